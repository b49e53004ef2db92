"""``unbroken suggest TARGET...``: the dynamic-shape fix as a command.

For every case that declares ``dynamic_shapes``, export it here (in this process). When the
spec does not hold, print the spec that ``ConstraintViolationError.suggested_dynamic_shapes``
carries — proven by the solver and verified by exporting again with it — and, for decisions
on data-dependent values, the ``torch._check(...)`` lines to add at the lines named: written
with the user's own expression when the line is an ``if``/``elif``/``while``/``assert`` whose
condition parses (``torch._check(n > 2)``), else with the error's description of the value.

``--write`` edits the ``dynamic_shapes=`` argument of the ``unbroken.case(...)`` call in the
declaring file, when that argument is written in the call as a dict, tuple or list display
(:mod:`unbroken.check.spec_edits`: only what the fix changes, comments and layout kept). The
files are read when the cases are collected and written once each, after every case ran
(:mod:`unbroken.check.source_files`: in their own encoding and line endings; not when they
changed meanwhile, nor through a symbolic link that leads out of the working directory).
Files are named relative to the working directory, in the diagnostics too.
"""
from __future__ import annotations

import ast
import os
import re

from ..cases import CaseCollectionError, ExportCase, load_target
from ..symbolic.diagnostics import (
    ConstraintViolationError,
    DataDependentError,
    RefusalError,
    UnbrokenError,
    describe_path,
)
from ..symbolic.diagnostics.catalogue import GraphBreakError
from .console import make_console
from .execute import case_id, relative, relative_text, use_root
from .outcome import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from .select import KeywordError, keyword_matcher
from .source_files import SourceFileError, read_source, write_source
from .spec_edits import SuggestError, declaration_edits

__all__ = ["SuggestError", "suggest_command", "user_condition"]

_CHECK = re.compile(r"`(torch\._check\(.*?\))`")


def suggest_command(options, version: str) -> int:
    console = make_console()
    root = os.getcwd()
    use_root(root)
    try:
        cases = _dynamic_cases(options.paths, options.keyword)
    except (CaseCollectionError, KeywordError) as err:
        console.print(f"unbroken suggest: error: {err}", markup=False, highlight=False)
        return EXIT_USAGE
    if not cases:
        console.print("unbroken suggest: no case declares dynamic_shapes", markup=False)
        return EXIT_USAGE
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    writer = _Writer(cases, root) if options.write else None
    status = EXIT_OK
    for case in cases:
        status = max(status, _suggest_one(say, case, root, writer))
    if writer is not None:
        status = max(status, writer.write(say))
    return status


def _dynamic_cases(targets, keyword) -> list[ExportCase]:
    matches = keyword_matcher(keyword) if keyword else (lambda _: True)
    root = os.getcwd()
    found = [c for t in targets for c in load_target(t)]
    return [c for c in found if c.dynamic_shapes is not None and matches(case_id(c, root))]


def _suggest_one(say, case: ExportCase, root: str, writer) -> int:
    title = case_id(case, root)
    try:
        case.export()
    except ConstraintViolationError as err:
        if err.suggested_dynamic_shapes is None:
            say(f"{title}: no verified fix found\n\n{relative_text(err.render(), root)}\n")
            return EXIT_REFUSED
        say(f"{title}: the spec does not hold; use this one (proven for every admitted size "
            f"and verified by exporting again):\n\n{err.suggested_code}\n")
        return writer.add(say, case, err.suggested_code) if writer else EXIT_OK
    except (GraphBreakError, DataDependentError) as err:
        checks = _check_lines(case, err, root)
        if not checks:
            say(f"{title}: refused for another reason than dynamic shapes\n\n"
                f"{relative_text(err.render(), root)}\n")
            return EXIT_REFUSED
        say(f"{title}: add these checks on data-dependent values (they become runtime "
            "asserts):\n\n" + "\n".join(checks) + "\n")
        return EXIT_OK
    except UnbrokenError as err:
        say(f"{title}: refused\n\n{relative_text(err.render(), root)}\n")
        return EXIT_REFUSED
    say(f"{title}: dynamic_shapes holds; nothing to change")
    return EXIT_OK


def _check_lines(case: ExportCase, error: UnbrokenError, root: str) -> list[str]:
    """``file:line: torch._check(...)`` for every data-dependent decision (all breaks)."""
    try:
        breaks = case.find_graph_breaks() if isinstance(error, GraphBreakError) else [error]
    except RefusalError:
        breaks = [error]
    lines = []
    for b in breaks or [error]:
        match = _CHECK.search(b.hint or "")
        if match and b.location is not None:
            where = f"{relative(b.location.filename, root)}:{b.location.lineno}"
            condition = user_condition(b.location.source)
            check = f"torch._check({condition})" if condition else match.group(1)
            way = (f"\n      (or torch._check(not ({condition})) if it must go the other way)"
                   if condition else "  # in terms of the values the error names")
            path = f" ({describe_path(b.path_conditions)})" if b.path_conditions else ""
            lines.append(f"  {where}{path}: before `{b.location.source}` add\n      {check}{way}")
    return lines


def user_condition(source: str) -> str | None:
    """The condition of an ``if``/``elif``/``while`` line or an ``assert``, as the user wrote
    it, when it is a valid expression; else None."""
    text = source.strip()
    for keyword in ("if ", "elif ", "while "):
        if text.startswith(keyword) and text.endswith(":"):
            return _expression(text[len(keyword):-1])
    if text.startswith("assert "):
        try:
            statement = ast.parse(text).body[0]
        except SyntaxError:
            return None
        return ast.unparse(statement.test) if isinstance(statement, ast.Assert) else None
    return None


def _expression(text: str) -> str | None:
    try:
        ast.parse(text.strip(), mode="eval")
    except SyntaxError:
        return None
    return text.strip()


class _Writer:
    """The ``--write`` edits, gathered per file and written once each at the end (so that the
    positions of one file's later declarations still hold): each declaring file is read when
    the cases are collected, and written only if unchanged since."""

    def __init__(self, cases: list[ExportCase], root: str):
        self.root = root
        self.sources: dict[str, object] = {}
        for case in cases:
            if case.filename not in self.sources:
                try:
                    self.sources[case.filename] = read_source(case.filename)
                except SourceFileError as err:
                    self.sources[case.filename] = err
        self.edits: dict[str, dict] = {}  # file -> {line of the declaration: edits}

    def add(self, say, case: ExportCase, code: str) -> int:
        """Compute the edits of one declaration; they are written by :meth:`write`."""
        where = f"{relative(case.filename, self.root)}:{case.lineno}"
        source = self.sources[case.filename]
        try:
            if isinstance(source, SourceFileError):
                raise source
            edits = declaration_edits(source, case.lineno, code)
        except (SuggestError, SourceFileError) as err:
            say(f"not written: {relative_text(str(err), self.root)}\n")
            return EXIT_REFUSED
        known = self.edits.setdefault(case.filename, {})
        if case.lineno in known and known[case.lineno] != edits:  # a loop declared cases
            say(f"not written: {where} declares several cases (a loop?) whose suggested "
                "specs differ; paste one that fits them all by hand\n")
            known[case.lineno] = []
            return EXIT_REFUSED
        known.setdefault(case.lineno, edits)
        return EXIT_OK

    def write(self, say) -> int:
        status = EXIT_OK
        for filename, declarations in self.edits.items():
            edits = [e for found in declarations.values() for e in found]
            if not edits:
                continue
            source, name = self.sources[filename], relative(filename, self.root)
            try:
                write_source(source, source.edited(edits), within=[self.root])
            except SourceFileError as err:
                say(f"not written: {relative_text(str(err), self.root)}\n")
                status = EXIT_REFUSED
                continue
            lines = [str(n) for n, found in sorted(declarations.items()) if found]
            which = f"line {lines[0]}" if len(lines) == 1 else f"lines {', '.join(lines)}"
            say(f"written into {name} (the declaration at {which})\n")
        return status
