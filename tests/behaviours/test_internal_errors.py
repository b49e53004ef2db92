"""Where torch's export tests found internal errors in unbroken (issue 20 item 3): run-time
assertions over max() of sizes and floor division, c10d collectives, torch.Generator
arguments, torch.distributions inside forward()."""
from __future__ import annotations

import contextlib

import pytest
import torch
import torch.distributed as dist
import torch.nn as nn
from torch.export import Dim

from tests.behaviours.harness import Behaviour, params, program, side_by_side


@contextlib.contextmanager
def _process_group():
    """A one-process gloo group for the run (and none left behind)."""
    dist.init_process_group("gloo", rank=0, world_size=1, store=dist.HashStore())
    try:
        yield
    finally:
        dist.destroy_process_group()


def _all_reduce(self, x):
    y = x * 2
    dist.all_reduce(y, op=dist.ReduceOp.MAX)
    return y + 1


def _all_reduce_input(self, x):
    dist.all_reduce(x)
    return x + 1


def _functional_all_reduce(self, x):
    from torch.distributed import _functional_collectives as funcol

    return funcol.all_reduce(x, "sum", dist.group.WORLD) * 3


def _async_all_reduce(self, x):
    work = dist.all_reduce(x, async_op=True)
    work.wait()
    return x + 1


def _generator_attr(self):
    self.g = torch.Generator().manual_seed(3)


def _assert_max_floordiv(self, x, z, y):
    early = torch.zeros(x.shape[0]) + torch.zeros(z.shape[0]).sum()
    u = y.item()
    torch._check(u >= 0)
    n = max(x.shape[0], z.shape[0]) // 2
    torch._check(u <= n)
    return torch.zeros(n) + u, early


def _max_of_counts(self, x, y):
    u = y.item()
    v = x.nonzero().shape[0]
    torch._check(max(u, v) // 2 >= 1)
    return torch.zeros(max(u, v) // 2)


def _cond_max_floordiv(self, x, z):
    def branch(scale):
        def fn(x, z):
            return x[: max(x.shape[0], z.shape[0]) // 2] * scale
        return fn

    return torch.cond(x.sum() > 0, branch(2), branch(3), (x, z))


def _normal(validate):
    def forward(self, loc, scale, value):
        d = torch.distributions.Normal(loc, scale, validate_args=validate)
        return d.log_prob(value) + d.entropy()
    return forward


def _categorical(self, logits):
    d = torch.distributions.Categorical(logits=logits, validate_args=False)
    return d.entropy(), d.log_prob(torch.zeros(logits.shape[0], dtype=torch.long))


def _independent(self, loc):
    base = torch.distributions.Normal(loc, torch.ones_like(loc), validate_args=False)
    return torch.distributions.Independent(base, 1, validate_args=False).log_prob(loc * 0.5)


def _lin(self):
    self.lin = nn.Linear(4, 2)


def _policy(self, x):
    mean, log_std = self.lin(x).chunk(2, dim=-1)
    d = torch.distributions.Normal(mean, log_std.exp(), validate_args=False)
    return d.log_prob(mean * 0.9).sum(-1)


_dist_inputs = lambda: (torch.randn(3), torch.rand(3) + 0.5, torch.randn(3))  # noqa: E731


BEHAVIOURS = [
    Behaviour("runtime_assert_max_floordiv", program(_assert_max_floordiv),
              lambda: (torch.randn(6), torch.randn(4), torch.tensor(2)),
              dynamic_shapes=({0: Dim.DYNAMIC}, {0: Dim.DYNAMIC}, None),
              more=(lambda: (torch.randn(9), torch.randn(3), torch.tensor(4)),),
              rejects=(lambda: (torch.randn(6), torch.randn(4), torch.tensor(5)),)),
    Behaviour("runtime_assert_max_of_counts", program(_max_of_counts),
              lambda: (torch.ones(6), torch.tensor(3)),
              more=(lambda: (torch.tensor([0.0, 1, 0, 1, 1, 0]), torch.tensor(9)),),
              rejects=(lambda: (torch.zeros(6), torch.tensor(1)),)),
    Behaviour("cond_branches_max_floordiv", program(_cond_max_floordiv),
              lambda: (torch.randn(6), torch.randn(4)),
              dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}),
              more=(lambda: (-torch.ones(8), torch.randn(10)),)),
    Behaviour("c10d_all_reduce_rewritten", program(_all_reduce), lambda: (torch.randn(3),),
              context=_process_group),
    Behaviour("c10d_all_reduce_input", program(_all_reduce_input), lambda: (torch.randn(3),),
              context=_process_group),
    Behaviour("functional_all_reduce", program(_functional_all_reduce),
              lambda: (torch.randn(3),), context=_process_group),
    Behaviour("c10d_async_all_reduce_refused", program(_async_all_reduce),
              lambda: (torch.randn(3),), expect="refuses", context=_process_group),
    Behaviour("generator_attribute_refused",
              program(lambda self, x: x + torch.rand(x.shape, generator=self.g),
                      _generator_attr), lambda: (torch.randn(3),), expect="refuses"),
    Behaviour("generator_input_refused",
              program(lambda self, x, g: x + torch.rand(x.shape, generator=g)),
              lambda: (torch.randn(3), torch.Generator()), expect="refuses"),
    Behaviour("distribution_normal", program(_normal(False)), _dist_inputs),
    Behaviour("distribution_normal_validated", program(_normal(True)), _dist_inputs,
              torch_fails="dynamo refuses to trace torch.distributions' argument validation "
                          "(constraints.is_dependent is marked as skipped); unbroken refuses "
                          "the data-dependent check cleanly (UB105)"),
    Behaviour("distribution_categorical", program(_categorical),
              lambda: (torch.randn(2, 4),)),
    Behaviour("distribution_independent", program(_independent), lambda: (torch.randn(2, 3),)),
    Behaviour("distribution_policy_head", program(_policy, _lin), lambda: (torch.randn(5, 4),)),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
