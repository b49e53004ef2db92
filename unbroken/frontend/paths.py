"""Decisions on tensor data in "find them all" mode: the paths of a program.

``find_graph_breaks`` reports the breaks of every path, not only of the one the example inputs
take. A *decision on tensor data* is a truth value the export cannot know (``if x.sum() > 0``,
a ternary, ``while`` on a tensor, ``assert`` on data, ``bool(t)``, ``t.item()`` compared in an
``if``): in "find them all" mode the frontend steps over it with the example's real value
(``TraceContext.take_branch``), and this module records it. Decisions on values fixed at
export time (flags, config, sizes the solver decides) are ordinary constant folding and never
reach here: they are not forked.

One trace follows one path. :class:`PathDecisions` is that path: the sides *prescribed* for
its first decisions (the fork: every decision up to the last prescribed one is replayed as
prescribed), then the example's side for the rest. The interpreter state at a decision (the
frames of inlined calls on the Python stack, value stacks, locals, the overlay of attribute
writes, the recorder's graph and the shadow's real tensors) is forked by *replay*: another
trace from the start, which reaches the decision with the same state, because a trace is
deterministic given its inputs and its prescribed decisions (``exporter.paths`` restores the
random state for each). Replay shares no mutable object between paths, so one path can
never see another's writes; the cost is re-running the prefix, bounded by the budget.

Each decision carries its :class:`~unbroken.symbolic.diagnostics.PathCondition`: the
condition's source text (from the user's line, found with ``ast`` at the position CPython
gives the instruction), the side taken, the file, line and occurrence.
"""
from __future__ import annotations

import ast
import dis
import linecache
from dataclasses import dataclass

from ..symbolic.diagnostics import PathCondition
from .decoding import decode
from .trace_site import is_internal

__all__ = ["Decision", "PathDecisions", "condition_text"]


@dataclass(frozen=True, slots=True)
class Decision:
    """One decision on tensor data on a path.

    site:      where it is decided: (file, first line and name of the code, instruction index)
               of the innermost frame (a library's own ``if`` inside a call of the user's is
               its own site; the condition's text is the user's line);
    condition: its :class:`PathCondition` (``taken``: the side this path takes);
    forced:    the side was prescribed by the path (not the example's value);
    forkable:  its other side may be explored: the condition's ``occurrence`` on this path is
               within the unrolling bound (a loop on data is unrolled that many times).
    """

    site: tuple
    condition: PathCondition
    forced: bool
    forkable: bool


class PathDecisions:
    """The decisions on tensor data of one trace (one path).

    prescribed: ``(site, taken)`` for its first decisions, as an earlier path recorded them
                (empty for the example's path);
    unroll:     how many evaluations of one condition on this path may be forked;
    decisions:  the decisions made so far, in order;
    diverged:   a decision came at another site than prescribed (the program is not
                deterministic, e.g. it branches on random numbers): the rest of the path
                follows the example's values.
    """

    def __init__(self, prescribed: tuple = (), unroll: int = 4):
        self.prescribed = tuple(prescribed)
        self.unroll = unroll
        self.decisions: list[Decision] = []
        self.diverged = False
        self._depths: dict[int, int] = {}  # id(error) -> decisions made before it
        self._noted: list = []  # the noted errors, alive so that their ids stay theirs
        self._occurrences: dict[tuple, int] = {}

    def decide(self, translators, real: bool) -> bool:
        """The side to take at a decision on tensor data whose example value is ``real``;
        ``translators``: the running translators (the innermost user frame decides)."""
        tx, inner = _user_translator(translators), translators[-1]
        site = (inner.code.co_filename, inner.code.co_firstlineno, inner.code.co_name,
                inner.ip - 1)
        occurrence = self._occurrences[site] = self._occurrences.get(site, 0) + 1
        index = len(self.decisions)
        taken, forced = real, False
        if index < len(self.prescribed) and not self.diverged:
            expected_site, prescribed = self.prescribed[index]
            if expected_site == site:
                taken, forced = prescribed, True
            else:
                self.diverged = True
        line, text = condition_text(tx.code, tx.ip - 1, tx.lineno)
        condition = PathCondition(text, bool(taken), tx.code.co_filename, line, occurrence)
        self.decisions.append(Decision(site, condition, forced, occurrence <= self.unroll))
        return bool(taken)

    def note(self, error) -> None:
        """``error`` was met here: the decisions made so far lead to it."""
        self._depths[id(error)] = len(self.decisions)
        self._noted.append(error)

    def before(self, error) -> tuple[Decision, ...]:
        """The decisions made before ``error`` was met (all of them if it was not noted)."""
        return tuple(self.decisions[:self._depths.get(id(error), len(self.decisions))])

    def forks(self) -> list[tuple]:
        """The prescriptions of the paths that branch off this one: for each forkable
        decision after the prescribed ones, the decisions before it and its other side."""
        steps = [(d.site, d.condition.taken) for d in self.decisions]
        return [tuple(steps[:i]) + ((d.site, not d.condition.taken),)
                for i, d in enumerate(self.decisions)
                if i >= len(self.prescribed) and d.forkable]

    def unforked(self) -> list[Decision]:
        """The decisions past the unrolling bound (their other side is not explored)."""
        return [d for i, d in enumerate(self.decisions)
                if i >= len(self.prescribed) and not d.forkable]


def _user_translator(translators):
    """The innermost running translator in the user's code (the innermost one otherwise)."""
    for tx in reversed(translators):
        if not is_internal(tx.code.co_filename):
            return tx
    return translators[-1]


# ---------------------------------------------------------------------- condition text

def _location(code, index: int):
    """CPython's position (``dis.Positions``) of the ``index``-th instruction of
    ``decode(code)``, as the translator numbers them."""
    instructions = decode(code)
    if not 0 <= index < len(instructions) or instructions[index].position is None:
        return None
    return dis.Positions(*instructions[index].position)


def condition_text(code, index: int, lineno: int) -> tuple[int, str]:
    """``(line, source text)`` of the condition the ``index``-th instruction of ``code``
    decides: the test of the ``if``/``while``/ternary/``assert`` (or operand of ``and``/
    ``or``, comprehension filter; the operand of ``not``, whose truth is what is decided) at
    the instruction's position, else the text of that position (``bool(t)``), else the
    stripped line ``lineno``."""
    filename = code.co_filename
    location = _location(code, index)
    tree, source = _parsed(filename)
    if location is None or location.lineno is None or location.col_offset is None:
        return lineno, _line(filename, lineno)
    span = (location.lineno, location.col_offset, location.end_lineno, location.end_col_offset)
    node = _best_test(tree, span) if tree is not None else None
    if node is not None and (isinstance(node, ast.BoolOp) or _shared(code, index)):
        node = _operand(tree, node, code, index)
    while isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
        node = node.operand  # `if not t:` jumps on the truth of `t`: that is what is decided
    if node is not None:
        return node.lineno, " ".join(ast.get_source_segment(source, node).split())
    text = _segment(source, span) if source else None
    return location.lineno, text or _line(filename, location.lineno)


_JUMPS: dict = {}


def _jumps(code) -> list[int]:
    """Indices of the conditional jumps of ``code`` (cached per code object)."""
    jumps = _JUMPS.get(code)
    if jumps is None:
        jumps = _JUMPS[code] = [i for i, instr in enumerate(decode(code))
                                if instr.name.startswith("POP_JUMP")]
    return jumps


def _shared(code, index: int) -> bool:
    """True when another conditional jump has the position of the ``index``-th instruction
    (3.11 gives the operands of ``and``/``or`` one position: the first's, or the whole's)."""
    location = _location(code, index)
    return any(i != index and _location(code, i) == location for i in _jumps(code))


def _operand(tree, node, code, index: int):
    """The operand of ``and``/``or`` an ambiguous position stands for: the operands (leaves
    of the test's tree of ``and``/``or``) are decided by one jump each, in source order, so
    the jumps of the code inside the test before this one count which (modulo their number:
    3.11 compiles a ``while`` test twice)."""
    root = _enclosing_boolop(tree, node)
    if root is None:
        return node
    leaves = list(_leaves(root))
    span = _span(root)
    before = sum(1 for i in _jumps(code) if i < index and _about(span, _location(code, i)))
    return leaves[before % len(leaves)]


def _about(span: tuple, location) -> bool:
    """True when a jump's position is inside ``span`` or holds it (3.11 may give the jumps of
    a test the whole statement's position)."""
    if location is None or location.lineno is None or location.col_offset is None:
        return False
    other = _location_span(location)
    return _contains(span, other) or _contains(other, span)


def _enclosing_boolop(tree, node):
    """The outermost ``and``/``or`` test containing ``node`` (itself included), or None."""
    around = [t for t in _tests(tree) if isinstance(t, ast.BoolOp)
              and _contains(_span(t), _span(node))]
    return min(around, key=lambda t: (_span(t)[:2], [-v for v in _span(t)[2:]])) \
        if around else None


def _leaves(node):
    if isinstance(node, ast.BoolOp):
        for value in node.values:
            yield from _leaves(value)
    else:
        yield node


def _location_span(location) -> tuple:
    return location.lineno, location.col_offset, location.end_lineno, location.end_col_offset


_PARSED: dict = {}


def _parsed(filename: str):
    """``(ast, source)`` of the file (``(None, '')`` when unreadable), cached by content."""
    source = "".join(linecache.getlines(filename))
    cached = _PARSED.get(filename)
    if cached is not None and cached[1] == source:
        return cached
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        tree = None
    _PARSED[filename] = (tree, source)
    return tree, source


def _tests(tree):
    """Every expression that is decided for its truth value."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.If, ast.While, ast.IfExp, ast.Assert)):
            yield node.test
        elif isinstance(node, ast.BoolOp):
            yield from node.values
        elif isinstance(node, ast.comprehension):
            yield from node.ifs
        elif isinstance(node, ast.UnaryOp) and isinstance(node.op, ast.Not):
            yield node.operand


def _span(node) -> tuple:
    return node.lineno, node.col_offset, node.end_lineno, node.end_col_offset


def _contains(outer: tuple, inner: tuple) -> bool:
    return outer[:2] <= inner[:2] and inner[2:] <= outer[2:]


def _best_test(tree, span: tuple):
    """The test at the instruction's span: exactly there, else the outermost test inside it
    (3.11 places a ternary's jump on the whole expression), else the innermost test around
    it."""
    tests = [node for node in _tests(tree) if node.end_lineno is not None]
    exact = [t for t in tests if _span(t) == span]
    if exact:
        return exact[0]
    inside = [t for t in tests if _contains(span, _span(t))]
    if inside:
        return min(inside, key=lambda t: (_span(t)[:2], [-v for v in _span(t)[2:]]))
    around = [t for t in tests if _contains(_span(t), span)]
    if around:
        return max(around, key=lambda t: (_span(t)[:2], [-v for v in _span(t)[2:]]))
    return _comprehension_filter(tree, span)


def _comprehension_filter(tree, span: tuple):
    """The one ``if`` of the comprehension around ``span`` (3.13 gives its jump the element's
    position), or None."""
    for node in ast.walk(tree):
        if isinstance(node, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)) \
                and _contains(_span(node), span):
            filters = [f for generator in node.generators for f in generator.ifs]
            if len(filters) == 1:
                return filters[0]
    return None


def _segment(source: str, span: tuple) -> str | None:
    """The source text of a position (CPython's columns are UTF-8 byte offsets)."""
    node = ast.Constant(value=None, lineno=span[0], col_offset=span[1], end_lineno=span[2],
                        end_col_offset=span[3])
    text = ast.get_source_segment(source, node)
    return " ".join(text.split()) if text else None


def _line(filename: str, lineno: int) -> str:
    return linecache.getline(filename, lineno).strip()
