"""ShapeEnvironment: the guard hot path, provenance, unbacked symbols and torch._check."""
import pytest
import sympy
import torch
from torch._dispatch.python import enable_python_dispatcher

from unbroken.symbolic.diagnostics import DataDependentError, ExportUsageError, UserFrame
from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.node import SymNode, sym_expr
from unbroken.symbolic.ranges import ValueRange

FRAME = UserFrame("/m.py", 12, "forward", "y = x.view(100, -1)")


def test_create_symbol_ranges_and_sources():
    env = ShapeEnvironment()
    s = env.create_symbol("batch", 8, upper=64, source="x.shape[0]")
    assert env.var_ranges[s] == ValueRange(2, 64)
    assert env.hint_of(s * 2) == 16 and env.source_of(s) == "x.shape[0]"
    assert env.symbols[s].name == "batch" and s.name == "s0"
    with pytest.raises(ExportUsageError):
        env.create_symbol("b", 100, upper=64)


def test_range_settled_guards_are_not_recorded():
    env = ShapeEnvironment()
    x = env.symint(env.create_symbol("", 5))
    assert x != 1 and x >= 2 and not (x == 0) and x * x > 3
    assert env.guards == []


def test_guards_record_frames_op_and_dedupe():
    env = ShapeEnvironment(location_provider=lambda: (FRAME,))
    s = env.create_symbol("", 100, source="x.shape[0]")
    x = env.symint(s)
    with env.op_context("aten.view.default"):
        assert x == 100
        assert x == 100
    assert not (x < 50)
    assert len(env.guards) == 2
    g = env.guards[0]
    assert g.expr == sympy.Eq(s, 100) and g.value is True and g.frames == (FRAME,)
    assert g.op == "aten.view.default" and g.kind == "guard"
    assert g.as_fact() == sympy.Eq(s, 100) and g.describe(env.source_of) == "x.shape[0] == 100"
    assert env.guards[1].as_fact() == (s >= 50) and env.guards[1].op is None


def test_guard_int_concretizes_with_eq_guard():
    env = ShapeEnvironment()
    s = env.create_symbol("", 7)
    assert int(env.symint(s) * 2) == 14
    assert env.guards[-1].as_fact() == sympy.Eq(2 * s, 14)


def test_unbacked_decision_raises_data_dependent_error():
    env = ShapeEnvironment(location_provider=lambda: (FRAME,))
    u = env.create_unbacked_symbol(source="y.item()")
    n = env.symint(u)
    with pytest.raises(DataDependentError) as info:
        bool(n > 4)
    err = info.value
    assert err.frames == (FRAME,) and "y.item()" in err.message and "torch._check" in err.hint
    with pytest.raises(DataDependentError):
        int(n)


def test_guard_or_false_falls_back_on_unbacked():
    from torch.fx.experimental.symbolic_shapes import (
        guard_or_false,
        guard_or_true,
        statically_known_true,
    )
    env = ShapeEnvironment()
    n = env.symint(env.create_unbacked_symbol(kind="size"))
    assert guard_or_false(n == 3) is False and guard_or_true(n == 3) is True
    assert statically_known_true(n >= 0) and not statically_known_true(n >= 1)
    assert env.guards == []


def test_torch_check_records_fact_and_refines_range():
    env = ShapeEnvironment()
    u = env.create_unbacked_symbol(source="n.item()")
    n = env.symint(u)
    torch._check(n >= 3)
    torch._check(n <= 10)
    assert env.var_ranges[u] == ValueRange(3, 10)
    assert [g.kind for g in env.guards] == ["expect_true", "expect_true"]
    assert bool(n > 2) and bool(n != 11)
    assert len(env.guards) == 2
    torch._check_is_size(n)
    assert env.symbols[u].kind == "size"


def test_facts_decide_the_questions_they_imply():
    """A data-dependent question the torch._check facts settle is answered (z3 over the
    facts), with no guard: the facts are the program's run-time assertions. One they do not
    settle still refuses."""
    env = ShapeEnvironment()
    a, b, c = (env.symint(env.create_unbacked_symbol(source=f"{n}.item()")) for n in "abc")
    torch._check(a == b + c)
    assert bool(b + c == a) and not bool(a != c + b)
    torch._check(b <= 2 * c)
    assert not bool(b > 2 * c) and bool(a <= 3 * c)
    guards = len(env.guards)
    with pytest.raises(DataDependentError):
        bool(a > 4)
    assert len(env.guards) == guards


def test_torch_check_false_at_hint_raises():
    env = ShapeEnvironment()
    x = env.symint(env.create_symbol("", 3))
    with pytest.raises(RuntimeError):
        torch._check(x > 5)


def test_size_oblivious_treats_unbacked_sizes_as_at_least_two():
    env = ShapeEnvironment()
    n = env.symint(env.create_unbacked_symbol(kind="size"))
    assert (n == 1).node.guard_size_oblivious("", 0) is False
    with pytest.raises(DataDependentError):
        bool(n == 1)


def test_symint_of_constant_is_int_and_meta_tensor_layout():
    env = ShapeEnvironment()
    s = env.create_symbol("", 4)
    assert env.symint(sympy.Integer(3)) == 3 and type(env.symint(sympy.Integer(3))) is int
    assert env.symbool(sympy.true) is True
    assert env.symfloat(s / 2).node.hint == 2.0
    example = torch.randn(4, 3, 5, 6, requires_grad=True).to(memory_format=torch.channels_last)
    with enable_python_dispatcher():
        t = env.make_meta_tensor(example, [s, 3, 5, 6])
    assert t.device.type == "meta" and t.requires_grad and t.dtype == example.dtype
    assert [sym_expr(v) for v in t.stride()] == [90, 1, 18, 3]
    assert sym_expr(t.shape[0]) == s and type(t.shape[1]) is int
    with pytest.raises(ExportUsageError):
        env.make_meta_tensor(example, [s])


def test_torch_helpers_reaching_into_shape_env():
    from torch.fx.experimental.symbolic_shapes import has_static_value, optimization_hint
    env = ShapeEnvironment()
    x = env.symint(env.create_symbol("", 6))
    assert optimization_hint(x) == 6 and not has_static_value(x)


# ----- replay_ranges: would narrower ranges have answered this trace alike? -----

def _watched(hint: int = 12):
    env = ShapeEnvironment()
    s = env.create_symbol("", hint, source="x.shape[1]")
    env.watch_ranges()
    return env, s


def test_replay_without_watching_says_nothing():
    env = ShapeEnvironment()
    s = env.create_symbol("", 12)
    assert env.replay_ranges({s: ValueRange(2, 16)}) is None


def test_replay_of_answers_the_narrower_ranges_leave_alike():
    env, s = _watched()
    x = env.symint(s)
    assert x >= 2 and env.static_truth(sympy.Le(s, 100)) is None
    assert env.replay_ranges({s: ValueRange(2, 200)}) == []
    assert env.replay_ranges({s: ValueRange(2, 16)}) is None  # s <= 100 becomes known


def test_a_guard_the_narrower_ranges_settle_alike_is_not_recorded_there():
    env, s = _watched()
    x = env.symint(s)
    assert x <= 16  # no range settles it: a guard (index 0), decided by the example
    assert not (x > 3 * s)  # settled by the ranges at once: no guard
    assert len(env.guards) == 1
    assert env.replay_ranges({s: ValueRange(2, 16)}) == [0]
    assert env.replay_ranges({s: ValueRange(2, 40)}) == []  # still a guard there


def test_a_fact_or_a_known_truth_that_would_change_is_refused():
    env, s = _watched()
    assert not env.known_true(sympy.Le(s, 16))  # statically_known_true: no, on [2, oo)
    assert env.replay_ranges({s: ValueRange(2, 16)}) is None
    env, s = _watched()
    assert env.expect_true(SymNode(sympy.Le(s, 16), env, bool, True))  # torch._check
    assert env.replay_ranges({s: ValueRange(2, 16)}) is None  # the fact would not be kept


def test_bounds_are_compared_by_what_their_reader_uses():
    env, s = _watched()
    assert not env.bound(s, use="singleton").is_singleton()
    assert env.bound(s - 1, use="sign").lower > 0
    assert env.replay_ranges({s: ValueRange(2, 16)}) == []  # neither reading changes
    assert env.replay_ranges({s: ValueRange(12, 12)}) is None  # now one value
    env.bound(s)  # read whole: any narrowing changes it
    assert env.replay_ranges({s: ValueRange(2, 16)}) is None


def test_replay_follows_the_facts_that_narrowed_ranges_during_the_trace():
    env, s = _watched()
    u = env.create_unbacked_symbol("int", "y.item()")
    env._refine(sympy.Ge(u, 0))  # torch._check(u >= 0): u becomes size-like
    assert env.static_truth(sympy.Ge(u, 2), size_oblivious=True) is True
    assert env.static_truth(sympy.Le(u + s, 3)) is None
    assert env.replay_ranges({s: ValueRange(2, 16)}) == []


def test_a_dry_run_question_the_narrower_ranges_settle_is_refused():
    """A dry run (the size-1 audit re-running a computation) that the ranges could not answer
    stopped there (DryRunUndecided); under narrower ranges it would go on: not the same trace,
    even though the same question, asked next as a guard, is one they settle alike."""
    from unbroken.symbolic.size_one_hook import DryRunUndecided, SizeOneHook

    class Dry(SizeOneHook):
        dry = 1

    hook = Dry()
    env = ShapeEnvironment(size_one=hook)
    s = env.create_symbol("", 12, source="x.shape[1]")
    env.watch_ranges()
    with pytest.raises(DryRunUndecided):
        env.decide_expr(sympy.Le(s, 16))
    hook.dry = 0
    assert env.decide_expr(sympy.Le(s, 16))
    assert len(env.guards) == 1
    assert env.replay_ranges({s: ValueRange(2, 16)}) is None


# ----- a computation's questions, logged and replayed (shared meta outputs) -----
def _two_symbols(hint_n=4, hint_m=4, upper=None):
    env = ShapeEnvironment(location_provider=lambda: (UserFrame("m.py", 3, "f", "y = x + z"),))
    n = env.create_symbol("", hint_n, upper=upper, source="x.shape[0]")
    m = env.create_symbol("", hint_m, source="z.shape[0]")
    return env, n, m


def _ask(env, n, m):
    """What a kernel asks: a decision, a torch._check, a range question, a concretization,
    a comparison decided inside another (nested: logged once)."""
    a = torch.SymInt(SymNode(n, env, int, env.hint_of(n)))
    b = torch.SymInt(SymNode(m, env, int, env.hint_of(m)))
    with env.op_context("aten.add.Tensor"):
        same = bool(a == b)
        torch._check(a * 2 >= 4)
        wide = env.static_truth(sympy.Ge(n, 2))
        low = env.bound(n + m).lower
        twice = int(a + a)
    return same, wide, low, twice


def _guards(env):
    return [(g.expr, g.value, g.kind, g.op, g.frames) for g in env.guards]


def test_replayed_questions_record_what_the_computation_would():
    env, n, m = _two_symbols()
    with env.calls_logged() as log:
        answers = _ask(env, n, m)
    assert type(env) is ShapeEnvironment and log
    names = [entry[0] for entry in log]
    assert names.count("decide_bool") == 1 and "expect_true" in names  # nested ones once
    assert "static_truth" in names and "bound" in names and "decide_value" in names
    other, n2, m2 = _two_symbols()
    assert other.computation_state({n2, m2}) == env.computation_state({n, m})
    with other.op_context("aten.add.Tensor"):  # replayed where the op would compute
        assert other.replay_calls(log)
    assert _guards(other) == _guards(env) and other.facts == env.facts
    assert other.var_ranges == env.var_ranges  # the torch._check refined the same range
    fresh, n3, m3 = _two_symbols()
    assert _ask(fresh, n3, m3) == answers and _guards(fresh) == _guards(other)


def test_a_replay_in_another_state_stops_at_the_first_other_answer():
    env, n, m = _two_symbols()
    with env.calls_logged() as log:
        _ask(env, n, m)
        wide = env.static_truth(sympy.Le(n, 4))  # the ranges do not settle it
    assert wide is None
    other, n2, m2 = _two_symbols(hint_m=5)
    assert other.computation_state({n2, m2}) != env.computation_state({n, m})
    narrower, n3, m3 = _two_symbols(upper=4)  # same hints, another range: another state
    assert narrower.computation_state({n3, m3}) != env.computation_state({n, m})
    with narrower.op_context("aten.add.Tensor"):
        assert not narrower.replay_calls(log)  # the last answer is True there
    assert len(narrower.guards) == len(env.guards)  # what came before was asked


def test_what_cannot_be_replayed_is_marked_and_nothing_is_logged_in_a_dry_run():
    from unbroken.size_one.audit import SizeOneAudit
    from unbroken.symbolic.env import UNREPLAYABLE
    env, n, m = _two_symbols()
    with env.calls_logged() as log:
        env.create_unbacked_symbol()
    assert UNREPLAYABLE in log
    with env.calls_logged() as log:
        try:
            env.decide_expr(sympy.Eq(env.create_unbacked_symbol(), 3))
        except DataDependentError:
            pass
    assert UNREPLAYABLE in log and type(env) is ShapeEnvironment
    assert env.computation_state({n, env.create_unbacked_symbol()}) is None
    with env.calls_logged() as outer:
        with env.calls_logged() as inner:  # one log at a time
            assert inner is None and env.computation_state({n}) is None
    assert outer == []
    audit = SizeOneAudit()
    dry_env = ShapeEnvironment(size_one=audit)
    s = dry_env.create_symbol("", 3)
    with audit.dry_run():
        with dry_env.calls_logged() as log:
            assert log is None and dry_env.computation_state({s}) is None
