"""``@torch.no_grad()`` / ``@torch.enable_grad()`` / ``@torch.inference_mode()`` on a helper
defined inside forward(): each call of the helper is a region of that mode, as torch's
decorator makes it; values, ``requires_grad`` and gradients as eager's, side by side with
torch.export."""
from __future__ import annotations

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact


def _model(decorator):
    class Helper(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            @decorator()
            def helper(t):
                return self.lin(t) * 2

            return helper(x) + self.lin(x), helper(x).requires_grad

    return Helper()


@pytest.mark.parametrize("decorator", [torch.no_grad, torch.enable_grad, torch.inference_mode])
def test_grad_mode_decorator_inside_forward(decorator):
    torch.manual_seed(0)
    model = _model(decorator)
    x = torch.randn(2, 3)
    want = model(x)
    ours = unbroken.export(model, (x,))
    got = ours.module()(x)
    assert_bit_exact(got, want)
    if decorator is not torch.inference_mode:  # torch.export refuses inference tensors mixed in
        assert_bit_exact(torch.export.export(model, (x,)).module()(x), want)
    got[0].sum().backward()
    grads = [p.grad.clone() for p in model.parameters()]
    model.zero_grad()
    want[0].sum().backward()
    assert_bit_exact(grads, [p.grad for p in model.parameters()])


def test_a_decorated_generator_is_still_refused():
    class Gen(torch.nn.Module):
        def forward(self, x):
            @torch.no_grad()
            def rows(t):
                yield from t

            return sum(rows(x))

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Gen(), (torch.randn(2, 3),))
    assert info.value.code == "UB110"
