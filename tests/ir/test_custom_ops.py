"""ir.custom_ops: a custom operator whose fake kernel asks ``torch.library.get_ctx()`` for a
data-dependent size is traced with that size an unbacked symbol (its bounds kept), read from
the op's node; the program matches eager on inputs with other counts, side by side with
torch.export. Ops whose fake kernel never asks are untouched."""
from __future__ import annotations

import torch

import unbroken


@torch.library.custom_op("unbroken_tests::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0]


@positives.register_fake
def _(x):
    return x.new_empty(torch.library.get_ctx().new_dynamic_size(max=x.numel()))


@torch.library.custom_op("unbroken_tests::pairs", mutates_args=())
def pairs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    keep = x != 0
    return x[keep].reshape(-1, 1).repeat(1, 2), keep.nonzero()


@pairs.register_fake
def _(x):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(n, 2), x.new_empty((n, 1), dtype=torch.long)


@torch.library.custom_op("unbroken_tests::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@doubled.register_fake
def _(x):
    return torch.empty_like(x)


class UsesThem(torch.nn.Module):
    def forward(self, x):
        p = positives(x)
        a, b = pairs(x)
        return p.sum() * p.shape[0] + a.sum() + b.float().sum() + doubled(x).sum()


def test_dynamic_sizes_of_custom_fake_kernels_are_unbacked_symbols():
    model = UsesThem()
    x = torch.tensor([0.0, -1.0, 2.0, 3.0])
    ep = unbroken.export(model, (x,))
    ranges = {str(s): r for s, r in ep.range_constraints.items()}
    assert len(ranges) == 2 and any(int(r.upper) == 4 for r in ranges.values()
                                    if str(r.upper) != "int_oo")
    for other in (x, torch.ones(4), torch.zeros(4), torch.tensor([5.0, 0.0, -2.0, 1.0])):
        assert torch.equal(ep.module()(other), model(other))
    peer = torch.export.export(model, (x,))
    assert torch.equal(peer.module()(x), model(x))


def test_a_fake_kernel_that_does_not_ask_is_traced_as_before():
    ep = unbroken.export(lambda x: doubled(x) + 1, (torch.randn(3),))
    assert not ep.range_constraints
    assert any(n.target is torch.ops.unbroken_tests.doubled.default for n in ep.graph.nodes)
