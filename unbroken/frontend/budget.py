"""The interpreter's budget: how many bytecode instructions and how much wall time one trace
may use before it is refused (UB122), so that ``while True:`` in ``forward`` cannot hang
``export`` or grow without bound.

The defaults fit every model we know of with a wide margin; a larger model raises them::

    with unbroken.budget(instructions=200_000_000, seconds=3600):
        ep = unbroken.export(model, args)

``find_graph_breaks`` (and ``unbroken check``) also explore both sides of each decision on
tensor data (``frontend.paths``): ``paths``, ``unroll``, ``path_instructions`` and
``path_seconds`` bound that exploration, and the report says when they cut it::

    with unbroken.budget(paths=256, unroll=8):
        breaks = unbroken.find_graph_breaks(model, args)
"""
from __future__ import annotations

import ast
import contextlib
import linecache
import time
from dataclasses import dataclass

__all__ = ["Budget", "budget", "current_budget", "BudgetMeter", "TraceStopped",
           "loop_statement_line"]


@dataclass(frozen=True, slots=True)
class Budget:
    """instructions: bytecode instructions interpreted in one trace (all frames together);
    seconds: wall time of one trace;
    paths: traces (paths) ``find_graph_breaks`` runs at most, the example's included;
    unroll: evaluations of one condition on tensor data forked on one path (a loop on data
        is unrolled that many times; later evaluations follow the example's values);
    path_instructions: instructions of all the traces of one exploration together;
    path_seconds: wall time of all the traces of one exploration together (the example's
        path is always traced whole, within ``seconds``)."""

    instructions: int = 2_000_000
    seconds: float = 180.0
    paths: int = 32
    unroll: int = 4
    path_instructions: int = 20_000_000
    path_seconds: float = 60.0


_CURRENT = [Budget()]


def current_budget() -> Budget:
    return _CURRENT[-1]


@contextlib.contextmanager
def budget(instructions: int | None = None, seconds: float | None = None, *,
           paths: int | None = None, unroll: int | None = None,
           path_instructions: int | None = None, path_seconds: float | None = None):
    """Raise (or lower) the interpreter's budget for the exports (and ``find_graph_breaks``
    explorations) run inside the block; an argument left None keeps the enclosing value."""
    base = current_budget()
    _CURRENT.append(Budget(base.instructions if instructions is None else int(instructions),
                           base.seconds if seconds is None else float(seconds),
                           base.paths if paths is None else max(1, int(paths)),
                           base.unroll if unroll is None else max(0, int(unroll)),
                           base.path_instructions if path_instructions is None
                           else int(path_instructions),
                           base.path_seconds if path_seconds is None else float(path_seconds)))
    try:
        yield current_budget()
    finally:
        _CURRENT.pop()


CLOCK_EVERY = 4096  # instructions between two reads of the clock


class TraceStopped(Exception):
    """The trace was asked to stop (:meth:`BudgetMeter.request_stop`): raised by the
    interpreter at an instruction boundary and passed up untouched, never delivered to the
    program's own handlers. The one who asked knows why and what comes next."""


class BudgetMeter:
    """Counts the instructions of one trace against ``limit`` (a :class:`Budget`). The
    interpreter's loop adds one to ``count`` per instruction and, every ``CLOCK_EVERY``
    instructions, asks ``exhausted()``: a description of what ran out, or None; or it raises
    :class:`TraceStopped` once a stop was requested."""

    __slots__ = ("limit", "count", "deadline", "_stop_if")

    def __init__(self, limit: Budget):
        self.limit = limit
        self.count = 0
        self.deadline = time.monotonic() + limit.seconds
        self._stop_if = None

    def request_stop(self, confirm) -> None:
        """End the trace at the next instruction the interpreter starts (the count moves up
        to the next check) if ``confirm()`` then says True; else go on. Asked once, at that
        instruction; a request while one is pending is dropped."""
        if self._stop_if is None:
            self._stop_if = confirm
            self.count += (-self.count - 1) % CLOCK_EVERY

    def exhausted(self) -> str | None:
        if self._stop_if is not None:
            confirm, self._stop_if = self._stop_if, None
            if confirm():
                raise TraceStopped()
        if self.count > self.limit.instructions:
            return f"{self.limit.instructions:,} bytecode instructions"
        if time.monotonic() > self.deadline:
            return f"{self.limit.seconds:g} seconds"
        return None


def loop_statement_line(filename: str, line: int) -> int:
    """The line of the innermost ``for``/``while`` statement of ``filename`` whose body holds
    ``line`` (where a loop jumps back to), or ``line`` itself when the source is unknown."""
    try:
        tree = ast.parse("".join(linecache.getlines(filename)))
    except (SyntaxError, ValueError):
        return line
    loops = [node for node in ast.walk(tree) if isinstance(node, (ast.For, ast.While))
             and node.lineno <= line <= (node.end_lineno or node.lineno)]
    return max((node.lineno for node in loops), default=line)
