"""Writes autograd does not see (a ``no_grad`` region, a ``.detach()`` alias) followed by
writes it sees, into intermediates, inputs and views: the program's values, ``requires_grad``,
gradients, the written input afterwards and the identity of a returned input match eager
(``passes.functionalize``'s straight-through reads and mutation outputs,
``ir.runtime``'s written states returned as themselves)."""
from __future__ import annotations

import pytest
import torch

import unbroken


def _no_grad_then_add(x):
    y = x * 2
    with torch.no_grad():
        y.mul_(3)
    y.add_(1)
    return y.sum()


def _no_grad_then_mul_by_input(x):
    y = x * 2
    with torch.no_grad():
        y.mul_(3)
    y.mul_(x)
    return y


def _view_no_grad_then_base_write(x):
    y = x * 2
    with torch.no_grad():
        y[0].mul_(3)
    y.add_(x)
    return y


def _no_grad_then_view_write(x):
    y = x * 2
    with torch.no_grad():
        y.mul_(3)
    y[1].add_(y[0])
    return y


def _detach_then_write(x):
    y = x.tanh()
    y.detach().mul_(2)
    y.mul_(x)
    return y


def _two_hidden_then_visible(x):
    y = x * 2
    with torch.no_grad():
        y.mul_(3)
        y.sub_(1)
    y.div_(x.exp())
    return y


def _visible_then_hidden_input(x):
    x.mul_(2)
    with torch.no_grad():
        x[0].mul_(3)
    return x


def _hidden_input(x):
    with torch.no_grad():
        x.mul_(3)
    return x


def _detach_alias_then_no_grad_linear(x):
    h = x.detach()
    h.add_(1)
    with torch.no_grad():
        h = torch.nn.functional.linear(h, torch.ones(3, 3)) * 2
    return h + x


CASES = [_no_grad_then_add, _no_grad_then_mul_by_input, _view_no_grad_then_base_write,
         _no_grad_then_view_write, _detach_then_write, _two_hidden_then_visible,
         _visible_then_hidden_input, _hidden_input, _detach_alias_then_no_grad_linear]


class _Wrap(torch.nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


def _call(module, example, requires_grad, non_leaf, ambient):
    """Outputs, requires_grad flags, gradients w.r.t. the leaf, the input after the call, and
    whether the output is the input itself; an eager error is returned as its type."""
    leaf = example.clone().requires_grad_(requires_grad)
    x = leaf.clone() if non_leaf else leaf
    try:
        with torch.set_grad_enabled(ambient):
            out = module(x)
    except RuntimeError:
        return RuntimeError
    grad = None
    if out.requires_grad:
        try:
            grad = torch.autograd.grad(out.sum(), [leaf], allow_unused=True)[0]
        except RuntimeError:
            grad = RuntimeError
    return out.detach(), out.requires_grad, grad, x.detach().clone(), out is x


@pytest.mark.parametrize("fn", CASES, ids=lambda f: f.__name__.strip("_"))
@pytest.mark.parametrize("requires_grad, non_leaf", [(True, False), (True, True),
                                                     (False, False)])
@pytest.mark.parametrize("ambient", [True, False], ids=["grad", "no_grad"])
@pytest.mark.parametrize("export_grad", [True, False], ids=["exported_with_grad",
                                                           "exported_under_no_grad"])
def test_matches_eager(fn, requires_grad, non_leaf, ambient, export_grad):
    """An export made under no_grad runs in its caller's mode: a write through a detach alias
    is still one autograd does not see."""
    torch.manual_seed(0)
    example = torch.randn(2, 3)
    eager = _call(_Wrap(fn), example, requires_grad, non_leaf, ambient)
    with torch.set_grad_enabled(export_grad):
        ep = unbroken.export(_Wrap(fn), (example.clone().requires_grad_(requires_grad),))
    program = _call(ep.module(), example, requires_grad, non_leaf, ambient)
    if eager is RuntimeError:  # eager refuses the call (a leaf written in place with grad)
        assert program is RuntimeError
        return
    e_out, e_flag, e_grad, e_input, e_same = eager
    p_out, p_flag, p_grad, p_input, p_same = program
    assert torch.equal(p_out, e_out)
    assert p_flag == e_flag
    assert torch.equal(p_input, e_input)
    assert p_same == e_same
    if isinstance(e_grad, torch.Tensor):
        torch.testing.assert_close(p_grad, e_grad, rtol=1e-6, atol=1e-6)
    else:
        assert p_grad is e_grad


def test_a_written_input_returned_under_no_grad_is_the_input():
    """Eager returns ``x`` itself: a leaf that requires grad, even from a call under no_grad
    (the program used to return a new tensor without ``requires_grad``)."""
    ep = unbroken.export(_Wrap(_hidden_input), (torch.randn(2, 3, requires_grad=True),))
    x = torch.randn(2, 3, requires_grad=True)
    expected = x.detach() * 3
    with torch.no_grad():
        out = ep.module()(x)
    assert out is x and out.requires_grad and out.is_leaf
    assert torch.equal(out.detach(), expected)


def test_the_input_keeps_the_history_of_the_write_autograd_saw():
    """``x.mul_(2)`` then a hidden write: after the call, backward through ``x`` gives its
    source the gradient 2 (eager's MulBackward); the hidden write adds no term."""
    ep = unbroken.export(_Wrap(_visible_then_hidden_input), (torch.randn(2, 3),))
    source = torch.randn(2, 3, requires_grad=True)
    x = source * 1
    ep.module()(x)
    (grad,) = torch.autograd.grad(x.sum(), [source])
    assert torch.equal(grad, torch.full((2, 3), 2.0))
