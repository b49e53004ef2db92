"""symbolic.auto: Dim.AUTO adopts what the code requires — equal dims, narrower ranges,
products, run-time assertions — and pins a dim only when the code fixes its value, saying so.

Oracle: the exported program against eager at sizes other than the example's."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.export import Dim
from torch.testing import assert_close

import unbroken
from tests.test_suggested_fixes import DynamicModel
from unbroken import InputMismatchError
from unbroken.symbolic.auto import SpecializationWarning

A = Dim.AUTO


def _placeholder_shapes(ep) -> list:
    return [list(n.meta["val"].shape) for n in ep.graph.nodes
            if n.op == "placeholder" and not n.name.startswith(("p_", "b_", "c_"))]


def test_seed_dynamic_model_gives_z_as_a_product():
    args = (torch.randn(6, 5), torch.randn(4), torch.randn(8, 4), torch.randn(32))
    model = DynamicModel()
    with pytest.warns(SpecializationWarning, match=r"w\.shape\[1\] is specialized to 5"):
        ep = unbroken.export(model, args,
                             dynamic_shapes={"w": (A, A), "x": (A,), "y": (A, A), "z": (A,)})
    w, x, y, z = _placeholder_shapes(ep)
    assert x[0] == y[1] and z[0] == x[0] * y[0] and w[1] == 5
    resized = (torch.randn(3, 5), torch.randn(7), torch.randn(5, 7), torch.randn(35))
    assert_close(ep.module()(*resized), model(*resized))
    with pytest.raises(InputMismatchError, match="z.shape.0. = 34"):
        ep.module()(torch.randn(3, 5), torch.randn(7), torch.randn(5, 7), torch.randn(34))
    (pinned,) = ep.specializations
    assert (pinned.source, pinned.value) == ("w.shape[1]", 5)
    assert pinned.frames[-1].source.strip() == "x1 = self.l(w)"


class DoubledBatch(nn.Module):
    def forward(self, x, y):
        return torch.cat([y, y]) + x  # x.shape[0] == 2 * y.shape[0]


def test_an_earlier_dim_twice_a_later_one_is_a_derived_dim():
    """x comes first, but only x = 2*y is a dim expression (as torch's Dim.AUTO makes it);
    y = x/2 would not be. y admits 1 (x is then 2)."""
    ep = unbroken.export(DoubledBatch(), (torch.randn(8, 3), torch.randn(4, 3)),
                         dynamic_shapes={"x": {0: A}, "y": {0: A}})
    (x, _), (y, _) = _placeholder_shapes(ep)
    assert x.node.expr == 2 * y.node.expr and len(ep.range_constraints) == 1
    for n in (1, 3, 6):
        args = (torch.randn(2 * n, 3), torch.randn(n, 3))
        assert_close(ep.module()(*args), DoubledBatch()(*args), rtol=0, atol=0)
    with pytest.raises(InputMismatchError, match="2\\*s0"):
        ep.module()(torch.randn(8, 3), torch.randn(3, 3))


class MaskOrBroadcast(nn.Module):
    """Like scaled_dot_product_attention's check: the mask's length equals the sequence's, or
    is 1 (broadcast). No dynamic_shapes spec can state an "or"."""

    def forward(self, x, mask):
        torch._check((x.shape[1] == mask.shape[1]) | (mask.shape[1] == 1))
        return x * mask.sum(1, keepdim=True)


def test_a_relation_no_spec_states_is_asserted_not_pinned():
    ep = unbroken.export(MaskOrBroadcast(), (torch.randn(2, 6), torch.ones(2, 6)),
                         dynamic_shapes={"x": (A, A), "mask": (A, A)})
    assert not ep.specializations
    assert all(isinstance(d, torch.SymInt) for shape in _placeholder_shapes(ep) for d in shape)
    x, mask = torch.randn(3, 9), torch.ones(3, 9)
    assert_close(ep.module()(x, mask), MaskOrBroadcast()(x, mask))
    with pytest.raises(InputMismatchError, match=r"x\.shape\[1\] == mask\.shape\[1\]"):
        ep.module()(torch.randn(3, 9), torch.ones(3, 7))
    asserts = [n for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    assert asserts, "the relation must stay in the program for other consumers of the graph"


class Quarters(nn.Module):
    def forward(self, x):
        return x.view(-1, 4).sum(1)


def test_divisibility_is_asserted_for_auto():
    ep = unbroken.export(Quarters(), (torch.randn(16),), dynamic_shapes={"x": (A,)})
    assert not ep.specializations
    for n in (8, 12, 40):
        x = torch.randn(n)
        assert_close(ep.module()(x), Quarters()(x))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(10))


def test_dim_dynamic_dims_that_must_be_equal_are_accepted():
    D = Dim.DYNAMIC
    model = nn.Bilinear(3, 3, 2).eval()
    ep = unbroken.export(model, (torch.randn(4, 3), torch.randn(4, 3)),
                         dynamic_shapes=({0: D}, {0: D}))
    x1, x2 = _placeholder_shapes(ep)
    assert x1[0] == x2[0]
    a, b = torch.randn(6, 3), torch.randn(6, 3)
    assert_close(ep.module()(a, b), model(a, b))


def test_dim_dynamic_is_never_specialized():
    class Fixed(nn.Module):
        def forward(self, x):
            return x.view(2, 4)

    with pytest.raises(unbroken.ConstraintViolationError):
        unbroken.export(Fixed(), (torch.randn(8),), dynamic_shapes={"x": (Dim.DYNAMIC,)})


class _PositionTable(nn.Module):
    """Reads ``table[:seq]``: the code requires ``seq <= 16`` and nothing else."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(16.0))

    def forward(self, x):
        return x + self.table[: x.shape[1]]


def test_a_range_only_adoption_narrows_in_place_without_a_second_trace(monkeypatch):
    import dataclasses

    import unbroken.exporter.pipeline as pipeline
    from unbroken.exporter.trace import Trace

    traces = []
    real_trace = Trace.run
    monkeypatch.setattr(Trace, "run", lambda self: (traces.append(self), real_trace(self))[1])
    model = _PositionTable()
    ep = unbroken.export(model, (torch.randn(2, 12),), dynamic_shapes=({0: A, 1: A},))
    assert len(traces) == 1
    ranges = sorted((int(r.lower), int(r.upper)) for r in ep.range_constraints.values()
                    if r.upper < 2 ** 62)
    assert ranges == [(1, 16)]  # and no decision depends on seq >= 2: 1 admitted (size_one)
    for shape in [(3, 9), (5, 16), (1, 1)]:
        x = torch.randn(shape)
        assert_close(ep.module()(x), model(x))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(3, 17))
    # the same program a second trace under the narrowed spec gives
    real_stages = pipeline.run_stages
    monkeypatch.setattr(pipeline, "run_stages", lambda call, options: real_stages(
        call, dataclasses.replace(options, narrow_in_place=False)))
    retraced = unbroken.export(model, (torch.randn(2, 12),), dynamic_shapes=({0: A, 1: A},))
    assert len(traces) == 3
    assert retraced.graph_module.code == ep.graph_module.code
    assert dict(retraced.range_constraints) == dict(ep.range_constraints)



# --------------------------------------------------------------------------------------------
# which guards need another trace whatever else the trace finds (options.adopt_early)
# --------------------------------------------------------------------------------------------

def _auto_env(*, dynamic=()):
    """Two Dim.AUTO dims (``a``, ``b``, hints 4), a Dim.DYNAMIC one (``c``) and a named one
    (``n``)."""
    from unbroken.symbolic.env import ShapeEnvironment

    env = ShapeEnvironment()
    a, b, c, n = (env.create_symbol(name, 4, source=f"{name}.shape[0]") for name in "abcn")
    env.auto_symbols.update({a: "a.shape[0]", b: "b.shape[0]", c: "c.shape[0]"})
    env.dynamic_symbols.add(c)
    return env, (a, b, c, n)


def test_equal_auto_dims_and_a_pinned_auto_dim_need_another_trace():
    import sympy

    from unbroken.symbolic.auto import may_need_retrace, needs_retrace
    from unbroken.symbolic.guards import Guard

    env, (a, b, c, n) = _auto_env()
    retrace = [Guard(sympy.Eq(a, b), True), Guard(sympy.Ne(b, a), False),  # a == b
               Guard(sympy.Eq(a, 4), True), Guard(sympy.Eq(4, b), True),  # pinned
               Guard(sympy.Eq(a, c), True),  # Dim.DYNAMIC may be related to another dim
               Guard(sympy.Eq(a, b), True, kind="expect_true")]  # torch._check(a == b)
    others = [Guard(sympy.Eq(a, b), False),  # a != b: an assertion, not a new symbol
              Guard(sympy.Eq(a, n), True),  # a named Dim: refused, with every violation
              Guard(sympy.Eq(c, 4), True),  # Dim.DYNAMIC never becomes static: refused
              Guard(sympy.Eq(a, 2 * b), True),  # derived: a retrace may not be the plan
              Guard(a <= 8, True)]  # a range: narrowed in place when the answers allow
    assert [needs_retrace(env, g) for g in retrace] == [True] * len(retrace)
    assert [may_need_retrace(env, g) for g in others] == [False] * len(others)


def test_a_torch_check_that_implies_the_equality_takes_the_retrace_back():
    """sdpa's meta kernel decides ``mask_len == seq_len`` and then checks ``mask_len == seq_len
    or mask_len == 1``: with every size >= 2 the check implies the decision, which is then no
    violation (the check stays a run-time assertion). A torch._check itself is decided under
    the spec alone, as settle_shapes does."""
    import sympy

    from unbroken.symbolic.auto import may_need_retrace, needs_retrace
    from unbroken.symbolic.guards import Guard

    env, (a, b, _, _) = _auto_env()
    decided = Guard(sympy.Eq(a, b), True)
    check = Guard(sympy.Or(sympy.Eq(a, b), sympy.Eq(b, 1)), True, kind="expect_true")
    env.guards += [decided, check]
    env.facts.append(check.expr)
    assert may_need_retrace(env, decided) and not needs_retrace(env, decided)
    assert needs_retrace(env, Guard(sympy.Eq(a, b), True, kind="expect_true"))


@pytest.mark.parametrize("facts, refuted", [
    # a view's divisibility check: a + 4 = 8 divides 16 * b too (b = 4), and is not a
    (["Eq(Mod(16*b, a), 0)"], True),
    # only an even a is admitted: a + 1 is not, a + 2 is
    (["Eq(Mod(a, 2), 0)"], True),
    # the facts themselves make a and b one: no admitted input refutes it, z3 proves it
    (["a <= b", "b <= a"], False),
    # a fact over a data-dependent size: no example value to move from, z3 decides
    (["Eq(u, a)", "Eq(u, b)"], False),
])
def test_an_equality_the_facts_do_not_imply_is_refuted_near_the_example(facts, refuted,
                                                                       monkeypatch):
    """``needs_retrace`` first moves one dim of ``a == b`` a few steps from the example value
    within the ranges, and where every recorded ``torch._check`` holds and the equality does
    not, answers without z3; otherwise z3 decides as before, with the same answer."""
    import sympy

    import unbroken.symbolic.auto as auto
    from unbroken.symbolic.guards import Guard

    env, (a, b, _, _) = _auto_env()
    u = env.create_unbacked_symbol("size")
    names = {"a": a, "b": b, "u": u, "Mod": sympy.Mod, "Eq": sympy.Eq}
    env.facts.extend(sympy.sympify(f, locals=names) for f in facts)
    guard = Guard(sympy.Eq(a, b), True)
    assert auto._refuted_near_the_example(env, guard.as_fact(), True) is refuted
    assert auto.needs_retrace(env, guard) is refuted
    if refuted:  # answered without a solver
        monkeypatch.setattr(auto, "Solver", None)
        assert auto.needs_retrace(env, guard)
