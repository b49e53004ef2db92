"""symbolic.fixes: each suggested fix makes every fact implied (checked independently by
sampling the new spec), and the search picks the expected kind of change."""
import itertools

import sympy
from hypothesis import given, settings
from hypothesis import strategies as st

from unbroken.symbolic.expr import PythonMod, evaluate_at
from unbroken.symbolic.fixes import implied, suggest_fix

s0, s1, s2 = (sympy.Symbol(f"s{i}", integer=True, positive=True) for i in range(3))
WIDE = (2, 200)


def _admitted(fix, symbols, limit=40):
    """Concrete assignments admitted by the fixed spec (roots sampled, the rest derived)."""
    roots = [s for s in fix.ranges]
    grids = [range(lo, min(hi if hi is not None else limit, lo + limit) + 1)
             for lo, hi in (fix.ranges[r] for r in roots)]
    for values in itertools.product(*grids):
        env = dict(zip(roots, values))
        full = {s: int(fix.apply(s).subs(env)) for s in symbols}
        yield full


def _holds_everywhere(fix, facts, symbols):
    for values in itertools.islice(_admitted(fix, symbols), 2000):
        for fact in facts:
            assert evaluate_at(fact, values), (fact, values)


def test_equality_with_a_constant_makes_the_dim_static():
    fix = suggest_fix([sympy.Eq(s0, 100)], {s0: WIDE}, {s0: 100})
    assert fix.static == {s0: 100}


def test_inequalities_tighten_the_range():
    facts = [sympy.Ge(s0, 5), sympy.Lt(2 * s0, 61)]
    fix = suggest_fix(facts, {s0: (2, None)}, {s0: 8})
    assert fix.ranges[s0] == (5, 30)
    _holds_everywhere(fix, facts, [s0])


def test_two_dims_made_equal_or_derived():
    fix = suggest_fix([sympy.Eq(s1, s0)], {s0: WIDE, s1: WIDE}, {s0: 4, s1: 4})
    assert fix.derived == {s1: s0}
    facts = [sympy.Eq(s1, 2 * s0 + 1)]
    fix = suggest_fix(facts, {s0: WIDE, s1: WIDE}, {s0: 4, s1: 9})
    assert fix.derived == {s1: 2 * s0 + 1}
    assert fix.ranges[s0] == (2, 99)  # keeps s1 = 2*s0 + 1 within its own range
    _holds_everywhere(fix, facts, [s0, s1])


def test_divisibility_introduces_a_new_root():
    facts = [sympy.Eq(PythonMod(3 * s0, 12), 0)]
    fix = suggest_fix(facts, {s0: WIDE}, {s0: 8})
    (root,) = fix.new_roots
    assert fix.derived[s0] == 4 * root
    _holds_everywhere(fix, facts, [s0])


def test_not_equal_moves_a_range_end_or_specializes():
    fix = suggest_fix([sympy.Ne(s0, 2)], {s0: WIDE}, {s0: 8})
    assert fix.ranges[s0] == (3, 200)
    fix = suggest_fix([sympy.Ne(s0, 7)], {s0: WIDE}, {s0: 8})
    assert fix.static == {s0: 8}


def test_a_product_of_dims_falls_back_to_static_dims():
    facts = [sympy.Eq(s2, s0 * s1)]
    fix = suggest_fix(facts, {s0: WIDE, s1: WIDE, s2: WIDE}, {s0: 4, s1: 8, s2: 32})
    assert fix is not None and implied(fix.apply(facts[0]), fix.ranges)


@settings(max_examples=40, deadline=None)
@given(st.integers(2, 30), st.integers(1, 4), st.integers(0, 5), st.integers(2, 6))
def test_every_fix_found_is_proven(hint, k, m, modulus):
    # facts that hold at the hints; the fix must make them hold for all admitted sizes
    hints = {s0: hint, s1: k * hint + m}
    facts = [sympy.Eq(s1, k * s0 + m), sympy.Ge(s0, 2), sympy.Le(s0 + s1, 10 * (hint + 20))]
    if (k * hint + m) % modulus == 0:
        facts.append(sympy.Eq(PythonMod(s1, modulus), 0))
    fix = suggest_fix(facts, {s0: (2, None), s1: (2, None)}, hints)
    assert fix is not None
    for fact in facts:
        assert implied(fix.apply(fact), fix.ranges)
    _holds_everywhere(fix, facts, [s0, s1])


# ----- adopt mode (Dim.AUTO): pins only one-value facts, asserts what no spec can state -----
def _adopt(facts, symbols, fixed=frozenset()):
    ranges = {s: (2, None) for s in symbols}
    hints = {s0: 3, s1: 5, s2: 15}
    return suggest_fix(facts, ranges, {s: hints[s] for s in symbols}, adopt=True, fixed=fixed)


def test_adopt_keeps_a_product_as_a_derived_dim():
    fix = _adopt([sympy.Eq(s2, s0 * s1)], [s0, s1, s2])
    assert fix.derived == {s2: s0 * s1} and not fix.static and not fix.asserted


def test_adopt_derives_an_earlier_dim_when_the_later_is_no_polynomial():
    """``s0 == 2*s1``: ``s1 = s0/2`` is no integer polynomial, ``s0 = 2*s1`` is (torch's
    Dim.AUTO does the same); ``s0 == s1**2 + 1`` too. ``2*s0 == 3*s1`` has neither: asserted."""
    fix = _adopt([sympy.Eq(s0, 2 * s1)], [s0, s1])
    assert fix.derived == {s0: 2 * s1} and not fix.asserted and s0 not in fix.ranges
    fix = _adopt([sympy.Eq(s0, s1 ** 2 + 1)], [s0, s1])
    assert fix.derived == {s0: s1 ** 2 + 1}
    fix = _adopt([sympy.Eq(2 * s0, 3 * s1)], [s0, s1])
    assert not fix.derived and fix.asserted == [sympy.Eq(2 * s0, 3 * s1)]
    fix = _adopt([sympy.Eq(s0, 2 * s1)], [s0, s1], fixed=frozenset({s0}))  # s0 a named Dim
    assert not fix.derived and fix.asserted


def test_adopt_asserts_a_disjunction_instead_of_pinning():
    fact = sympy.Or(sympy.Eq(s0, s1), sympy.Eq(s1, 1))
    fix = _adopt([fact], [s0, s1])
    assert fix.asserted == [fact] and not fix.static and not fix.derived


def test_adopt_asserts_divisibility_and_middle_holes():
    facts = [sympy.Eq(PythonMod(s0, 4), 0), sympy.Ne(s1, 7)]
    fix = _adopt(facts, [s0, s1])
    assert fix.asserted == facts and not fix.static and not fix.new_roots


def test_adopt_pins_only_a_fact_with_one_admitted_value():
    fix = _adopt([sympy.Eq(s0, 3), sympy.Eq(s1 * s0, 5 * s0)], [s0, s1])
    assert fix.static == {s0: 3, s1: 5}
    assert fix.pinned_by[s0] == sympy.Eq(s0, 3)
    fix = _adopt([sympy.Eq(sympy.floor(s0 / 4), 0)], [s0])  # 2 and 3: not a pin
    assert not fix.static and fix.asserted


def test_adopt_never_changes_fixed_symbols():
    fix = _adopt([sympy.Eq(s0, s1)], [s0, s1], fixed=frozenset({s1}))
    assert fix.derived == {s0: s1}
    fix = _adopt([sympy.Le(s0, 512)], [s0], fixed=frozenset({s0}))
    assert fix.asserted == [sympy.Le(s0, 512)] and fix.ranges[s0] == (2, None)


def test_adopt_narrows_a_range():
    fix = _adopt([sympy.Le(s0, 512)], [s0])
    assert fix.ranges[s0] == (2, 512) and not fix.asserted


@settings(max_examples=120, deadline=None)
@given(st.integers(-3, 3).filter(bool), st.integers(-9, 9), st.integers(-20, 20),
       st.sampled_from([sympy.Lt, sympy.Le, sympy.Gt, sympy.Ge, sympy.Eq, sympy.Ne]),
       st.integers(-5, 5), st.integers(0, 8) | st.none())
def test_implied_matches_every_value_of_the_range(a, b, c, rel, low, width):
    """The interval shortcuts (a bound the interval settles, a linear order it does not)
    answer as checking every admitted value would."""
    s = sympy.Symbol("s", integer=True)
    fact = rel(a * s + b, c)
    upper = None if width is None else low + width
    values = range(low, (upper if upper is not None else low + 60) + 1)
    every = all(bool(fact.subs(s, v)) for v in values)
    if upper is None and every:  # unbounded: also far out
        every = all(bool(fact.subs(s, v)) for v in (10**4, 10**6))
    assert implied(fact, {s: (low, upper)}) is every


_TWO_DIM_FACTS = [
    lambda a, b: sympy.Eq(a, b),
    lambda a, b: sympy.Or(sympy.Eq(a, b), sympy.Eq(b, 1)),
    lambda a, b: sympy.Ne(a, b),
    lambda a, b: sympy.Eq(sympy.Mod(4 * b, a), 0),
    lambda a, b: sympy.Le(a, 2 * b),
    lambda a, b: sympy.Ge(a * b, 9),
    lambda a, b: sympy.And(sympy.Le(a, b + 1), sympy.Ge(a, b - 1)),
]


@settings(max_examples=150, deadline=None, derandomize=True, database=None)
@given(fact=st.sampled_from(range(len(_TWO_DIM_FACTS))),
       assumed=st.lists(st.sampled_from(range(len(_TWO_DIM_FACTS))), max_size=2),
       swap=st.booleans(), lows=st.tuples(st.integers(1, 4), st.integers(1, 4)),
       widths=st.tuples(st.integers(0, 6), st.integers(0, 6)))
def test_implied_matches_every_admitted_assignment_of_two_dims(fact, assumed, swap, lows,
                                                               widths):
    """``implied`` with assumptions (what the ``Dim.AUTO`` search asks: a relation between
    two dims, under the ``torch._check`` facts it keeps) answers as enumerating every
    assignment the ranges and assumptions admit: its shortcuts (a fact among the
    assumptions, an assignment near the lower corner refuting it) and z3 alike."""
    a, b = (s1, s0) if swap else (s0, s1)
    claim = _TWO_DIM_FACTS[fact](a, b)
    assumptions = [_TWO_DIM_FACTS[i](a, b) for i in assumed]
    ranges = {s: (low, low + width) for s, low, width in zip((s0, s1), lows, widths)}
    admitted = [{s0: x, s1: y} for x in range(ranges[s0][0], ranges[s0][1] + 1)
                for y in range(ranges[s1][0], ranges[s1][1] + 1)
                if all(evaluate_at(p, {s0: x, s1: y}) for p in assumptions)]
    every = all(evaluate_at(claim, values) for values in admitted)
    assert implied(claim, ranges, assumptions) is every
