"""Sets of symbols put at 1: which to try, in which order, and what one node's answers
say about them.

A question over dims that admit 1 is re-asked with each non-empty set of its symbols at 1,
smallest first (name order within a size), up to ``_AT_ONE_MAX`` symbols per question
(``2**n - 1`` sets); beyond, every set counts. :class:`AnswersAtOne` holds the answers of
one node's meta computation (or one leaf call) to check, with the sets that flip them.
"""
from __future__ import annotations

import functools
import itertools
from collections.abc import Callable, Iterator

import sympy

__all__ = ["AnswersAtOne", "UndefinedThere", "at_values", "flipped_at_one", "holds_at_one",
           "put_ones", "sets_at_one",
           "smallest_first"]

_AT_ONE_MAX = 3  # symbols checked together at 1 (2**n - 1 checks); beyond, they count


def holds_at_one(symbols, check: Callable[[dict], bool], within=None) -> bool:
    """Whether ``check(ones)`` holds for every non-empty set of ``symbols`` put at 1
    (``ones``: ``{symbol: 1}``); False beyond ``_AT_ONE_MAX`` symbols.

    within: when given, the only sets that may fail (``AnswersAtOne.flips``: the sets under
    which an answer changed); the others are known to hold and are not checked."""
    return all(check({s: sympy.Integer(1) for s in subset})
               for subset in _sets_at_one(symbols, within))


def flipped_at_one(symbols, holds: Callable[[dict], bool]) -> list[frozenset] | None:
    """The non-empty sets of ``symbols`` which, put at 1, make ``holds(ones)`` False; None
    beyond ``_AT_ONE_MAX`` symbols (every set counts then)."""
    if len(symbols) > _AT_ONE_MAX:
        return None
    return [frozenset(subset) for subset in _sets_at_one(symbols, None)
            if not holds({s: sympy.Integer(1) for s in subset})]


def _sets_at_one(symbols, within) -> list:
    """The sets of ``symbols`` to put at 1, smallest first (name order within a size); a
    single impossible set (``(None,)``) beyond ``_AT_ONE_MAX`` symbols, so that checks fail."""
    if within is not None:
        free = set(symbols)
        return smallest_first(subset for subset in within if subset <= free)
    if len(symbols) > _AT_ONE_MAX:
        return [(None,)]
    return list(sets_at_one(symbols))


class AnswersAtOne(dict):
    """The size-1 sensitive answers given inside one node's meta computation (or one leaf
    call): ``{symbol: Guard}``, and ``flips``, the sets of symbols which, put at 1, change one
    of those answers (None once an answer had too many symbols to enumerate: every set
    counts). A set no answer changes under gives the same computation, so only ``flips``
    need the metadata compared at 1."""

    __slots__ = ("flips",)

    def __init__(self):
        super().__init__()
        self.flips: set | None = set()

    def note(self, symbols, guard, flips) -> None:
        for symbol in symbols:
            self.setdefault(symbol, guard)
        if flips is None or self.flips is None:
            self.flips = None
        else:
            self.flips.update(flips)


class UndefinedThere(ArithmeticError):
    """An expression is undefined at the sizes put in: sympy divides by zero, or one of
    torch's sympy functions refuses its arguments (``Mod``'s and ``FloorDiv``'s checks raise
    AssertionError for a negative divisor: ``x % (s - 5)`` at ``s = 1``)."""


def at_values(expr, values: dict):
    """``expr`` with ``values`` (``{symbol: size}``) put in; raises :class:`UndefinedThere`
    (an ArithmeticError, as sympy's ZeroDivisionError) where it is undefined."""
    try:
        return expr.xreplace(values)
    except AssertionError as exc:  # torch's sympy functions checking their arguments
        raise UndefinedThere(f"{expr} at {values}: {exc}") from exc


@functools.lru_cache(maxsize=8192)
def put_ones(expr, symbols: tuple):
    """``expr`` with each of ``symbols`` replaced by 1 (:func:`at_values`). Cached for the
    process: substituting re-evaluates the expression (most of an audit's cost), and every
    export of a model audits the same questions."""
    return at_values(expr, {s: sympy.Integer(1) for s in symbols})


def sets_at_one(symbols) -> Iterator[frozenset]:
    """Every non-empty set of ``symbols``, smallest first (name order within a size)."""
    symbols = sorted(symbols, key=str)
    for count in range(1, len(symbols) + 1):
        for subset in itertools.combinations(symbols, count):
            yield frozenset(subset)


def smallest_first(sets) -> list:
    """The distinct ``sets`` of symbols, smallest first (name order within a size)."""
    return sorted(set(sets), key=lambda subset: (len(subset), sorted(map(str, subset))))
