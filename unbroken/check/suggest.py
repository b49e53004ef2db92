"""``unbroken suggest TARGET...``: the dynamic-shape fix as a command.

For every case that declares ``dynamic_shapes``, export it here (in this process). When the
spec does not hold, print the spec that ``ConstraintViolationError.suggested_dynamic_shapes``
carries — proven by the solver and verified by exporting again with it — and, for decisions
on data-dependent values, the ``torch._check(...)`` lines to add at the lines named: written
with the user's own expression when the line is an ``if``/``elif``/``while``/``assert`` whose
condition parses (``torch._check(n > 2)``), else with the error's description of the value.

``--write`` replaces the ``dynamic_shapes=`` argument of the ``unbroken.case(...)`` call in the
declaring file, when that argument is written in the call as a dict, tuple or list display.
The new spec is inlined (``{"x": {0: 4 * Dim("_n", min=2, max=25)}}``: Dims of the same name
are one dimension); ``Dim`` is written as the file binds it (``Dim`` or ``torch.export.Dim``).
A spec given by a name or a call is refused: the file would need more than one edit.
"""
from __future__ import annotations

import ast
import os
import re
from dataclasses import dataclass

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
from .execute import case_id, relative, use_root
from .outcome import EXIT_OK, EXIT_REFUSED, EXIT_USAGE
from .select import KeywordError, keyword_matcher

__all__ = ["SuggestError", "rewrite_declaration", "suggest_command"]

_CHECK = re.compile(r"`(torch\._check\(.*?\))`")


class SuggestError(Exception):
    """``--write`` cannot edit a declaration (the reason says why and what to do instead)."""


@dataclass(frozen=True, slots=True)
class _Edit:
    """A replacement of ``dynamic_shapes=`` in one file: character offsets and the new text."""

    start: int
    end: int
    text: str


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
    status = EXIT_OK
    for case in cases:
        status = max(status, _suggest_one(console, case, root, options.write))
    return status


def _dynamic_cases(targets, keyword) -> list[ExportCase]:
    matches = keyword_matcher(keyword) if keyword else (lambda _: True)
    root = os.getcwd()
    found = [c for t in targets for c in load_target(t)]
    return [c for c in found if c.dynamic_shapes is not None and matches(case_id(c, root))]


def _suggest_one(console, case: ExportCase, root: str, write: bool) -> int:
    title = case_id(case, root)
    say = lambda text: console.print(text, markup=False, highlight=False, soft_wrap=True)  # noqa: E731
    try:
        case.export()
    except ConstraintViolationError as err:
        if err.suggested_dynamic_shapes is None:
            say(f"{title}: no verified fix found\n\n{err.render()}\n")
            return EXIT_REFUSED
        say(f"{title}: the spec does not hold; use this one (proven for every admitted size "
            f"and verified by exporting again):\n\n{err.suggested_code}\n")
        return _write(say, case, err.suggested_code) if write else EXIT_OK
    except (GraphBreakError, DataDependentError) as err:
        checks = _check_lines(case, err, root)
        if not checks:
            say(f"{title}: refused for another reason than dynamic shapes\n\n{err.render()}\n")
            return EXIT_REFUSED
        say(f"{title}: add these checks on data-dependent values (they become runtime "
            "asserts):\n\n" + "\n".join(checks) + "\n")
        return EXIT_OK
    except UnbrokenError as err:
        say(f"{title}: refused\n\n{err.render()}\n")
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


def _write(say, case: ExportCase, code: str) -> int:
    try:
        rewrite_declaration(case.filename, case.lineno, code)
    except SuggestError as err:
        say(f"not written: {err}\n")
        return EXIT_REFUSED
    say(f"written into {case.filename}:{case.lineno}\n")
    return EXIT_OK


def rewrite_declaration(filename: str, lineno: int, code: str) -> None:
    """Replace the ``dynamic_shapes=`` of the ``case(...)`` call at ``lineno`` of ``filename``
    by the spec of ``code`` (the text ``ConstraintViolationError.suggested_code``)."""
    with open(filename, encoding="utf-8") as f:
        source = f.read()
    tree = ast.parse(source)
    value = _spec_argument(tree, filename, lineno)
    text = _inline_spec(code, _dim_name(tree))
    lines = source.splitlines(keepends=True)
    offsets = [0]
    for line in lines:
        offsets.append(offsets[-1] + len(line.encode("utf-8")))
    data = source.encode("utf-8")
    start = offsets[value.lineno - 1] + value.col_offset
    end = offsets[value.end_lineno - 1] + value.end_col_offset
    new = data[:start] + text.encode("utf-8") + data[end:]
    with open(filename, "wb") as f:
        f.write(new)


def _spec_argument(tree, filename: str, lineno: int):
    calls = [n for n in ast.walk(tree) if isinstance(n, ast.Call) and _is_case(n.func)
             and n.lineno <= lineno <= n.end_lineno]
    if not calls:
        raise SuggestError(f"no unbroken.case(...) call at {filename}:{lineno}")
    call = max(calls, key=lambda n: n.lineno)
    spec = next((k.value for k in call.keywords if k.arg == "dynamic_shapes"), None)
    if not isinstance(spec, (ast.Dict, ast.Tuple, ast.List)):
        raise SuggestError(
            f"the dynamic_shapes= of the declaration at {filename}:{call.lineno} is not written "
            "in the call as a dict, tuple or list (it is a name, a call or built elsewhere); "
            "paste the spec printed above where it is built instead")
    return spec


def _is_case(func) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "case") or \
        (isinstance(func, ast.Name) and func.id == "case")


def _dim_name(tree) -> str:
    """How the file can spell ``torch.export.Dim`` at module level."""
    bound, has_torch = set(), False
    for node in tree.body:
        if isinstance(node, ast.ImportFrom):
            bound |= {a.asname or a.name for a in node.names if a.name == "Dim"}
        elif isinstance(node, ast.Import):
            has_torch |= any(a.name == "torch" and a.asname is None for a in node.names)
    if "Dim" in bound:
        return "Dim"
    if has_torch:
        return "torch.export.Dim"
    raise SuggestError("the file imports neither Dim nor torch at module level; add "
                       "`from torch.export import Dim` and run again")


def _inline_spec(code: str, dim_name: str) -> str:
    """The ``dynamic_shapes = {...}`` of ``code`` with each Dim's definition written in place."""
    module = ast.parse(code)
    definitions, spec = {}, None
    for node in module.body:
        if isinstance(node, ast.Assign) and isinstance(node.targets[0], ast.Name):
            name = node.targets[0].id
            if name == "dynamic_shapes":
                spec = node.value
            else:
                definitions[name] = node.value
    if spec is None:
        raise SuggestError("the suggested code has no dynamic_shapes")

    class Inline(ast.NodeTransformer):
        def visit_Name(self, node):
            if node.id in definitions:
                call = definitions[node.id]
                return ast.copy_location(ast.Call(ast.parse(dim_name, mode="eval").body,
                                                  call.args, call.keywords), node)
            return node

    return ast.unparse(Inline().visit(spec))
