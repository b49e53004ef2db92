"""Every path of the program: the exploration behind ``find_graph_breaks``.

The first trace follows the example inputs (``docs/ci.md``, "Every path"). Each decision on
tensor data it meets (``frontend.paths``) is a fork: the other side becomes a path to explore,
traced again from the start with the decisions before the fork replayed and the other side
prescribed at it. Paths are explored breadth first (the other side of an early decision before
combinations of later ones) until none is left or the budget (``unbroken.budget``: ``paths``,
``unroll``, ``path_instructions``) is spent; what the budget left unexplored is said in
:class:`PathExploration`, never dropped silently.

What a path reports:

- its graph breaks, each with the decisions that lead to it;
- on a path other than the example's, an exception the program itself raises (the failing
  side of an ``assert``, a ``raise`` in the other branch) ends the path and is not a graph
  break: it is what the program does for inputs that go that way (counted in ``raised``);
  running out of the interpreter's budget there is a cut, not a break.

A break met on several paths (the same id at the same line) is reported once, at its first
occurrence (the example's path first), with the decisions *common to every explored path
that reaches it*: a break inside ``if x.sum() > 0:`` carries "`x.sum() > 0` is True", a break
after the ``if``/``else`` joins carries nothing. The conditions are necessary among the
explored paths (each path that reaches the break satisfies them), not a full description of
every input that reaches it.

Each trace runs with the random state as the exploration found it (``torch.random.fork_rng``),
so a replayed path meets the same decisions, and the process's random state is left as found.
"""
from __future__ import annotations

import contextlib
import dataclasses
import warnings
from collections import deque
from dataclasses import dataclass

import torch

from ..frontend.budget import budget, current_budget
from ..symbolic.diagnostics.catalogue import TracedException
from .options import ExportCall, ExportOptions
from .trace import Trace

__all__ = ["GraphBreaks", "PathExploration", "explore"]


@dataclass(frozen=True, slots=True)
class PathExploration:
    """How much of the program ``find_graph_breaks`` explored.

    explored: paths traced (the example inputs' path is the first);
    forks:    decisions on tensor data met on them whose other side was (or was to be)
              explored;
    raised:   paths, other than the example's, that end in an exception the program raises;
    cut:      one line per reason the exploration is incomplete (the budget's ``paths``,
              ``unroll`` or ``path_instructions``, a program that decides differently when
              replayed); empty when every side of every decision met was explored.
    """

    explored: int
    forks: int
    raised: int
    cut: tuple[str, ...]

    @property
    def complete(self) -> bool:
        return not self.cut

    def describe(self) -> str:
        """``3 paths explored: both sides of every decision on tensor data`` or ``32 paths
        explored; incomplete, not explored: ...``."""
        text = f"{self.explored} path{'s' if self.explored != 1 else ''} explored"
        if self.complete:
            return text + (": both sides of every decision on tensor data" if self.forks
                           else " (no decision on tensor data)")
        return text + "; incomplete, not explored: " + "; ".join(self.cut)

    def to_dict(self) -> dict:
        return {"explored": self.explored, "forks": self.forks, "raised": self.raised,
                "complete": self.complete, "cut": list(self.cut)}


class GraphBreaks(list):
    """The list ``find_graph_breaks`` returns: the graph breaks, in order (the example's
    path first), with ``exploration``, the :class:`PathExploration` that found them."""

    def __init__(self, breaks=(), exploration: PathExploration | None = None):
        super().__init__(breaks)
        self.exploration = exploration or PathExploration(1, 0, 0, ())


def explore(call: ExportCall, options: ExportOptions) -> GraphBreaks:
    """Trace every path of ``call`` in "find them all" mode (within ``unbroken.budget``) and
    return the graph breaks of all of them (see the module docstring)."""
    limit = current_budget()
    queue: deque[tuple] = deque([()])
    found: dict[tuple, tuple] = {}  # break key -> (first error, [decisions of each path])
    explored = forks = raised = used = 0
    cut: list[str] = []
    while queue:
        if explored >= limit.paths:
            cut.append(f"{len(queue)} more path(s): the budget of {limit.paths} paths is "
                       "spent (unbroken.budget(paths=...))")
            break
        if explored and used >= limit.path_instructions:
            cut.append(f"{len(queue)} more path(s): the budget of {limit.path_instructions:,} "
                       "instructions for all paths is spent "
                       "(unbroken.budget(path_instructions=...))")
            break
        prescribed = queue.popleft()
        trace, errors = _trace_path(call, options, prescribed,
                                    None if not explored else limit.path_instructions - used)
        used += trace.output.meter.count
        path = trace.output.path
        errors, ended = _path_outcome(trace, errors, forced=bool(explored))
        raised += ended == "raised"
        if ended == "budget":
            cut.append(f"a path {_where(prescribed, path)} used up the interpreter's budget "
                       "(unbroken.budget(instructions=...))")
        if path.diverged:
            cut.append(f"a path {_where(prescribed, path)}: the program decided differently "
                       "when replayed (random numbers?), its rest follows the example")
        new = path.forks()
        forks += len(new)
        queue.extend(new)
        cut.extend(_unrolled(path, limit.unroll))
        for error in errors:
            entry = found.setdefault(_key(error), (error, []))
            entry[1].append(path.before(error))
        explored += 1
    breaks = [error.on_path(_common(paths)) for error, paths in found.values()]
    return GraphBreaks(breaks, PathExploration(explored, forks, raised,
                                               tuple(dict.fromkeys(cut))))


def _trace_path(call, options, prescribed: tuple, instructions: int | None):
    """One trace along ``prescribed``: ``(trace, its breaks)``; a path other than the
    example's may use at most ``instructions`` (what is left of the exploration's budget),
    and its warnings (a write to the model's state...) are the example path's again: not
    repeated."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.random.fork_rng(devices=[]))
        if instructions is not None:
            stack.enter_context(budget(instructions=min(current_budget().instructions,
                                                        max(instructions, 1))))
            stack.enter_context(warnings.catch_warnings())
            warnings.simplefilter("ignore")
        trace = Trace(call, dataclasses.replace(options, find_all=True,
                                                forced_path=prescribed))
        return trace, trace.find_breaks()


def _path_outcome(trace, errors: list, *, forced: bool) -> tuple[list, str | None]:
    """The breaks a path reports, and how it ended when that is not a break: ``"raised"``
    (the program's own exception, on a path other than the example's) or ``"budget"``."""
    ended = trace.ended_by
    if not forced or ended is None:
        return errors, None
    if isinstance(ended, TracedException):
        return [e for e in errors if e is not ended], "raised"
    if ended.code == "UB122":
        return [e for e in errors if e is not ended], "budget"
    return errors, None


def _unrolled(path, unroll: int) -> list[str]:
    """A line per condition whose evaluations past the unrolling bound were not forked."""
    lines = {}
    for decision in path.unforked():
        c = decision.condition
        lines.setdefault(decision.site, (
            f"the other side of `{c.source_text}` ({c.file.rsplit('/', 1)[-1]}:{c.line}) after "
            f"its first {unroll} evaluation(s) on a path (unbroken.budget(unroll=...))"))
    return list(lines.values())


def _where(prescribed: tuple, path) -> str:
    """``where `x.sum() > 0` is False`` for the last prescribed decision of a path."""
    if not prescribed or len(path.decisions) < len(prescribed):
        return "after a replayed decision"
    return f"where {path.decisions[len(prescribed) - 1].condition.describe()}"


def _key(error) -> tuple:
    """What makes two breaks the same: the id and the place (as ``trace._unique``)."""
    where = error.location
    return error.code, where.filename if where else None, where.lineno if where else None


def _common(paths: list[tuple]) -> tuple:
    """The conditions every path in ``paths`` (their decisions before the break) shares, in
    the order of the first: the same site, the same evaluation, the same side."""
    def literal(decision):
        return decision.site, decision.condition.occurrence, decision.condition.taken
    shared = set.intersection(*({literal(d) for d in decisions} for decisions in paths))
    return tuple(d.condition for d in paths[0] if literal(d) in shared)
