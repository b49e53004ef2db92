"""symbolic.functions: the one registry of the size language. For each integer function, its
rules agree with its Python semantics: the interval rule contains the value, the z3 rule
computes it, the graph callable computes it (so ranges, solver and recorded graphs cannot
disagree about what ``//`` or ``%`` means)."""
import math
import operator

import pytest
import sympy
import torch
import z3
from hypothesis import given, settings
from hypothesis import strategies as st

import unbroken
from unbroken.symbolic import expr as E
from unbroken.symbolic.functions import FUNCTIONS, apply, function_of
from unbroken.symbolic.ranges import ValueRange

SETTINGS = settings(max_examples=60, deadline=None, derandomize=True, database=None)
ints = st.integers(-12, 12)

# class -> which pairs (a, b) are in its domain
BINARY = {
    sympy.Add: lambda a, b: True,
    sympy.Mul: lambda a, b: True,
    E.PowByNatural: lambda a, b: 0 <= b <= 4,
    E.FloorDiv: lambda a, b: b != 0,
    E.PythonMod: lambda a, b: b != 0,
    E.Mod: lambda a, b: a >= 0 and b > 0,
    E.Max: lambda a, b: True,
    E.Min: lambda a, b: True,
    sympy.Max: lambda a, b: True,
    sympy.Min: lambda a, b: True,
}


def _z3_value(term) -> int:
    return z3.simplify(term).as_long()


@SETTINGS
@given(a=ints, b=ints, widen_a=st.integers(0, 3), widen_b=st.integers(0, 3))
@pytest.mark.parametrize("cls", list(BINARY), ids=lambda c: c.__name__)
def test_the_rules_of_a_binary_function_agree(cls, a, b, widen_a, widen_b):
    if not BINARY[cls](a, b):
        return
    entry = FUNCTIONS[cls]
    value = apply(entry, entry.python, [a, b])
    ranges = [ValueRange(a - widen_a, a + widen_a), ValueRange(b - widen_b, b + widen_b)]
    in_domain = all(BINARY[cls](x, y) for x in range(a - widen_a, a + widen_a + 1)
                    for y in range(b - widen_b, b + widen_b + 1))
    if entry.interval is not None and in_domain:
        assert apply(entry, entry.interval, ranges).contains(value)
    assert _z3_value(apply(entry, entry.z3, [z3.IntVal(a), z3.IntVal(b)])) == value
    assert apply(entry, entry.graph, [a, b]) == value


@SETTINGS
@given(a=ints)
def test_abs_and_rounding_agree(a):
    for cls in (sympy.Abs, E.FloorToInt, E.CeilToInt, E.TruncToInt, sympy.floor,
                sympy.ceiling):
        entry = FUNCTIONS[cls]
        value = entry.python(a)
        assert entry.interval(ValueRange(a, a)).contains(value), cls
        assert _z3_value(entry.z3(z3.IntVal(a))) == value, cls
        assert entry.graph(a) == value, cls  # what the program computes


def test_floor_division_and_modulo_are_pythons():
    """The cases where C and Python differ: negative operands floor, the sign of % follows
    the divisor."""
    floordiv, mod = FUNCTIONS[E.FloorDiv], FUNCTIONS[E.PythonMod]
    assert _z3_value(floordiv.z3(z3.IntVal(-7), z3.IntVal(2))) == -4
    assert _z3_value(floordiv.z3(z3.IntVal(7), z3.IntVal(-2))) == -4
    assert _z3_value(mod.z3(z3.IntVal(-7), z3.IntVal(2))) == 1
    assert _z3_value(mod.z3(z3.IntVal(7), z3.IntVal(-2))) == -1


def test_lookup_follows_subclasses_and_relations_have_no_interval_rule():
    s = sympy.Symbol("s", integer=True, positive=True)
    assert function_of(E.FloorDiv(s, 2)) is FUNCTIONS[E.FloorDiv]
    assert function_of(sympy.Eq(s, 2)).interval is None
    assert function_of(s) is None  # a symbol is not a function
    assert function_of(s + 1).graph is operator.add


class _Power(torch.nn.Module):
    def __init__(self, power, dtype):
        super().__init__()
        self.power, self.dtype = power, dtype

    def forward(self, s, x):
        return x + self.power(s.item())


@pytest.mark.parametrize("name, power, dtype", [
    ("float_squared", lambda f: f ** 2, torch.float32),
    ("float_cubed", lambda f: f ** 3, torch.float32),
    ("float_pow_builtin", lambda f: pow(f, 2), torch.float32),
    ("float_integral_float_exponent", lambda f: f ** 3.0, torch.float32),
    ("float_negative_exponent", lambda f: f ** -1, torch.float32),
    ("int_float_exponent", lambda f: f ** 2.0, torch.int64),
    ("int_squared", lambda f: f ** 2, torch.int64),
    ("math_pow_float", lambda f: math.pow(f, 2), torch.float32),
    ("math_pow_int", lambda f: math.pow(f, 3), torch.int64),
    ("math_pow_float_exponent", lambda f: math.pow(f, 3.0), torch.int64),
    ("math_pow_negative_exponent", lambda f: math.pow(f, -1), torch.float32),
    ("abs_float", abs, torch.float32),
    ("abs_int", abs, torch.int64),
    ("math_fabs_float", math.fabs, torch.float32),
    ("math_fabs_int", math.fabs, torch.int64),
    ("floor_of_abs", lambda f: math.floor(abs(f) / 2), torch.float32),
])
def test_an_integral_power_of_an_item_admits_negative_bases(name, power, dtype):
    """torch's ``SymFloat.__pow__`` checks ``base >= 0`` (a complex result otherwise): for an
    integral exponent the result is real for every base (``real_power_call``), so the
    program asserts nothing and computes eager's value for negative items too. So do
    ``math.pow`` (with ``math.fabs``: the ``math`` functions that convert their arguments with
    ``float()``, ``symbolic.functions.SYMBOLIC_MATH``) and ``abs``, which the program computes
    with Python's own operators (torch's verifier admits them)."""
    model = _Power(power, dtype)
    x = torch.randn(3)
    ep = unbroken.export(model, (torch.tensor(2, dtype=dtype), x))
    assert not [n for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    for value in (2, -1, -3, 5):
        s = torch.tensor(value, dtype=dtype)
        torch.testing.assert_close(ep.module()(s, x), model(s, x))


def test_a_fractional_power_of_a_float_item_keeps_refusing_negative_bases():
    """``f ** 0.5`` of a negative ``f`` is complex in eager: the program keeps torch's check
    and refuses it at run time, and computes eager's value elsewhere."""
    model = _Power(lambda f: f ** 0.5, torch.float32)
    x = torch.randn(3)
    ep = unbroken.export(model, (torch.tensor(2.25), x))
    torch.testing.assert_close(ep.module()(torch.tensor(4.0), x), model(torch.tensor(4.0), x))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(torch.tensor(-4.0), x)


def test_math_pow_of_a_fractional_exponent_refuses_a_negative_item_as_eager_does():
    """``math.pow(-4.0, 0.5)`` raises in eager (a math domain error): the program keeps the
    check and refuses it at run time, and computes eager's value elsewhere."""
    model = _Power(lambda f: math.pow(f, 0.5), torch.float32)
    x = torch.randn(3)
    ep = unbroken.export(model, (torch.tensor(2.25), x))
    torch.testing.assert_close(ep.module()(torch.tensor(4.0), x), model(torch.tensor(4.0), x))
    with pytest.raises(ValueError):
        model(torch.tensor(-4.0), x)
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(torch.tensor(-4.0), x)
