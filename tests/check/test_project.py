"""`unbroken check` on the test project of tests/check/project/, in worker processes, as CI
runs it: isolation (hang, crash, SystemExit, poisoned state), a loop of declarations, a
failing import, a module:callable target, the reports (JSON, JUnit, SARIF, GitHub), shards
that merge back into the full report.

One full run is shared by the module (``full``): worker start-up and the timeout are paid once.
"""
from __future__ import annotations

import json
import os
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import jsonschema
import pytest

from unbroken.cli import main

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

PROJECT = Path(__file__).parent / "project"
SCHEMA = Path(__file__).parent / "sarif-schema-2.1.0.json"
TIMEOUT = "10"  # seconds: a real case takes < 1 s in a warm worker; 10x margin for a loaded machine


@pytest.fixture(scope="module")
def project(tmp_path_factory):
    """A copy of the project (a run must not leave files in the source tree), as the cwd."""
    root = tmp_path_factory.mktemp("cli") / "project"
    shutil.copytree(PROJECT, root, ignore=shutil.ignore_patterns("__pycache__"))
    previous, path = os.getcwd(), list(os.sys.path)
    os.chdir(root)
    yield root
    os.chdir(previous)
    os.sys.path[:] = path


@pytest.fixture(scope="module")
def full(project):
    """exit code and reports of one run over the whole project, 2 workers."""
    out = project / "out"
    out.mkdir()
    code = main(["check", "models", "zoo.factory:make_cases", "-j", "2", "--timeout", TIMEOUT,
                 "--quiet", "--json", str(out / "r.json"), "--junit", str(out / "r.xml"),
                 "--sarif", str(out / "r.sarif")])
    return code, json.loads((out / "r.json").read_text()), out


def by_id(report) -> dict:
    return {c["id"]: c for c in report["cases"]}


def test_each_misbehaving_case_is_reported_for_itself(full):
    code, report, _ = full
    cases = by_id(report)
    assert cases["models/hang.py::spin"]["status"] == "timeout"
    assert cases["models/crash.py::crasher"]["status"] == "crashed"
    assert "exit code 7" in cases["models/crash.py::crasher"]["diagnostic"]
    assert cases["models/exits.py::exits"]["status"] == "internal_error"
    assert "SystemExit" in cases["models/exits.py::exits"]["diagnostic"]
    # every case after them (and beside the poisoner) is unaffected
    for ok in ("models/good.py::Scale", "models/loop.py::Head",
               "models/uses_package.py::classifier", "zoo/factory.py::Classifier",
               "zoo/factory.py::Classifier[1]"):
        assert cases[ok]["status"] == "ok", cases[ok]["diagnostic"]
    assert code == 3  # a crash and an internal error: reported as bugs, whatever else happened


def test_loop_declarations_get_unique_names_and_both_run(full):
    cases = by_id(full[1])
    head, batch1 = cases["models/loop.py::Head"], cases["models/loop.py::Head[1]"]
    assert head["status"] == "ok"
    assert batch1["status"] == "refused" and batch1["findings"][0]["code"] == "UB103"


def test_failing_import_is_reported_and_the_rest_still_runs(full):
    _, report, _ = full
    [failure] = report["usage_errors"]
    assert failure["path"] == "models/broken_import.py"
    assert "ImportError: this file fails to import on purpose" in failure["message"]
    assert report["summary"]["total"] == 11


def test_json_paths_are_relative_with_columns(full):
    breaks = by_id(full[1])["models/breaks.py::TwoBreaks"]
    assert [f["code"] for f in breaks["findings"]] == ["UB101", "UB103"]
    first = breaks["findings"][0]
    assert (first["file"], first["line"], first["column"]) == ("models/breaks.py", 7, 9)
    assert first["source"] == "if x.sum() > 0:"
    assert breaks["error"]["frames"][-1]["file"] == "models/breaks.py"
    assert breaks["error"]["frames"][-1]["column"] == 9


def test_junit_has_one_testcase_per_case_with_the_diagnostic(full):
    _, report, out = full
    root = ET.parse(out / "r.xml").getroot()
    assert root.tag == "testsuites"
    [suite] = root
    cases = suite.findall("testcase")
    assert len(cases) == report["summary"]["total"] + 1  # + the target that did not import
    named = {(c.get("classname"), c.get("name")): c for c in cases}
    failure = named[("models.breaks", "TwoBreaks")].find("failure")
    assert failure.get("type") == "UB101" and "Fix:" in failure.text
    assert "if x.sum() > 0:" in failure.text
    assert named[("models.crash", "crasher")].find("error") is not None
    assert named[("models.good", "Scale")].find("failure") is None
    assert int(suite.get("failures")) == 3  # Head[1], TwoBreaks, spin (timeout)
    assert int(suite.get("errors")) == 4  # crasher, exits, the poisoner, the failing import


def test_sarif_is_valid_and_has_one_result_per_break(full):
    _, report, out = full
    log = json.loads((out / "r.sarif").read_text())
    jsonschema.validate(log, json.loads(SCHEMA.read_text()))
    run = log["runs"][0]
    rules = {r["id"]: r for r in run["tool"]["driver"]["rules"]}
    assert "torch.cond" in rules["UB101"]["help"]["text"]
    anchor = "docs/graph-breaks.md#ub101-data-dependent-control-flow"
    assert anchor in rules["UB101"]["help"]["markdown"]
    breaks = [r for r in run["results"] if r["ruleId"] == "UB101"]
    [result] = breaks
    region = result["locations"][0]["physicalLocation"]["region"]
    assert (region["startLine"], region["startColumn"]) == (7, 9)
    assert result["locations"][0]["physicalLocation"]["artifactLocation"]["uri"] == \
        "models/breaks.py"
    refused = sum(len(c["findings"]) for c in report["cases"] if c["status"] == "refused")
    assert len([r for r in run["results"] if r["ruleId"].startswith("UB")]) == refused


def test_github_annotations_from_merged_report(full, capsys, monkeypatch):
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    _, _, out = full
    capsys.readouterr()
    assert main(["merge-reports", str(out / "r.json")]) == 3
    lines = capsys.readouterr().out.splitlines()
    assert any(line.startswith("::error file=models/breaks.py,line=7,col=9,title=UB101 TwoBreaks::")
               for line in lines), lines


def test_shards_merge_back_into_the_full_report(full, project, capsys):
    _, report, out = full
    parts = []
    for index in (1, 2):
        part = out / f"shard{index}.json"
        main(["check", "models", "zoo.factory:make_cases", "--shard", f"{index}/2", "-j", "2",
              "--timeout", TIMEOUT, "-k", "not spin", "--quiet", "--json", str(part)])
        parts.append(json.loads(part.read_text()))
    ids = [set(by_id(p)) for p in parts]
    assert ids[0] and ids[1] and not ids[0] & ids[1]
    merged = out / "merged.json"
    assert main(["merge-reports", *(str(out / f"shard{i}.json") for i in (1, 2)),
                 "--json", str(merged), "--junit", str(out / "m.xml"),
                 "--sarif", str(out / "m.sarif")]) == 3
    data = json.loads(merged.read_text())
    expected = {i: c["status"] for i, c in by_id(report).items() if i != "models/hang.py::spin"}
    assert {i: c["status"] for i, c in by_id(data).items()} == expected
    assert [e["path"] for e in data["usage_errors"]] == ["models/broken_import.py"]
    jsonschema.validate(json.loads((out / "m.sarif").read_text()), json.loads(SCHEMA.read_text()))
    assert len(ET.parse(out / "m.xml").getroot()[0].findall("testcase")) == len(expected) + 1


def test_console_script_imports_the_project_package(project):
    """The issue's first complaint: `from zoo import ...` in a case file under the console
    script. Run the real executable, as CI does."""
    import subprocess
    import sys

    script = Path(sys.executable).with_name("unbroken")
    import unbroken  # the child runs the unbroken under test, not another installed copy
    env = {**os.environ, "PYTHONPATH": str(Path(unbroken.__file__).parents[1])}
    done = subprocess.run([str(script), "check", "models/uses_package.py", "--quiet"],
                          capture_output=True, text=True, cwd=project, timeout=300, env=env)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "1 exported" in done.stdout
