"""A tensor's sizes, rank and dtype read in forward() (``x.shape``, ``x.size(d)``, ``x.dim()``,
``x.ndim``, ``x.dtype``): read from the meta stand-in directly when that answers what eager
reads (``variables.tensor._read_directly``), through a leaf call otherwise (a torch-function
mode on the stack, a ``vmap`` open, a dim out of range). Either way the program is eager's."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim
from torch.utils._device import DeviceContext

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.frontend import output

pytestmark = pytest.mark.matrix


class Reads(torch.nn.Module):
    """Every read of the direct path, each used in what the program computes."""

    def forward(self, x):
        batch, width = x.shape
        last = x.size(-1) + x.size(1) + x.size()[0]
        rank = x.dim() + x.ndim + x.ndimension() + len(x.shape)
        y = x.view(batch * width).new_zeros(x.size(0), width, dtype=x.dtype)
        if x.ndim == 2 and x.dtype == torch.float32:
            y = y + 1
        return (x * last + rank).reshape(x.shape[0], -1) + y, torch.full((2,), x.size(0))


class _LeafCalls:
    """The functions forward()'s leaf calls were made with (``TraceContext.call_leaf``)."""

    def __init__(self, monkeypatch):
        self.fns = []
        original = output.TraceContext.call_leaf

        def counting(context, tx, fn, args, kwargs, opaque=None):
            self.fns.append(getattr(fn, "__name__", repr(fn)))
            return original(context, tx, fn, args, kwargs, opaque)

        monkeypatch.setattr(output.TraceContext, "call_leaf", counting)


@pytest.mark.parametrize("spec", [None, ({0: Dim("b"), 1: Dim("w")},),
                                  ({0: Dim.AUTO, 1: Dim.AUTO},)], ids=["static", "dims", "auto"])
def test_metadata_reads_are_eagers_without_a_leaf_call(monkeypatch, spec):
    calls = _LeafCalls(monkeypatch)
    model, x = Reads(), torch.randn(3, 5)
    program = unbroken.export(model, (x,), dynamic_shapes=spec)
    assert not {"getattr", "size", "dim", "ndimension"} & set(calls.fns)
    for inputs in [x] + ([torch.randn(6, 2), torch.randn(2, 7)] if spec else []):
        assert_bit_exact(program.module()(inputs), model(inputs))
    if spec is not None:  # the sizes stayed symbols: nothing was specialized by the reads
        assert len(program.range_constraints) == 2


def test_a_dim_out_of_range_raises_the_index_error_eager_catches(monkeypatch):
    class Probe(torch.nn.Module):
        def forward(self, x):
            try:
                extra = x.size(2)
            except IndexError:
                extra = -1
            return x + extra

    calls = _LeafCalls(monkeypatch)
    model, x = Probe(), torch.randn(3, 4)
    program = unbroken.export(model, (x,))
    assert "size" in calls.fns  # the leaf call raised what eager raises
    assert_bit_exact(program.module()(x), model(x))


def test_under_a_torch_function_mode_the_read_is_a_leaf_call(monkeypatch):
    class UnderMode(torch.nn.Module):
        def forward(self, x):
            with DeviceContext("cpu"):  # a torch-function mode of torch's, entered natively
                return torch.zeros(x.shape[0], x.size(1)) + x.dim()

    calls = _LeafCalls(monkeypatch)
    model, x = UnderMode(), torch.randn(3, 4)
    program = unbroken.export(model, (x,), dynamic_shapes=({0: Dim("b")},))
    assert {"getattr", "size", "dim"} <= set(calls.fns)
    for inputs in (x, torch.randn(5, 4)):
        assert_bit_exact(program.module()(inputs), model(inputs))


def test_inside_vmap_the_per_example_sizes_are_read():
    class Batched(torch.nn.Module):
        def forward(self, x):
            rows = torch.vmap(lambda row: row * row.shape[0] + row.dim() + row.size(-1))(x)
            columns = torch.vmap(lambda col: col * col.size(0) - col.ndim, in_dims=1)(x)
            nested = torch.vmap(torch.vmap(lambda v: v + v.dim() + len(v.shape)))(x)
            return rows, columns, nested

    model, x = Batched(), torch.randn(3, 4)
    program = unbroken.export(model, (x,), dynamic_shapes=({0: Dim("b"), 1: Dim("w")},))
    for inputs in (x, torch.randn(2, 6)):
        assert_bit_exact(program.module()(inputs), model(inputs))
