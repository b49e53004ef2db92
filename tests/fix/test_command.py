"""``unbroken fix`` and ``unbroken check --fix``: console, JSON, SARIF fixes, merging the
hunks of several cases in one file."""
import json
from pathlib import Path

import pytest

from unbroken.cli import main
from unbroken.fix.command import merge_texts

TWO = """\
import torch
import unbroken


class A(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x.sin()
        return x.cos()


class B(torch.nn.Module):
    def forward(self, x):
        return x + id(x)


unbroken.case(A(), (torch.randn(3),))
unbroken.case(B(), (torch.randn(3),))
"""


@pytest.fixture
def project(tmp_path, monkeypatch):
    (tmp_path / "models.py").write_text(TWO)
    monkeypatch.chdir(tmp_path)
    return tmp_path


def test_console_json_and_sarif(project, capsys):
    assert main(["fix", "models.py", "--json", "fix.json", "--sarif", "fix.sarif"]) == 1
    out = capsys.readouterr().out
    assert "VERIFIED FIX       models.py::A" in out and "NO FIX             models.py::B" in out
    assert "+        return torch.where(x.sum() > 0, x.sin(), x.cos())" in out
    data = json.loads((project / "fix.json").read_text())
    assert [c["status"] for c in data["cases"]] == ["verified", "no-fix"]
    assert data["cases"][0]["verification"]["verified"] is True
    sarif = json.loads((project / "fix.sarif").read_text())
    (result,) = sarif["runs"][0]["results"]
    change = result["fixes"][0]["artifactChanges"][0]
    assert change["artifactLocation"]["uri"] == "models.py"
    (replacement,) = change["replacements"]
    assert replacement["deletedRegion"]["startLine"] == 7
    assert "torch.where" in replacement["insertedContent"]["text"]
    schema = Path(__file__).parents[1] / "check" / "sarif-schema-2.1.0.json"
    jsonschema = pytest.importorskip("jsonschema")
    jsonschema.validate(sarif, json.loads(schema.read_text()))
    assert (project / "models.py").read_text() == TWO  # nothing written without --write


def test_check_fix_proposes_fixes_for_refused_cases(project, capsys):
    assert main(["check", "models.py", "--in-process", "--fix", "-k", "A"]) == 1
    out = capsys.readouterr().out
    assert "REFUSED" in out and "VERIFIED FIX" in out


def test_merge_texts_joins_hunks_and_refuses_clashes():
    base = "a\nb\nc\nd\n"
    merged, refused = merge_texts(base, ["A\nb\nc\nd\n", "a\nb\nc\nD\n", "A\nb\nc\nd\n"])
    assert merged == "A\nb\nc\nD\n" and refused == []
    merged, refused = merge_texts(base, ["A\nb\nc\nd\n", "X\nb\nc\nd\n"])
    assert merged == "A\nb\nc\nd\n" and refused == [1]
