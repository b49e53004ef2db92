"""Autograd state inside forward: no_grad, enable_grad, autocast, requires_grad, backward."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.behaviours.harness import Behaviour, params, program, side_by_side


def _lin(self):
    self.lin = nn.Linear(3, 3)


def _no_grad_part(self, x):
    with torch.no_grad():
        frozen = self.lin(x)
    return frozen, self.lin(x)


def _enable_grad_in_no_grad(self, x, y):
    with torch.enable_grad():
        c = torch.tensor(4.0)
        z = c + x + y
    return z * z


def _autocast_bf16(self, x):
    with torch.autocast("cpu", dtype=torch.bfloat16):
        y = self.lin(x)
    return y, y.float() + 1


def _set_grad_call(self, x):
    torch.set_grad_enabled(False)
    y = self.lin(x)
    torch.set_grad_enabled(True)
    return y, self.lin(x)


def _nested_regions(self, x):
    with torch.no_grad():
        a = self.lin(x)
        with torch.enable_grad():
            b = self.lin(a)
    return a, b


class _Square(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        ctx.save_for_backward(x)
        return x * x

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return 2 * x * grad


def _backward_matches(make, inputs):
    def check(ep):
        torch.manual_seed(0)
        model = make()
        torch.manual_seed(0)
        (x,) = inputs()
        x_eager = x.clone().requires_grad_()
        x_export = x.clone().requires_grad_()
        module = ep.module()
        model(x_eager).sum().backward()
        module(x_export).sum().backward()
        torch.testing.assert_close(x_export.grad, x_eager.grad)
        eager = dict(model.named_parameters())
        for name, p in module.named_parameters():
            torch.testing.assert_close(p.grad, eager[name].grad, msg=name)
    return check


def _no_grad_in_branch(self, x):
    def frozen(x):
        with torch.no_grad():
            return self.lin(x) + 1

    return torch.cond(x.sum() > 0, frozen, lambda x: self.lin(x) - 1, (x,))


_train = program(lambda self, x: torch.tanh(self.lin(x)) * x, _lin)
_custom = program(lambda self, x: _Square.apply(self.lin(x)), _lin)


BEHAVIOURS = [
    Behaviour("no_grad_region", program(_no_grad_part, _lin), lambda: (torch.randn(2, 3),)),
    Behaviour("enable_grad_region", program(_enable_grad_in_no_grad),
              lambda: (torch.randn(4), torch.randn(4))),
    Behaviour("autocast_bfloat16_region", program(_autocast_bf16, _lin),
              lambda: (torch.randn(2, 3),),
              torch_fails="module() raises a dtype mismatch (float vs bfloat16)"),
    Behaviour("set_grad_enabled_calls", program(_set_grad_call, _lin),
              lambda: (torch.randn(2, 3),)),
    Behaviour("nested_grad_regions", program(_nested_regions, _lin),
              lambda: (torch.randn(2, 3),)),
    Behaviour("no_grad_region_in_cond_branch", program(_no_grad_in_branch, _lin),
              lambda: (torch.ones(2, 3),), more=(lambda: (-torch.ones(2, 3),),)),
    Behaviour("output_requires_grad", program(lambda self, x: self.lin(x).relu(), _lin),
              lambda: (torch.randn(2, 3),)),
    Behaviour("backward_through_module", _train, lambda: (torch.randn(2, 3),),
              check=_backward_matches(_train, lambda: (torch.randn(2, 3),))),
    Behaviour("autograd_function_backward", _custom, lambda: (torch.randn(2, 3),),
              check=_backward_matches(_custom, lambda: (torch.randn(2, 3),)),
              torch_fails="the output of the autograd.Function does not require grad"),
    Behaviour("detach_stops_gradient", program(lambda self, x: self.lin(x).detach() + x, _lin),
              lambda: (torch.randn(2, 3),)),
    Behaviour("requires_grad_input", program(lambda self, x: (x * 2).sum()),
              lambda: (torch.randn(3, requires_grad=True),)),
    Behaviour("exported_under_no_grad_caller", program(lambda self, x: self.lin(x), _lin),
              lambda: (torch.randn(2, 3),), grad=False),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
