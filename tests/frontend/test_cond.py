"""torch.cond: each branch traced into its own subgraph, one higher-order node recorded."""
import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import unbroken


def _check(model, args, fresh):
    ep = unbroken.export(model, args)
    for inputs in [args, *fresh]:
        torch.testing.assert_close(ep.module()(*inputs), model(*inputs))
    return ep


def seed_cond(x):
    def true_fn(x):
        return torch.sin(x)

    def false_fn(x):
        return torch.cos(x)

    return torch.cond(x.sum() > 0, true_fn, false_fn, [x])


def test_seed_example_takes_both_branches():
    ep = _check(seed_cond, (torch.randn(3, 3),), [(torch.ones(3, 3),), (-torch.ones(3, 3),)])
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.higher_order.cond in targets


class Gated(nn.Module):
    """Branches read parameters and an outer tensor (extra operands), use in-place ops on
    their own intermediates, return several tensors, and nest."""

    def __init__(self):
        super().__init__()
        self.up = nn.Linear(4, 4)
        self.down = nn.Linear(4, 4)

    def forward(self, x, scale):
        offset = x.mean()

        def inner_true(h):
            return h * 2

        def inner_false(h):
            return h - 1

        def true_fn(h):
            y = self.up(h)
            y.relu_()
            return y + offset, torch.cond(y.sum() > 0, inner_true, inner_false, (y,))

        def false_fn(h):
            y = self.down(h) * scale
            return y, y.abs()

        return torch.cond(x.max() > 0.5, true_fn, false_fn, (x,))


def test_closures_parameters_nesting_and_several_outputs():
    fresh = [(torch.randn(2, 4), torch.tensor(3.0)), (-torch.rand(2, 4), torch.tensor(0.5))]
    _check(Gated(), (torch.randn(2, 4), torch.tensor(2.0)), fresh)


def test_constant_predicate_calls_its_branch_only():
    def f(x, flag: bool):
        return torch.cond(flag, lambda t: t + 1, lambda t: t - 1, (x,))

    ep = unbroken.export(f, (torch.randn(3), True))
    assert all(n.target is not torch.ops.higher_order.cond for n in ep.graph.nodes)
    x = torch.randn(3)
    torch.testing.assert_close(ep.module()(x, True), x + 1)


def test_predicate_on_a_dynamic_size():
    def f(x):
        return torch.cond(x.shape[0] > 4, lambda t: t.sin(), lambda t: t.cos(), (x,))

    ep = unbroken.export(f, (torch.randn(6, 2),), dynamic_shapes={"x": {0: Dim("n", max=16)}})
    for n in (2, 4, 5, 16):
        x = torch.randn(n, 2)
        torch.testing.assert_close(ep.module()(x), f(x))


def test_branch_may_not_change_state_created_outside_it():
    def f(x):
        log = []

        def true_fn(t):
            log.append(1)
            return t + 1

        out = torch.cond(x.sum() > 0, true_fn, lambda t: t - 1, (x,))
        return out * len(log)

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(f, (torch.randn(3),))
    assert info.value.code == "UB107"


def test_branch_may_not_modify_its_inputs():
    def f(x):
        def true_fn(t):
            t.add_(1)
            return t * 1

        return torch.cond(x.sum() > 0, true_fn, lambda t: t - 1, (x,))

    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(f, (torch.randn(3),))
    assert info.value.code == "UB121"


class _WritesItsOwnTensor(nn.Module):
    def forward(self, x):
        def fill(t):
            y = t.clone()
            y[0] = 1.0          # item assignment into the branch's own tensor
            y[1:3] += 2         # and an augmented one through a slice
            return y

        return torch.cond(x.sum() > 0, fill, lambda t: t.cos(), (x,))


def test_branch_may_assign_items_of_its_own_tensors():
    x = torch.rand(6, 4)
    _check(_WritesItsOwnTensor(), (x,), [(-x,), (torch.rand(6, 4),)])


def test_branch_may_not_assign_items_of_its_inputs():
    def f(x):
        def true_fn(t):
            t[0] = 1.0
            return t * 1

        return torch.cond(x.sum() > 0, true_fn, lambda t: t - 1, (x,))

    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(f, (torch.randn(3),))
    assert info.value.code == "UB121"


def test_branches_must_agree_on_their_results():
    def f(x):
        return torch.cond(x.sum() > 0, lambda t: t.sum(0), lambda t: t, (x,))

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(f, (torch.randn(3, 3),))
    assert info.value.code == "UB113" and "differ" in info.value.message


def test_seed_map_example_is_unrolled():
    from torch._higher_order_ops.map import map as torch_map

    class MapModule(nn.Module):
        def forward(self, xs, y, z):
            def body(x, y, z):
                return x + y + z

            return torch_map(body, xs, y, z)

    inputs = (torch.ones(6, 4), torch.tensor(5), torch.tensor(4))
    _check(MapModule(), inputs, [(torch.randn(6, 4), torch.tensor(1), torch.tensor(-2))])


def test_map_over_a_dynamic_first_dim_is_refused():
    from torch._higher_order_ops.map import map as torch_map

    def f(xs):
        return torch_map(lambda x: x * 2, xs)

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(f, (torch.randn(4, 3),), dynamic_shapes={"xs": {0: Dim("n")}})
    assert info.value.code == "UB117"


class Collatz(nn.Module):
    """A loop whose number of iterations only the data decides."""

    def __init__(self):
        super().__init__()
        self.scale = nn.Parameter(torch.tensor(1.5))

    def forward(self, n, x):
        def cond_fn(i, n, x):
            return n > 1

        def body_fn(i, n, x):
            nxt = torch.where(n % 2 == 0, n // 2, 3 * n + 1)
            return i + 1, nxt, x * self.scale  # reads a parameter: an extra input

        return torch.while_loop(cond_fn, body_fn, (torch.tensor(0), n, x))


def test_while_loop_runs_as_many_times_as_the_data_says():
    _check(Collatz(), (torch.tensor(6), torch.ones(2)),
           [(torch.tensor(27), torch.ones(2)), (torch.tensor(1), torch.randn(2))])


def test_while_loop_body_must_keep_the_carried_shapes():
    def f(x):
        return torch.while_loop(lambda x: x.sum() < 10, lambda x: torch.cat([x, x]), (x,))

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(f, (torch.ones(2),))
    assert info.value.code == "UB113"


def test_branches_may_use_dynamic_sizes_as_values():
    def f(x):
        def t(v):
            return v.reshape(v.shape[0], -1).sum(1) * v.shape[0]

        def e(v):
            return v.reshape(v.shape[0], -1).mean(1)

        return torch.cond(x.sum() > 0, t, e, (x,))

    ep = unbroken.export(f, (torch.randn(4, 2, 3),), dynamic_shapes={"x": {0: Dim("b", max=64)}})
    for n in (2, 9, 64):
        for sign in (1, -1):
            x = sign * torch.rand(n, 2, 3)
            torch.testing.assert_close(ep.module()(x), f(x))
    # the branch reads the size from its own input, not from the outer graph
    assert "sym_size" in ep.graph_module.true_graph_0.code


class CheckedInBranch(torch.nn.Module):
    """torch._check on a value the branch itself reads (`.item()` inside it)."""

    def forward(self, x, n):
        def small(x, n):
            k = n.item()
            torch._check(k >= 0)
            torch._check(k < 4)
            return x * k

        def other(x, n):
            return x - 1

        return torch.cond(x.sum() > 0, small, other, (x, n))


def test_a_check_inside_a_branch_is_asserted_inside_it():
    """Was UB999 (the assertion was placed in the root graph, where the branch's value does
    not exist); as torch's, it is asserted in the branch, in the program's order, and only
    when the branch runs."""
    ep = unbroken.export(CheckedInBranch(), (torch.ones(4), torch.tensor(2)))
    branch = ep.graph_module.true_graph_0
    asserts = [n for n in branch.graph.nodes
               if n.target is torch.ops.aten._assert_scalar.default]
    assert [">= 0" in a.args[1] for a in asserts] == [True, False]
    assert not any(n.target is torch.ops.aten._assert_scalar.default
                   for n in ep.graph.nodes)
    for n in (0, 3):
        got = ep.module()(torch.ones(4), torch.tensor(n))
        assert torch.equal(got, torch.ones(4) * n)
    with pytest.raises(RuntimeError, match="< 4"):
        ep.module()(torch.ones(4), torch.tensor(4))


class _IntBranches(nn.Module):
    """Branches returning Python ints beside a tensor: a constant in each (the program reads
    it back, bounded by the two constants) and the same constant in both."""

    def forward(self, x):
        def t(x):
            return x + 1, 3, 4

        def f(x):
            return x - 1, 5, 4

        a, n, same = torch.cond(x.sum() > 0, t, f, (x,))
        return a * n + same


def test_branches_may_return_ints_as_torch_export_reads_them():
    model = _IntBranches()
    for spec in (None, ({0: Dim.AUTO},)):
        ep = unbroken.export(model, (torch.randn(4, 3),), dynamic_shapes=spec)
        items = [n for n in ep.graph.nodes if n.target is torch.ops.aten.item.default]
        assert len(items) == 1  # only the constants that differ are read back
        for x in (torch.ones(4, 3), -torch.ones(4, 3), torch.randn(4, 3)):
            assert torch.equal(ep.module()(x), model(x))
        if spec is not None:
            x = torch.ones(6, 3)
            assert torch.equal(ep.module()(x), model(x))
    peer = torch.export.export(model, (torch.randn(4, 3),))
    assert torch.equal(peer.module()(torch.ones(4, 3)), model(torch.ones(4, 3)))


def test_a_branch_returning_a_float_is_refused_as_eager_refuses_it():
    class Floats(nn.Module):
        def forward(self, x):
            return x * torch.cond(x.sum() > 0, lambda x: 2.5, lambda x: 0.5, (x,))

    with pytest.raises(Exception):  # noqa: B017, PT011 (eager's own error)
        Floats()(torch.randn(3))
    with pytest.raises(unbroken.GraphBreakError, match="tensors or ints") as info:
        unbroken.export(Floats(), (torch.randn(3),))
    assert info.value.code == "UB113"


class _CountsToTheSize(nn.Module):
    """A while_loop whose cond_fn returns a Python bool: a comparison of an ``.item()``."""

    def forward(self, x, start):
        def cond_fn(i, acc):
            return i.item() < x.size(0)

        return torch.while_loop(cond_fn, lambda i, acc: (i + 1, acc + x.sum()), (start, x))


def test_while_loop_cond_fn_may_return_a_python_bool():
    x = torch.randn(4)
    _check(_CountsToTheSize(), (x, torch.tensor(0)),
           [(torch.randn(4), torch.tensor(2)), (torch.randn(4), torch.tensor(7))])
    ep = unbroken.export(_CountsToTheSize(), (torch.randn(5), torch.tensor(1)),
                         dynamic_shapes=({0: Dim("n")}, None))
    for n, start in ((3, 0), (8, 2)):
        inputs = (torch.randn(n), torch.tensor(start))
        torch.testing.assert_close(ep.module()(*inputs), _CountsToTheSize()(*inputs))


class _ClosesOverNumbers(nn.Module):
    """Branches (nested too) closing over an int input declared dynamic and an ``.item()``
    read before the cond: each becomes an extra input of the subgraphs that read it."""

    def forward(self, x, target, n):
        k = n.item()

        def scaled(x):
            return x * target + k

        def shifted(x):
            return torch.cond(x.sum() > 0, lambda y: y + k, lambda y: y - target, (x,))

        return torch.cond(x.sum() > 1, scaled, shifted, (x,))


def test_branches_may_read_int_inputs_and_items_of_the_enclosing_graph():
    model = _ClosesOverNumbers()
    ep = unbroken.export(model, (torch.randn(3), 2, torch.tensor(4)),
                         dynamic_shapes=(None, Dim.DYNAMIC, None))
    for inputs in [(torch.ones(3), 3, torch.tensor(2)), (-torch.ones(3), -5, torch.tensor(7)),
                   (torch.full((3,), 0.1), 9, torch.tensor(-3))]:
        torch.testing.assert_close(ep.module()(*inputs), model(*inputs))
