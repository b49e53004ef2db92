"""Tensors forward() makes require grad (``torch.zeros(..., requires_grad=True)`` and the other
factories, ``.requires_grad_()`` on a tensor forward() made): eager makes them leaves of autograd;
a program cannot (its values require grad through its inputs and parameters only). What requires
grad in eager only through such a tensor must not reach an output or the state: refused
(UB116, at the line that made it), where torch.export returns a program whose output does not
require grad while eager's does. What also requires grad through the parameters is the same in
the program: exported, values, ``requires_grad`` and gradients equal to eager
(``frontend.output.TraceContext.note_results``, ``check_grad_reproducible``)."""
from __future__ import annotations

import pytest
import torch
from torch import nn

import unbroken
from tests.exactness import assert_bit_exact


def _zeros_like(x):
    return torch.zeros_like(x, requires_grad=True)


def _tensor(x):
    return torch.tensor([1.0, 2.0, 3.0, 4.0], requires_grad=True)


def _new_ones(x):
    return x.new_ones(x.shape[-1], requires_grad=True)


def _requires_grad_(x):
    return torch.zeros_like(x).requires_grad_()


def _full_no_grad(x):
    with torch.no_grad():
        return torch.full(x.shape, 0.5, requires_grad=True)


MAKERS = [_zeros_like, _tensor, _new_ones, _requires_grad_, _full_no_grad]


class Returns(nn.Module):
    def __init__(self, make):
        super().__init__()
        self.make = make

    def forward(self, x):
        return x * 2 + self.make(x)


class ThroughLinear(nn.Module):
    """mra's pattern: ``zeros_like(q).requires_grad_()`` goes on through the model's layers."""

    def __init__(self, make):
        super().__init__()
        self.make = make
        self.linear = nn.Linear(4, 3)

    def forward(self, x):
        return self.linear(self.make(x) + x).relu()


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_a_value_requiring_grad_only_through_it_is_refused_at_the_line_that_made_it(make):
    x = torch.randn(2, 4)
    assert Returns(make)(x).requires_grad  # eager
    with pytest.raises(unbroken.GraphBreakError) as caught:
        unbroken.export(Returns(make), (x,))
    assert caught.value.code == "UB116"
    assert "returned by forward()" in caught.value.reason
    line = make.__code__.co_firstlineno + (2 if make is _full_no_grad else 1)
    assert caught.value.location.lineno == line, caught.value.location


def test_torch_export_s_program_differs_from_eager_there():
    """What the refusal is for: torch's program drops ``requires_grad`` (2.13)."""
    x = torch.randn(2, 4)
    program = torch.export.export(Returns(_zeros_like), (x,))
    assert Returns(_zeros_like)(x).requires_grad and not program.module()(x).requires_grad


@pytest.mark.parametrize("make", MAKERS, ids=lambda m: m.__name__)
def test_through_the_parameters_the_program_is_eager_s(make):
    torch.manual_seed(0)
    model, x = ThroughLinear(make), torch.randn(2, 4)
    program = unbroken.export(model, (x,)).module()
    outputs = [module(x) for module in (model, program)]
    assert_bit_exact(outputs[1], outputs[0])
    assert outputs[1].requires_grad == outputs[0].requires_grad
    grads = [torch.autograd.grad(out.sum(), [dict(module.named_parameters())["linear.weight"]])[0]
             for module, out in zip((model, program), outputs)]
    assert_bit_exact(grads[1], grads[0])


def test_made_and_used_under_no_grad_requires_nothing():
    class NoGrad(nn.Module):
        def forward(self, x):
            with torch.no_grad():
                scale = torch.ones(4, requires_grad=True) * 2
            return x + scale

    x = torch.randn(2, 4)
    out = unbroken.export(NoGrad(), (x,)).module()(x)
    assert_bit_exact(out, NoGrad()(x))
    assert not out.requires_grad and not NoGrad()(x).requires_grad


def test_written_into_a_buffer_is_refused():
    class IntoBuffer(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("total", torch.zeros(4))

        def forward(self, x):
            self.total.add_(torch.ones(4, requires_grad=True))
            return x + 1

    model = IntoBuffer()
    model(torch.randn(4))
    assert model.total.requires_grad  # eager: the buffer now requires grad
    with pytest.raises(unbroken.GraphBreakError, match="written into an input or the model's"):
        unbroken.export(IntoBuffer(), (torch.randn(4),))


def test_an_in_place_op_on_such_a_leaf_fails_as_in_eager():
    class InPlace(nn.Module):
        def forward(self, x):
            z = torch.zeros_like(x).requires_grad_()
            z.add_(1)
            return x + z

    with pytest.raises(RuntimeError, match="leaf Variable that requires grad"):
        InPlace()(torch.randn(3))
    with pytest.raises(unbroken.GraphBreakError, match="leaf Variable that requires grad"):
        unbroken.export(InPlace(), (torch.randn(3),))


def test_the_caller_s_tensors_are_not_made_to_require_grad():
    class OnInput(nn.Module):
        def forward(self, x):
            return x.requires_grad_() * 2

    x = torch.randn(3)
    with pytest.raises(unbroken.GraphBreakError, match="changes whether autograd tracks it"):
        unbroken.export(OnInput(), (x,))
    assert not x.requires_grad
