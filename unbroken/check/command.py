"""``unbroken check`` and ``unbroken merge-reports``: options in, reports out, exit status.

Exit status (both commands): 0 every case exported (or was refused for baselined breaks
only); 1 a case was refused or timed out; 2 usage error (bad option, missing path, a target
that fails to import, no cases); 3 an internal error or a crash in unbroken (reported as a bug,
whatever else happened).
"""
from __future__ import annotations

import json
import os

from rich.console import Console

from .baseline import apply_baseline, baseline_text, read_baseline
from .console import make_console, print_report, progress_for
from .outcome import EXIT_USAGE, CollectionFailure, Report
from .reports import ReportError, github_annotations, json_text, junit_xml, sarif, write_text
from .runner import CheckPlan, run_check
from .select import KeywordError, ShardError, keyword_matcher, parse_shard

__all__ = ["check_command", "merge_command"]


def check_command(options, version: str) -> int:
    """Run ``unbroken check`` with parsed ``options``; return the exit status."""
    to_stdout = options.json == "-"
    console = make_console(stderr=to_stdout)  # stdout is the JSON report's
    try:
        plan = _plan(options)
        known = read_baseline(options.baseline) if options.baseline else None
    except (KeywordError, ShardError, ReportError) as err:
        console.print(f"unbroken check: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE
    report = run_check(plan, progress_for(console, options.quiet or to_stdout))
    if not report.outcomes and not report.failures and not plan.shard:  # a shard may be empty
        report.failures.append(CollectionFailure(
            ", ".join(options.paths), "no export cases found; declare one per model with "
            "unbroken.case(model, args)" + (f" (or none matches -k {options.keyword!r})"
                                            if options.keyword else "")))
    if known is not None:
        report = apply_baseline(report, known)
    status = _finish(report, options, console, version)
    if getattr(options, "fix", False):  # `check --fix`: the check's status stands
        from ..fix.command import fix_refused

        fix_refused(report, options, console, version, os.getcwd())
    return status


def merge_command(options, version: str) -> int:
    """``unbroken merge-reports SHARD.json... [--json F] [--junit F] [--sarif F]``."""
    console = make_console(stderr=options.json == "-")
    try:
        report = None
        for path in options.reports:
            part = _read_report(path)
            report = part if report is None else report.merged(part)
    except ReportError as err:
        console.print(f"unbroken merge-reports: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE
    return _finish(report, options, console, version)


def _plan(options) -> CheckPlan:
    if options.keyword:
        keyword_matcher(options.keyword)  # a bad expression is a usage error before any work
    if options.jobs < 1:
        raise ShardError(f"-j takes a number of processes >= 1, got {options.jobs}")
    if options.timeout <= 0:
        raise ShardError(f"--timeout takes a number of seconds > 0, got {options.timeout}")
    return CheckPlan(tuple(options.paths), os.getcwd(), options.keyword,
                     parse_shard(options.shard) if options.shard else None, options.jobs,
                     options.timeout, options.in_process, _path_budget(options))


def _path_budget(options) -> dict:
    """``--paths``/``--unroll`` as ``unbroken.budget`` arguments (only those given)."""
    given = {"paths": getattr(options, "max_paths", None),
             "unroll": getattr(options, "unroll", None)}
    for name, value in given.items():
        if value is not None and value < (1 if name == "paths" else 0):
            raise ShardError(f"--{name} takes a number >= {1 if name == 'paths' else 0}, "
                             f"got {value}")
    return {name: value for name, value in given.items() if value is not None}


def _finish(report: Report, options, console: Console, version: str) -> int:
    print_report(console, report, quiet=getattr(options, "quiet", False))
    if os.environ.get("GITHUB_ACTIONS") == "true":
        for line in github_annotations(report):
            console.print(line, markup=False, highlight=False, soft_wrap=True)
    try:
        if getattr(options, "write_baseline", None):
            write_text(options.write_baseline, baseline_text(report), "baseline")
        if options.junit:
            write_text(options.junit, junit_xml(report), "JUnit report")
        if options.sarif:
            write_text(options.sarif, json.dumps(sarif(report, version), indent=2) + "\n",
                       "SARIF report")
        if options.json:
            write_text(options.json, json_text(report, version), "JSON report")
    except ReportError as err:
        console.print(f"unbroken: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE
    return report.exit_code


def _read_report(path: str) -> Report:
    try:
        with open(path, encoding="utf-8") as f:
            data = json.load(f)
    except OSError as err:
        raise ReportError(f"cannot read {path}: {err.strerror}") from err
    except ValueError as err:
        raise ReportError(f"{path} is not JSON: {err}") from err
    if not isinstance(data, dict) or data.get("tool") != "unbroken check":
        raise ReportError(f"{path} is not a report of `unbroken check --json`")
    return Report.from_dict(data)
