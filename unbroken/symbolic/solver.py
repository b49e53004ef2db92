"""Deciding facts about symbolic sizes for *every* input the spec admits, with z3.

``Solver(env).decide(fact)`` answers three-valued:

* ``"true"``:  ``fact`` holds for every admitted assignment of the symbols;
* ``"false"``: ``fact`` fails for every admitted assignment;
* ``"inconclusive"``: it depends (or z3 could not tell, or the fact uses a function we do not
  translate); ``counterexample`` then holds admitted values violating it when one is known.

"Admitted" means: each symbol within its value range, and (``assume_checks=True``, the
default) every ``torch._check`` fact recorded during tracing holds — those become runtime
asserts, so assuming them is sound.

Pipeline per fact: constant-fold, cache by expression, interval check (``ranges``), then one
reused ``z3.Solver`` with push/pop. z3 may answer ``unknown`` on non-linear integer queries
(typically ``%`` over symbols); we then retry once with a fresh solver and a larger budget,
and never treat ``unknown`` as "implied".

Each check is bounded by a count of z3's own steps (``budgeted_solver``), not by wall time:
the answer, hence the program, is the same on every machine and under any load.

Python semantics of ``//``, ``%`` and ``round`` are encoded exactly: z3's integer ``div``/``mod``
are Euclidean (``mod`` is never negative), Python's floor. For ``b > 0`` they agree; for
``b < 0`` we use ``a // b == (-a) div (-b)``; and ``a % b == a - b * (a // b)`` always.
``round(v)`` is ``floor(v + 1/2)``, minus one when ``v + 1/2`` is an odd integer (ties to even).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

import sympy
import z3

from . import expr as E
from .functions import apply, function_of
from .guards import Guard
from .ranges import INF, NEG_INF, static_truth

__all__ = ["Solver", "Decision", "Violation", "budgeted_solver", "check_guards", "to_z3",
           "Untranslatable"]

# z3's budget per check is its ``rlimit``, a count of its own steps: a wall-clock timeout
# answers ``unknown`` sooner on a loaded machine, and the program then depended on the load
# (mamba2 under Dim.AUTO: 301 or 315 nodes). Budgets are given in milliseconds of this
# machine's slowest measured rate on the project's queries (~0.6-3.6 million steps per second
# on mamba2's non-linear ones), so a budget of 1000 lets through what 1 s mostly did.
STEPS_PER_MS = 1000
# The timeout stays, far behind the step count, only so that no query can hang an export.
_BACKSTOP = 20


def budgeted_solver(budget_ms: int) -> z3.Solver:
    """A fresh ``z3.Solver`` whose every ``check()`` stops (``unknown``) after
    ``budget_ms * STEPS_PER_MS`` of z3's steps: deterministic, whatever the machine's load."""
    solver = z3.Solver()
    solver.set("rlimit", budget_ms * STEPS_PER_MS)
    solver.set("timeout", budget_ms * _BACKSTOP)
    return solver


Verdict = Literal["true", "false", "inconclusive"]


@dataclass(frozen=True, slots=True)
class Decision:
    """The answer for one fact.

    verdict:        ``"true"`` (implied for every admitted value), ``"false"`` (false for every
                    admitted value) or ``"inconclusive"``.
    counterexample: admitted values of the fact's symbols under which the fact is false
                    (None when the verdict is "true" or no model is known).
    reason:         how it was decided: ``"constant"``, ``"ranges"``, ``"z3"``, ``"unknown"``
                    (z3 gave up) or ``"untranslatable"``.
    """

    verdict: Verdict
    counterexample: dict[sympy.Symbol, int] | None = None
    reason: str = "z3"


@dataclass(frozen=True, slots=True)
class Violation:
    """A recorded guard that the spec does not imply.

    guard:          the guard (its ``as_fact()`` is what must hold).
    decision:       the solver's answer for that fact.
    counterexample: admitted input values under which the guard's fact is false (or None).
    """

    guard: Guard
    decision: Decision
    counterexample: dict[sympy.Symbol, int] | None


class Untranslatable(Exception):
    """The expression uses a function the z3 translation does not model."""


class Solver:
    """Decides facts against the ranges (and ``torch._check`` facts) of a shape environment.

    env:           the environment (``env.ShapeEnvironment``, which asks this module about its
                   facts: not imported here) whose symbols, ranges and facts define what is
                   admitted.
    assume_checks: also assume the recorded ``torch._check`` facts (and the ranges they
                   refined); with False only the spec ranges (``env.spec_ranges``) are used.
    timeout_ms:    z3 budget of the reused solver per check (``budgeted_solver``); the fresh
                   retry gets 5x as much.
    smallest:      counterexamples are the lexicographically smallest (deterministic, for
                   messages); False keeps z3's first model, for answers whose counterexample
                   nobody shows (a search per symbol saved).
    """

    def __init__(self, env, *, assume_checks: bool = True,
                 timeout_ms: int = 1000, smallest: bool = True):
        self.env = env
        self.assume_checks = assume_checks
        self.timeout_ms = timeout_ms
        self.smallest = smallest
        self.ranges = dict(env.var_ranges if assume_checks else env.spec_ranges)
        self._facts = list(env.facts) if assume_checks else []
        self._cache: dict = {}
        self._bound_cache: dict = {}
        self._translator = _Translator()
        self._assumptions = None  # built with the z3 solver, on the first fact z3 must decide
        self._reused = None

    # ----- public -----
    def decide(self, fact) -> Decision:
        """Is ``fact`` true for every admitted value? See the module docstring."""
        fact = sympy.sympify(fact)
        if fact is sympy.true:
            return Decision("true", None, "constant")
        if fact is sympy.false:
            return Decision("false", self._any_model(fact), "constant")
        cached = self._cache.get(fact)
        if cached is None:
            cached = self._decide(fact)
            self._cache[fact] = cached
        return cached

    def is_admitted(self, values: dict[sympy.Symbol, int]) -> bool:
        """Whether concrete values satisfy every range and assumed fact (for tests/fixes)."""
        for symbol, value_range in self.ranges.items():
            if symbol in values and not value_range.contains(values[symbol]):
                return False
        for fact in self._facts:
            if fact.free_symbols <= set(values) and not E.evaluate_at(fact, values):
                return False
        return True

    # ----- pipeline -----
    def _decide(self, fact) -> Decision:
        settled = static_truth(fact, self.ranges, self._bound_cache)
        if settled is True:
            return Decision("true", None, "ranges")
        try:
            z3_fact = self._translator.translate(fact)
        except Untranslatable:
            if settled is False:
                return Decision("false", None, "ranges")
            return Decision("inconclusive", None, "untranslatable")
        if settled is False:
            return Decision("false", self._model_for(z3_fact, fact, negate=True), "ranges")
        return self._decide_z3(fact, z3_fact)

    def _decide_z3(self, fact, z3_fact) -> Decision:
        result, model = self._check(z3.Not(z3_fact))
        if result == z3.unsat:
            return Decision("true", None, "z3")
        if result == z3.unknown:
            return Decision("inconclusive", None, "unknown")
        counterexample = self._counterexample(z3.Not(z3_fact), fact, model)
        holds_somewhere, _ = self._check(z3_fact)
        if holds_somewhere == z3.unsat:
            return Decision("false", counterexample, "z3")
        return Decision("inconclusive", counterexample, "z3")

    def _check(self, query):
        """``(result, model)`` of assumptions + query; retries ``unknown`` with a fresh solver."""
        if self._reused is None:
            self._reused = self._new_solver(self.timeout_ms)
        solver = self._reused
        solver.push()
        try:
            solver.add(query)
            result = solver.check()
            model = solver.model() if result == z3.sat else None
        finally:
            solver.pop()
        if result != z3.unknown:
            return result, model
        fresh = self._new_solver(self.timeout_ms * 5)
        fresh.add(query)
        result = fresh.check()
        return result, (fresh.model() if result == z3.sat else None)

    def _model_for(self, z3_fact, fact, negate: bool):
        query = z3.Not(z3_fact) if negate else z3_fact
        result, model = self._check(query)
        return self._counterexample(query, fact, model) if result == z3.sat else None

    def _counterexample(self, query, fact, model) -> dict[sympy.Symbol, int] | None:
        """Values of ``fact``'s symbols satisfying ``query``, from ``model``: the smallest
        such (``self.smallest``) or z3's own."""
        return self._smallest(query, fact, model) if self.smallest else self._extract(model, fact)

    def _smallest(self, query, fact, model) -> dict[sympy.Symbol, int] | None:
        """The lexicographically smallest integer model of ``query`` (symbols in name order),
        so that counterexamples are deterministic and small: z3's own model depends on the
        solver's history. Non-integer symbols keep z3's value."""
        fixed = []
        for symbol in sorted(fact.free_symbols, key=str):
            var = self._translator.symbol(symbol)
            if model is None or not z3.is_int(var):
                continue
            high = _z3_number(model.eval(var, model_completion=True))
            lower = self.ranges.get(symbol)
            low = lower.lower if lower is not None and lower.lower is not NEG_INF else high - 64
            low = min(int(low), high)
            while low < high:
                middle = (low + high) // 2
                result, _ = self._check(z3.And(query, *fixed, var <= middle))
                low, high = (low, middle) if result == z3.sat else (middle + 1, high)
            fixed.append(var == high)
            result, refreshed = self._check(z3.And(query, *fixed))
            model = refreshed if result == z3.sat else None
        return self._extract(model, fact)

    def _any_model(self, fact):
        return {}  # a constant fact has no symbols: every admitted input is a counterexample

    def _extract(self, model, fact) -> dict[sympy.Symbol, int] | None:
        if model is None:
            return None
        values = {}
        for symbol in sorted(fact.free_symbols, key=str):
            value = model.eval(self._translator.symbol(symbol), model_completion=True)
            values[symbol] = _z3_number(value)
        return values

    # ----- assumptions -----
    def _build_assumptions(self) -> list:
        assumptions = []
        for symbol, value_range in self.ranges.items():
            var = self._translator.symbol(symbol)
            if value_range.lower is not NEG_INF:
                assumptions.append(var >= _z3_const(value_range.lower))
            if value_range.upper is not INF:
                assumptions.append(var <= _z3_const(value_range.upper))
        for fact in self._facts:
            try:
                assumptions.append(self._translator.translate(fact))
            except Untranslatable:
                pass  # dropping an assumption only weakens what we can prove: still sound
        return assumptions

    def _new_solver(self, timeout_ms: int) -> z3.Solver:
        if self._assumptions is None:
            self._assumptions = self._build_assumptions()
        solver = budgeted_solver(timeout_ms)
        solver.add(*self._assumptions)
        return solver


def check_guards(env, solver: Solver | None = None,
                 guards=None) -> list[Violation]:
    """Every recorded guard (or every one of ``guards``) whose fact is not implied by the
    spec, in recording order.

    ``expect_true`` guards (``torch._check``) are assumptions, not obligations: they are
    skipped here (use ``Solver(env, assume_checks=False)`` to check them against the spec).
    """
    solver = solver or Solver(env)
    violations = []
    for guard in env.guards if guards is None else guards:
        if guard.kind == "expect_true" and solver.assume_checks:
            continue
        decision = solver.decide(guard.as_fact())
        if decision.verdict != "true":
            violations.append(Violation(guard, decision, decision.counterexample))
    return violations


# ----- translation -----
def _z3_const(value):
    if isinstance(value, int):
        return z3.IntVal(value)
    return z3.RealVal(str(value))


def _z3_number(value):
    if z3.is_int_value(value):
        return value.as_long()
    if z3.is_rational_value(value):
        return value.numerator_as_long() / value.denominator_as_long()
    if z3.is_true(value):
        return True
    if z3.is_false(value):
        return False
    return value


def to_z3(expr):
    """Translate one sympy expression (fresh translator; for tests and one-off use)."""
    return _Translator().translate(expr)


class _Translator:
    """sympy -> z3 with a cache; symbols become ``z3.Int`` (``z3.Real`` for floats)."""

    def __init__(self):
        self._symbols: dict[sympy.Symbol, object] = {}
        self._cache: dict = {}

    def symbol(self, symbol: sympy.Symbol):
        var = self._symbols.get(symbol)
        if var is None:
            var = z3.Int(symbol.name) if symbol.is_integer else z3.Real(symbol.name)
            self._symbols[symbol] = var
        return var

    def translate(self, expr):
        hit = self._cache.get(expr)
        if hit is None:
            hit = self._translate(expr)
            self._cache[expr] = hit
        return hit

    def _translate(self, expr):
        if expr is sympy.true or expr is sympy.false:
            return z3.BoolVal(expr is sympy.true)
        if expr.is_Symbol:
            return self.symbol(expr)
        if expr.is_Integer:
            return z3.IntVal(int(expr))
        if expr.is_Rational:
            return z3.RealVal(f"{expr.p}/{expr.q}")
        if expr.is_Float:
            return z3.RealVal(str(expr))
        if isinstance(expr, sympy.Piecewise):
            return self._piecewise(expr)
        rounded = self._rounded_division(expr)
        if rounded is not None:
            return rounded
        entry = function_of(expr)
        if entry is None or entry.z3 is None:
            raise Untranslatable(f"no z3 translation for {type(expr).__name__}: {expr}")
        result = apply(entry, entry.z3, [self.translate(a) for a in expr.args])
        if result is None:
            raise Untranslatable(f"no z3 translation for {expr}")
        return result

    def _rounded_division(self, expr):
        """``CeilToInt(IntTrueDiv(a, n))`` / ``FloorToInt(...)`` of an integer ``a`` by a
        positive integer ``n`` (``math.ceil(s / 8)``: a padded length's block count) as
        integer division: ``-((-a) // n)`` / ``a // n``. The same value as the rules' real
        division rounded, but linear integer arithmetic for z3, which the mixed integer and
        real form is not (each fact of a padded encoder took it ~15 ms). None for any other
        expression."""
        if not isinstance(expr, (E.CeilToInt, E.FloorToInt)) or \
                not isinstance(expr.args[0], E.IntTrueDiv):
            return None
        numerator, denominator = expr.args[0].args
        if not (denominator.is_Integer and denominator > 0 and numerator.is_integer):
            return None
        a, n = self.translate(numerator), z3.IntVal(int(denominator))
        if not a.is_int():
            return None
        return a / n if isinstance(expr, E.FloorToInt) else -((-a) / n)

    def _piecewise(self, expr):
        result = None
        for value, cond in reversed(expr.args):
            z_value = self.translate(value)
            result = z_value if result is None else z3.If(self.translate(cond), z_value, result)
        return result
