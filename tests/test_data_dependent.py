"""Values that only tensor data decide: .item() and data-dependent sizes are unbacked symbols;
torch._check facts about them become runtime asserts; what the facts cannot decide is refused
with a hint. Examples from the seed tutorial's data-dependent section."""
import pytest
import torch
import torch.nn as nn

import unbroken


class IndexByItem(nn.Module):
    def forward(self, x, y):
        a = x.item()
        torch._check(a >= 0)
        torch._check(a < y.shape[0])
        return y[a]


def test_seed_item_with_checks_exports_with_runtime_asserts():
    ep = unbroken.export(IndexByItem(), (torch.tensor(32), torch.randn(60)))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets.count(torch.ops.aten._assert_scalar.default) == 2
    assert [(r.lower, r.upper) for r in ep.range_constraints.values()] == [(0, 59)]
    y = torch.randn(60)
    for a in (0, 7, 59):
        torch.testing.assert_close(ep.module()(torch.tensor(a), y), y[a])
    with pytest.raises(RuntimeError, match="x.item\\(\\) >= 0"):
        ep.module()(torch.tensor(-3), y)  # the program checks like eager's torch._check


class Repeat(nn.Module):
    def forward(self, x, y):
        a = x.item()
        torch._check(a >= 0)
        b = y.unsqueeze(0).repeat(a, 1)
        return b + a


def test_seed_repeat_by_item():
    ep = unbroken.export(Repeat(), (torch.tensor(32), torch.randn(60)))
    y = torch.randn(60)
    for a in (0, 3, 40):
        torch.testing.assert_close(ep.module()(torch.tensor(a), y), Repeat()(torch.tensor(a), y))


def test_data_dependent_output_sizes():
    class M(nn.Module):
        def forward(self, x):
            positive = x[x > 0]
            where = x.nonzero()
            picked = torch.masked_select(x, x < -1)
            return positive.sum(), where.float().sum(0), picked.sum(), positive.shape[0] + 0.0

    ep = unbroken.export(M(), (torch.randn(4, 5),))
    for seed in range(3):
        torch.manual_seed(seed)
        x = torch.randn(4, 5)
        torch.testing.assert_close(ep.module()(x), M()(x))


class BranchOnItem(nn.Module):
    def forward(self, x):
        s = x.sum().item()
        if s > 0:
            return x * 2
        return x


def test_a_branch_on_a_data_dependent_value_is_refused_with_a_hint():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(BranchOnItem(), (torch.randn(3),))
    error = info.value
    assert error.code == "UB105"
    assert error.frames[-1].source == "if s > 0:"
    assert "torch._check" in error.render() or "torch.cond" in error.render()
