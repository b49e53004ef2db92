"""Python floor semantics of the sympy functions we build, checked against Python."""
import sympy
from hypothesis import given
from hypothesis import strategies as st

from unbroken.symbolic import expr as E

ints = st.integers(-50, 50)
nonzero = ints.filter(lambda v: v != 0)


@given(ints, nonzero)
def test_floordiv_and_mod_match_python(a, b):
    assert E.python_floordiv(a, b) == a // b
    assert E.python_mod(a, b) == a % b


@given(ints, nonzero)
def test_symbolic_floordiv_mod_evaluate_like_python(a, b):
    x = sympy.Symbol("u0", integer=True)
    y = sympy.Symbol("u1", integer=True)
    values = {x: a, y: b}
    assert E.evaluate_at(E.python_floordiv(x, y), values) == a // b
    assert E.evaluate_at(E.python_mod(x, y), values) == a % b
    assert E.evaluate_at(y * E.python_floordiv(x, y) + E.python_mod(x, y), values) == a


def test_symbol_kinds():
    assert E.is_backed_symbol(E.make_size_symbol(3))
    assert E.is_unbacked_symbol(E.make_unbacked_symbol(0))
    assert E.is_unbacked_symbol(E.make_unbacked_symbol(1, "float"))
    u = E.make_unbacked_symbol(2, "size")
    assert E.free_unbacked_symbols(u + E.make_size_symbol(0)) == {u}


def test_to_python():
    assert E.to_python(sympy.Integer(3)) == 3 and E.to_python(sympy.true) is True
    assert E.to_python(sympy.Float(1.5)) == 1.5


def test_exact_divisions_carries_out_only_divisions_without_remainder():
    s0, s1 = (sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(2))
    assert E.exact_divisions(sympy.Eq(4 * s1**2, 4 * s1 * E.FloorDiv(s1**2, s1))) is sympy.true
    assert E.exact_divisions(E.FloorDiv(4 * s0 * s1, 2 * s1)) == 2 * s0
    assert E.exact_divisions(E.FloorDiv(s1 + 1, 2)) == E.FloorDiv(s1 + 1, 2)  # a remainder
    assert E.exact_divisions(E.FloorDiv(s1, s0)) == E.FloorDiv(s1, s0)
    plain = s0 + s1
    assert E.exact_divisions(plain) is plain
    expr = E.FloorDiv(3 * s0 * s1**2 + s1, s1) + E.FloorDiv(s0, 2)
    simpler = E.exact_divisions(expr)
    assert simpler == 3 * s0 * s1 + 1 + E.FloorDiv(s0, 2)
    for a in range(1, 6):  # an identity: checked at sampled values
        for b in range(1, 6):
            assert simpler.xreplace({s0: a, s1: b}) == (3 * a * b**2 + b) // b + a // 2
