"""Settling one node's deferred size-1 check once the trace's input facts are known.

A node whose meta computation gave answers that change when some dims are 1
(``AnswersAtOne``) is re-run with those dims at 1 (``size_one.unit_meta``); the sets of dims at 1 it
is re-run under are the ones that changed an answer (``AnswersAtOne.flips``), with the dims an
input fact relates to them (``n == b or b == 1``: the batch ``b`` of a mask and the batch
``n`` it broadcasts against, see ``_linked``). A set no admitted input reaches is skipped: one
of its dims is refused at 1 anyway, or an input fact (asserted before the program runs) is
false under it whatever the other sizes.

A set under which the node's metadata differs is refused:

- by the range of a dim (it keeps ``[2, ...]``) when every reachable set containing that dim
  differs: size 1 never works for it;
- otherwise by a run-time assertion of that exact pattern (``RefusedAtOne``: those dims at 1,
  the others of the check not), so that the sets that do give the same program stay admitted:
  a mask of batch 1 against inputs of batch ``n`` broadcasts to another shape and is refused,
  while mask and inputs of batch 1 together run.

Failing sets are followed by their supersets (one more dim at 1), which may work again.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import sympy

from ..symbolic.guards import Guard
from ..symbolic.ranges import ValueRange, static_truth
from .at_one import at_values, sets_at_one, smallest_first

__all__ = ["RefusedAtOne", "forced_equalities", "settle_check"]

# dims of one node's check put at 1 together (63 cheap meta re-runs at most): a pointwise op
# between a tensor and its mask meets batch and sequence of both
NODE_AT_ONE_MAX = 6


@dataclass(frozen=True, slots=True)
class RefusedAtOne:
    """A set of dims at 1 under which a node computes something else.

    ones:   the symbols at 1;
    others: the other symbols of the check, >= 2 in this set;
    guard:  the answer of the node that changes under it (its line is the user's).
    """

    ones: frozenset
    others: frozenset
    guard: Guard

    @property
    def fact(self):
        """What the program asserts at run time: not this pattern."""
        return sympy.Or(*(sympy.Ne(s, 1) for s in sorted(self.ones, key=str)),
                        *(sympy.Eq(s, 1) for s in sorted(self.others, key=str)))

    def describe(self, source: Callable) -> str:
        """The run-time assertion's message (``source``: symbol -> its input's name)."""
        guard = self.guard
        ones = " and ".join(f"{source(s)} = 1" for s in sorted(self.ones, key=str))
        others = sorted(self.others, key=str)
        needed = (f"{source(others[0])} must be 1 too" if len(others) == 1 else
                  f"one of {', '.join(map(source, others))} must be 1 too")
        where = f" at {guard.frames[-1].short()}" if guard.frames else ""
        return (f"with {ones}, {needed}: otherwise the program relies on "
                f"{guard.describe(source)}{where}, which does not hold there (those sizes "
                f"need a program of their own)")


def settle_check(audit, env, pending, check: Callable[[dict], bool],
                 reachability: dict) -> list[RefusedAtOne]:
    """Run one deferred check (``check(ones)``: the node's metadata with ``ones`` put in is
    its metadata at 1) on the reachable sets; mark in ``audit`` the symbols size 1 never
    works for, and return the failing sets left to refuse with an assertion.
    ``reachability``: the answers of :func:`_unreachable` kept by the caller while the
    environment's ranges stay as they are (the checks of one settling ask the same sets
    of the same symbols over and over: a block's nodes, repeated in every block)."""
    free = [s for s in pending if s not in audit.sensitive]
    if not free:
        return []
    symbols = _linked(audit, env, free)
    queue = _sets_to_check(pending, free, symbols)
    if queue is None:
        audit.mark_sensitive(pending)
        return []
    guard = next(iter(pending.values()))
    reached, failed, facts, seen = [], [], [], set()
    while queue:
        subset = queue.pop(0)
        if subset in seen:
            continue
        seen.add(subset)
        if _unreachable_kept(reachability, audit, env, subset, symbols, facts):
            continue
        reached.append(subset)
        if check({s: sympy.Integer(1) for s in subset}):
            continue
        failed.append(subset)
        facts.append(RefusedAtOne(subset, frozenset(symbols) - subset, guard).fact)
        queue = smallest_first(queue + [subset | {t} for t in symbols if t not in subset])
    never = {s for s in symbols if any(s in f for f in failed)
             and all(r in failed for r in reached if s in r)}
    audit.mark_sensitive({s: pending.get(s, guard) for s in never})
    return [RefusedAtOne(f, frozenset(symbols) - f, pending.get(_first(f), guard))
            for f in failed if not f & never]


def _first(subset):
    return min(subset, key=str)


def _sets_to_check(pending, free: list, symbols: list) -> list | None:
    """The sets a check starts from: each set of ``free`` (pending's symbols not refused at
    1) that flipped an answer, with each set of the symbols ``_linked`` to them; every set
    when the flips were too many to enumerate (None beyond ``NODE_AT_ONE_MAX`` symbols)."""
    flips = getattr(pending, "flips", None)
    linked = [s for s in symbols if s not in free]
    if flips is None:
        if len(symbols) > NODE_AT_ONE_MAX:
            return None
        bases = list(sets_at_one(free))
    else:
        bases = [subset for subset in flips if subset <= set(free)]
    extras = [frozenset(), *sets_at_one(linked)]
    return smallest_first(base | extra for base in bases for extra in extras)


def _linked(audit, env, symbols: list) -> list:
    """``symbols`` and the free size-1 candidates an input fact relates to them (a mask's
    batch ``b`` with the batch ``n`` it broadcasts against: ``n == b or b == 1``)."""
    linked = set(symbols)
    for fact in env.input_facts:
        if fact.free_symbols & linked:
            linked |= {s for s in fact.free_symbols
                       if s in audit.admits_one and s not in audit.sensitive}
    return sorted(linked, key=str)


def _unreachable_kept(kept: dict, audit, env, subset: frozenset, checked,
                      facts: list) -> bool:
    """:func:`_unreachable`, kept in ``kept`` under everything it reads but the ranges: the
    set, the symbols checked, this check's refused patterns, the input facts (appended to
    while settling) and the symbols refused at 1."""
    key = (subset, tuple(checked), tuple(facts), len(env.input_facts),
           frozenset(audit.sensitive))
    answer = kept.get(key)
    if answer is None:
        answer = kept[key] = _unreachable(audit, env, subset, checked, facts)
    return answer


def _unreachable(audit, env, subset: frozenset, checked, facts: list) -> bool:
    """Whether no admitted input has ``subset`` at 1 and the other ``checked`` symbols >= 2:
    one of ``subset`` is refused at 1 already, or an input fact (or a pattern this check
    refuses, ``facts``) is false there whatever the other sizes."""
    if subset & set(audit.sensitive):
        return True
    if not env.input_facts and not facts:
        return False
    ones = {s: sympy.Integer(1) for s in subset}
    ranges = _ranges_at_one(audit, env, ones, checked)
    cache: dict = {}
    return any(_false_at(fact, ones, ranges, cache) for fact in (*env.input_facts, *facts))


def _false_at(fact, ones: dict, ranges: dict, cache: dict) -> bool:
    """Whether ``fact`` with ``ones`` put in is false for every size in ``ranges``; not when
    it is undefined there (``4*s % (s - 1) == 0``, a view's ``-1`` dim, at ``s = 1``): the
    set is then checked like any other, and refused if the node differs there."""
    try:
        return static_truth(at_values(fact, ones), ranges, cache) is False
    except ArithmeticError:
        return False


def _ranges_at_one(audit, env, ones: dict, checked=()) -> dict:
    """The ranges with the size-1 candidates other than ``ones`` and ``checked`` (which keep
    their trace ranges, >= 2) widened to 1 or more, unless already refused at 1."""
    ranges = dict(env.var_ranges)
    for symbol in audit.admits_one - set(checked) - set(audit.sensitive) - set(ones):
        ranges[symbol] = ValueRange(1, ranges[symbol].upper)
    return ranges


def forced_equalities(audit, env, ones: dict) -> dict:
    """``{symbol: expression}`` every input reaching a computation with ``ones`` at 1 has:
    an input fact (checked before the program runs) of which one alternative is left, an
    equality, once ``ones`` are put in and the alternatives false for every size are dropped
    (``seq == 1 or mask_seq == seq`` with ``seq`` refused at 1: ``mask_seq == seq``)."""
    ranges = _ranges_at_one(audit, env, ones)
    cache: dict = {}
    forced: dict = {}
    for fact in env.input_facts:
        try:
            options = sympy.Or.make_args(at_values(fact, ones))
        except ArithmeticError:  # undefined there (``x % (s - 1)``): forces nothing
            continue
        left = [option for option in options if static_truth(option, ranges, cache) is not False]
        if len(left) == 1 and isinstance(left[0], sympy.Eq):
            lhs, rhs = left[0].args
            if lhs.is_Symbol and lhs not in forced:
                forced[lhs] = rhs
            elif rhs.is_Symbol and rhs not in forced:
                forced[rhs] = lhs
    return forced
