"""The functions of the symbolic language, one entry each, with what every layer needs.

A size expression is a sympy tree over the classes below (sympy's own ``Add``, ``Mul``,
relations and logic, and the Python-semantics functions of ``torch.utils._sympy.functions``:
``FloorDiv``, ``PythonMod``, ``ToFloat``...). Each entry states, for one class:

- ``python``:   the function on Python values, with Python's semantics (``//`` floors);
- ``interval``: the value-range rule, from the arguments' ``ValueRange``s to the result's
  (``None`` for relations and logic, which ``ranges.static_truth`` decides);
- ``z3``:       the translation, from the arguments' z3 terms to the result's;
- ``graph``:    the callable a graph node applies to compute it on SymInts/SymFloats (how the
  recorder writes the expression into an fx graph).

A rule that is ``None`` is not modelled by that layer: the range is then unbounded, z3 refuses
the fact as untranslatable, and the recorder refuses to write the expression (UB117).
``ranges``, ``solver`` and ``ir.graph_builder`` read this table; none keeps its own.
(``node`` maps torch's protocol methods, ``add``, ``int_floordiv``..., to constructors of
these classes, and computes hints with Python's operators, which are these ``python`` rules.)
N-ary entries (``nary=True``) fold their arguments left to right with the binary rule; the
rules of other entries take the arguments as positional parameters.
"""
from __future__ import annotations

import math
import operator
from collections.abc import Callable
from dataclasses import dataclass

import sympy
import torch
import z3

from . import expr as E
from .torch_compat import OPAQUE_SQRT, sym_sqrt

__all__ = ["SymbolicFunction", "FUNCTIONS", "function_of", "fold", "apply", "as_real",
           "real_power_call", "SYMBOLIC_MATH"]


@dataclass(frozen=True, slots=True)
class SymbolicFunction:
    """One function of the symbolic language (see the module docstring for each rule).

    cls: the sympy class; nary: the rules are binary and fold over any number of arguments.
    """

    cls: type
    python: Callable | None
    interval: Callable | None
    z3: Callable | None
    graph: Callable | None
    nary: bool = False


def fold(rule: Callable, arguments):
    """``rule`` applied left to right: ``rule(rule(a, b), c)``."""
    result = arguments[0]
    for argument in arguments[1:]:
        result = rule(result, argument)
    return result


# ----- z3 rules (Python semantics over z3's Euclidean integer division) -----
def _z3_floordiv(a, b):
    """Python ``a // b``: floor division, via Euclidean ``div`` on a positive divisor."""
    if z3.is_int_value(b):
        value = b.as_long()
        return a / b if value > 0 else (-a) / (-b)
    return z3.If(b > 0, a / b, (-a) / (-b))


def _z3_mod(a, b):
    return a - b * _z3_floordiv(a, b)


def as_real(term):
    """A z3 term as a real (integers converted)."""
    return z3.ToReal(term) if term.is_int() else term


def _z3_pow(base, exponent):
    if not z3.is_int_value(exponent) or exponent.as_long() < 0:
        return None  # untranslatable: the caller refuses the fact
    result = z3.IntVal(1) if base.is_int() else z3.RealVal(1)
    for _ in range(exponent.as_long()):
        result = result * base
    return result


def _z3_trunc(a):
    real = as_real(a)
    return z3.If(real >= 0, z3.ToInt(real), -z3.ToInt(-real))


def _z3_round(a):
    """Python ``round``: the nearest integer, ties to the even one (``floor(a + 1/2)``, minus
    one when ``a + 1/2`` is an odd integer)."""
    shifted = as_real(a) + z3.RealVal("1/2")
    nearest = z3.ToInt(shifted)
    tie_to_odd = z3.And(z3.ToReal(nearest) == shifted, nearest % 2 == 1)
    return z3.If(tie_to_odd, nearest - 1, nearest)


def _z3_floor(a):
    return z3.ToInt(as_real(a)) if not a.is_int() else a


def _z3_ceil(a):
    return -z3.ToInt(-as_real(a)) if not a.is_int() else a


# ----- interval rules (arguments are ValueRanges) -----
def _interval_pow(base, exponent):
    if exponent.is_singleton() and isinstance(exponent.lower, int) and exponent.lower < 0:
        return None  # 1/x: unbounded near 0
    return base.pow(exponent)


def _identity(value):
    return value


def _entry(cls, python, interval, z3_rule, graph, nary=False):
    return cls, SymbolicFunction(cls, python, interval, z3_rule, graph, nary)


def _z3_max(a, b):
    return z3.If(a >= b, a, b)


def _z3_min(a, b):
    return z3.If(a <= b, a, b)


def _z3_equivalent(*terms):
    return z3.And(*[terms[0] == term for term in terms[1:]])


def _equivalent(*values):
    return all(value == values[0] for value in values)


FUNCTIONS: dict[type, SymbolicFunction] = dict([
    # arithmetic
    _entry(sympy.Add, operator.add, operator.add, operator.add, operator.add, nary=True),
    _entry(sympy.Mul, operator.mul, operator.mul, operator.mul, operator.mul, nary=True),
    _entry(sympy.Pow, operator.pow, _interval_pow, _z3_pow, operator.pow),
    _entry(E.PowByNatural, operator.pow, lambda a, b: a.pow(b), _z3_pow, operator.pow),
    _entry(E.FloatPow, lambda a, b: float(a) ** float(b), _interval_pow, None, operator.pow),
    _entry(E.FloorDiv, operator.floordiv, lambda a, b: a.floordiv(b), _z3_floordiv,
           operator.floordiv),
    _entry(E.PythonMod, operator.mod, lambda a, b: a.mod(b), _z3_mod, operator.mod),
    _entry(E.Mod, operator.mod, lambda a, b: a.mod(b), _z3_mod, operator.mod),
    _entry(sympy.Mod, operator.mod, None, _z3_mod, operator.mod),
    _entry(E.IntTrueDiv, operator.truediv, lambda a, b: a.truediv(b),
           lambda a, b: as_real(a) / as_real(b), operator.truediv),
    _entry(E.FloatTrueDiv, operator.truediv, lambda a, b: a.truediv(b),
           lambda a, b: as_real(a) / as_real(b), operator.truediv),
    _entry(E.Max, max, lambda a, b: a.max(b), _z3_max, torch.sym_max, nary=True),
    _entry(E.Min, min, lambda a, b: a.min(b), _z3_min, torch.sym_min, nary=True),
    _entry(sympy.Max, max, lambda a, b: a.max(b), _z3_max, torch.sym_max, nary=True),
    _entry(sympy.Min, min, lambda a, b: a.min(b), _z3_min, torch.sym_min, nary=True),
    _entry(sympy.Abs, abs, lambda a: a.abs(), lambda a: z3.If(a >= 0, a, -a), operator.abs),
    # conversions and rounding
    _entry(E.ToFloat, float, _identity, as_real, torch.sym_float),
    _entry(E.Identity, _identity, _identity, _identity, None),
    _entry(sympy.floor, math.floor, lambda a: a.floor(), _z3_floor, math.floor),
    _entry(sympy.ceiling, math.ceil, lambda a: a.ceil(), _z3_ceil, math.ceil),
    _entry(E.FloorToInt, math.floor, lambda a: a.floor(), lambda a: z3.ToInt(as_real(a)),
           math.floor),
    _entry(E.CeilToInt, math.ceil, lambda a: a.ceil(), lambda a: -z3.ToInt(-as_real(a)),
           math.ceil),
    _entry(E.TruncToInt, math.trunc, lambda a: a.trunc(), _z3_trunc, math.trunc),
    _entry(E.TruncToFloat, lambda a: float(math.trunc(a)), lambda a: a.trunc(), None, None),
    _entry(E.RoundToInt, round, lambda a: a.round_to_int(), _z3_round, round),
    # relations (decided by ranges.static_truth, not by an interval rule)
    _entry(sympy.Eq, operator.eq, None, operator.eq, operator.eq),
    _entry(sympy.Ne, operator.ne, None, operator.ne, operator.ne),
    _entry(sympy.Lt, operator.lt, None, operator.lt, operator.lt),
    _entry(sympy.Le, operator.le, None, operator.le, operator.le),
    _entry(sympy.Gt, operator.gt, None, operator.gt, operator.gt),
    _entry(sympy.Ge, operator.ge, None, operator.ge, operator.ge),
    # logic
    _entry(sympy.And, lambda a, b: bool(a and b), None, lambda a, b: z3.And(a, b),
           operator.and_, nary=True),
    _entry(sympy.Or, lambda a, b: bool(a or b), None, lambda a, b: z3.Or(a, b), operator.or_,
           nary=True),
    _entry(sympy.Not, operator.not_, None, z3.Not, torch.sym_not),
    _entry(sympy.Xor, operator.xor, None, z3.Xor, None, nary=True),
    _entry(sympy.Equivalent, _equivalent, None, _z3_equivalent, None),
])

_sqrt = OPAQUE_SQRT
if _sqrt is not None:  # torch's own sqrt of a size (made by torch._sym_sqrt)
    FUNCTIONS[_sqrt] = SymbolicFunction(_sqrt, math.sqrt, None, None, sym_sqrt)


def function_of(expr) -> SymbolicFunction | None:
    """The entry for ``expr``'s function (its class or the nearest base class), or None."""
    for cls in type(expr).__mro__:
        entry = FUNCTIONS.get(cls)
        if entry is not None:
            return entry
    return None


def apply(entry: SymbolicFunction, rule: Callable, arguments: list):
    """``rule`` (one of ``entry``'s) on ``arguments``: folded for n-ary entries."""
    return fold(rule, arguments) if entry.nary else rule(*arguments)


_POWERS = (operator.pow, operator.ipow, pow)


def real_power_call(fn, args: list) -> tuple:
    """``(fn, args)`` of a leaf call, with a symbolic float raised to a constant integral
    power (``f ** 2``, ``f ** 3.0``, ``n ** 2.0`` of an ``item``) made ``FloatPow`` directly.

    torch's ``SymFloat.__pow__`` first does ``torch._check(base >= 0)`` (its symbolic power
    may not give a complex number), which would become a run-time assertion and a range
    ``[0, inf]`` on the program's value: ``ep.module()`` would refuse a negative ``item`` for
    which eager computes ``(-2.5) ** 3``. An integral exponent gives a real result for every
    base (the graph computes it with Python's ``**``, as eager does), so the check is skipped
    there; other exponents keep it (a negative base would give a complex number)."""
    if fn not in _POWERS or len(args) != 2:
        return fn, args
    base, exponent = args
    if not (isinstance(base, torch.SymFloat)
            or (isinstance(base, torch.SymInt) and type(exponent) is float)):
        return fn, args
    if type(exponent) not in (int, float) or not float(exponent).is_integer():
        return fn, args
    return _float_pow, [torch.sym_float(base), float(exponent)]


def _float_pow(base, exponent: float):
    return base.__float_pow__(exponent)


def _math_pow(base, exponent):
    """``math.pow`` of symbolic values: ``float(base) ** float(exponent)``, as it computes
    (an integral exponent without the ``base >= 0`` check: ``real_power_call``)."""
    fn, args = real_power_call(operator.pow, [torch.sym_float(base), torch.sym_float(exponent)])
    return fn(*args)


def _math_fabs(value):
    """``math.fabs`` of a symbolic value: ``abs(float(value))``."""
    return abs(torch.sym_float(value))


# the functions of ``math`` that convert their arguments with ``float()`` (which a symbolic
# value refuses: it would fix the value), computed symbolically instead, as the graph can
SYMBOLIC_MATH = {math.sqrt: sym_sqrt, math.pow: _math_pow, math.fabs: _math_fabs}
