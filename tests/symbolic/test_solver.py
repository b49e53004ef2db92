"""The solver: three-valued verdicts, counterexamples that really violate the fact, exact
Python floor semantics, and check_guards over recorded guards."""
import math

import sympy
import torch
import z3
from hypothesis import given, settings
from hypothesis import strategies as st
from torch._dispatch.python import enable_python_dispatcher

from unbroken.symbolic import expr as E
from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.solver import STEPS_PER_MS, Solver, budgeted_solver, check_guards, to_z3


def _env(upper=None):
    env = ShapeEnvironment()
    a = env.create_symbol("a", 8, upper=upper, source="x.shape[0]")
    b = env.create_symbol("b", 6, upper=upper, source="y.shape[0]")
    return env, a, b


def test_verdicts():
    env, a, b = _env(upper=64)
    solver = Solver(env)
    assert solver.decide(sympy.Ne(a, 1)).verdict == "true"
    assert solver.decide(E.FloorDiv(a, 2) * 2 >= a - 1).verdict == "true"
    assert solver.decide(sympy.Eq(E.PythonMod(2 * a, 2), 0)).verdict == "true"
    assert solver.decide(a > 100).verdict == "false"
    assert solver.decide(sympy.Eq(a * b, 2 * a * b + 1)).verdict == "false"
    undecided = solver.decide(sympy.Le(a, b))
    assert undecided.verdict == "inconclusive"
    cx = undecided.counterexample
    assert cx[a] > cx[b] and 2 <= cx[b] and cx[a] <= 64
    assert solver.decide(sympy.true).verdict == "true"


FACT_BUILDERS = [
    lambda a, b, c: sympy.Eq(E.PythonMod(a * b, c), 0),
    lambda a, b, c: sympy.Le(E.FloorDiv(a, c) + b, 3 * c),
    lambda a, b, c: sympy.Ne(a + c, 2 * b),
    lambda a, b, c: sympy.Lt(E.Max(a, b) - E.Min(a, b), c),
    lambda a, b, c: sympy.Or(sympy.Eq(a, b), sympy.Gt(a, c)),
    lambda a, b, c: sympy.Ge(E.FloorDiv(a - 3 * b, c - 6), -2),
    lambda a, b, c: sympy.Eq(E.PythonMod(a - 2 * b, c - 6), 0),
]


@settings(max_examples=40, deadline=None)
@given(st.sampled_from(range(len(FACT_BUILDERS))), st.integers(2, 9).filter(lambda c: c != 6),
       st.integers(8, 40), st.booleans())
def test_counterexamples_violate_the_fact_and_verdicts_match_sampling(which, c, upper,
                                                                      smallest):
    env, a, b = _env(upper=upper)
    fact = FACT_BUILDERS[which](a, b, c)
    decision = Solver(env, smallest=smallest).decide(fact)
    if smallest is False:  # z3's first model: a counterexample all the same, same verdict
        assert decision.verdict == Solver(env).decide(fact).verdict
    if decision.counterexample is not None:
        values = decision.counterexample
        assert 2 <= values[a] <= upper and 2 <= values[b] <= upper
        assert E.evaluate_at(fact, values) is False
    sampled = {E.evaluate_at(fact, {a: x, b: y})
               for x in range(2, upper + 1, 3) for y in range(2, upper + 1, 4)}
    if decision.verdict == "true":
        assert sampled == {True}
    elif decision.verdict == "false":
        assert sampled == {False}


@settings(max_examples=60, deadline=None)
@given(st.integers(-30, 30), st.integers(-9, 9).filter(bool))
def test_z3_encoding_of_floordiv_and_mod_is_python(x, y):
    u, v = sympy.Symbol("u0", integer=True), sympy.Symbol("u1", integer=True)
    s = z3.Solver()
    s.add(z3.Int("u0") == x, z3.Int("u1") == y)
    q, r = z3.Int("q"), z3.Int("r")
    s.add(q == to_z3(E.FloorDiv(u, v)), r == to_z3(E.PythonMod(u, v)))
    assert s.check() == z3.sat
    m = s.model()
    assert m[q].as_long() == x // y and m[r].as_long() == x % y


@settings(max_examples=60, deadline=None)
@given(st.integers(-40, 40), st.integers(1, 9), st.sampled_from(["ceil", "floor"]))
def test_rounded_division_by_a_constant_is_python_and_integer_only(x, n, rounding):
    """``CeilToInt(IntTrueDiv(u, n))`` (``math.ceil(u / n)``) and ``FloorToInt`` translate to
    integer division (no real arithmetic for z3) with Python's value."""
    u = sympy.Symbol("u0", integer=True)
    kind, python = (E.CeilToInt, math.ceil) if rounding == "ceil" else (E.FloorToInt, math.floor)
    term = to_z3(kind(E.IntTrueDiv(u, n)))
    assert term.is_int() and "ToReal" not in str(term) and "ToInt" not in str(term)
    value = z3.simplify(z3.substitute(term, (z3.Int("u0"), z3.IntVal(x))))
    assert value.as_long() == python(x / n)


def test_negative_divisor_fact_decided_with_floor_semantics():
    env = ShapeEnvironment()
    u = env.create_unbacked_symbol()
    torch._check(env.symint(u) >= -7)
    torch._check(env.symint(u) <= -1)
    solver = Solver(env)
    # floor semantics: (-1) // 2 == -1, so u // 2 <= -1 for every admitted u
    assert solver.decide(E.FloorDiv(u, 2) <= -1).verdict == "true"
    assert solver.decide(E.PythonMod(u, -3) <= 0).verdict == "true"
    assert solver.decide(E.PythonMod(u, 3) >= 0).verdict == "true"


def test_expect_true_facts_are_assumed_only_when_asked():
    env = ShapeEnvironment()
    s = env.create_symbol("", 10)
    torch._check(env.symint(s) % 2 == 0)
    fact = sympy.Eq(E.PythonMod(s * 3, 2), 0)
    assert Solver(env).decide(fact).verdict == "true"
    assert Solver(env, assume_checks=False).decide(fact).verdict == "inconclusive"


def test_check_guards_reports_specializations_with_counterexamples():
    env, a, b = _env()
    with enable_python_dispatcher():
        x = env.make_meta_tensor(torch.randn(8, 4), [a, 4])
        y = env.make_meta_tensor(torch.randn(6, 4), [b, 4])
        assert bool(x.shape[0] >= y.shape[0])
        x.view(2, -1)
        assert bool(x.shape[0] > 3)
    violations = check_guards(env)
    assert violations, env.guards
    for v in violations:
        assert v.decision.verdict != "true"
        if v.counterexample is not None:
            assert E.evaluate_at(v.guard.as_fact(), {**{a: 8, b: 6}, **v.counterexample}) is False
    assert any(v.guard.as_fact() == (a > 3) for v in violations)


def test_check_guards_empty_when_implied():
    env, a, b = _env(upper=64)
    with enable_python_dispatcher():
        x = env.make_meta_tensor(torch.randn(8, 4), [a, 4])
        torch.nn.Linear(4, 3).to("meta")(x).sum()
    assert check_guards(env) == []


def test_round_of_a_true_division_is_decided():
    # ExportDB dynamic_shape_round: x[: round(x.shape[0] / 2)] guards round(n / 2) <= n
    env, a, _ = _env()
    solver = Solver(env)
    assert solver.decide(sympy.Le(E.RoundToInt(E.IntTrueDiv(a, 2)), a)).verdict == "true"
    assert solver.decide(sympy.Eq(E.RoundToInt(E.IntTrueDiv(a, 2)), 4)).verdict == "inconclusive"


@settings(max_examples=60, deadline=None)
@given(st.integers(-50, 50), st.integers(1, 8))
def test_round_translation_is_python_round(n, d):
    # ties go to the even integer: round(5 / 2) == 2, round(7 / 2) == 4
    s = sympy.Symbol("s0", integer=True)
    term = to_z3(E.RoundToInt(E.IntTrueDiv(s, d)))
    value = z3.simplify(z3.substitute(term, (z3.Int("s0"), z3.IntVal(n))))
    assert value.as_long() == round(n / d)


def _steps(solver) -> int:
    statistics = solver.statistics()
    return statistics.get_key_value("rlimit count") if "rlimit count" in statistics.keys() else 0


def test_a_check_stops_after_its_budget_of_steps_not_of_seconds():
    """Fermat's cubes are beyond z3's non-linear integer reasoning: every check of them runs
    out of budget. It must stop after exactly its budget of z3 steps, each time (the reused
    solver too): an answer bounded by steps is the same on a loaded machine, one bounded by
    the clock is not."""
    x, y, z = z3.Ints("x y z")
    hard = z3.And(x > 1, y > 1, z > 1, x * x * x + y * y * y == z * z * z)
    solver = budgeted_solver(50)
    for _ in range(3):
        solver.push()
        solver.add(hard)
        before = _steps(solver)
        assert solver.check() == z3.unknown
        assert _steps(solver) - before == 50 * STEPS_PER_MS
        solver.pop()


def test_an_undecidable_fact_is_inconclusive_after_the_same_work_every_time():
    """``Solver.decide`` on a fact z3 cannot settle answers ``inconclusive`` (``unknown``,
    never "implied"), spending the same steps in every run."""
    env = ShapeEnvironment()
    a, b, c = (env.create_symbol("", hint, source=f"x.shape[{i}]")
               for i, hint in enumerate((4, 5, 6)))
    fact = sympy.Ne(a ** 3 + b ** 3, c ** 3)
    spent = []
    original = z3.Solver.check

    def counted(self, *args):
        before = _steps(self)
        try:
            return original(self, *args)
        finally:
            spent.append(_steps(self) - before)

    z3.Solver.check = counted
    try:
        for _ in range(2):
            decision = Solver(env, timeout_ms=20).decide(fact)
            assert decision.verdict == "inconclusive" and decision.reason == "unknown"
    finally:
        z3.Solver.check = original
    assert spent[:len(spent) // 2] == spent[len(spent) // 2:]
    assert spent[0] == 20 * STEPS_PER_MS and spent[1] == 5 * 20 * STEPS_PER_MS
