"""Sympy vocabulary of the symbolic layer: symbol kinds and the integer functions we use.

Expressions are plain sympy objects. For the operations Python and PyTorch have but sympy
lacks (floor division and modulo with Python's floor semantics, integer powers, int<->float
conversions, ...) we use the sympy ``Function`` classes that ship with PyTorch in
``torch.utils._sympy.functions``: they are well-tested, they evaluate to numbers when their
arguments are numbers, and using them keeps our expressions readable by the rest of the
PyTorch tool chain (printers, range constraints, serializers).

Semantics we rely on (all checked against Python in ``tests/symbolic/test_expr.py``):

* ``FloorDiv(a, b)``  == Python ``a // b``  (rounds toward -inf, for any signs);
* ``PythonMod(a, b)`` == Python ``a % b``   (result has the sign of ``b``);
* ``Mod(a, b)``       == ``a % b`` but only meaningful when ``a >= 0`` and ``b > 0``
  (we only build it when value ranges prove that);
* identity: ``a == b * (a // b) + a % b`` for every ``b != 0``.

Symbol naming follows PyTorch's convention (``torch.utils._sympy.symbol``) so that PyTorch's
own helpers (``free_unbacked_symbols``, ``has_free_symbols``, ...) classify our symbols
correctly when meta kernels call them: backed sizes are ``s0, s1, ...``; unbacked integers
``u0, u1, ...``; unbacked floats ``zuf0, ...``.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping

import sympy

from .torch_compat import (  # noqa: F401  (re-exported vocabulary: torch's size functions)
    CeilToInt,
    CleanDiv,
    FloatPow,
    FloatTrueDiv,
    FloorDiv,
    FloorToInt,
    Identity,
    IntTrueDiv,
    Max,
    Min,
    Mod,
    PowByNatural,
    PythonMod,
    RoundToInt,
    ToFloat,
    TruncToFloat,
    TruncToInt,
)

__all__ = [
    "exact_divisions",
    "refuted_near",
    "BACKED_PREFIX",
    "UNBACKED_INT_PREFIX",
    "UNBACKED_FLOAT_PREFIX",
    "make_size_symbol",
    "make_unbacked_symbol",
    "is_backed_symbol",
    "is_unbacked_symbol",
    "free_unbacked_symbols",
    "python_floordiv",
    "python_mod",
    "evaluate_at",
    "to_python",
    "FloorDiv",
    "PythonMod",
    "Mod",
    "Max",
    "Min",
]

BACKED_PREFIX = "s"
UNBACKED_INT_PREFIX = "u"
UNBACKED_FLOAT_PREFIX = "zuf"


def make_size_symbol(index: int) -> sympy.Symbol:
    """A backed size symbol ``s<index>``: integer and positive (sizes are >= 2 anyway)."""
    return sympy.Symbol(f"{BACKED_PREFIX}{index}", integer=True, positive=True)


def make_unbacked_symbol(index: int, kind: str = "int") -> sympy.Symbol:
    """An unbacked symbol: ``u<index>`` (integer; nonnegative when ``kind == "size"``) or
    ``zuf<index>`` (real, ``kind == "float"``)."""
    if kind == "float":
        return sympy.Symbol(f"{UNBACKED_FLOAT_PREFIX}{index}", real=True)
    if kind == "size":
        return sympy.Symbol(f"{UNBACKED_INT_PREFIX}{index}", integer=True, nonnegative=True)
    if kind == "int":
        return sympy.Symbol(f"{UNBACKED_INT_PREFIX}{index}", integer=True)
    raise ValueError(f"unknown unbacked symbol kind {kind!r} (expected int, size or float)")


def is_unbacked_symbol(symbol: sympy.Symbol) -> bool:
    """True for symbols created by ``make_unbacked_symbol`` (no example value)."""
    name = symbol.name
    return name.startswith(UNBACKED_INT_PREFIX) or name.startswith(UNBACKED_FLOAT_PREFIX)


def is_backed_symbol(symbol: sympy.Symbol) -> bool:
    """True for input-dimension symbols (``s<n>``), which carry an example value."""
    return symbol.name.startswith(BACKED_PREFIX)


def free_unbacked_symbols(expr) -> set[sympy.Symbol]:
    """The unbacked symbols an expression mentions."""
    free = getattr(expr, "free_symbols", ())
    return {s for s in free if is_unbacked_symbol(s)}


def python_floordiv(a, b) -> sympy.Expr:
    """``a // b`` with Python semantics as a sympy expression (folds when both are numbers)."""
    return FloorDiv(sympy.sympify(a), sympy.sympify(b))


def exact_divisions(expr):
    """``expr`` with each ``FloorDiv(p, q)`` whose polynomials divide exactly (integer
    coefficients, no remainder: ``(s1**2)//s1``) replaced by the quotient; the same
    expression when there is none. An identity wherever ``q != 0``."""
    if not expr.has(FloorDiv):
        return expr
    return expr.replace(lambda e: isinstance(e, FloorDiv), _exact_quotient)


def _exact_quotient(division):
    p, q = division.args
    try:
        quotient, remainder = sympy.div(p, q, domain="ZZ")
    except (sympy.PolynomialError, sympy.polys.polyerrors.PolificationFailed,
            sympy.polys.polyerrors.CoercionFailed):
        return division
    return quotient if remainder == 0 else division


def python_mod(a, b) -> sympy.Expr:
    """``a % b`` with Python semantics as a sympy expression (folds when both are numbers)."""
    return PythonMod(sympy.sympify(a), sympy.sympify(b))


def to_python(value):
    """Convert a sympy number/boolean to ``int``, ``float`` or ``bool``."""
    if value is sympy.true or value is True:
        return True
    if value is sympy.false or value is False:
        return False
    if isinstance(value, (int, float)):
        return value
    if getattr(value, "is_Integer", False):
        return int(value)
    if getattr(value, "is_Number", False):
        return float(value)
    raise TypeError(f"expression {value} is not a number")


def evaluate_at(expr, values: Mapping[sympy.Symbol, int | float | bool]):
    """Evaluate ``expr`` with every free symbol replaced by a concrete value.

    Returns a Python ``int``/``float``/``bool``; raises ``TypeError`` when a free symbol has no
    value. ``xreplace`` triggers each function's automatic evaluation, so ``FloorDiv`` and
    ``PythonMod`` fold with their Python semantics.
    """
    if isinstance(expr, (bool, int, float)):
        return expr
    mapping = {s: sympy.sympify(values[s]) for s in expr.free_symbols if s in values}
    result = expr.xreplace(mapping)
    if not isinstance(result, sympy.Number) and result not in (sympy.true, sympy.false):
        result = _rebuild(result)
    return to_python(result)


def _rebuild(expr):
    """Re-create ``expr`` bottom-up so every function sees numeric arguments and folds
    (``xreplace`` does not re-evaluate ``Min``/``Max`` nested inside other functions)."""
    if not getattr(expr, "args", ()) or expr.is_Atom:
        return expr
    return expr.func(*(_rebuild(a) for a in expr.args))


def refuted_near(fact, start: Mapping, admits: Callable[[object, int], bool], steps,
                 assumptions=()) -> bool:
    """True when ``start`` (a value for every symbol of ``fact`` and ``assumptions``), or
    ``start`` with one of ``fact``'s symbols moved up by one of ``steps``, is admitted
    (``admits(symbol, value)``), satisfies every assumption and makes ``fact`` false: a
    witness that ``fact`` does not follow from them, found without a solver. False says
    nothing. A point where something is undefined (a modulus of 0) is no witness."""
    points = [start] + [{**start, symbol: start[symbol] + step}
                        for symbol in sorted(fact.free_symbols, key=str) for step in steps]
    for point in points:
        if not all(admits(symbol, value) for symbol, value in point.items()):
            continue
        try:
            if evaluate_at(fact, point) is False and all(
                    evaluate_at(a, point) is True for a in assumptions):
                return True
        except (ArithmeticError, TypeError):
            continue
    return False
