"""Progress of `unbroken check`: one plain line per finished case in a CI log (not a terminal),
a live bar with failures printed above it on a terminal, nothing with --quiet."""
from __future__ import annotations

import io
import re

import pytest
from rich.console import Console

from unbroken.check.console import LiveProgress, PlainProgress, Silent, progress_for
from unbroken.check.outcome import OK, REFUSED, CaseOutcome, Finding
from unbroken.cli import main

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

CASES = """\
import torch
import unbroken


def double(x):
    return x * 2


def branchy(x):
    if x.sum() > 0:
        return x
    return -x


unbroken.case(double, (torch.ones(2),))
unbroken.case(branchy, (torch.ones(2),))
"""

PROGRESS = re.compile(r"\[\d+/\d+\] ")


@pytest.fixture(autouse=True)
def plain_output(monkeypatch, tmp_path):
    monkeypatch.delenv("FORCE_COLOR", raising=False)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("NO_COLOR", "1")
    monkeypatch.chdir(tmp_path)


def test_plain_line_per_case_in_a_log(tmp_path, capsys):
    (tmp_path / "cases.py").write_text(CASES)
    assert main(["check", "cases.py", "--in-process"]) == 1
    lines = capsys.readouterr().out.splitlines()
    progress = [line for line in lines if PROGRESS.match(line)]
    assert len(progress) == 2  # in declaration order, as each finishes
    assert re.fullmatch(r"\[1/2\] OK +cases\.py::double \((\d+ ms|[\d.]+ s)\)", progress[0])
    assert re.fullmatch(r"\[2/2\] REFUSED +cases\.py::branchy \((\d+ ms|[\d.]+ s)\)",
                        progress[1])
    assert lines.index(progress[-1]) < next(
        i for i, line in enumerate(lines) if "unbroken check" in line)


def test_quiet_prints_no_progress(tmp_path, capsys):
    (tmp_path / "cases.py").write_text(CASES)
    assert main(["check", "cases.py", "--in-process", "-q"]) == 1
    out = capsys.readouterr().out
    assert not any(PROGRESS.match(line) for line in out.splitlines())
    assert "REFUSED: cases.py::branchy" in out and "1 exported, 1 refused" in out


def outcome(name: str, status: str) -> CaseOutcome:
    findings = (Finding("UB101", "m", "f.py", 3, 5, "if x:", "fix"),) if status == REFUSED else ()
    return CaseOutcome(f"f.py::{name}", name, "f.py", 9, "f.py", status, 0.01,
                       diagnostic="d", findings=findings)


def test_terminal_gets_a_live_bar_with_failures_above_it():
    buffer = io.StringIO()
    console = Console(file=buffer, force_terminal=True, width=100, color_system=None)
    progress = progress_for(console, quiet=False)
    assert isinstance(progress, LiveProgress)
    progress.collecting(1)
    progress.running(2)
    progress.finished(outcome("good", OK))
    progress.finished(outcome("bad", REFUSED))
    assert progress.bar.tasks[0].completed == 2 and progress.bar.tasks[0].total == 2
    progress.close()
    text = buffer.getvalue()
    assert "REFUSED f.py::bad" in text and "OK f.py::good" not in text


def test_progress_kinds():
    log = Console(file=io.StringIO(), force_terminal=False)
    assert isinstance(progress_for(log, quiet=False), PlainProgress)
    assert isinstance(progress_for(log, quiet=True), Silent)
