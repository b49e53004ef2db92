"""Builtin ``max()``/``min()`` of 0-d tensors run at run time as CPython runs them (the first
maximal item wins; a NaN is kept or skipped as CPython's comparisons decide), side by side
with torch.export strict (which records ``maximum``/``minimum``)."""
from __future__ import annotations

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact


class Extremes(torch.nn.Module):
    def forward(self, x, y):
        a = max(x.sum(), y.sum())
        b = min(x.max(), y.min(), x.mean())
        return a * x + b


@pytest.mark.parametrize("values", [
    pytest.param((torch.randn(3), torch.randn(3)), id="random"),
    pytest.param((torch.ones(3), torch.ones(3)), id="ties"),
    pytest.param((torch.tensor([1.0, float("nan"), 2.0]), torch.randn(3)), id="nan"),
])
def test_max_min_of_zero_dim_tensors_as_cpython(values):
    model = Extremes()
    example = (torch.randn(3), torch.randn(3))
    ours = unbroken.export(model, example)
    assert_bit_exact(ours.module()(*values), model(*values))
    peer = torch.export.export(model, example, strict=True)
    if not any(torch.isnan(v).any() for v in values):  # torch's maximum differs on NaNs
        assert_bit_exact(peer.module()(*values), model(*values))


def test_the_gradient_reaches_the_tensor_python_picked():
    x = torch.tensor([1.0, 2.0], requires_grad=True)
    y = torch.tensor([1.5, 1.5], requires_grad=True)

    class Pick(torch.nn.Module):
        def forward(self, x, y):
            return max(x.sum(), y.sum()) * 2  # a tie: Python keeps x's

    program = unbroken.export(Pick(), (x, y))
    program.module()(x, y).backward()
    got = (x.grad.clone(), y.grad.clone())
    x.grad = y.grad = None
    Pick()(x, y).backward()
    # eager's y.grad stays None (y was not picked); the program's is zeros (a where's branch)
    want = tuple(torch.zeros_like(t) if t.grad is None else t.grad for t in (x, y))
    assert_bit_exact(got, want)
