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
