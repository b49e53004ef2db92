"""Every path of the program: the exploration behind ``find_graph_breaks``.

The first trace follows the example inputs (``docs/ci.md``, "Every path"). Each decision on
tensor data it meets (``frontend.paths``) is a fork: the other side becomes a path to explore,
traced again from the start with the decisions before the fork replayed and the other side
prescribed at it. Paths are explored breadth first (the other side of an early decision before
combinations of later ones) until none is left or the budget (``unbroken.budget``: ``paths``,
``unroll``, ``path_instructions``, ``path_seconds``) is spent; what the budget left unexplored
is said in :class:`PathExploration`, never dropped silently.

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
import time
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
              ``unroll``, ``path_instructions`` or ``path_seconds``, a program that decides
              differently when replayed); empty when every side of every decision met was
              explored.
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
    exploration = _Exploration(current_budget())
    while exploration.queue and not exploration.spent():
        exploration.follow(call, options, exploration.queue.popleft())
    return exploration.result()


class _Exploration:
    """The state of one exploration: the paths still to explore (``queue``, prescriptions),
    the breaks found (``found``: break key -> (first error, the decisions before it on each
    path that reaches it)), what was counted and what was cut."""

    def __init__(self, limit):
        self.limit = limit
        self.deadline = time.monotonic() + limit.path_seconds
        self.queue: deque[tuple] = deque([()])
        self.found: dict[tuple, tuple] = {}
        self.explored = self.forks = self.raised = self.used = 0
        self.cut: list[str] = []

    def spent(self) -> bool:
        """True (and the cut noted) when the budget allows no further path."""
        limit, more = self.limit, f"{len(self.queue)} more path(s): the budget of"
        if self.explored >= limit.paths:
            reason = f"{more} {limit.paths} paths is spent (unbroken.budget(paths=...))"
        elif self.explored and self.used >= limit.path_instructions:
            reason = (f"{more} {limit.path_instructions:,} instructions for all paths is spent "
                      "(unbroken.budget(path_instructions=...))")
        elif self.explored and time.monotonic() >= self.deadline:
            reason = (f"{more} {limit.path_seconds:g} seconds for all paths is spent "
                      "(unbroken.budget(path_seconds=...))")
        else:
            return False
        self.cut.append(reason)
        return True

    def follow(self, call, options, prescribed: tuple) -> None:
        """Trace the path ``prescribed`` and take in its breaks and forks."""
        left = None if not self.explored else \
            (self.limit.path_instructions - self.used, self.deadline - time.monotonic())
        trace, errors = _trace_path(call, options, prescribed, left)
        self.used += trace.output.meter.count
        path = trace.output.path
        errors, ended = _path_outcome(trace, errors, forced=bool(self.explored))
        self.raised += ended == "raised"
        if ended == "budget":
            self.cut.append(f"the rest of a path {_where(prescribed, path)}: it used up the "
                            "interpreter's budget (unbroken.budget(instructions=..., "
                            "seconds=..., path_instructions=..., path_seconds=...))")
        if path.diverged:
            self.cut.append(f"a path {_where(prescribed, path)}: the program decided "
                            "differently when replayed (random numbers?), its rest follows "
                            "the example")
        new = path.forks()
        self.forks += len(new)
        self.queue.extend(new)
        self.cut.extend(_unrolled(path, self.limit.unroll))
        for error in errors:
            self.found.setdefault(_key(error), (error, []))[1].append(path.before(error))
        self.explored += 1

    def result(self) -> GraphBreaks:
        breaks = [error.on_path(_common(paths)) for error, paths in self.found.values()]
        return GraphBreaks(breaks, PathExploration(self.explored, self.forks, self.raised,
                                                   tuple(dict.fromkeys(self.cut))))


def _trace_path(call, options, prescribed: tuple, left: tuple | None):
    """One trace along ``prescribed``: ``(trace, its breaks)``; a path other than the
    example's may use at most ``left``, the instructions and seconds left of the
    exploration's budget, and its warnings (a write to the model's state...) are the example
    path's again: not repeated."""
    with contextlib.ExitStack() as stack:
        stack.enter_context(torch.random.fork_rng(devices=[]))
        if left is not None:
            limit = current_budget()
            stack.enter_context(budget(instructions=min(limit.instructions, max(left[0], 1)),
                                       seconds=min(limit.seconds, max(left[1], 0.001))))
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
