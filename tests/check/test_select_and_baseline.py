"""-k, --shard, --json -, explain, and baselines (one new and one fixed break, robust to line
moves). Runs --in-process on small files: the selection and baseline logic does not depend on
worker processes (tests/check/test_project.py covers those)."""
from __future__ import annotations

import json
import textwrap

import pytest

from unbroken.check.select import KeywordError, ShardError, keyword_matcher, parse_shard, shard
from unbroken.cli import main

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

CASES = """\
import torch
import unbroken


class Branchy(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x + 1
        return x + id(x)


def double(x):
    return x * 2


unbroken.case(Branchy(), (torch.ones(3),), name="branchy")
for n in (2, 3):
    unbroken.case(double, (torch.ones(n),))
"""


@pytest.fixture(autouse=True)
def plain_output(monkeypatch, tmp_path):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)


def ids(path) -> list[str]:
    return [c["id"] for c in json.loads(path.read_text())["cases"]]


@pytest.mark.parametrize("expression, expected", [
    ("double", ["cases.py::double", "cases.py::double[1]"]),
    ("not double", ["cases.py::branchy"]),
    ("branchy or [1]", ["cases.py::branchy", "cases.py::double[1]"]),
    ("(cases.py and double) and not [1]", ["cases.py::double"]),
])
def test_keyword_selects_cases_by_id(tmp_path, expression, expected):
    (tmp_path / "cases.py").write_text(CASES)
    main(["check", "cases.py", "--in-process", "-q", "-k", expression, "--json", "r.json"])
    assert ids(tmp_path / "r.json") == expected


def test_keyword_errors_and_no_match_are_usage_errors(tmp_path, capsys):
    (tmp_path / "cases.py").write_text(CASES)
    assert main(["check", "cases.py", "--in-process", "-k", "a and"]) == 2
    assert main(["check", "cases.py", "--in-process", "-k", "nothing_matches"]) == 2
    assert "none matches -k" in capsys.readouterr().out
    with pytest.raises(KeywordError):
        keyword_matcher("(a or b")


def test_shard_split_is_a_partition():
    names = [f"f.py::case{i}" for i in range(7)]
    parts = [shard(names, i, 3) for i in (1, 2, 3)]
    assert set().union(*parts) == set(names) and sum(map(len, parts)) == 7
    assert parse_shard("2/3") == (2, 3)
    for bad in ("0/3", "4/3", "x"):
        with pytest.raises(ShardError):
            parse_shard(bad)


def test_json_to_stdout(tmp_path, capsys):
    (tmp_path / "cases.py").write_text(CASES)
    assert main(["check", "cases.py", "--in-process", "-k", "double", "--json", "-"]) == 0
    data = json.loads(capsys.readouterr().out)  # nothing else on stdout
    assert data["summary"]["ok"] == 2 and not (tmp_path / "-").exists()


def test_baseline_fails_only_on_new_breaks_and_reports_fixed(tmp_path, capsys):
    source = tmp_path / "cases.py"
    source.write_text(CASES)
    assert main(["check", "cases.py", "--in-process", "-q", "--write-baseline", "base.json"]) == 1
    baseline = json.loads((tmp_path / "base.json").read_text())
    assert [(e["case"], e["code"]) for e in baseline["findings"]] == [
        ("cases.py::branchy", "UB101"), ("cases.py::branchy", "UB103")]
    assert main(["check", "cases.py", "--in-process", "-q", "--baseline", "base.json"]) == 0

    # lines move (a comment above), the id() break is fixed, a new break appears
    changed = CASES.replace("        return x + id(x)", "        return x + len(dir(x))")
    source.write_text("# a comment that moves every line\n\n" + changed)
    assert main(["check", "cases.py", "--in-process", "-q", "--baseline", "base.json",
                 "--json", "r.json"]) == 1
    out = capsys.readouterr().out
    case = json.loads((tmp_path / "r.json").read_text())["cases"][0]
    assert [(f["code"], f["known"]) for f in case["findings"]] == [("UB101", True),
                                                                     ("UB103", False)]
    assert case["findings"][1]["source"] == "return x + len(dir(x))"
    assert json.loads((tmp_path / "r.json").read_text())["baseline_fixed"] == [
        {"case": "cases.py::branchy", "code": "UB103", "source": "return x + id(x)", "count": 1}]
    assert "1 baseline entry fixed" in out and "return x + id(x)" in out


def test_explain_prints_the_catalogue_entry(capsys):
    assert main(["explain", "ub101"]) == 0
    out = capsys.readouterr().out
    assert "Data-dependent control flow" in out and "torch.cond" in out
    assert main(["explain", "UB003"]) == 0
    assert main(["explain", "UB999x"]) == 2
    assert "unknown id" in capsys.readouterr().out


def test_module_callable_target_with_bad_return(tmp_path, capsys):
    (tmp_path / "factory_mod.py").write_text(textwrap.dedent("""\
        def make():
            return 42
    """))
    assert main(["check", "factory_mod:make", "--in-process"]) == 2
    assert "must return an unbroken.case" in capsys.readouterr().out
