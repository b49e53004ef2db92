"""check.reports (and the outcome they read): the path of a break behind a decision on tensor
data, in every format; how many paths were explored."""
from __future__ import annotations

import json
import textwrap
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from unbroken.check.baseline import apply_baseline, baseline_text, read_baseline
from unbroken.check.jobs import case_job
from unbroken.check.outcome import Report
from unbroken.cli import main

pytestmark = pytest.mark.matrix

SCHEMA = Path(__file__).parent / "sarif-schema-2.1.0.json"

UNTAKEN = textwrap.dedent("""\
    import torch
    import unbroken


    class Untaken(torch.nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x * 2
            return x + id(x)


    unbroken.case(Untaken(), (torch.ones(3),))
""")


@pytest.fixture
def checked(tmp_path, monkeypatch, capsys):
    """Run ``unbroken check`` on a case whose second break is only on the untaken side."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    (tmp_path / "untaken.py").write_text(UNTAKEN)
    assert main(["check", "untaken.py", "--in-process", "--json", "r.json", "--sarif", "r.sarif",
                 "--junit", "r.xml"]) == 1
    return tmp_path, capsys.readouterr().out


PATH = [{"condition": "x.sum() > 0", "taken": False, "file": "untaken.py", "line": 7,
         "occurrence": 1}]


def test_json_findings_carry_their_path_and_the_case_its_exploration(checked):
    out, _ = checked
    report = json.loads((out / "r.json").read_text())
    [case] = report["cases"]
    assert [(f["code"], f["line"], f["path"]) for f in case["findings"]] == [
        ("UB101", 7, []), ("UB103", 9, PATH)]
    assert case["paths"] == {"explored": 2, "forks": 1, "raised": 0, "complete": True,
                             "cut": []}
    again = Report.from_dict(report)  # merge-reports reads it back as written
    assert again.outcomes[0].findings[1].path == tuple(PATH)
    assert json.loads(json.dumps(again.to_dict(report["version"])))["cases"] == report["cases"]


def test_sarif_has_the_path_as_a_property_and_in_the_message(checked):
    out, _ = checked
    log = json.loads((out / "r.sarif").read_text())
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    results = {r["ruleId"]: r for r in log["runs"][0]["results"]}
    assert results["UB103"]["properties"] == {"path": PATH}
    assert "on the path where `x.sum() > 0` is False (untaken.py:7)" in \
        results["UB103"]["message"]["text"]
    assert "properties" not in results["UB101"]


def test_console_junit_and_annotations_say_the_path(checked):
    out, console = checked
    assert "Found on the path where `x.sum() > 0` is False (untaken.py:7)." in console
    assert "2 paths explored: both sides of every decision on tensor data." in console
    failure = ET.parse(out / "r.xml").getroot()[0][0].find("failure")
    assert "Found on the path where `x.sum() > 0` is False" in failure.text
    assert any(line.startswith("::error file=untaken.py,line=9") and
               "%0AOn the path where `x.sum() > 0` is False" in line
               for line in console.splitlines())


def test_the_path_is_not_part_of_the_baseline_key(checked):
    out, _ = checked
    report = Report.from_dict(json.loads((out / "r.json").read_text()))
    (out / "baseline.json").write_text(baseline_text(report))
    entries = json.loads((out / "baseline.json").read_text())["findings"]
    assert all(set(entry) == {"case", "code", "source", "count"} for entry in entries)
    marked = apply_baseline(report, read_baseline(str(out / "baseline.json")))
    assert all(f.known for o in marked.outcomes for f in o.findings)


def test_the_path_budget_is_an_option_and_its_cut_is_reported(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "untaken.py").write_text(UNTAKEN)
    assert main(["check", "untaken.py", "--paths", "1", "--unroll", "0", "--json", "r.json",
                 "--in-process"]) == 1
    case = json.loads((tmp_path / "r.json").read_text())["cases"][0]
    assert case["paths"]["explored"] == 1 and not case["paths"]["complete"]
    assert [f["code"] for f in case["findings"]] == ["UB101"]  # the other side: unseen
    assert "1 path explored; incomplete, not explored:" in capsys.readouterr().out
    # what a worker process runs (the forkserver of a worktree imports the installed unbroken,
    # so the job is called here)
    outcome = case_job("untaken.py", case["id"], str(tmp_path), {"paths": 1})["outcome"]
    assert outcome["paths"]["explored"] == 1 and outcome["paths"]["cut"]
    assert main(["check", "untaken.py", "--paths", "0", "--in-process"]) == 2
