"""ir.saved_tensors: a tensor autograd saved for backward, then written in place (under
no_grad or not), makes eager's backward raise "modified by an inplace operation"; the program's
module() raises the same error when backward reaches that op, and only then (differential
against eager)."""
from __future__ import annotations

import pytest
import torch

import unbroken


class WritesSaved(torch.nn.Module):
    def __init__(self, no_grad: bool, saves_result: bool = False):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))
        self.no_grad, self.saves_result = no_grad, saves_result

    def forward(self, x):
        y = x * self.w if self.saves_result else x * 2
        z = y.exp() if self.saves_result else (y * self.w).sin()  # exp saves its result
        written = z if self.saves_result else y
        if self.no_grad:
            with torch.no_grad():
                written.add_(1)
        else:
            written.add_(1)
        return z * self.w


class WritesUnsaved(torch.nn.Module):
    """``y + w`` saves nothing: the write is harmless, backward runs as in eager."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        y = x * 2
        z = y + self.w
        with torch.no_grad():
            y.add_(1)
        return z * 3


def _backward(fn, x):
    try:
        fn(x).sum().backward()
    except RuntimeError as error:
        return "modified by an inplace operation" in str(error)
    return False


@pytest.mark.parametrize("no_grad", [True, False])
@pytest.mark.parametrize("saves_result", [False, True])
def test_backward_through_a_saved_then_written_tensor_raises_as_eager(no_grad, saves_result):
    model = WritesSaved(no_grad, saves_result)
    x = torch.randn(3)
    assert _backward(model, x)  # eager raises
    ep = unbroken.export(model, (x,))
    assert _backward(ep.module(), x)
    with torch.no_grad():  # forward alone runs, as in eager
        torch.testing.assert_close(ep.module()(x), model(x))


def test_a_write_into_an_unsaved_tensor_keeps_backward():
    model, x = WritesUnsaved(), torch.randn(3)
    ep = unbroken.export(model, (x,))
    module = ep.module()
    assert not _backward(model, x) and not _backward(module, x)
    model.w.grad = None
    module(x).sum().backward()
    model(x).sum().backward()
    torch.testing.assert_close(module.w.grad, model.w.grad)


def _through_view(y):
    """A write into a view of the saved tensor (one version counter for the family)."""
    z = y.sin()
    y[0].mul_(2)
    return z


def _through_detach(y):
    z = y.sin()
    y.detach().mul_(2)
    return z


def _saved_view_base_written(y):
    z = y[0].sin()
    y.mul_(2)
    return z


def _saved_view_sibling_written(y):
    z = y[0].sin()
    y[1].mul_(2)
    return z


def _writes_what_it_saves(y):
    y.mul_(y)  # saves `other`, which is the tensor it writes
    return y


def _addcmul_saves_its_target(y):
    y.addcmul_(y, y)
    return y


def _writes_what_it_does_not_save(y):
    y.add_(y)  # add saves nothing: backward runs
    return y * 3


def _write_after_a_non_saving_view_read(y):
    z = y[0] + 1
    y.mul_(2)
    return z * y[1]


def _writes_what_its_detach_alias_saves(y):
    y.mul_(y.detach())  # saves `other`: one version counter with y
    return y


def _writes_what_a_whole_view_saves(y):
    y.mul_(y.view(2, 3))
    return y


def _addcmul_with_a_constant_factor(y):
    y.addcmul_(y, y.detach() + 1)  # saves tensor1 (y) only for tensor2's gradient: none
    return y


def _product_with_a_constant(y):
    z = y * torch.arange(3.0)  # saves y only when the other factor requires grad
    y.add_(1)
    return z + y


FAMILY = [_through_view, _through_detach, _saved_view_base_written,
          _saved_view_sibling_written, _writes_what_it_saves, _addcmul_saves_its_target,
          _writes_what_it_does_not_save, _write_after_a_non_saving_view_read,
          _addcmul_with_a_constant_factor, _product_with_a_constant,
          _writes_what_its_detach_alias_saves, _writes_what_a_whole_view_saves]


class _Intermediate(torch.nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x * 2)


@pytest.mark.parametrize("body", FAMILY, ids=lambda f: f.__name__.strip("_"))
def test_writes_into_any_alias_of_a_saved_tensor_raise_as_eager(body):
    """Eager's check is per version counter, which a base and its views (a ``detach`` alias
    too) share: the program's backward raises exactly when eager's does, and otherwise gives
    eager's gradient."""
    model = _Intermediate(body)
    example = torch.randn(2, 3)
    ep = unbroken.export(model, (example,))
    results = []
    for module in (model, ep.module()):
        x = example.clone().requires_grad_()
        out = module(x)
        try:
            (grad,) = torch.autograd.grad(out.sum(), [x])
        except RuntimeError as error:
            assert "modified by an inplace operation" in str(error)
            grad = None
        results.append((out.detach(), grad))
    (e_out, e_grad), (p_out, p_grad) = results
    torch.testing.assert_close(p_out, e_out, rtol=0, atol=0)
    assert (p_grad is None) == (e_grad is None)
    if e_grad is not None:
        torch.testing.assert_close(p_grad, e_grad)


class _ScaledByParameter(torch.nn.Module):
    """``y * w``: saves ``y`` exactly when ``w`` requires grad (frozen or not, per call)."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        y = x * 2
        z = y * self.w
        y.add_(1)
        return z + y


@pytest.mark.parametrize("frozen_at_export", [False, True])
@pytest.mark.parametrize("frozen_at_call", [False, True])
def test_the_refusal_follows_the_arguments_requires_grad_at_the_call(frozen_at_export,
                                                                     frozen_at_call):
    model = _ScaledByParameter()
    model.w.requires_grad_(not frozen_at_export)
    ep = unbroken.export(model, (torch.randn(3),))
    module = ep.module()
    module.w.requires_grad_(not frozen_at_call)
    model.w.requires_grad_(not frozen_at_call)
    x = torch.randn(3, requires_grad=True)
    assert _backward(module, x) == _backward(model, x) == (not frozen_at_call)
