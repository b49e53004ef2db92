"""Value ranges: closed intervals and the interval arithmetic of the guard fast path.

Before a guard is recorded (or sent to z3) we ask: is the answer the same for every value
the symbols may take? ``bound(expr, ranges)`` computes an interval containing every value of
``expr``; ``static_truth(expr, ranges)`` answers ``True``/``False`` for a boolean expression
when the intervals settle it, ``None`` otherwise. Both are *sound over-approximations*: a
``True``/``False`` answer holds for every admitted value; ``None`` says nothing.

Endpoints are Python ints (or floats for float expressions) or ``-sympy.oo``/``sympy.oo``.
"""
from __future__ import annotations

import functools
import math
from collections.abc import Mapping
from dataclasses import dataclass

import sympy
from sympy.core.relational import Relational
from sympy.logic.boolalg import BooleanAtom

from .functions import apply, function_of
from .torch_compat import int_oo

__all__ = ["ValueRange", "bound", "static_truth", "INF", "NEG_INF"]

INF = sympy.oo
NEG_INF = -sympy.oo

#: Every spelling of an infinite endpoint: sympy's, torch's ``int_oo`` (``int()`` of it raises
#: AttributeError), and float infinities.
_INFINITIES = (INF, NEG_INF, int_oo, -int_oo, math.inf, -math.inf)


def finite_bound(value) -> int | None:
    """A range endpoint as a Python int, or None when the range is unbounded on that side: the
    endpoint is None, infinite in any spelling (:data:`_INFINITIES`), not a number, or beyond
    ``2**62`` (where torch's ``int_oo`` starts; such a bound states nothing a size can reach).
    The one conversion of an endpoint for code outside this module (files, torch's ranges,
    messages)."""
    if value is None or value in _INFINITIES:
        return None
    try:
        number = int(value)
    except (TypeError, ValueError, OverflowError, AttributeError):
        return None
    return number if abs(number) < 2 ** 62 else None


def _is_inf(x) -> bool:
    return x is INF or x is NEG_INF


def _key(x):
    """An endpoint as a Python number, for comparing: a comparison with ``sympy.oo`` builds
    and evaluates a sympy relational (about a hundred times slower), and the guard fast path
    compares endpoints on every decision."""
    if x is INF:
        return math.inf
    if x is NEG_INF:
        return -math.inf
    return x


def _norm(x):
    """Normalize an endpoint: sympy numbers to Python, infinities to ``±sympy.oo``."""
    if x is None:
        return None
    if _is_inf(x):
        return x
    if isinstance(x, float) and math.isinf(x):
        return INF if x > 0 else NEG_INF
    if isinstance(x, sympy.Basic):
        if x in (sympy.oo, sympy.S.Infinity) or getattr(x, "is_infinite", False):
            return INF if x.is_positive else NEG_INF
        return int(x) if x.is_Integer else float(x)
    return x


@dataclass(frozen=True, slots=True)
class ValueRange:
    """A closed interval ``[lower, upper]`` of values an expression may take.

    lower: the least value (an int/float, or ``-sympy.oo`` for unbounded below).
    upper: the greatest value (an int/float, or ``sympy.oo`` for unbounded above).
    ``None`` passed to the constructor means unbounded on that side.
    """

    lower: object
    upper: object

    def __post_init__(self):
        lower = NEG_INF if self.lower is None else _norm(self.lower)
        upper = INF if self.upper is None else _norm(self.upper)
        object.__setattr__(self, "lower", lower)
        object.__setattr__(self, "upper", upper)

    # ----- constructors -----
    @staticmethod
    def unbounded() -> ValueRange:
        return ValueRange(NEG_INF, INF)

    @staticmethod
    def point(value) -> ValueRange:
        return ValueRange(value, value)

    # ----- queries -----
    def is_singleton(self) -> bool:
        """True when the interval holds exactly one value."""
        return not _is_inf(self.lower) and self.lower == self.upper

    def is_empty(self) -> bool:
        return _key(self.lower) > _key(self.upper)

    def contains(self, value) -> bool:
        return _key(self.lower) <= _key(value) <= _key(self.upper)

    def is_nonnegative(self) -> bool:
        return _key(self.lower) >= 0

    def is_positive(self) -> bool:
        return _key(self.lower) > 0

    def intersect(self, other: ValueRange) -> ValueRange:
        return ValueRange(_max(self.lower, other.lower), _min(self.upper, other.upper))

    def union(self, other: ValueRange) -> ValueRange:
        return ValueRange(_min(self.lower, other.lower), _max(self.upper, other.upper))

    def __str__(self) -> str:
        def show(x):
            return "int_oo" if x is INF else "-int_oo" if x is NEG_INF else str(x)
        return f"VR[{show(self.lower)}, {show(self.upper)}]"

    __repr__ = __str__

    # ----- arithmetic (each returns an interval containing every possible result) -----
    def __add__(self, other: ValueRange) -> ValueRange:
        return ValueRange(_add(self.lower, other.lower), _add(self.upper, other.upper))

    def __neg__(self) -> ValueRange:
        return ValueRange(-self.upper, -self.lower)

    def __sub__(self, other: ValueRange) -> ValueRange:
        return self + (-other)

    def __mul__(self, other: ValueRange) -> ValueRange:
        return _corners(self, other, _mul)

    def floordiv(self, other: ValueRange) -> ValueRange:
        """Python ``//``. Unbounded when the divisor range contains 0."""
        if _key(other.lower) > 0:
            return _corners(self, other, _floordiv)
        if _key(other.upper) < 0:
            return (-self).floordiv(-other)
        return ValueRange.unbounded()

    def truediv(self, other: ValueRange) -> ValueRange:
        """Real division. Unbounded when the divisor range contains 0."""
        if _key(other.lower) > 0 or _key(other.upper) < 0:
            return _corners(self, other, _truediv)
        return ValueRange.unbounded()

    def mod(self, other: ValueRange) -> ValueRange:
        """Python ``%`` (the result takes the divisor's sign)."""
        if (other.is_singleton() and other.lower > 0
                and not _is_inf(self.lower) and not _is_inf(self.upper)):
            c = other.lower
            if self.lower // c == self.upper // c:
                return ValueRange(self.lower % c, self.upper % c)
        divisor_low, low = _key(other.lower), _key(self.lower)
        if divisor_low > 0 and low >= 0 and _key(self.upper) < divisor_low:
            return self  # a % b == a when 0 <= a < b
        if divisor_low > 0:
            top = _add(other.upper, -1)
            if low >= 0:
                top = _min(top, self.upper)
            return ValueRange(0, top)
        if _key(other.upper) < 0:
            return ValueRange(_add(other.lower, 1), 0)
        return ValueRange.unbounded()

    def pow(self, other: ValueRange) -> ValueRange:
        """``self ** other`` for a nonnegative integer exponent range; else unbounded."""
        if other.is_singleton() and isinstance(other.lower, int) and other.lower >= 0:
            n = other.lower
            lo, hi = _pow(self.lower, n), _pow(self.upper, n)
            if n % 2 == 1 or _key(self.lower) >= 0:
                return ValueRange(lo, hi)
            if _key(self.upper) <= 0:
                return ValueRange(hi, lo)
            return ValueRange(0, _max(lo, hi))
        if _key(self.lower) >= 1 and _key(other.lower) >= 0:
            return ValueRange(_pow(self.lower, other.lower), _pow(self.upper, other.upper))
        return ValueRange.unbounded()

    def abs(self) -> ValueRange:
        if _key(self.lower) >= 0:
            return self
        if _key(self.upper) <= 0:
            return -self
        return ValueRange(0, _max(-self.lower, self.upper))

    def min(self, other: ValueRange) -> ValueRange:
        return ValueRange(_min(self.lower, other.lower), _min(self.upper, other.upper))

    def max(self, other: ValueRange) -> ValueRange:
        return ValueRange(_max(self.lower, other.lower), _max(self.upper, other.upper))

    def floor(self) -> ValueRange:
        return ValueRange(_round(self.lower, math.floor), _round(self.upper, math.floor))

    def ceil(self) -> ValueRange:
        return ValueRange(_round(self.lower, math.ceil), _round(self.upper, math.ceil))

    def round_to_int(self) -> ValueRange:
        """Python's ``round`` to an int (half to even): within one of the floor."""
        return ValueRange(_add(self.lower, -1), _add(self.upper, 1)).floor()

    def trunc(self) -> ValueRange:
        return self.floor().union(self.ceil())


# ----- endpoint helpers: 0 * oo == 0 here (the product of a zero-width factor) -----
def _add(a, b):
    return a + b if not (_is_inf(a) or _is_inf(b)) else (a if _is_inf(a) else b)


def _mul(a, b):
    if _is_inf(a) or _is_inf(b):
        a, b = _key(a), _key(b)
        if a == 0 or b == 0:
            return 0
        return INF if (a > 0) == (b > 0) else NEG_INF
    return a * b


def _floordiv(a, b):
    if _is_inf(b):
        if _is_inf(a):
            return 0  # only a corner candidate; the other corners bound the true extremes
        return 0 if (a >= 0) == (_key(b) > 0) else -1
    if _is_inf(a):
        return a if b > 0 else -a
    return a // b


def _truediv(a, b):
    if _is_inf(b):
        return 0
    if _is_inf(a):
        return a if b > 0 else -a
    return a / b


def _pow(a, n):
    if _is_inf(a):
        if n == 0:
            return 1
        return INF if a is INF or n % 2 == 0 else NEG_INF
    if _is_inf(n):
        return INF if a > 1 else a  # only used with a >= 1
    return a ** n


def _round(a, fn):
    return a if _is_inf(a) else int(fn(a))


def _min(a, b):
    return a if _key(a) <= _key(b) else b


def _max(a, b):
    return a if _key(a) >= _key(b) else b


def _corners(x: ValueRange, y: ValueRange, fn) -> ValueRange:
    values = [fn(a, b) for a in (x.lower, x.upper) for b in (y.lower, y.upper)]
    lo, hi = values[0], values[0]
    for v in values[1:]:
        lo, hi = _min(lo, v), _max(hi, v)
    return ValueRange(lo, hi)


# ----- bounding expressions -----
Ranges = Mapping[sympy.Symbol, ValueRange]


def bound(expr, ranges: Ranges, cache: dict | None = None) -> ValueRange:
    """An interval containing every value of ``expr`` when each symbol lies in its range.

    Symbols missing from ``ranges`` are unbounded (or ``[0, oo)`` when sympy knows they are
    nonnegative). Unknown functions give the unbounded interval: never wrong, only weak.
    """
    if cache is not None:
        hit = cache.get(expr)
        if hit is not None:
            return hit
    result = _bound(expr, ranges, cache)
    if cache is not None:
        cache[expr] = result
    return result


def _bound(expr, ranges, cache) -> ValueRange:
    if isinstance(expr, (int, float)) and not isinstance(expr, bool):
        return ValueRange.point(expr)
    if expr.is_Number:
        if expr.is_infinite:
            return ValueRange(expr, expr)
        return ValueRange.point(_norm(expr))
    if expr.is_Symbol:
        found = ranges.get(expr)
        if found is not None:
            return found
        return ValueRange(0, INF) if expr.is_nonnegative else ValueRange.unbounded()
    entry = function_of(expr)
    if entry is None or entry.interval is None:
        return ValueRange.unbounded()
    result = apply(entry, entry.interval, [bound(a, ranges, cache) for a in expr.args])
    return ValueRange.unbounded() if result is None else result


# ----- deciding booleans -----
def static_truth(expr, ranges: Ranges, cache: dict | None = None) -> bool | None:
    """``True``/``False`` when the ranges settle ``expr`` for every admitted value, else None."""
    if expr is sympy.true or expr is True:
        return True
    if expr is sympy.false or expr is False:
        return False
    if isinstance(expr, sympy.Not):
        inner = static_truth(expr.args[0], ranges, cache)
        return None if inner is None else not inner
    if isinstance(expr, sympy.And):
        return _and([static_truth(a, ranges, cache) for a in expr.args])
    if isinstance(expr, sympy.Or):
        return _or([static_truth(a, ranges, cache) for a in expr.args])
    if isinstance(expr, Relational):
        return _relational_truth(expr, ranges, cache)
    return None


_BOOL_TYPES = (BooleanAtom, Relational, sympy.And, sympy.Or, sympy.Not, sympy.Xor, sympy.Equivalent)


def _is_bool_expr(expr) -> bool:
    return isinstance(expr, _BOOL_TYPES)


def _and(values) -> bool | None:
    if any(v is False for v in values):
        return False
    return True if all(v is True for v in values) else None


def _or(values) -> bool | None:
    if any(v is True for v in values):
        return True
    return False if all(v is False for v in values) else None


def _relational_truth(rel, ranges, cache) -> bool | None:
    lhs, rhs = rel.args
    if _is_bool_expr(lhs) or _is_bool_expr(rhs):
        a, b = static_truth(lhs, ranges, cache), static_truth(rhs, ranges, cache)
        if a is None or b is None:
            return None
        if isinstance(rel, sympy.Eq):
            return a == b
        return (a != b) if isinstance(rel, sympy.Ne) else None
    difference = _difference(lhs, rhs)
    truth = _sign_truth(rel, bound(difference, ranges, cache))
    if truth is None and isinstance(difference, sympy.Add):
        # a sum of products loses their correlation (s0*s1 - s0 is [-oo, oo] for s0, s1 >= 2);
        # its common factors kept apart (s0*(s1 - 1) >= 2) often settle it
        factored = _common_factors(difference)
        if factored is not difference:
            truth = _sign_truth(rel, bound(factored, ranges, cache))
    if truth is None:
        truth = _int64_truth(rel, lhs, rhs, ranges)
    return truth


_INT64 = ValueRange(-(2 ** 63), 2 ** 63 - 1)


def _int64_truth(rel, lhs, rhs, ranges) -> bool | None:
    """Every integer a program holds is an int64 (a size, a SymInt, the ``item()`` of an
    integer tensor): an integer symbol compared with a constant at or beyond that type's
    bounds is decided over its range within them. Slicing to the end asks ``size <=
    9223372036854775807`` (is the slice the whole dim?): the answer is the same whatever the
    symbol's range, so narrowing a range cannot change it."""
    symbol, constant = (lhs, rhs) if isinstance(rhs, sympy.Integer) else (rhs, lhs)
    if not (isinstance(symbol, sympy.Symbol) and symbol.is_integer
            and isinstance(constant, sympy.Integer)):
        return None
    if _INT64.lower < constant < _INT64.upper:
        return None
    within = ranges.get(symbol, ValueRange.unbounded()).intersect(_INT64)
    return _sign_truth(rel, bound(lhs - rhs, {symbol: within}))


def _sign_truth(rel, diff: ValueRange) -> bool | None:
    """``rel`` (``lhs <op> rhs``) given an interval of ``lhs - rhs``."""
    if isinstance(rel, sympy.Eq):
        return _eq_truth(diff)
    if isinstance(rel, sympy.Ne):
        t = _eq_truth(diff)
        return None if t is None else not t
    lower, upper = _key(diff.lower), _key(diff.upper)
    if isinstance(rel, sympy.StrictLessThan):
        return _cmp(upper < 0, lower >= 0)
    if isinstance(rel, sympy.LessThan):
        return _cmp(upper <= 0, lower > 0)
    if isinstance(rel, sympy.StrictGreaterThan):
        return _cmp(lower > 0, upper <= 0)
    if isinstance(rel, sympy.GreaterThan):
        return _cmp(lower >= 0, upper < 0)
    return None


@functools.lru_cache(maxsize=4096)
def _common_factors(expr):
    """``expr`` with the factors common to its terms pulled out (``s0*(s1 - 1)``), or
    ``expr`` itself when there are none. Cached for the process, as ``_difference``."""
    factored = sympy.factor_terms(expr)
    return expr if factored == expr else factored


@functools.lru_cache(maxsize=4096)
def _difference(lhs, rhs):
    """``lhs - rhs``, expanded when small (expanding products cancels terms; large
    expressions are left alone). Cached: the same guards come back in every export of a model,
    and expanding is most of the cost of settling one."""
    cheap = lhs.count_ops() + (rhs.count_ops() if hasattr(rhs, "count_ops") else 0) < 12
    return sympy.expand(lhs - rhs) if cheap else lhs - rhs


def _eq_truth(diff: ValueRange) -> bool | None:
    if diff.is_singleton() and diff.lower == 0:
        return True
    if not diff.contains(0):
        return False
    return None


def _cmp(true_if: bool, false_if: bool) -> bool | None:
    if true_if:
        return True
    if false_if:
        return False
    return None
