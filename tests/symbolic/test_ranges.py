"""Interval arithmetic is sound: every concrete value lies in the computed bound."""
import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from unbroken.symbolic import expr as E
from unbroken.symbolic.ranges import ValueRange, bound, static_truth

A = sympy.Symbol("u0", integer=True)
B = sympy.Symbol("u1", integer=True)


def _exprs():
    leaves = st.sampled_from([A, B, sympy.Integer(3), sympy.Integer(-2), sympy.Integer(7)])

    def extend(children):
        pair = st.tuples(children, children)
        return st.one_of(
            pair.map(lambda p: p[0] + p[1]),
            pair.map(lambda p: p[0] * p[1]),
            pair.map(lambda p: p[0] - p[1]),
            children.map(lambda c: E.FloorDiv(c, 3)),
            children.map(lambda c: E.FloorDiv(c, -4)),
            children.map(lambda c: E.PythonMod(c, 5)),
            children.map(lambda c: E.PythonMod(c, -3)),
            pair.map(lambda p: E.Max(p[0], p[1])),
            pair.map(lambda p: E.Min(p[0], p[1])),
            children.map(lambda c: c ** 2),
            children.map(sympy.Abs),
        )
    return st.recursive(leaves, extend, max_leaves=6)


@settings(max_examples=150, deadline=None)
@given(_exprs(), st.integers(-10, 10), st.integers(0, 10), st.integers(-10, 10), st.integers(0, 10))
def test_bound_contains_every_value(expr, a_lo, a_w, b_lo, b_w):
    ranges = {A: ValueRange(a_lo, a_lo + a_w), B: ValueRange(b_lo, b_lo + b_w)}
    box = bound(expr, ranges)
    for a in range(a_lo, a_lo + a_w + 1, max(1, a_w // 3)):
        for b in range(b_lo, b_lo + b_w + 1, max(1, b_w // 3)):
            value = E.evaluate_at(expr, {A: a, B: b})
            assert box.contains(value), (expr, a, b, value, box)


@settings(max_examples=150, deadline=None)
@given(_exprs(), st.sampled_from([sympy.Eq, sympy.Ne, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge]),
       st.integers(-20, 20), st.integers(0, 6))
def test_static_truth_is_sound(expr, rel, c, width):
    ranges = {A: ValueRange(2, 2 + width), B: ValueRange(-3, -3 + width)}
    fact = rel(expr, c)
    answer = static_truth(fact, ranges)
    if answer is None or fact in (sympy.true, sympy.false):
        return
    for a in range(2, 3 + width):
        for b in range(-3, -2 + width):
            assert E.evaluate_at(fact, {A: a, B: b}) == answer


def test_str_and_unbounded():
    assert str(ValueRange(2, None)) == "VR[2, int_oo]"
    assert str(ValueRange(2, 10)) == "VR[2, 10]"
    assert ValueRange(None, None).contains(-10**9)
    assert ValueRange(3, 3).is_singleton()


def test_size_questions_settled_by_ranges():
    s = sympy.Symbol("s0", integer=True, positive=True)
    ranges = {s: ValueRange(2, None)}
    assert static_truth(sympy.Eq(s, 1), ranges) is False
    assert static_truth(sympy.Ne(s, 1), ranges) is True
    assert static_truth(s * s >= 2, ranges) is True
    assert static_truth(sympy.Eq(s, 4), ranges) is None
    assert static_truth(sympy.Or(sympy.Eq(s, 1), sympy.Eq(s, 0)), ranges) is False


@settings(max_examples=150, deadline=None)
@given(_exprs(), st.sampled_from([sympy.Eq, sympy.Ne, sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge]),
       st.integers(-20, 20), st.integers(-3, 3))
def test_static_truth_is_sound_on_unbounded_ranges(expr, rel, c, low):
    """Endpoints at infinity take part in every operation (products, quotients, modulo):
    an answer must hold at small and at very large values alike."""
    ranges = {A: ValueRange(low, None), B: ValueRange(None, low + 4)}
    fact = rel(expr, c)
    answer = static_truth(fact, ranges)
    if answer is None or fact in (sympy.true, sympy.false):
        return
    for a in (low, low + 1, low + 5, 10**6):
        for b in (low + 4, low + 1, low - 7, -10**6):
            assert E.evaluate_at(fact, {A: a, B: b}) == answer, (fact, a, b)


def test_products_with_infinite_endpoints():
    assert ValueRange(2, None) * ValueRange(-3, 5) == ValueRange(None, None)
    assert ValueRange(2, None) * ValueRange(0, 0) == ValueRange(0, 0)
    assert ValueRange(None, -1) * ValueRange(2, 3) == ValueRange(None, -2)
    assert ValueRange(2, None).intersect(ValueRange(None, 64)) == ValueRange(2, 64)
    assert ValueRange(5, None).intersect(ValueRange(None, 4)).is_empty()
    assert ValueRange(None, 3).contains(-10**30) and not ValueRange(4, None).contains(3)


def test_common_factors_settle_products_of_sizes():
    """``s0*s1 != s0`` for sizes >= 2 (torch's view code asks it): the expanded difference
    ``s0*s1 - s0`` bounds to [-oo, oo]; ``s0*(s1 - 1)`` to [2, oo]."""
    s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)
    sizes = {s0: ValueRange(2, None), s1: ValueRange(2, 64)}
    assert static_truth(sympy.Ne(s0 * s1, s0), sizes) is True
    assert static_truth(sympy.Eq(s0, s0 * s1), sizes) is False
    assert static_truth(sympy.Gt(3 * s0 * s1, 3 * s0), sizes) is True
    with_one = {s0: ValueRange(2, None), s1: ValueRange(1, 64)}
    assert static_truth(sympy.Ne(s0 * s1, s0), with_one) is None


def test_finite_bound_is_an_int_or_none_for_every_spelling_of_infinity():
    from unbroken.symbolic.ranges import finite_bound
    from unbroken.symbolic.torch_compat import int_oo

    assert finite_bound(7) == 7 and finite_bound(sympy.Integer(-3)) == -3
    for infinite in (None, sympy.oo, -sympy.oo, int_oo, -int_oo, float("inf"), 2 ** 62,
                     sympy.Symbol("s0")):
        assert finite_bound(infinite) is None


def test_an_integer_symbol_is_an_int64_whatever_its_range():
    """Slicing to the end asks ``size <= 9223372036854775807``: true of every int64, so true
    on ``[2, oo)`` as on ``[2, 512]`` (a narrowing in place cannot change the answer); what
    the int64 bounds do not settle stays unknown."""
    s = sympy.Symbol("s0", integer=True, positive=True)
    u = sympy.Symbol("u0", integer=True)
    top, bottom = 2 ** 63 - 1, -(2 ** 63)
    ranges = {s: ValueRange(2, sympy.oo), u: ValueRange.unbounded()}
    settled = {s <= top: True, s > top: False, s < top + 1: True, sympy.Eq(s, top + 1): False,
               sympy.Ne(top + 5, s): True, u >= bottom: True, u < bottom: False}
    assert {e: static_truth(e, ranges) for e in settled} == settled
    for open_question in (s < top, s <= 512, sympy.Eq(s, top), u <= 0, 2 * s <= top):
        assert static_truth(open_question, ranges) is None, open_question
    real = sympy.Symbol("zuf0", real=True)  # a float is no int64
    assert static_truth(real <= top, {real: ValueRange.unbounded()}) is None
