"""`unbroken suggest`: the verified spec printed and, with --write, put into the declaration;
and the data ConstraintViolationError carries for it."""
from __future__ import annotations

import shutil
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import unbroken
from unbroken.check.suggest import user_condition
from unbroken.cli import main

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

DYNAMIC = Path(__file__).parent / "project" / "more" / "dynamic.py"


@pytest.fixture(autouse=True)
def in_tmp(monkeypatch, tmp_path):
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)


class Pairs(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 4, 2).sum(1)


def test_constraint_violation_carries_the_spec_as_data():
    with pytest.raises(unbroken.ConstraintViolationError) as info:
        unbroken.export(Pairs(), (torch.randn(16, 2),),
                        dynamic_shapes={"x": {0: Dim("n", max=100)}})
    error = info.value
    assert error.violations and error.violations[0].counterexample == {"x.shape[0]": 2}
    assert error.violations[0].frames[-1].source == "return x.view(-1, 4, 2).sum(1)"
    ep = unbroken.export(Pairs(), (torch.randn(16, 2),),
                         dynamic_shapes=error.suggested_dynamic_shapes)  # accepted as is
    x = torch.randn(40, 2)
    torch.testing.assert_close(ep.module()(x), Pairs()(x))
    data = error.to_dict()
    assert "4 * _n" in data["suggested_dynamic_shapes"]
    assert data["violations"][0]["line"] == error.violations[0].frames[-1].lineno


def test_suggest_prints_and_writes_the_spec(tmp_path, capsys):
    target = tmp_path / "dynamic.py"
    shutil.copy(DYNAMIC, target)
    assert main(["check", "dynamic.py", "--in-process", "-q"]) == 1
    assert main(["suggest", "dynamic.py"]) == 0
    out = capsys.readouterr().out
    assert 'dynamic_shapes = {\n    "x": {0: 4 * _n},\n}' in out
    assert main(["suggest", "dynamic.py", "--write"]) == 0
    text = target.read_text()
    assert """dynamic_shapes={"x": {0: 4 * Dim('_n', min=2, max=25)}}""" in text
    assert main(["check", "dynamic.py", "--in-process", "-q"]) == 0
    assert main(["suggest", "dynamic.py"]) == 0
    assert "nothing to change" in capsys.readouterr().out


def test_suggest_write_refuses_a_spec_that_is_not_a_literal(tmp_path, capsys):
    source = DYNAMIC.read_text().replace(
        'unbroken.case(Pairs(), (torch.randn(16, 2),), '
        'dynamic_shapes={"x": {0: Dim("n", max=100)}})',
        'spec = {"x": {0: Dim("n", max=100)}}\nunbroken.case(Pairs(), (torch.randn(16, 2),), '
        'dynamic_shapes=spec)')
    (tmp_path / "dynamic.py").write_text(source)
    assert main(["suggest", "dynamic.py", "--write"]) == 1
    assert "is not written in the call as a dict" in capsys.readouterr().out
    assert (tmp_path / "dynamic.py").read_text() == source


def test_suggest_without_dynamic_cases_is_a_usage_error(tmp_path, capsys):
    (tmp_path / "static.py").write_text(
        "import torch, unbroken\nunbroken.case(lambda x: x * 2, (torch.ones(2),))\n")
    assert main(["suggest", "static.py"]) == 2


GATE = """\
import torch
import unbroken
from torch.export import Dim


class Gate(torch.nn.Module):
    def forward(self, x):
        n = x.nonzero().shape[0]
        if n > 2:
            return x * 2
        return x


unbroken.case(Gate(), (torch.ones(6),), dynamic_shapes={"x": {0: Dim("n", max=64)}})
"""


def test_suggest_prints_the_check_to_add_in_the_users_words(tmp_path, capsys):
    (tmp_path / "gate.py").write_text(GATE)
    assert main(["check", "gate.py", "--in-process", "-q"]) == 1
    capsys.readouterr()
    assert main(["suggest", "gate.py"]) == 0
    out = capsys.readouterr().out
    assert "gate.py:9: before `if n > 2:` add\n      torch._check(n > 2)\n" in out
    assert "torch._check(not (n > 2))" in out
    # the line as printed, pasted where it says: the case exports
    (tmp_path / "gate.py").write_text(GATE.replace(
        "        if n > 2:", "        torch._check(n > 2)\n        if n > 2:"))
    assert main(["check", "gate.py", "--in-process", "-q"]) == 0


@pytest.mark.parametrize("source, expected", [
    ("if n > 2:", "n > 2"), ("elif a.shape[0] == k:", "a.shape[0] == k"),
    ("while i < n:", "i < n"), ("assert n >= 0, 'negative'", "n >= 0"),
    ("x = y[:n]", None), ("if (n >:", None),
])
def test_user_condition(source, expected):
    assert user_condition(source) == expected


PAIRS = """\
import torch
import unbroken
from torch.export import Dim


class Pairs(torch.nn.Module):
    def forward(self, x, y):
        return x.view(-1, 4, 2).sum(1), y * 2
"""

MULTILINE = PAIRS + """
unbroken.case(Pairs(), (torch.randn(16, 2), torch.randn(3)), dynamic_shapes={
\t"x": {  # rows: a multiple of 4
\t\t0: Dim("n", max=100),  # the batch
\t},
\t"y": None,  # y is static
})
"""


def _spec_of(path) -> dict:
    """The dynamic_shapes the file declares, as the case collected from it holds them."""
    (case,) = unbroken.cases.collect_cases(path)
    return case.dynamic_shapes


@pytest.mark.parametrize("newline", ["\n", "\r\n"])
def test_suggest_write_keeps_line_endings_tabs_and_comments(tmp_path, capsys, newline):
    path = tmp_path / "pairs.py"
    path.write_bytes(MULTILINE.replace("\n", newline).encode())
    assert main(["suggest", "pairs.py", "--write"]) == 0
    expected = MULTILINE.replace('0: Dim("n", max=100)', "0: 4 * Dim('_n', min=2, max=25)")
    assert path.read_bytes() == expected.replace("\n", newline).encode()
    assert main(["check", "pairs.py", "--in-process", "-q"]) == 0


def test_suggest_write_keeps_comments_of_a_part_it_replaces(tmp_path, capsys):
    # y is declared dynamic but the model does not constrain it: the fix keeps y's entry;
    # x's inner dict is merged entry by entry; a removed static dim's comment stays
    source = PAIRS.replace("y * 2", "y[:3] * 2") + """
unbroken.case(Pairs(), (torch.randn(16, 2), torch.randn(3)), dynamic_shapes={
    "x": {  # rows
        0: Dim("n", max=100),  # the batch
    },
    "y": {0: Dim("m", min=3, max=9)},
})
"""
    (tmp_path / "pairs.py").write_text(source)
    status = main(["suggest", "pairs.py", "--write"])
    out = capsys.readouterr().out
    text = (tmp_path / "pairs.py").read_text()
    assert status == 0, out
    assert "# rows" in text and "# the batch" in text
    assert main(["check", "pairs.py", "--in-process", "-q"]) == 0


def test_suggest_write_honours_a_pep_263_encoding(tmp_path, capsys):
    source = "# -*- coding: latin-1 -*-\n# caf\xe9 au lait\n" + MULTILINE
    (tmp_path / "a_latin.py").write_bytes(source.encode("latin-1"))
    (tmp_path / "b_pairs.py").write_text(MULTILINE)
    assert main(["suggest", ".", "--write"]) == 0
    out = capsys.readouterr().out
    assert "written into a_latin.py" in out and "written into b_pairs.py" in out  # not skipped
    expected = source.replace('0: Dim("n", max=100)', "0: 4 * Dim('_n', min=2, max=25)")
    assert (tmp_path / "a_latin.py").read_bytes() == expected.encode("latin-1")


def test_suggest_write_refuses_a_symlink_out_of_the_tree(tmp_path, capsys, monkeypatch):
    outside, tree = tmp_path / "outside", tmp_path / "tree"
    outside.mkdir()
    tree.mkdir()
    (outside / "pairs.py").write_text(MULTILINE)
    (tree / "pairs.py").symlink_to(outside / "pairs.py")
    monkeypatch.chdir(tree)
    assert main(["suggest", "pairs.py", "--write"]) == 1
    out = capsys.readouterr().out
    assert "not written:" in out and "outside the checked tree" in out
    assert (outside / "pairs.py").read_text() == MULTILINE


def test_suggest_write_refuses_a_file_changed_since_collected(tmp_path, capsys, monkeypatch):
    from unbroken.check import suggest
    path = tmp_path / "pairs.py"
    path.write_text(MULTILINE)
    original = suggest._suggest_one

    def edit_meanwhile(*args):
        path.write_text(MULTILINE + "# edited meanwhile\n")
        return original(*args)

    monkeypatch.setattr(suggest, "_suggest_one", edit_meanwhile)
    assert main(["suggest", "pairs.py", "--write"]) == 1
    assert "changed since it was read" in capsys.readouterr().out
    assert path.read_text() == MULTILINE + "# edited meanwhile\n"


def test_suggest_write_edits_every_declaration_of_a_file(tmp_path, capsys):
    case = MULTILINE[len(PAIRS):]
    path = tmp_path / "pairs.py"
    path.write_text(PAIRS + case.replace(', dynamic_shapes={', ',\n  dynamic_shapes={') + case)
    assert main(["suggest", "pairs.py", "--write"]) == 0
    text = path.read_text()
    assert text.count("4 * Dim('_n', min=2, max=25)") == 2 and 'Dim("n"' not in text
    assert main(["check", "pairs.py", "--in-process", "-q"]) == 0


def test_reports_name_files_relative_to_the_working_directory(tmp_path, capsys):
    (tmp_path / "models").mkdir()
    (tmp_path / "models" / "gate.py").write_text(GATE)
    assert main(["check", "models", "--in-process", "-q", "--json", "report.json"]) == 1
    report = (tmp_path / "report.json").read_text()
    assert str(tmp_path) not in report
    assert 'File \\"models/gate.py\\", line 9' in report
    assert main(["suggest", "models"]) == 0
    assert str(tmp_path) not in capsys.readouterr().out
    # an import failure's traceback too
    (tmp_path / "models" / "broken.py").write_text("import torch\nraise ValueError('no')\n")
    assert main(["check", "models", "--in-process", "-q", "--json", "report.json"]) == 2
    report = (tmp_path / "report.json").read_text()
    assert str(tmp_path) not in report and 'models/broken.py\\", line 2' in report


def test_a_check_on_another_path_says_which(tmp_path, capsys):
    """A data-dependent decision only the other side of a branch reaches: the line to add
    says on which path it is needed."""
    (tmp_path / "gate.py").write_text(GATE.replace(
        "        return x\n\n", "        if x.sum() > 100:\n            return x\n"
        "        return x[:n] if n > 1 else x\n\n"))
    assert main(["suggest", "gate.py"]) == 0
    out = capsys.readouterr().out
    assert "(on the path where `n > 2` is False (gate.py:9) and `x.sum() > 100` is False " \
           "(gate.py:11)): before `return x[:n] if n > 1 else x` add" in out
