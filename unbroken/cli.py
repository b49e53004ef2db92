"""The ``unbroken`` command.

``unbroken check PATH... [--json FILE] [--quiet]`` imports the Python files at PATH (files, or
directories walked for ``*.py``), collects the export cases they declare with
``unbroken.case(model, args)``, exports each one, and reports:

- a summary table: case, where it is declared, OK / REFUSED / INTERNAL ERROR, the error id and
  the user line it points at, and the export time;
- for every failure, the full diagnostic (``UnbrokenError.render()``);
- with ``--json FILE``, the same data as a machine-readable report.

Exit status: 0 when every case exported, 1 when any was refused (or hit an internal error),
2 on usage errors (no such path, a file that fails to import, no cases found).
"""
from __future__ import annotations

import argparse
import json
import sys
import time
import traceback
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.table import Table
from rich.text import Text

from unbroken.cases import CaseCollectionError, ExportCase, collect_cases
from unbroken.frontend.graph_breaks import GraphBreakError
from unbroken.symbolic.diagnostics import BUG_NOTE, InternalError, RefusalError, UnbrokenError

__all__ = ["main"]

EXIT_OK, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

OK, REFUSED, INTERNAL = "ok", "refused", "internal_error"
_STATUS_LABEL = {OK: "OK", REFUSED: "REFUSED", INTERNAL: "INTERNAL ERROR"}
_STATUS_STYLE = {OK: "green", REFUSED: "bold red", INTERNAL: "bold magenta"}


@dataclass(frozen=True, slots=True)
class CaseResult:
    """The outcome of exporting one case.

    case:      the declaration.
    status:    ``"ok"``, ``"refused"`` (an ``UnbrokenError``) or ``"internal_error"`` (any other
               exception, or ``InternalError``: a bug in unbroken).
    seconds:   wall time of the ``export`` call.
    error:     the exception, or None.
    traceback: for internal errors, the Python traceback text; else ''.
    breaks:    for a graph break, every graph break of the case (found in one more run).
    """

    case: ExportCase
    status: str
    seconds: float
    error: BaseException | None = None
    traceback: str = ""
    breaks: tuple = ()

    def error_id(self) -> str:
        if isinstance(self.error, UnbrokenError):
            where = self.error.location
            text = f"{self.error.code} {where.short()}" if where else self.error.code
            more = len(self.breaks) - 1
            return text + (f" (+{more} more)" if more > 0 else "")
        return type(self.error).__name__ if self.error is not None else ""

    def to_dict(self) -> dict:
        return {
            "name": self.case.name,
            "declared_at": self.case.declared_at,
            "file": self.case.filename,
            "line": self.case.lineno,
            "status": self.status,
            "seconds": round(self.seconds, 6),
            "error": _error_dict(self.error, self.traceback),
            "graph_breaks": [b.to_dict() for b in self.breaks],
        }


class ReportError(Exception):
    """The JSON report could not be written (a usage error: exit 2)."""


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``unbroken`` console script; returns the exit status."""
    parser = _parser()
    options = parser.parse_args(argv)
    if options.command is None:
        parser.print_help()
        return EXIT_USAGE
    console = _console()
    try:
        return _check(options, console)
    except ReportError as err:
        console.print(f"unbroken check: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unbroken", description="Strict whole-graph export for PyTorch models.")
    parser.add_argument("--version", action="version", version=f"unbroken {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    check = commands.add_parser(
        "check", help="export every case declared with unbroken.case(...) in PATH",
        description="Import PATH (files, or directories walked for *.py), export every case "
                    "declared with unbroken.case(model, args), and report. Exit 0: all exported; "
                    "1: some refused; 2: usage error.")
    check.add_argument("paths", nargs="+", metavar="PATH")
    check.add_argument("--json", metavar="FILE", help="also write a machine-readable report")
    check.add_argument("--quiet", "-q", action="store_true",
                       help="no table: print only failures and the one-line summary")
    return parser


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("unbroken")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        from unbroken import __version__

        return __version__


def _console() -> Console:
    # Colours only on a terminal (rich's own detection; NO_COLOR is honoured). In CI logs the
    # width rich guesses is 80; give tables a little more room so paths are not cut.
    console = Console(highlight=False)
    if not console.is_terminal:
        console = Console(highlight=False, width=max(console.width, 120))
    return console


# -- check ---------------------------------------------------------------------------------------

def _check(options, console: Console) -> int:
    started = time.perf_counter()
    cases, usage_errors = _collect(options.paths)
    if not usage_errors and not cases:
        usage_errors.append(CaseCollectionError(
            ", ".join(options.paths),
            "no export cases found; declare one per model with unbroken.case(model, args)"))
    if usage_errors:
        _print_usage_errors(console, usage_errors)
        _write_json(options, [], usage_errors, EXIT_USAGE, time.perf_counter() - started)
        return EXIT_USAGE
    results = [_run_case(c) for c in cases]
    code = EXIT_OK if all(r.status == OK for r in results) else EXIT_REFUSED
    elapsed = time.perf_counter() - started
    if not options.quiet:
        console.print(_table(results))
    _print_failures(console, results)
    console.print(_summary_line(results, elapsed), markup=False)
    _write_json(options, results, [], code, elapsed)
    return code


def _collect(paths: list[str]) -> tuple[list[ExportCase], list[CaseCollectionError]]:
    cases, errors, seen = [], [], set()
    for path in paths:
        try:
            found = collect_cases(path)
        except CaseCollectionError as err:
            errors.append(err)
            continue
        for c in found:
            if (c.declared_at, c.name) not in seen:
                seen.add((c.declared_at, c.name))
                cases.append(c)
    return cases, errors


def _run_case(case: ExportCase) -> CaseResult:
    start = time.perf_counter()
    try:
        case.export()
    except InternalError as err:
        return CaseResult(case, INTERNAL, time.perf_counter() - start, err,
                          traceback.format_exc())
    except UnbrokenError as err:
        elapsed = time.perf_counter() - start
        try:
            breaks = _all_breaks(case, err)
        except InternalError as bug:  # listing the breaks met a bug in unbroken: report it
            return CaseResult(case, INTERNAL, elapsed, bug, traceback.format_exc())
        return CaseResult(case, REFUSED, elapsed, err, breaks=breaks)
    except Exception as err:  # anything else escaping export() is a bug in unbroken
        return CaseResult(case, INTERNAL, time.perf_counter() - start, err,
                          traceback.format_exc())
    return CaseResult(case, OK, time.perf_counter() - start)


def _all_breaks(case: ExportCase, error: UnbrokenError) -> tuple:
    """Every graph break of a case refused for one, so a single CI run lists them all; an
    ``InternalError`` of the listing pass is raised (a bug is never dropped)."""
    if not isinstance(error, GraphBreakError):
        return ()
    try:
        breaks = case.find_graph_breaks()
    except RefusalError:  # the first break is still reported; the rest is a bonus
        return (error,)
    return tuple(breaks) or (error,)


# -- printing ------------------------------------------------------------------------------------

def _table(results: list[CaseResult]) -> Table:
    table = Table(title="unbroken check", title_justify="left")
    table.add_column("case", overflow="fold")
    table.add_column("declared at", overflow="fold")
    table.add_column("status")
    table.add_column("error", overflow="fold")
    table.add_column("time", justify="right")
    for r in results:
        table.add_row(Text(r.case.name), Text(r.case.short_location()),
                      Text(_STATUS_LABEL[r.status], style=_STATUS_STYLE[r.status]),
                      Text(r.error_id()), _duration(r.seconds))
    return table


def _duration(seconds: float) -> str:
    return f"{seconds * 1000:.0f} ms" if seconds < 1 else f"{seconds:.2f} s"


def _print_failures(console: Console, results: list[CaseResult]) -> None:
    for r in results:
        if r.status == OK:
            continue
        console.rule(Text(f"{_STATUS_LABEL[r.status]}: {r.case.name} ({r.case.declared_at})"),
                     style=_STATUS_STYLE[r.status])
        console.print(_failure_text(r), markup=False, highlight=False, soft_wrap=True)
        console.print()


def _failure_text(result: CaseResult) -> str:
    err = result.error
    if result.status == REFUSED and len(result.breaks) > 1:
        parts = [f"{len(result.breaks)} graph breaks (all of them, found in one run):"]
        parts += [f"({i}) {b.render()}" for i, b in enumerate(result.breaks, 1)]
        return "\n\n".join(parts)
    if result.status == REFUSED:
        return err.render()
    head = err.render() if isinstance(err, UnbrokenError) else \
        f"Internal error in unbroken: {type(err).__name__}: {err}"
    return f"{head}\n\n{result.traceback.rstrip()}\n\n{BUG_NOTE}"


def _summary_line(results: list[CaseResult], elapsed: float) -> str:
    counts = {s: sum(r.status == s for r in results) for s in (OK, REFUSED, INTERNAL)}
    parts = [f"{counts[OK]} exported", f"{counts[REFUSED]} refused"]
    if counts[INTERNAL]:
        parts.append(f"{counts[INTERNAL]} internal error(s) (bugs in unbroken)")
    return f"{len(results)} case(s): " + ", ".join(parts) + f" in {elapsed:.2f} s"


def _print_usage_errors(console: Console, errors: list[CaseCollectionError]) -> None:
    for err in errors:
        console.print(f"unbroken check: error: {err.path}: {err.summary}", markup=False,
                      highlight=False, soft_wrap=True)


# -- JSON report ---------------------------------------------------------------------------------

def _error_dict(error: BaseException | None, tb: str) -> dict | None:
    if error is None:
        return None
    data = error.to_dict() if isinstance(error, UnbrokenError) else {
        "code": None, "kind": type(error).__name__, "message": str(error), "frames": [],
        "details": "", "hint": BUG_NOTE}
    if tb:
        data["traceback"] = tb
    return data


def _write_json(options, results, usage_errors, exit_code: int, elapsed: float) -> None:
    if not options.json:
        return
    report: dict[str, Any] = {
        "tool": "unbroken check",
        "version": _version(),
        "paths": list(options.paths),
        "exit_code": exit_code,
        "seconds": round(elapsed, 6),
        "summary": {s: sum(r.status == s for r in results) for s in (OK, REFUSED, INTERNAL)},
        "cases": [r.to_dict() for r in results],
        "usage_errors": [{"path": e.path, "message": e.summary} for e in usage_errors],
    }
    report["summary"]["total"] = len(results)
    try:
        with open(options.json, "w", encoding="utf-8") as f:
            json.dump(report, f, indent=2)
            f.write("\n")
    except OSError as err:
        raise ReportError(f"cannot write the JSON report {options.json}: {err.strerror}") from err


if __name__ == "__main__":
    sys.exit(main())
