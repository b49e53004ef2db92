"""``Dim.AUTO`` and ``Dim.DYNAMIC``: adopt what the code requires of the dims export may choose.

A trace records guards; the ones the spec does not imply are *violations*. For a named ``Dim``
they are refused with a suggested fix. For the dims whose spec lets export decide (``Dim.AUTO``
everywhere, ``Dim.DYNAMIC`` except that it may not become static) the fix search runs in its
``adopt`` mode (``fixes.suggest_fix``) and its result is adopted:

* ``x.shape[1] <= 512``: the range narrows;
* ``y.shape[0] == x.shape[0]``: the two dims share one symbol; ``z.shape[0] == x.shape[0] *
  y.shape[0]``: z's dim *is* that product (``module()`` checks it on every call);
* ``x.shape[1] == 8`` (one admitted value): the dim is pinned, which export reports as a
  :class:`Specialization` (a warning naming the dim and the line, and ``ep.specializations``);
* a fact no spec can state (``a == b or b == 1``, ``n % 4 == 0``): kept as a run-time
  assertion in the program, checked by ``module()`` before the graph runs.

The first three change the symbols, so export traces again with :class:`Adoption`'s
``refinements`` (keyed by dim source, e.g. ``x.shape[0]``; see ``spec.resolve_dynamic_shapes``);
assertions are placed once the symbols have settled. A guard that relates two dims or pins
one (:func:`needs_retrace`) needs that trace whatever else the first finds: the exporter
stops the first trace after the operation that recorded it (``ExportOptions.adopt_early``).
"""
from __future__ import annotations

from dataclasses import dataclass

import sympy

from .diagnostics import UserFrame
from .env import ShapeEnvironment
from .expr import refuted_near
from .fixes import Fix, suggest_fix
from .guards import Guard, render_expr
from .ranges import ValueRange, finite_bound
from .solver import Solver

__all__ = ["Adoption", "Specialization", "SpecializationWarning", "narrow_in_place",
           "may_need_retrace", "needs_retrace", "plan_adoption"]


class SpecializationWarning(UserWarning):
    """A dim marked ``Dim.AUTO`` became static because the model's code pins it to one value."""


@dataclass(frozen=True, slots=True)
class Specialization:
    """A ``Dim.AUTO`` dim export made static.

    source: the dim (``input_ids.shape[1]``); value: the size it is fixed at; reason: the
    fact that pins it (``input_ids.shape[1] == 12``); frames: the user's stack where the code
    asked for it (innermost last; may be empty).
    """

    source: str
    value: int
    reason: str
    frames: tuple[UserFrame, ...] = ()

    def describe(self) -> str:
        """One line: the dim, its value, why and where."""
        where = ""
        if self.frames:
            frame = self.frames[-1]
            where = f" at {frame.short()}: {frame.source}"
        return (f"Dim.AUTO {self.source} is specialized to {self.value}: the code needs "
                f"`{self.reason}`{where}")


@dataclass(frozen=True, slots=True)
class Adoption:
    """What export adopts for one set of violations.

    refinements:     dim source -> ``"static"``, another dim's source (equal dims),
                     ``("range", lower, upper)`` or ``("expr", e)`` with ``e`` over symbols
                     named after earlier dims' sources; empty when the symbols are settled.
    asserted:        guards whose facts become run-time assertions (``Guard.as_fact()`` is
                     the fact to assert; frames say where the code asked for it).
    specializations: the dims this adoption makes static.
    """

    refinements: dict
    asserted: tuple[Guard, ...]
    specializations: tuple[Specialization, ...]


def plan_adoption(env: ShapeEnvironment, violations) -> Adoption | None:
    """The :class:`Adoption` that makes every violated guard hold, or None when a violation
    involves a named ``Dim`` (or would make a ``Dim.DYNAMIC`` static): that is refused.
    ``violations``: ``solver.Violation``s, or the violated ``Guard``s themselves."""
    adoptable = set(env.auto_symbols)
    guards = [v if isinstance(v, Guard) else v.guard for v in violations]
    if not all(g.as_fact().free_symbols & adoptable for g in guards):
        return None
    backed = [s for s, info in env.symbols.items() if info.hint is not None]
    ranges = {s: _range(env, s) for s in backed}
    fix = suggest_fix([g.as_fact() for g in guards], ranges,
                      {s: env.hint_of(s) for s in backed}, env.source_of, adopt=True,
                      fixed=frozenset(backed) - adoptable)
    if fix is None or any(s in env.dynamic_symbols for s in fix.static):
        return None
    changed = set(fix.static) | set(fix.derived) | {s for s in fix.ranges if
                                                     fix.ranges[s] != ranges.get(s)}
    asserted = set().union(*(sympy.sympify(a).free_symbols for a in fix.asserted))
    if not (changed | asserted) <= adoptable:
        return None
    return Adoption(_refinements(env, fix, ranges),
                    tuple(_guard_for(fact, guards) for fact in fix.asserted),
                    tuple(_specialization(env, s, fix, guards) for s in fix.static))


def may_need_retrace(env: ShapeEnvironment, guard: Guard) -> bool:
    """The cheap half of :func:`needs_retrace`, asked of every guard as it is recorded: its
    fact is ``a == b`` for two ``Dim.AUTO``/``Dim.DYNAMIC`` symbols or ``a == n`` for a
    ``Dim.AUTO`` symbol."""
    fact = guard.as_fact()
    if not isinstance(fact, sympy.Eq):
        return False
    auto = env.auto_symbols
    lhs, rhs = fact.args
    if isinstance(lhs, sympy.Integer):
        lhs, rhs = rhs, lhs
    if not (isinstance(lhs, sympy.Symbol) and lhs in auto):
        return False
    if isinstance(rhs, sympy.Symbol):
        return rhs in auto and rhs != lhs
    return isinstance(rhs, sympy.Integer) and lhs not in env.dynamic_symbols


def needs_retrace(env: ShapeEnvironment, guard: Guard) -> bool:
    """True when ``guard`` is a violation whose adoption changes the symbols, and so needs
    another trace whatever else the trace finds: two ``Dim.AUTO``/``Dim.DYNAMIC`` dims made
    one (``a == b``), or a ``Dim.AUTO`` dim pinned (``a == n``). Asked once the operation that
    recorded it is over (the ``torch._check`` it made are then known: sdpa's meta kernel
    decides ``mask_len == seq_len``, then checks ``mask_len == seq_len or mask_len == 1``).
    The spec cannot imply such a fact (the ranges did not settle it, else it would not be
    recorded, and two symbols are free of each other); the facts of ``torch._check`` recorded
    so far can (a guard is decided under them, as ``settle_shapes`` does; a ``torch._check``
    itself under the spec alone). A fact checked later than that would take it back: not
    known here. Narrower ranges are not such a guard: they are adopted in place when the
    trace's answers allow it."""
    if not may_need_retrace(env, guard):
        return False
    if not env.facts:
        return True
    assume_checks = guard.kind != "expect_true"
    if _refuted_near_the_example(env, guard.as_fact(), assume_checks):
        return True
    solver = Solver(env, assume_checks=assume_checks, smallest=False)
    return solver.decide(guard.as_fact()).verdict != "true"


# how far from its example value a dim of the fact is moved to look for a refuting input
_NEAR_STEPS = (1, 2, 3, 4, 6, 8, 12, 16)


def _refuted_near_the_example(env: ShapeEnvironment, fact, assume_checks: bool) -> bool:
    """True when an input the ranges and facts admit makes ``fact`` false: the example's sizes
    with one of the fact's dims moved up by a few steps (``_NEAR_STEPS``), within the ranges
    the solver would assume (``assume_checks``: the ranges the checks narrowed, and every
    ``torch._check`` fact true there). Such an input is what z3 would find (``a == b`` with
    ``n % a == 0`` recorded: a view's divisibility check), without building a solver; False
    says nothing (z3 decides)."""
    ranges = env.var_ranges if assume_checks else env.spec_ranges
    facts = list(env.facts) if assume_checks else []
    example = {}
    for symbol in set().union(fact.free_symbols, *(f.free_symbols for f in facts)):
        hint = env.hint_of(symbol)
        if hint is None or symbol not in ranges:
            return False  # a data-dependent size or one without a range: leave it to z3
        example[symbol] = hint
    return refuted_near(fact, example, lambda s, v: ranges[s].contains(v), _NEAR_STEPS, facts)


def narrow_in_place(env: ShapeEnvironment, adoption: Adoption) -> bool:
    """Adopt ``adoption`` in ``env`` itself when all it does is narrow the ranges of
    ``Dim.AUTO``/``Dim.DYNAMIC`` symbols (``x.shape[1] <= 512``); True when done, False (and
    ``env`` untouched) when it pins, relates or derives dims, which needs another trace.

    Narrowing a range cannot change what the trace computed: every decision the wider range
    settled holds on the narrower one, and every other decision took the example's answer,
    which lies in both. But the trace may have *asked* the ranges (``statically_known_true``,
    a guard the ranges settle and so never record, a bound read by a kernel or by the size-1
    audit), and narrower ones can answer otherwise: BERT's sequence narrowed to ``<= 512``
    settles ``end >= size`` for a whole slice, which a trace under it drops. So the answers
    the ranges gave are replayed under the narrower ones (``ShapeEnvironment.replay_ranges``,
    the environment watched since the inputs were bound): only when every one is the same
    (but for guard questions they settle the way the example did: that trace records no guard
    for them, and neither does this one from now on) is this trace the one the narrower spec
    gives, and its guards, re-checked against the narrower ranges, decide the same program
    without tracing again. Otherwise False.
    """
    by_source = {source: symbol for symbol, source in env.auto_symbols.items()}
    narrowed = {}
    for source, refinement in adoption.refinements.items():
        symbol = by_source.get(source)
        if symbol is None or not (isinstance(refinement, tuple) and refinement[0] == "range"):
            return False
        new = ValueRange(refinement[1], refinement[2])
        current = env.var_ranges[symbol].intersect(new)
        spec = env.spec_ranges[symbol]
        if current.is_empty() or new == spec or spec.intersect(new) != new \
                or not new.contains(env.hint_of(symbol)):
            return False  # not strictly narrower, or a contradiction the retrace reports
        if (new.lower >= 1) != (spec.lower >= 1) or (new.lower >= 0) != (spec.lower >= 0):
            return False  # another symbol (positive / nonnegative / any int): sympy
            # simplifies otherwise
        narrowed[symbol] = (new, current)
    settled = env.replay_ranges({symbol: new for symbol, (new, _) in narrowed.items()})
    if settled is None:
        return False
    for symbol, (spec, current) in narrowed.items():
        env.set_range(symbol, spec, spec=True)
        env.set_range(symbol, current)
    dropped = set(settled)  # what that trace settles, it does not record
    env.guards[:] = [g for i, g in enumerate(env.guards) if i not in dropped]
    return True


def _range(env: ShapeEnvironment, symbol) -> tuple:
    value_range = env.spec_ranges[symbol]
    return int(value_range.lower), finite_bound(value_range.upper)


def _refinements(env: ShapeEnvironment, fix: Fix, ranges: dict) -> dict:
    refinements: dict = {env.auto_symbols[s]: "static" for s in fix.static}
    for symbol, value_range in fix.ranges.items():
        if symbol in env.auto_symbols and value_range != ranges.get(symbol):
            refinements[env.auto_symbols[symbol]] = ("range",) + tuple(value_range)
    for symbol, expr in fix.derived.items():
        if isinstance(expr, sympy.Symbol):
            refinements[env.auto_symbols[symbol]] = env.source_of(expr)
        else:
            named = {s: sympy.Symbol(env.source_of(s), integer=True, positive=True)
                     for s in expr.free_symbols}
            refinements[env.auto_symbols[symbol]] = ("expr", expr.xreplace(named))
    return refinements


def _guard_for(fact, guards: list[Guard]) -> Guard:
    """The first guard whose fact is (or has as a conjunct) ``fact``; a guard made for it."""
    for guard in guards:
        whole = guard.as_fact()
        if whole == fact or fact in sympy.And.make_args(whole):
            return Guard(fact, True, guard.frames, guard.op, guard.kind)
    return Guard(fact, True)


def _specialization(env: ShapeEnvironment, symbol, fix: Fix, guards) -> Specialization:
    fact = fix.pinned_by.get(symbol, sympy.Eq(symbol, fix.static[symbol]))
    frames = _guard_for(fact, guards).frames
    if not frames:  # the fact may be a rewriting of a guard: take the first one on the symbol
        frames = next((g.frames for g in guards if symbol in g.as_fact().free_symbols), ())
    return Specialization(env.auto_symbols[symbol], int(fix.static[symbol]),
                          render_expr(fact, env.source_of), frames)
