"""symbolic.parse: what str() prints for unbroken's expressions reads back to the same
expression, and nothing else is read: no eval, unknown names, oversized numbers and costly
expressions are refused quickly."""
import pytest
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.cpu_time import cpu_clock
from unbroken.symbolic import expr as E
from unbroken.symbolic.parse import ExpressionBudget, ExpressionError, parse_expression

S0 = sympy.Symbol("s0", integer=True, positive=True)
S1 = sympy.Symbol("s1", integer=True, positive=True)
U0 = sympy.Symbol("u0", integer=True)
Z0 = sympy.Symbol("zuf0", real=True)
SYMBOLS = {"s0": S0, "s1": S1, "u0": U0, "zuf0": Z0}

EXAMPLES = [
    E.FloorDiv(S0, 2), E.PythonMod(S0, 3), E.Mod(S0, 3), E.Max(S0, U0), E.Min(2, S0),
    E.CeilToInt(Z0), E.FloorToInt(Z0), E.TruncToInt(Z0), E.RoundToInt(Z0), E.ToFloat(S0),
    E.TruncToFloat(Z0), E.IntTrueDiv(S0, 2), E.FloatTrueDiv(Z0, 2.0), S0 ** 2, 2 * S0 - 3 * U0 + 1,
    S0 / 2, sympy.Eq(S0, 3), sympy.Ne(S0, 3), S0 >= 2, sympy.And(S0 > 2, U0 < 3),
    sympy.Or(S0 > 2, U0 < 3), sympy.Not(sympy.And(S0 > 2, U0 < 3)), 1.5 * Z0, -S0 ** 2,
    1 / (S0 + 1), E.Max(1, S0, U0, 3), 4 * E.FloorDiv(S0 * U0 + 2, 3) - E.PythonMod(U0, S0),
    sympy.sqrt(S0), sympy.Abs(U0), sympy.true,
    # a sign over a whole product must not be distributed into its first factor
    -(S0 + S1) * E.FloorDiv(S0, 3), E.FloorDiv(-S0, 3), -E.FloorDiv(S0 * U0, 3),
    2 * (S0 + S1) * E.FloorDiv(S0, 3), (S0 + S1) * U0 / 3, -2 * (S0 + 1) / (U0 + 2),
]


@pytest.mark.parametrize("expression", EXAMPLES, ids=str)
def test_printed_expressions_read_back(expression):
    assert parse_expression(str(expression), SYMBOLS) == expression


_ATOMS = st.sampled_from([S0, S1, U0, sympy.Integer(2), sympy.Integer(7)])
_EXPRESSIONS = st.recursive(_ATOMS, lambda inner: st.one_of(
    st.builds(lambda a, b: a + b, inner, inner), st.builds(lambda a, b: a * b, inner, inner),
    st.builds(lambda a: -a, inner), st.builds(lambda a: E.FloorDiv(a, 3), inner),
    st.builds(lambda a, b: E.Max(a, b), inner, inner),
    st.builds(lambda a: E.PythonMod(a, 5), inner)), max_leaves=6)


@settings(max_examples=300, deadline=None)
@given(_EXPRESSIONS)
def test_random_expressions_read_back(expression):
    assert parse_expression(str(expression), SYMBOLS) == expression


@pytest.mark.parametrize("text, message", [
    ("__import__('os').system('true')", "unexpected character"),
    ("s0.__class__", "unexpected character"),
    ("eval(1)", "unknown function 'eval'"),
    ("x + 1", "unknown symbol 'x'"),
    ("9**9**9**9", "exponent"),
    ("s0 ** s0", "exponent"),
    ("9" * 30, "exceeds 64 bits"),
    ("1/0", "division by zero"),
    ("FloorDiv(s0, 0)", "undefined"),
    ("1e999", "not finite"),
    ("(" * 100 + "1" + ")" * 100, "nests deeper"),
    ("s0+" * 400 + "1", "characters exceeds"),
    ("+".join(["s0"] * 40), "more than 24 operations"),
    ("%".join(["s0"] * 8), "floor divisions and modulos"),
    ("Eq(s0 > 2, 1)", "condition where a number"),
    ("s0 & s1", "number where a condition"),
    ("Max(" + ",".join(["s0"] * 20) + ")", "more than 16 arguments"),
])
def test_everything_else_is_refused_quickly(text, message):
    with cpu_clock() as clock, pytest.raises(ExpressionError, match=message):
        parse_expression(text, SYMBOLS)
    assert clock.seconds < 0.5


def test_a_budget_bounds_the_expressions_of_one_file():
    budget = ExpressionBudget(operations=10, divisions=100)
    parse_expression("s0 + s1 + 2*u0", SYMBOLS, budget)
    with pytest.raises(ExpressionError, match="budget"):
        for _ in range(5):
            parse_expression("s0 + s1 + 2*u0", SYMBOLS, budget)
