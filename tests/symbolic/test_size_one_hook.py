"""symbolic.size_one_hook: the null audit an environment has when no export passes one."""
import sympy

from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.size_one_hook import NO_SIZE_ONE


def test_an_environment_without_an_audit_decides_and_audits_nothing():
    env = ShapeEnvironment()
    assert env.size_one is NO_SIZE_ONE and not NO_SIZE_ONE.active and NO_SIZE_ONE.dry == 0
    s = env.create_symbol("", 3)
    NO_SIZE_ONE.admit(s, requested=True)  # ignored: nothing admits 1
    assert env.decide_expr(sympy.Ne(s, 1)) is True  # settled by the range [2, oo)
    assert NO_SIZE_ONE.node_meta(env, lambda a, k: (a, k), (1,), {}) == ((1,), {})
    with NO_SIZE_ONE.unit_scope() as pending, NO_SIZE_ONE.aligned_broadcast(None, ()):
        assert pending == {}
