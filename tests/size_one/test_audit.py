"""size_one.audit and size_one.at_one: which sets of dims at 1 an answer is re-asked under,
and where an answer given inside a node's meta computation goes."""
import sympy

from unbroken.size_one.at_one import flipped_at_one, holds_at_one
from unbroken.size_one.audit import SizeOneAudit
from unbroken.symbolic.env import ShapeEnvironment


def test_flipped_sets_at_one_are_exactly_the_failing_ones():
    a, b, c, d = sympy.symbols("a b c d", integer=True, positive=True)
    fails = {frozenset({b}), frozenset({a, b})}
    holds = lambda ones: frozenset(ones) not in fails  # noqa: E731
    assert set(flipped_at_one([a, b], holds)) == fails
    assert flipped_at_one([a, b, c, d], holds) is None  # too many to enumerate
    asked = []
    assert not holds_at_one([a, b], lambda ones: asked.append(set(ones)) or holds(ones),
                            within=fails)
    assert asked == [{b}]  # smallest first, stops at the first failure
    asked.clear()
    # a set naming a symbol no longer free (sensitive elsewhere) cannot occur: not checked
    assert holds_at_one([a], lambda ones: asked.append(set(ones)) or holds(ones), within=fails)
    assert asked == []


def test_unit_scope_records_which_sets_at_one_change_an_answer():
    audit = SizeOneAudit()
    env = ShapeEnvironment(size_one=audit)
    s0 = env.create_symbol("s0", 3, source="x.shape[0]")
    s1 = env.create_symbol("s1", 5, upper=64, source="x.shape[1]")
    audit.admit(s0, requested=False)
    audit.admit(s1, requested=False)
    with audit.unit_scope() as pending:
        assert env.decide_expr(sympy.Ne(s0 * s1, s0)) is True  # settled by the ranges
    # s1 == 1 makes it s0 != s0; s0 == 1 alone leaves s1 != 1, still true for s1 >= 2
    assert set(pending) == {s0, s1}
    assert pending.flips == {frozenset({s1}), frozenset({s0, s1})}
    assert not audit.sensitive  # inside a node: the node's metadata check decides
