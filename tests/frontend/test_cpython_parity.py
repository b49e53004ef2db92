"""Oracle tests: the bytecode interpreter against CPython, part 1 — operators and builtins.

Every function below is plain Python defined at module level (so its source lines exist).
Each test runs it natively and through ``unbroken.frontend.interpret`` and requires the same
result: equal values *and* equal types, recursively (``True`` is not ``1``, ``2.0`` is not
``2``, a namedtuple is not a tuple, dict key order counts, floats compare by ``repr`` so that
``-0.0`` is not ``0.0``).

The suite is split by construct family:

- ``test_cpython_parity.py``            arithmetic, bit ops, comparisons, boolean operators,
                                        unary ops, augmented assignment, conversions, builtins
- ``test_cpython_parity_control.py``    branches, loops, iteration, comprehensions, generator
                                        expressions, unpacking, slicing, ``del``
- ``test_cpython_parity_data.py``       strings and formatting, list/dict methods, namedtuples,
                                        attributes, ``assert``, ``try``, ``with``
- ``test_cpython_parity_functions.py``  closures, ``nonlocal``, defaults, ``*args``/``**kwargs``,
                                        lambdas, recursion, calls between module functions, globals
- ``test_cpython_parity_refusals.py``   constructs strict mode must refuse, at the right line

Tests that call :func:`check` cover constructs the interpreter supports. Tests that call
:func:`check_breaks` pin a known limitation: the construct is refused with a well-formed
``GraphBreakError`` of the given code; lifting the limitation makes them fail, so that they
become ``check``s (a test never accepts either outcome: a regression must show).

These two helpers, the strict comparison behind them and the hypothesis settings live in
``tests/frontend/parity.py``, imported absolutely (``tests.frontend.parity``: the repository root
is on ``sys.path``) so that the files run under any pytest import mode.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.frontend.parity import PARITY, check

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

small_ints = st.integers(-50, 50)
nonzero_ints = st.integers(-50, 50).filter(lambda n: n != 0)
exponents = st.integers(0, 6)
shifts = st.integers(0, 8)
floats = st.floats(-1e3, 1e3, allow_nan=False, allow_infinity=False)
nonzero_floats = floats.filter(lambda x: abs(x) > 1e-3)


# ---------------------------------------------------------------- arithmetic

def int_arith(a, b):
    return a + b, a - b, a * b, a / b, a // b, a % b, -a // b, a % -b


def int_power(a, e):
    return a ** e, (-a) ** e, 2 ** e, a ** 0


def int_negative_power(a, e):
    return a ** -e


def float_arith(x, y):
    return x + y, x - y, x * y, x / y, x // y, x % y


def mixed_arith(a, x):
    return a + x, a * x, a - x, x * 2, 3 / 2, 7 // 2.0, a * 1.0, abs(x) ** 0.5


def bool_arith(p, q):
    return p + q, p * 3, p - q, p / 1, -p, p & q, p | q, p ^ q, p + 0.5


def int_bitops(a, b, s):
    return a & b, a | b, a ^ b, ~a, a << s, a >> s, -a >> s, (a & 0xFF) << 2


def precedence(a, b, c):
    return a + b * c, (a + b) * c, a - b - c, a ** 2 ** 1, -a ** 2, a * b % 7 + c


def divmod_builtin(a, b):
    return divmod(a, b), divmod(-a, b), divmod(a, -b), divmod(7.5, 2)


def int_sizes(n):
    """Integer arithmetic that a shape computation would do."""
    half = n // 2
    padded = (n + 7) // 8 * 8
    groups = -(-n // 3)          # ceil division
    return half, padded, groups, n * n * n, max(n, 1) - 1


@PARITY
@given(a=small_ints, b=nonzero_ints)
def test_int_arithmetic(a, b):
    check(int_arith, a, b)


@PARITY
@given(a=small_ints, e=exponents)
def test_int_power(a, e):
    check(int_power, a, e)


@PARITY
@given(a=nonzero_ints, e=st.integers(1, 3))
def test_int_negative_power_is_float(a, e):
    check(int_negative_power, a, e)


@PARITY
@given(x=floats, y=nonzero_floats)
def test_float_arithmetic(x, y):
    check(float_arith, x, y)


@PARITY
@given(a=small_ints, x=floats)
def test_mixed_int_float(a, x):
    check(mixed_arith, a, x)


@pytest.mark.parametrize("p", [True, False])
@pytest.mark.parametrize("q", [True, False])
def test_bool_arithmetic(p, q):
    check(bool_arith, p, q)


@PARITY
@given(a=small_ints, b=small_ints, s=shifts)
def test_bit_operations(a, b, s):
    check(int_bitops, a, b, s)


@PARITY
@given(a=small_ints, b=small_ints, c=small_ints)
def test_operator_precedence(a, b, c):
    check(precedence, a, b, c)


@PARITY
@given(a=small_ints, b=nonzero_ints)
def test_divmod(a, b):
    check(divmod_builtin, a, b)


@PARITY
@given(n=st.integers(0, 512))
def test_shape_style_integer_math(n):
    check(int_sizes, n)


# ---------------------------------------------------------------- comparisons

def compare_all(a, b):
    return a < b, a <= b, a > b, a >= b, a == b, a != b


def chained(a, b, c):
    return a < b < c, a <= b <= c, a < b > c, a == b == c, 0 <= a < 10, a != b != c


def compare_mixed(a, x):
    return a < x, a == float(a), a == x, 1 == 1.0, True == 1, (a, 1) < (a, 2), [a] == [a]


def identity_and_membership(x, xs):
    maybe = None if x > 0 else x
    return (
        maybe is None, maybe is not None, x in xs, x not in xs, x in range(5),
        "ab" in "cabd", "z" not in "abc", x in {1: 0, 2: 0}, (x, x) in [(1, 1), (2, 2)],
    )


@PARITY
@given(a=small_ints, b=small_ints)
def test_comparisons(a, b):
    check(compare_all, a, b)


@PARITY
@given(a=st.integers(-3, 12), b=st.integers(-3, 12), c=st.integers(-3, 12))
def test_chained_comparisons(a, b, c):
    check(chained, a, b, c)


@PARITY
@given(a=small_ints, x=floats)
def test_mixed_comparisons(a, x):
    check(compare_mixed, a, x)


@PARITY
@given(x=st.integers(-2, 6), xs=st.lists(st.integers(-2, 6), max_size=5))
def test_is_and_in(x, xs):
    check(identity_and_membership, x, xs)


# ---------------------------------------------------------------- boolean and unary operators

def and_or_operands(a, b):
    """``and``/``or`` return one of their operands, not a bool."""
    return a and b, a or b, a and b or 7, not a, (a or None), ("" or []), ([] and 1)


def short_circuit(xs):
    """The right operand must not be evaluated: ``xs[0]`` would raise on an empty list."""
    first_positive = len(xs) > 0 and xs[0] > 0
    fallback = (len(xs) == 0) or xs[0]
    return first_positive, fallback


def unary(a, x, p):
    return -a, +a, ~a, not a, -x, +x, not x, not p, -p, +p, ~(a - 1)


def truthiness(a, xs, s):
    out = []
    for value in (a, xs, s, None, 0.0, (), {}, [0], "0"):
        if value:
            out.append(1)
        else:
            out.append(0)
    return out, bool(a), bool(xs), bool(s)


@pytest.mark.parametrize("a, b", [(0, 5), (3, 0), (2, 9), ("", "x"), ("y", ""), ([], [1]),
                                  (None, 0), (0.0, 1.5), (True, False), (False, True)])
def test_and_or_return_operands(a, b):
    check(and_or_operands, a, b)


@pytest.mark.parametrize("xs", [[], [3], [-1, 2]])
def test_short_circuit_skips_right_operand(xs):
    check(short_circuit, xs)


@PARITY
@given(a=small_ints, x=floats, p=st.booleans())
def test_unary_operators(a, x, p):
    check(unary, a, x, p)


@PARITY
@given(a=st.integers(-2, 2), xs=st.lists(st.integers(0, 1), max_size=2),
       s=st.sampled_from(["", "a"]))
def test_truthiness(a, xs, s):
    check(truthiness, a, xs, s)


# ---------------------------------------------------------------- augmented assignment

def augmented_int(a, b):
    x = a
    x += b
    x -= 1
    x *= 3
    x //= b
    x %= 17
    x **= 2
    x <<= 2
    x >>= 1
    x &= 0xFFF
    x |= 8
    x ^= b
    y = a
    y /= b
    return x, y


def augmented_containers(xs, s):
    out = list(xs)
    alias = out
    out += [1, 2]           # in place: the alias sees it
    t = tuple(xs)
    t_alias = t
    t += (9,)               # rebinding: the alias does not
    s += "!"
    s *= 2
    out *= 2
    return out, alias, t, t_alias, s


@PARITY
@given(a=small_ints, b=nonzero_ints)
def test_augmented_assignment_numbers(a, b):
    check(augmented_int, a, b)


@PARITY
@given(xs=st.lists(small_ints, max_size=4), s=st.sampled_from(["", "ab", "xyz"]))
def test_augmented_assignment_containers(xs, s):
    check(augmented_containers, xs, s)


# ---------------------------------------------------------------- conversions and builtins

def conversions(a, x):
    return (
        int(x), int(-x), float(a), bool(a), bool(x), str(a), str(x), int("12"), int(" -7 "),
        float("1.5"), str(True), int(True), float(False), int("ff", 16), repr("q"),
    )


def rounding(x):
    return round(x), round(x, 2), round(2.5), round(3.5), round(-0.5), round(1234, -2), round(x, 0)


def builtin_numbers(a, b, xs):
    return (
        abs(a), abs(-2.5), min(a, b), max(a, b), min(a, b, 0), max(a, 3, b, -1),
        min(xs), max(xs), sum(xs), sum(xs, 10), len(xs), max([a, b]), min((a, b)),
        max(xs, default=None), min([], default=-1), pow(2, 5), pow(a, 2),
    )


def builtin_isinstance(value):
    return (
        isinstance(value, int), isinstance(value, float), isinstance(value, (int, float)),
        isinstance(value, bool), isinstance(value, str), isinstance(value, (list, tuple)),
        type(value) is int, type(value).__name__,
    )


def builtin_len(xs, s):
    d = {i: i for i in xs}
    return len(xs), len(s), len(tuple(xs)), len(d), len(range(2, 11, 3)), len(set(xs)), len("")


@PARITY
@given(a=small_ints, x=floats)
def test_conversions(a, x):
    check(conversions, a, x)


def min_max_with_key(xs):
    return max(xs, key=abs), min(xs, key=lambda v: (v % 5, v)), max(xs, key=lambda v: -v)


@PARITY
@given(xs=st.lists(small_ints, min_size=1, max_size=6))
def test_min_max_with_key(xs):
    check(min_max_with_key, xs)


@PARITY
@given(x=floats)
def test_round(x):
    check(rounding, x)


@PARITY
@given(a=small_ints, b=small_ints, xs=st.lists(small_ints, min_size=1, max_size=6))
def test_min_max_abs_sum(a, b, xs):
    check(builtin_numbers, a, b, xs)


@pytest.mark.parametrize("value", [3, True, 2.5, "s", [1], (1,), None])
def test_isinstance(value):
    check(builtin_isinstance, value)


@PARITY
@given(xs=st.lists(st.integers(0, 4), max_size=6), s=st.sampled_from(["", "abc", "hello"]))
def test_len(xs, s):
    check(builtin_len, xs, s)


def test_keyword_arguments_to_interpret():
    check(conversions, a=4, x=-2.75)
