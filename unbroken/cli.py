"""The ``unbroken`` command.

- ``unbroken check TARGET...``: export every case declared with ``unbroken.case(...)`` in
  the targets (files, directories walked for ``*.py``, ``module:callable``), each in its own
  worker process, and report (console, ``--json``, ``--junit``, ``--sarif``, GitHub
  annotations; ``--baseline``). See :mod:`unbroken.check.command` for the exit status.
- ``unbroken merge-reports SHARD.json...``: one report from the JSON of ``--shard`` runs.
- ``unbroken suggest TARGET...``: the verified ``dynamic_shapes`` of each dynamic case
  (``--write`` puts it into the declaration).
- ``unbroken fix TARGET...``: rewrite each case's graph breaks, verify the patches against
  eager, print them as diffs (``--write`` applies the verified ones); ``check --fix`` does the
  same for the cases a check refused.
- ``unbroken explain UB101``: a catalogue entry.

Like ``python -m``, the command puts the working directory first on ``sys.path``, so that
case files can import the project's own packages.
"""
from __future__ import annotations

import argparse
import importlib
import sys

from .check.outcome import EXIT_USAGE

__all__ = ["main"]

DEFAULT_TIMEOUT = 300.0


def main(argv: list[str] | None = None) -> int:
    """Entry point of the ``unbroken`` console script; returns the exit status."""
    parser = _parser()
    try:
        options = parser.parse_args(argv)
    except SystemExit as exit_:  # argparse exits 2 on bad usage, 0 for --help/--version
        return int(exit_.code or 0)
    if options.command is None:
        parser.print_help()
        return EXIT_USAGE
    problem = _python_support_error() if options.command in _TRACING_COMMANDS else None
    if problem is not None:
        print(f"unbroken {options.command}: error: [UB119] {problem}", file=sys.stderr)
        return EXIT_USAGE  # one usage error, not a refusal per case
    return options.run(options, _version())


# The commands that trace models (and so need a Python whose bytecode unbroken interprets).
_TRACING_COMMANDS = frozenset({"check", "suggest", "fix"})


def _python_support_error():
    from .frontend.opcodes.versions import python_support_error  # imports the interpreter

    return python_support_error()


def _command(module: str, name: str, package: str = "unbroken.check"):
    """The command function ``name`` of ``unbroken.check.<module>``, imported when the command
    runs: ``unbroken --version``, ``--help`` and a usage error need neither the console
    (rich) nor the exporter."""
    def run(options, version):
        return getattr(importlib.import_module(f"{package}.{module}"), name)(options,
                                                                                   version)

    run.__name__ = name
    return run


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="unbroken", description="Strict whole-graph export for PyTorch models.")
    parser.add_argument("--version", action="version", version=f"unbroken {_version()}")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")
    _check_parser(commands)
    merge = commands.add_parser(
        "merge-reports", help="join the JSON reports of --shard runs into one report",
        description="Read the JSON reports of `unbroken check --shard I/N --json FILE` runs "
                    "and write one report (JSON, JUnit, SARIF). Exit status as for check.")
    merge.add_argument("reports", nargs="+", metavar="REPORT.json")
    _report_options(merge)
    merge.set_defaults(run=_command("command", "merge_command"), quiet=False)
    suggest = commands.add_parser(
        "suggest", help="print the verified dynamic_shapes of each case that declares one",
        description="Export every case with dynamic_shapes in TARGET; where the spec does not "
                    "hold, print the suggested spec (proven, and verified by exporting again) "
                    "and the torch._check lines for data-dependent values. Exit 0: nothing to "
                    "change or every fix found; 1: a case has no fix; 2: usage error.")
    suggest.add_argument("paths", nargs="+", metavar="TARGET")
    suggest.add_argument("--write", action="store_true",
                         help="replace the dynamic_shapes= of each declaration in place "
                              "(only when it is written as a literal in the call)")
    suggest.add_argument("-k", dest="keyword", metavar="EXPR",
                         help="only cases whose id matches EXPR (as pytest -k)")
    suggest.set_defaults(run=_command("suggest", "suggest_command"))
    _fix_parser(commands)
    explain = commands.add_parser("explain", help="show a diagnostic id's catalogue entry",
                                  description="Print what a diagnostic id means, why, an "
                                              "example and its fix.")
    explain.add_argument("code", metavar="ID", help="e.g. UB101; `all` lists every id")
    explain.set_defaults(run=_command("explain", "explain_command"))
    return parser


def _fix_parser(commands) -> None:
    fix = commands.add_parser(
        "fix", help="rewrite graph breaks and verify the patches against eager",
        description="For every case in TARGET, rewrite each graph break that has a mechanical "
                    "rewrite (torch.cond/torch.where, torch._check, ...), export the patched "
                    "copy, and compare it with the original model in eager on inputs that "
                    "drive every decision both ways. Verified patches and unverified hints "
                    "are printed as diffs. Exit 0: every case exports or got a verified fix; "
                    "1: some did not; 2: usage error.")
    fix.add_argument("paths", nargs="+", metavar="TARGET")
    fix.add_argument("-k", dest="keyword", metavar="EXPR",
                     help="only cases whose id matches EXPR (as pytest -k)")
    fix.add_argument("--write", action="store_true",
                     help="apply the verified patches in place (encoding, line endings and "
                          "formatting kept; a file changed since it was read is not written)")
    fix.add_argument("--json", metavar="FILE", help="write every case's fix record as JSON")
    fix.add_argument("--sarif", metavar="FILE",
                     help="write a SARIF 2.1.0 log with the verified patches as fixes")
    fix.set_defaults(run=_command("fix.command", "fix_command", package="unbroken"))


def _check_parser(commands) -> None:
    check = commands.add_parser(
        "check", help="export every case declared with unbroken.case(...) in TARGET",
        description="Import TARGET (files, directories walked for *.py, or module:callable "
                    "returning cases), export every case declared with unbroken.case(model, "
                    "args), each in its own process, and report. Exit 0: all exported; 1: some "
                    "refused or timed out; 2: usage error; 3: internal error in unbroken.")
    check.add_argument("paths", nargs="+", metavar="TARGET")
    check.add_argument("-k", dest="keyword", metavar="EXPR",
                       help="only cases whose id (file::name) matches EXPR, as pytest -k: "
                            "substrings with and/or/not and parentheses")
    check.add_argument("-j", "--jobs", type=int, default=1, metavar="N",
                       help="export N cases at a time, each in its own process (default 1)")
    check.add_argument("--shard", metavar="I/N",
                       help="run only shard I of N (a deterministic split by case id)")
    check.add_argument("--timeout", type=float, default=DEFAULT_TIMEOUT, metavar="SECONDS",
                       help=f"stop a case (or a target's import) after SECONDS "
                            f"(default {DEFAULT_TIMEOUT:.0f})")
    check.add_argument("--in-process", action="store_true",
                       help="no worker processes: run everything here (no isolation, no "
                            "timeout; for a debugger)")
    check.add_argument("--paths", type=int, dest="max_paths", metavar="N",
                       help="explore at most N paths of a refused case's program for its "
                            "graph breaks (both sides of each decision on tensor data; "
                            "default 32)")
    check.add_argument("--unroll", type=int, metavar="N",
                       help="fork the first N evaluations of one condition on tensor data on "
                            "a path (a loop on data is unrolled N times; default 4)")
    check.add_argument("--baseline", metavar="FILE",
                       help="fail only on graph breaks that FILE does not list")
    check.add_argument("--write-baseline", metavar="FILE",
                       help="record this run's graph breaks in FILE")
    check.add_argument("--fix", action="store_true",
                       help="then propose verified fixes for the refused cases, as `unbroken "
                            "fix` does (in this process)")
    check.add_argument("--write-fixes", action="store_true",
                       help="with --fix: apply the verified fixes in place")
    check.add_argument("--quiet", "-q", action="store_true",
                       help="no table or progress: print only failures and the summary")
    _report_options(check)
    check.set_defaults(run=_command("command", "check_command"))


def _report_options(parser) -> None:
    parser.add_argument("--json", metavar="FILE",
                        help="write the machine-readable report to FILE ('-': stdout)")
    parser.add_argument("--junit", metavar="FILE", help="write a JUnit XML report")
    parser.add_argument("--sarif", metavar="FILE", help="write a SARIF 2.1.0 report")


def _version() -> str:
    from importlib import metadata

    try:
        return metadata.version("unbroken")
    except metadata.PackageNotFoundError:  # running from a source tree that is not installed
        from unbroken import __version__

        return __version__


if __name__ == "__main__":
    sys.exit(main())
