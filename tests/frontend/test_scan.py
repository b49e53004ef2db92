"""``torch._higher_order_ops.scan`` inside forward() (``torch_calls.call_scan``): unrolled over
the steps known at export time, compared with eager (values, gradients, other sizes of the
other dims), and refused where torch refuses the combine_fn (aliasing, writes, a carry that
changes) or where the number of steps is dynamic."""
import inspect

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim
from torch.utils._pytree import tree_leaves

import unbroken
from unbroken.symbolic.torch_compat import scan_function as scan

pytestmark = pytest.mark.matrix


def _same(got, want):
    got, want = tree_leaves(got), tree_leaves(want)
    assert len(got) == len(want)
    for g, w in zip(got, want):
        assert g.shape == w.shape and g.dtype == w.dtype
        torch.testing.assert_close(g, w, rtol=1e-5, atol=1e-6)


class Cumulative(nn.Module):
    def forward(self, xs):
        def step(carry, x):
            carry = carry + x
            return carry, carry * 2
        return scan(step, torch.zeros(xs.shape[1:]), xs)


class Recurrent(nn.Module):
    """An RNN cell over a dict of inputs, scanned along dim 1, last step first."""

    def __init__(self):
        super().__init__()
        self.cell = nn.Linear(4, 4)

    def forward(self, a, gate):
        def step(carry, x):
            h = torch.tanh(self.cell(x["a"]) + carry["h"]) * x["gate"][..., None]
            return {"h": h}, (h.sum(-1), h.clone())
        return scan(step, {"h": torch.zeros(a.shape[0], 4)}, {"a": a, "gate": gate}, dim=1,
                    reverse=True)


def test_a_scan_matches_eager():
    xs = torch.randn(5, 3)
    _same(unbroken.export(Cumulative(), (xs,)).module()(xs), Cumulative()(xs))


def test_pytrees_dim_reverse_and_gradients_match_eager():
    torch.manual_seed(0)
    model = Recurrent()
    a, gate = torch.randn(2, 6, 4), torch.randn(2, 6)
    program = unbroken.export(model, (a, gate)).module()
    _same(program(a, gate), model(a, gate))
    got = program(a, gate)[1][1].sum()
    want = model(a, gate)[1][1].sum()
    grads_got = torch.autograd.grad(got, list(program.parameters()))
    grads_want = torch.autograd.grad(want, list(model.parameters()))
    _same(grads_got, grads_want)


def test_the_other_dims_stay_dynamic():
    model = Recurrent()
    a, gate = torch.randn(3, 6, 4), torch.randn(3, 6)
    batch = Dim("batch")
    program = unbroken.export(model, (a, gate),
                              dynamic_shapes=({0: batch}, {0: batch})).module()
    for size in (2, 5):
        a, gate = torch.randn(size, 6, 4), torch.randn(size, 6)
        _same(program(a, gate), model(a, gate))
    with pytest.raises(Exception, match="shape|size|dim"):
        program(torch.randn(2, 7, 4), torch.randn(2, 7))  # the steps are fixed


def test_a_dynamic_scan_dimension_is_refused():
    xs = torch.randn(5, 3)
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Cumulative(), (xs,), dynamic_shapes=({0: Dim("steps")},))
    assert info.value.code == "UB117" and "scan" in str(info.value)


def _refusal(step):
    class Scanned(nn.Module):
        def forward(self, xs):
            return scan(step, torch.zeros(3), xs)

    xs = torch.randn(4, 3)
    with pytest.raises(RuntimeError):  # torch refuses it in eager too (torch.compile's error)
        Scanned()(xs)
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Scanned(), (xs,))
    return info.value


@pytest.mark.parametrize("step, reason", [
    (lambda c, x: (c, x * 2), "shares memory"),            # the carry returned as is
    (lambda c, x: (c + x, x), "shares memory"),            # the slice returned as is
    (lambda c, x: (lambda h: (h, h[1:]))(c + x), "shares memory"),  # an output's view
    (lambda c, x: (c.clone(), x.mul_(2)), "in place"),
    (lambda c, x: (torch.cat([c, x]), x * 2), "structure, shapes and dtypes"),
    (lambda c, x: (c.double(), x * 2), "structure, shapes and dtypes"),
], ids=["carry-alias", "slice-alias", "output-alias", "write", "shape", "dtype"])
def test_what_torch_refuses_of_a_combine_fn_is_refused(step, reason):
    error = _refusal(step)
    assert error.code == "UB113" and reason in str(error) and error.frames


@settings(max_examples=12, deadline=None, derandomize=True, database=None)
@given(steps=st.integers(1, 5), width=st.integers(1, 3), dim=st.integers(0, 1),
       reverse=st.booleans(), outputs=st.integers(1, 2))
def test_drawn_scans_match_eager(steps, width, dim, reverse, outputs):
    class Drawn(nn.Module):
        def forward(self, xs, w):
            def step(carry, x):
                new = carry * 0.5 + x @ w
                ys = (new.sin(), new.sum(-1)) if outputs == 2 else new.cos()
                return new, ys
            return scan(step, torch.ones(2, width), xs, dim=dim, reverse=reverse)

    shape = [2, width]
    shape.insert(dim, steps)
    xs, w = torch.randn(*shape), torch.randn(width, width)
    _same(unbroken.export(Drawn(), (xs, w)).module()(xs, w), Drawn()(xs, w))


@pytest.mark.skipif("length" not in inspect.signature(scan).parameters,
                    reason="scan(length=) is torch 2.14+")
def test_length_without_xs_counts_the_steps():
    class Counted(nn.Module):
        def forward(self, x):
            def step(carry, nothing):
                assert nothing is None
                carry = carry * 2
                return carry, carry + 1
            return scan(step, x, None, length=3)

    x = torch.randn(3)
    _same(unbroken.export(Counted(), (x,)).module()(x), Counted()(x))
