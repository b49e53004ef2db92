"""Suggested fixes: the smallest change to a dynamic-shapes spec under which every guard holds.

Input: the facts the trace needs (each violated guard's ``as_fact()``), the symbols' spec
ranges and example values. Output: a :class:`Fix` — symbols made static, symbols expressed
through others (equal or derived dims), tightened ranges — that makes *every* fact implied for
all values the new spec admits, or None when no change expressible as a ``dynamic_shapes`` spec
does it. The search is deterministic and greedy, one change at a time, re-deciding every fact
after each change (one fix can settle others: an equality can make a multivariate guard
univariate), until all are implied:

- ``f(s) == c`` with one symbol: ``s`` becomes static (its example value);
- ``a*s + b <op> c`` (``<``, ``<=``, ``>``, ``>=``): ``s``'s range is tightened;
- ``s != c``: a range end moves when ``c`` is one, else ``s`` becomes static (a range cannot
  exclude a value in its middle);
- ``a*s + b == c*t + d`` solvable as ``t = k*s + m`` (integers, ``k > 0``): ``t`` becomes a
  derived dim (equal dims when ``k = 1, m = 0``), the later symbol in terms of the earlier;
- ``(a*s + b) % m == 0``: ``s`` becomes ``m'*r + r0`` for a new root ``r`` (a derived dim).

Every decision is made with z3 over the new ranges (``implied`` below), so what is returned is
proven for the symbolic spec; the exporter then runs the stages again with the rendered spec
to verify it end to end.

``adopt=True`` is the search ``Dim.AUTO`` uses, where the result is adopted rather than shown:
a dim becomes static only where the code pins it to one value (``s == c`` has one admitted
solution; ``x*y == 8*x``); a relation that solves for its latest symbol as a polynomial of
earlier ones (``z == x*y``) makes that symbol the polynomial; and a fact no spec can state
(``a == b or b == 1``, ``s % 4 == 0``, ``s != 5`` inside the range) is *asserted*: kept in
``Fix.asserted``, assumed by the rest of the search, and checked at run time by the program.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, field

import sympy
import z3

from .expr import Mod, PythonMod, refuted_near
from .guards import render_expr
from .ranges import ValueRange, static_truth
from .solver import Untranslatable, budgeted_solver, to_z3

__all__ = ["Fix", "suggest_fix", "implied"]

MAX_CHANGES = 32


@dataclass
class Fix:
    """A spec change. ``static``: symbol -> value; ``derived``: symbol -> expression of other
    symbols (roots); ``ranges``: root symbol -> (lower, upper or None); ``hints``: example value
    of every symbol (new roots included); ``notes``: one line per change, for the message;
    ``new_roots``: symbols the fix introduces (divisibility roots); ``asserted``: facts kept as
    run-time assertions (adopt mode only); ``pinned_by``: static symbol -> the fact that pins it."""

    static: dict = field(default_factory=dict)
    derived: dict = field(default_factory=dict)
    ranges: dict = field(default_factory=dict)
    hints: dict = field(default_factory=dict)
    notes: list = field(default_factory=list)
    new_roots: list = field(default_factory=list)
    asserted: list = field(default_factory=list)
    pinned_by: dict = field(default_factory=dict)

    def substitution(self) -> dict:
        return {**{s: sympy.Integer(v) for s, v in self.static.items()}, **self.derived}

    def apply(self, expr):
        """``expr`` under the fix (static values and derived expressions substituted)."""
        substitution = self.substitution()
        for _ in range(4):  # derived expressions only name roots, but be safe about chains
            new = sympy.sympify(expr).xreplace(substitution)
            if new == expr:
                break
            expr = new
        return sympy.expand(expr) if isinstance(expr, sympy.Expr) else expr


def implied(fact, ranges: dict, assumptions=()) -> bool:
    """Whether ``fact`` holds for every integer assignment within ``ranges`` (z3) under which
    every fact of ``assumptions`` holds."""
    fact = sympy.sympify(fact)
    assumptions = [sympy.sympify(a) for a in assumptions]
    if fact is sympy.true or fact in assumptions:
        return True
    if fact is sympy.false and not assumptions:
        return False
    intervals = {symbol: ValueRange(*ranges.get(symbol, (None, None)))
                 for symbol in fact.free_symbols}
    settled = static_truth(fact, intervals)
    if settled is True:  # true on the whole box: true on the part the assumptions leave
        return True
    if not assumptions and (settled is False or _linear_bound(fact)) \
            and not any(box.is_empty() for box in intervals.values()):
        return False  # a linear bound the interval does not settle fails at an end of it
    if _refuted_near_the_lower_corner(fact, ranges, assumptions):
        return False
    solver = budgeted_solver(2000)
    symbols = set(fact.free_symbols).union(*(sympy.sympify(a).free_symbols for a in assumptions))
    for symbol in symbols:
        lower, upper = ranges.get(symbol, (None, None))
        var = z3.Int(str(symbol))
        if lower is not None:
            solver.add(var >= lower)
        if upper is not None:
            solver.add(var <= upper)
    try:
        solver.add(*(to_z3(a) for a in assumptions))
        solver.add(z3.Not(to_z3(fact)))
    except (Untranslatable, z3.Z3Exception):  # z3 cannot express it: never claim it implied
        return False
    return solver.check() == z3.unsat


# how far a symbol moves up from its lower bound in the search for a refuting assignment
_CORNER_STEPS = (1, 2, 3, 4)


def _refuted_near_the_lower_corner(fact, ranges: dict, assumptions: list) -> bool:
    """True when an integer assignment within ``ranges`` satisfies every assumption and makes
    ``fact`` false: every symbol at its lower bound, or one of the fact's a few steps
    (``_CORNER_STEPS``) above it. What z3 would find first for the usual facts (``a == b``,
    ``a == b or b == 1``: two dims free of each other), without building a solver; False says
    nothing. Symbols without a lower bound leave it to z3."""
    symbols = fact.free_symbols.union(*(a.free_symbols for a in assumptions))
    corner = {}
    for symbol in symbols:
        lower, upper = ranges.get(symbol, (None, None))
        if lower is None or (upper is not None and upper < lower):
            return False
        corner[symbol] = int(lower)

    def admits(symbol, value) -> bool:
        upper = ranges[symbol][1]
        return upper is None or value <= upper

    return refuted_near(fact, corner, admits, _CORNER_STEPS, assumptions)


def _linear_bound(fact) -> bool:
    """``a*s + b <op> c`` with one symbol and ``<op>`` an order (not ``==``/``!=``): its
    interval is exact and its extremes lie at the ends of the symbol's range, so the
    interval answers it (``2*s != 5`` would not be: no integer makes it false)."""
    if not isinstance(fact, (sympy.StrictLessThan, sympy.LessThan, sympy.StrictGreaterThan,
                             sympy.GreaterThan)) or len(fact.free_symbols) != 1:
        return False
    symbol = next(iter(fact.free_symbols))
    difference = sympy.expand(fact.lhs - fact.rhs)
    return difference.is_polynomial(symbol) and sympy.degree(difference, symbol) == 1


def suggest_fix(facts, ranges: dict, hints: dict, describe=str, *,
                adopt: bool = False, fixed=frozenset()) -> Fix | None:
    """The fix for ``facts`` (see the module docstring), or None.

    ranges: symbol -> (lower, upper or None) of the current spec; hints: symbol -> example
    value; describe: symbol -> text for notes (``x.shape[0]``); adopt: the ``Dim.AUTO``
    search (see the module docstring); fixed: symbols the adopt search may not change (named
    ``Dim``s), which it keeps as they are and expresses the others through.
    """
    fix = Fix(ranges=dict(ranges), hints=dict(hints))
    facts = [part for fact in facts for part in _conjuncts(sympy.sympify(fact))]
    for _ in range(MAX_CHANGES):
        asserted = [fix.apply(a) for a in fix.asserted]
        pending = [f for f in facts if not implied(fix.apply(f), fix.ranges, asserted)]
        if not pending:
            return fix
        # every change below only narrows what the fix admits (a range, a pin, a derived dim,
        # an assertion): a fact it implies now it implies after them, so only the pending
        # ones are asked again (each ask is a solver call; modular guards make them slow)
        facts = pending
        if adopt:
            if not any(_adopt_change(fix, fix.apply(f), f, describe, fixed) for f in pending):
                fix.asserted.append(pending[0])
                fix.notes.append(f"`{render_expr(pending[0], describe)}` is checked at run time")
            continue
        pending.sort(key=lambda f: _priority(fix.apply(f)))
        if not any(_change(fix, fix.apply(f), describe) for f in pending):
            if not _specialize_last(fix, fix.apply(pending[0]), describe):
                return None
    return None


def _priority(fact) -> int:
    """Structural changes first: a divisibility root (``n == 4*k``) or a relation between dims
    can settle other facts (``n // 4 != 1`` holds once ``k >= 2``) that alone would make a dim
    static."""
    if isinstance(fact, sympy.Eq) and fact.has(Mod, PythonMod):
        return 0
    if isinstance(fact, sympy.Eq) and len(fact.free_symbols) > 1:
        return 1
    return 2


def _adopt_change(fix: Fix, fact, original, describe, fixed) -> bool:
    """One change the ``Dim.AUTO`` search may make for ``fact``: a pin, a range, an equality
    or a polynomial relation; False when the fact is better asserted."""
    if not isinstance(fact, sympy.core.relational.Relational):
        return False
    symbols = sorted(fact.free_symbols, key=_order)
    if len(symbols) == 1:
        return symbols[0] not in fixed and \
            _adopt_univariate(fix, fact, original, symbols[0], describe)
    if isinstance(fact, sympy.Eq):
        return _relate_polynomial(fix, fact, symbols, describe, fixed)
    return False


def _adopt_univariate(fix: Fix, fact, original, s, describe) -> bool:
    hint = fix.hints[s]
    if isinstance(fact, sympy.Eq):
        if not implied(sympy.Eq(s, hint), fix.ranges, [fact]):
            return False  # several sizes satisfy it: not a pin
        fix.pinned_by[s] = original
        return _make_static(fix, s, f"the code needs `{render_expr(fact, describe)}`", describe)
    linear = _linear(sympy.expand(fact.lhs - fact.rhs), s)
    if linear is None:
        return False
    if isinstance(fact, sympy.Ne):  # a range end may move; a hole in the middle is asserted
        value = sympy.Rational(-linear[1], linear[0])
        lower, upper = fix.ranges.get(s, (2, None))
        return value in (lower, upper) and _exclude(fix, s, value, describe)
    return _bound(fix, fact, s, linear[0], linear[1], describe)


def _relate_polynomial(fix: Fix, fact, symbols, describe, fixed) -> bool:
    """``later == p(earlier...)``: the latest symbol that is not ``fixed`` becomes the integer
    polynomial ``p`` when every value of ``p`` lies in its range; ``y == 8`` whatever ``x`` is
    pins ``y``. When the latest is no integer polynomial of the others (``x == 2*y``: ``y`` is
    ``x/2``), an earlier free symbol that is one becomes it (``x = 2*y``, as torch.export's
    ``Dim.AUTO`` makes it); the symbols it is expressed over stay roots."""
    free = [s for s in symbols if s not in fixed]
    if not free:
        return False
    later = free[-1]
    if any(s not in fixed and _order(s) > _order(later) for s in symbols):
        return False
    for target in reversed(free):
        value = _solved_for(fact, target)
        if value is None:
            continue
        if value.is_Integer:
            if target is not later:
                continue  # a pin is the latest dim's (as before: the first to differ)
            fix.pinned_by[later] = fact
            return _make_static(fix, later, f"the code needs `{render_expr(fact, describe)}`",
                                describe)
        if _integer_polynomial(value) and target not in value.free_symbols \
                and not value.free_symbols & set(fix.derived) \
                and _derive_in_range(fix, target, value, describe):
            return True
    return False


def _solved_for(fact, symbol):
    """The one solution of ``fact`` for ``symbol`` (expanded), or None. Only a polynomial
    equation is solved: what the callers take is an integer or an integer polynomial, which
    sympy does not find for one with ``Mod``, floor division or ``Max`` in it (and takes
    long to fail on: a padded length's ``s - Mod(s, 8) + 8``)."""
    difference = fact.lhs - fact.rhs
    if not difference.is_polynomial(*sorted(difference.free_symbols, key=str)):
        return None
    try:
        solved = sympy.solve(fact, symbol)
    except (NotImplementedError, ValueError, TypeError):  # not a relation sympy solves
        return None
    return sympy.expand(solved[0]) if len(solved) == 1 else None


def _derive_in_range(fix: Fix, symbol, value, describe) -> bool:
    """Make ``symbol`` the expression ``value`` when every value it takes lies in ``symbol``'s
    range."""
    lower, upper = fix.ranges.get(symbol, (2, None))
    in_range = sympy.Ge(value, lower) if upper is None else \
        sympy.And(sympy.Ge(value, lower), sympy.Le(value, upper))
    if not implied(in_range, fix.ranges):
        return False
    fix.derived[symbol] = value
    fix.ranges.pop(symbol, None)
    fix.notes.append(f"{describe(symbol)} = {render_expr(value, describe)}")
    return True


def _integer_polynomial(expr) -> bool:
    """A polynomial with integer coefficients in its symbols (``x*y``, ``2*x + 1``)."""
    symbols = sorted(expr.free_symbols, key=str)
    if not symbols or not expr.is_polynomial(*symbols):
        return False
    return all(c.is_Integer for c in sympy.Poly(expr, *symbols).coeffs())


def _conjuncts(fact) -> list:
    """``a and b`` is two facts (each may need its own change)."""
    return [p for arg in fact.args for p in _conjuncts(arg)] if isinstance(fact, sympy.And) \
        else [fact]


def _specialize_last(fix: Fix, fact, describe) -> bool:
    """Fallback for a relation no spec can state (``z == x*y``): make its latest symbol
    static; the search then goes on with what is left of the relation."""
    symbols = sorted(fact.free_symbols, key=_order)
    if not symbols:
        return False
    return _make_static(fix, symbols[-1], f"`{render_expr(fact, describe)}` cannot be stated in "
                        "dynamic_shapes", describe)


def _order(symbol) -> tuple:
    name = str(symbol)
    return (name.rstrip("0123456789"), int(name[len(name.rstrip("0123456789")):] or 0))


def _change(fix: Fix, fact, describe) -> bool:
    if not isinstance(fact, sympy.core.relational.Relational):
        return False
    symbols = sorted(fact.free_symbols, key=_order)
    if len(symbols) == 1:
        return _univariate(fix, fact, symbols[0], describe)
    if len(symbols) == 2 and isinstance(fact, sympy.Eq):
        return _relate(fix, fact, symbols, describe)
    return False


def _linear(expr, symbol):
    """(a, b) with expr == a*symbol + b and integer a != 0, b; else None."""
    expr = sympy.expand(expr)
    a = expr.coeff(symbol, 1)
    b = sympy.expand(expr - a * symbol)
    if a.is_Integer and b.is_Integer and a != 0 and symbol not in b.free_symbols:
        return int(a), int(b)
    return None


def _univariate(fix: Fix, fact, s, describe) -> bool:
    lhs = sympy.expand(fact.lhs - fact.rhs)
    if isinstance(fact, sympy.Eq) and _divisibility(fix, fact, s, describe):
        return True
    linear = _linear(lhs, s)
    if isinstance(fact, sympy.Eq) or (linear is None and not isinstance(fact, sympy.Ne)):
        return _make_static(fix, s, f"the code needs `{render_expr(fact, describe)}`", describe)
    if linear is None:
        return _make_static(fix, s, f"the code needs `{render_expr(fact, describe)}`", describe)
    a, b = linear
    if isinstance(fact, sympy.Ne):
        return _exclude(fix, s, sympy.Rational(-b, a), describe)
    return _bound(fix, fact, s, a, b, describe)


def _make_static(fix: Fix, s, reason: str, describe) -> bool:
    if s in fix.static:
        return False
    fix.static[s] = fix.hints[s]
    fix.ranges.pop(s, None)
    fix.notes.append(f"{describe(s)} is static ({fix.hints[s]}): {reason}")
    return True


def _exclude(fix: Fix, s, value, describe) -> bool:
    lower, upper = fix.ranges.get(s, (2, None))
    if value.is_Integer and value == lower:
        fix.ranges[s] = (lower + 1, upper)
    elif value.is_Integer and upper is not None and value == upper:
        fix.ranges[s] = (lower, upper - 1)
    else:
        return _make_static(fix, s, f"it may not be {value}, which a range cannot exclude",
                            describe)
    fix.notes.append(f"{describe(s)} may not be {value}: range {_range(fix.ranges[s])}")
    return True


def _bound(fix: Fix, fact, s, a, b, describe) -> bool:
    """Tighten ``s``'s range so that ``a*s + b <op> 0`` always holds."""
    lower, upper = fix.ranges.get(s, (2, None))
    op = type(fact)
    if a < 0:  # a*s + b >= 0  <=>  -a*s - b <= 0
        a, b = -a, -b
        op = {sympy.Ge: sympy.Le, sympy.Gt: sympy.Lt, sympy.Le: sympy.Ge,
              sympy.Lt: sympy.Gt}[op]
    if op in (sympy.Ge, sympy.Gt):   # s >= -b/a  (strict: +1 after ceiling of the >= form)
        bound = math.ceil(sympy.Rational(-b, a)) + (1 if op is sympy.Gt and (-b) % a == 0 else 0)
        new = (max(lower, bound), upper)
    else:                            # s <= -b/a
        bound = math.floor(sympy.Rational(-b, a)) - (1 if op is sympy.Lt and (-b) % a == 0 else 0)
        new = (lower, bound if upper is None else min(upper, bound))
    if new == (lower, upper):
        return False
    if new[1] is not None and new[0] > new[1]:
        return _make_static(fix, s, f"no range satisfies `{render_expr(fact, describe)}`",
                            describe)
    fix.ranges[s] = new
    fix.notes.append(f"{describe(s)} in {_range(new)}: the code needs "
                     f"`{render_expr(fact, describe)}`")
    return True


def _relate(fix: Fix, fact, symbols, describe) -> bool:
    """``a*s + b == c*t + d``: express the later symbol through the earlier one."""
    first, later = symbols
    for root, dependent in ((first, later), (later, first)):
        try:
            solved = sympy.solve(fact, dependent)
        except (NotImplementedError, ValueError, TypeError):  # not a relation we can solve
            continue
        if len(solved) != 1:
            continue
        if solved[0].is_Integer:  # x*y == 8*x: y is 8 whatever x is
            return _make_static(fix, dependent, f"the code needs "
                                f"`{render_expr(fact, describe)}`", describe)
        linear = _linear(solved[0], root)
        if linear is None or linear[0] <= 0:
            continue
        k, m = linear
        fix.derived[dependent] = k * root + m
        lower_d, upper_d = fix.ranges.pop(dependent, (2, None))
        lower_r, upper_r = fix.ranges.get(root, (2, None))
        lower_r = max(lower_r, math.ceil(sympy.Rational(lower_d - m, k)))
        if upper_d is not None:
            bound = math.floor(sympy.Rational(upper_d - m, k))
            upper_r = bound if upper_r is None else min(upper_r, bound)
        fix.ranges[root] = (lower_r, upper_r)
        fix.notes.append(f"{describe(dependent)} equals {describe(root)}" if (k, m) == (1, 0)
                         else f"{describe(dependent)} = {_text(k, m, describe(root))}")
        return True
    return False


def _divisibility(fix: Fix, fact, s, describe) -> bool:
    """``(a*s + b) % m == 0``: ``s = m' * r + r0`` for a new root ``r``."""
    other = fact.rhs if fact.lhs.has(Mod, PythonMod) else fact.lhs
    mod = fact.lhs if fact.lhs.has(Mod, PythonMod) else fact.rhs
    if other != 0 or not isinstance(mod, (Mod, PythonMod)) or not mod.args[1].is_Integer:
        return False
    linear = _linear(mod.args[0], s)
    if linear is None:
        return False
    a, b = linear
    modulus = int(mod.args[1])
    step = modulus // math.gcd(a, modulus)
    offset = fix.hints[s] % step
    root = sympy.Symbol(f"{s}_r", integer=True, positive=True)
    lower, upper = fix.ranges.pop(s, (2, None))
    fix.derived[s] = step * root + offset
    fix.hints[root] = (fix.hints[s] - offset) // step
    # every dynamic size, roots included, ranges over [2, ...] (see symbolic.spec)
    fix.ranges[root] = (max(2, math.ceil(sympy.Rational(lower - offset, step))),
                        None if upper is None else (upper - offset) // step)
    fix.new_roots.append(root)
    fix.notes.append(f"{describe(s)} is a multiple of {step}" + (f" plus {offset}" if offset
                                                                  else "")
                     + f": the code needs `{render_expr(fact, describe)}`")
    return True


def _text(k, m, name) -> str:
    base = name if k == 1 else f"{k}*{name}"
    return base if m == 0 else f"{base} + {m}" if m > 0 else f"{base} - {-m}"


def _range(value) -> str:
    lower, upper = value
    return f"[{lower}, {'inf' if upper is None else upper}]"

