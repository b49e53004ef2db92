"""The work of ``unbroken check`` on one target or one case, in the calling process.

:func:`collect` imports a target and describes its cases; :func:`run_case` exports one case
and turns what happened into a :class:`CaseOutcome`. The command calls both inside worker
processes (:mod:`unbroken.check.pool`), so that whatever the user's code does to the process
stays there; ``--in-process`` and the pytest plugin call them directly.
"""
from __future__ import annotations

import linecache
import os
import sys
import time
import traceback
from dataclasses import dataclass

from ..cases import CaseCollectionError, ExportCase, load_target
from ..frontend.budget import budget
from ..symbolic.diagnostics import BUG_NOTE, InternalError, RefusalError, UnbrokenError
from ..symbolic.diagnostics.catalogue import GraphBreakError
from .outcome import INTERNAL, OK, REFUSED, CaseOutcome, Finding

__all__ = ["CaseInfo", "case_id", "collect", "describe", "find_case", "relative",
           "relative_text", "run_case", "run_target_case"]


@dataclass(frozen=True, slots=True)
class CaseInfo:
    """A collected case, described without its model (it crosses process boundaries).

    id:      ``file::name`` (see :func:`case_id`).
    name:    the unique name within its file.
    file:    the declaring file, relative to the root when inside it.
    line:    the line of the ``unbroken.case(...)`` call.
    target:  the target that declared it.
    dynamic: whether the case declares ``dynamic_shapes``.
    """

    id: str
    name: str
    file: str
    line: int
    target: str
    dynamic: bool


def relative(path: str, root: str) -> str:
    """``path`` relative to ``root`` (POSIX separators) when inside it, else unchanged."""
    if not path or not os.path.isabs(path):
        return path
    rel = os.path.relpath(path, root)
    return path if rel.startswith("..") else rel.replace(os.sep, "/")


def relative_text(text: str, root: str) -> str:
    """``text`` (a rendered diagnostic, a traceback) with every absolute path inside ``root``
    written relative to it, as :func:`relative` writes a path."""
    prefix = root.rstrip(os.sep) + os.sep
    if not text or prefix == os.sep:
        return text
    return text.replace(prefix, "")


def case_id(case: ExportCase, root: str) -> str:
    """``models/heads.py::Head[1]``: unique in a run, stable across runs and machines."""
    return f"{relative(case.filename, root)}::{case.name}"


def use_root(root: str) -> None:
    """Make the project at ``root`` importable as ``python -m`` would: ``root`` first on
    ``sys.path`` (the console script alone does not put the working directory there)."""
    if not sys.path or sys.path[0] != root:
        sys.path.insert(0, root)


def collect(target: str, root: str) -> list[CaseInfo]:
    """Import ``target`` and describe its cases. Raises CaseCollectionError."""
    return [describe(c, target, root) for c in load_target(target)]


def describe(case: ExportCase, target: str, root: str) -> CaseInfo:
    """The :class:`CaseInfo` of a collected case."""
    return CaseInfo(case_id(case, root), case.name, relative(case.filename, root), case.lineno,
                    target, case.dynamic_shapes is not None)


def find_case(target: str, wanted_id: str, root: str) -> ExportCase:
    """Import ``target`` again (in a fresh worker) and return the case with this id."""
    for c in load_target(target):
        if case_id(c, root) == wanted_id:
            return c
    raise CaseCollectionError(target, f"no longer declares the case {wanted_id} (does the "
                                      "file declare its cases in a different order each run?)")


def run_target_case(target: str, wanted_id: str, root: str,
                    path_budget: dict | None = None) -> CaseOutcome:
    """:func:`find_case`, then :func:`run_case`: the job of a worker."""
    return run_case(find_case(target, wanted_id, root), target, root, path_budget)


def run_case(case: ExportCase, target: str, root: str,
             path_budget: dict | None = None) -> CaseOutcome:
    """Export ``case`` and describe the outcome. An exception that is not an ``UnbrokenError``
    (``SystemExit`` included) escaped ``export()``: that is an internal error.
    ``path_budget``: ``unbroken.budget`` arguments for listing a refused case's graph breaks
    on every path (``paths``, ``unroll``)."""
    linecache.checkcache()  # a file edited since an earlier run in this process: read it anew
    start = time.perf_counter()
    base = dict(id=case_id(case, root), name=case.name, file=relative(case.filename, root),
                line=case.lineno, target=target)
    try:
        case.export()
    except InternalError as err:
        return _internal(base, time.perf_counter() - start, err, root)
    except UnbrokenError as err:
        seconds = time.perf_counter() - start
        try:
            with budget(**(path_budget or {})):
                breaks = _all_breaks(case, err)
        except InternalError as bug:  # listing the breaks met a bug in unbroken: report it
            return _internal(base, time.perf_counter() - start, bug, root)
        exploration = getattr(breaks, "exploration", None)
        return CaseOutcome(**base, status=REFUSED, seconds=seconds,
                           diagnostic=relative_text(_refusal_text(err, breaks, exploration),
                                                    root),
                           error=_error_dict(err, root),
                           findings=tuple(finding(b, root) for b in breaks),
                           paths=exploration.to_dict() if exploration is not None else None)
    except BaseException as err:  # noqa: B036 - anything escaping export() is a bug in unbroken
        if isinstance(err, KeyboardInterrupt):
            raise
        return _internal(base, time.perf_counter() - start, err, root)
    return CaseOutcome(**base, status=OK, seconds=time.perf_counter() - start)


def _all_breaks(case: ExportCase, error: UnbrokenError) -> list[UnbrokenError]:
    """Every graph break of a case refused for one, on every path of the program (one more
    run in "find them all" mode: a ``GraphBreaks`` list with its ``exploration``), so a
    single CI run lists them all; the error itself for other refusals. An ``InternalError``
    of the listing run is raised: a bug is never dropped."""
    if not isinstance(error, GraphBreakError):
        return [error]
    try:
        found = case.find_graph_breaks()
    except RefusalError:  # the first break is still reported; the rest is a bonus
        return [error]
    return found if found else [error]


def _refusal_text(error: UnbrokenError, breaks: list[UnbrokenError], exploration=None) -> str:
    """The diagnostic of a refusal: the error, or every break (each says the path it is on)
    and how many paths of the program were explored for them."""
    explored = [exploration.describe() + "."] if exploration is not None and \
        (exploration.forks or not exploration.complete) else []
    if len(breaks) <= 1:  # then no break is behind a decision on data: no path to show
        return "\n\n".join([error.render(), *explored])
    parts = [f"{len(breaks)} graph breaks (all of them, found in one run):"]
    parts += [f"({i}) {b.render()}" for i, b in enumerate(breaks, 1)]
    return "\n\n".join(parts + explored)


def _internal(base: dict, seconds: float, error: BaseException, root: str) -> CaseOutcome:
    head = error.render() if isinstance(error, UnbrokenError) else \
        f"Internal error in unbroken: {type(error).__name__}: {error}"
    tb = relative_text("".join(traceback.format_exception(error)).rstrip(), root)
    return CaseOutcome(**base, status=INTERNAL, seconds=seconds,
                       diagnostic=relative_text(f"{head}\n\n{tb}\n\n{BUG_NOTE}", root),
                       error=_error_dict(error, root) | {"traceback": tb})


def finding(error: UnbrokenError, root: str) -> Finding:
    """The place and id of one refusal, for reports and baselines."""
    where = error.location
    path = tuple(c.to_dict() | {"file": relative(c.file, root)} for c in error.path_conditions)
    if where is None:
        return Finding(error.code, relative_text(error.message, root), "", 0, 0, "",
                       relative_text(error.hint, root), path=path)
    return Finding(error.code, relative_text(error.message, root), relative(where.filename, root),
                   where.lineno, statement_column(where.filename, where.lineno), where.source,
                   relative_text(error.hint, root), path=path)


def statement_column(filename: str, lineno: int) -> int:
    """1-based column of the first character of the statement on that line (0 if unknown)."""
    text = linecache.getline(filename, lineno)
    stripped = text.lstrip()
    return len(text) - len(stripped) + 1 if stripped else 0


def _error_dict(error: BaseException, root: str) -> dict:
    if not isinstance(error, UnbrokenError):
        return {"code": None, "kind": type(error).__name__,
                "message": relative_text(str(error), root), "frames": [], "details": "",
                "hint": BUG_NOTE}
    data = error.to_dict()
    for key in ("message", "details", "hint", "suggested_dynamic_shapes"):
        if isinstance(data.get(key), str):
            data[key] = relative_text(data[key], root)
    for frame in data["frames"]:
        frame["column"] = statement_column(frame["file"], frame["line"])
        frame["file"] = relative(frame["file"], root)
    for condition in data.get("path_conditions", ()):
        condition["file"] = relative(condition["file"], root)
    for violation in data.get("violations", ()):
        if violation.get("file"):
            violation["file"] = relative(violation["file"], root)
    return data
