"""ir.serialize.reader: only a dialect violation of the loaded graph is the file's fault; any
other InternalError met while loading is unbroken's and is raised as such."""
import pytest
import torch

import unbroken
from unbroken.ir.verifier import DialectViolation
from unbroken.program import ExportedProgram

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


def _saved(tmp_path):
    path = tmp_path / "relu.ub"
    unbroken.save(unbroken.export(lambda x: torch.relu(x) + 1, (torch.randn(3),)), path)
    return path


def test_a_bug_while_loading_is_ours_not_the_files(tmp_path, monkeypatch):
    path = _saved(tmp_path)

    def buggy(*args, **kwargs):
        raise unbroken.InternalError("a bug planted by the test")

    monkeypatch.setattr(ExportedProgram, "from_parts", classmethod(buggy))
    with pytest.raises(unbroken.InternalError, match="planted") as info:
        unbroken.load(path)
    assert not isinstance(info.value, unbroken.SerializationError)


def test_a_dialect_violation_of_the_loaded_graph_is_the_files(tmp_path, monkeypatch):
    path = _saved(tmp_path)

    def violated(*args, **kwargs):
        raise DialectViolation("exported graph is invalid: planted")

    monkeypatch.setattr(ExportedProgram, "from_parts", classmethod(violated))
    with pytest.raises(unbroken.SerializationError, match="fails the verifier: .*planted"):
        unbroken.load(path)
