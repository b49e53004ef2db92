"""What ``unbroken check`` prints: live progress, the table, each failure's diagnostic, the
summary line.

On a terminal the progress is a rich progress bar; in a CI log (not a terminal) it is one plain
line per case as it finishes, so that a long run shows it is alive and a killed job's log still
says which cases passed.
"""
from __future__ import annotations

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn
from rich.progress import Progress as RichProgress
from rich.table import Table
from rich.text import Text

from .outcome import CRASHED, INTERNAL, OK, REFUSED, TIMEOUT, CaseOutcome, Report
from .runner import Progress

__all__ = ["LiveProgress", "PlainProgress", "make_console", "print_report", "progress_for"]

LABEL = {OK: "OK", REFUSED: "REFUSED", INTERNAL: "INTERNAL ERROR", TIMEOUT: "TIMEOUT",
         CRASHED: "CRASHED"}
STYLE = {OK: "green", REFUSED: "bold red", INTERNAL: "bold magenta", TIMEOUT: "bold yellow",
         CRASHED: "bold magenta"}


def make_console(stderr: bool = False) -> Console:
    """Colours only on a terminal (rich's own detection; NO_COLOR is honoured). In CI logs the
    width rich guesses is 80; tables get a little more room so that paths are not cut."""
    console = Console(highlight=False, stderr=stderr)
    if not console.is_terminal:
        console = Console(highlight=False, stderr=stderr, width=max(console.width, 120))
    return console


def label(outcome: CaseOutcome) -> tuple[str, str]:
    """(text, style) of an outcome's status; a refusal a baseline accepts is ``KNOWN``."""
    if outcome.status == REFUSED and not outcome.failed:
        return "KNOWN", "yellow"
    return LABEL[outcome.status], STYLE[outcome.status]


class PlainProgress(Progress):
    """One line per finished case: ``[ 3/50] OK        models/a.py::Head (120 ms)``."""

    def __init__(self, console: Console):
        self.console, self.total, self.done = console, 0, 0

    def running(self, cases: int) -> None:
        self.total = cases

    def finished(self, outcome: CaseOutcome) -> None:
        self.done += 1
        width = len(str(self.total))
        text, _ = label(outcome)
        self.console.print(f"[{self.done:>{width}}/{self.total}] {text:<14} {outcome.id} "
                           f"({duration(outcome.seconds)})", markup=False, highlight=False,
                           soft_wrap=True)


class LiveProgress(Progress):
    """A progress bar on a terminal; failures are printed above it as they happen."""

    def __init__(self, console: Console):
        self.console = console
        self.bar = RichProgress(TextColumn("{task.description}"), BarColumn(),
                                MofNCompleteColumn(), TimeElapsedColumn(), console=console,
                                transient=True)
        self.task = None

    def collecting(self, targets: int) -> None:
        self.bar.start()
        self.task = self.bar.add_task(f"collecting {targets} target(s)", total=None)

    def running(self, cases: int) -> None:
        self.bar.update(self.task, description="exporting", total=cases, completed=0)

    def finished(self, outcome: CaseOutcome) -> None:
        if outcome.failed:
            text, style = label(outcome)
            self.bar.console.print(Text(f"{text} {outcome.id}", style=style))
        self.bar.advance(self.task)

    def close(self) -> None:
        self.bar.stop()


class Silent(Progress):
    """No progress output (``--quiet``)."""


def progress_for(console: Console, quiet: bool) -> Progress:
    if quiet:
        return Silent()
    return LiveProgress(console) if console.is_terminal else PlainProgress(console)


def print_report(console: Console, report: Report, *, quiet: bool) -> None:
    """The table (unless quiet), every failure's diagnostic, collection failures, the
    baseline's fixed entries and the summary line."""
    if not quiet and report.outcomes:
        console.print(table(report))
    for outcome in report.outcomes:
        if outcome.failed:
            text, style = label(outcome)
            console.rule(Text(f"{text}: {outcome.id} (line {outcome.line})"), style=style)
            console.print(outcome.diagnostic, markup=False, highlight=False, soft_wrap=True)
            console.print()
    for failure in report.failures:
        console.print(f"unbroken check: error: {failure.target}: {failure.message}",
                      markup=False, highlight=False, soft_wrap=True)
    if report.fixed:
        console.print(f"{len(report.fixed)} baseline entr{'y' if len(report.fixed) == 1 else 'ies'}"
                      " fixed (no longer found; remove them with --write-baseline):",
                      markup=False)
        for entry in report.fixed:
            console.print(f"  {entry['case']}: {entry['code']} `{entry['source']}`",
                          markup=False, highlight=False, soft_wrap=True)
    console.print(summary_line(report), markup=False, highlight=False)


def table(report: Report) -> Table:
    grid = Table(title="unbroken check", title_justify="left")
    for column in ("case", "declared at", "status", "error"):
        grid.add_column(column, overflow="fold")
    grid.add_column("time", justify="right")
    for o in report.outcomes:
        text, style = label(o)
        grid.add_row(Text(o.name), Text(f"{o.file.rsplit('/', 1)[-1]}:{o.line}"),
                     Text(text, style=style), Text(o.error_id()), duration(o.seconds))
    return grid


def duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def summary_line(report: Report) -> str:
    counts = report.counts()
    parts = [f"{counts[OK]} exported", f"{counts[REFUSED] - counts['known']} refused"]
    if counts["known"]:
        parts.append(f"{counts['known']} refused for known breaks only (baseline)")
    if counts[TIMEOUT]:
        parts.append(f"{counts[TIMEOUT]} timed out")
    bugs = counts[INTERNAL] + counts[CRASHED]
    if bugs:
        parts.append(f"{bugs} internal error(s) (bugs in unbroken)")
    if report.failures:
        parts.append(f"{len(report.failures)} target(s) not collected")
    shard = f" [shard {report.shard}]" if report.shard else ""
    return f"{counts['total']} case(s){shard}: " + ", ".join(parts) + \
        f" in {report.seconds:.2f} s"
