"""ir.data_dependent: values and views only tensor data decides (``.item()`` indices)."""
import pytest
import torch

import unbroken


class IndexByItem(torch.nn.Module):
    """``y[x.item()]`` on either dim, the method form, and a write through such a view."""

    def forward(self, x, y):
        i = x.item()
        picked = (y[i], y[:, i], y.select(0, i) + 1)
        y[i].mul_(2)
        return (*picked, y * 1)


def test_indexing_with_an_item_value_exports_and_matches_eager_at_every_index():
    """torch's fake select kernel keeps an unbacked index without a guard; ours asked for its
    sign and bounds (UB105). Every index in range, negative ones included, matches eager,
    the write into the input too; one out of range is eager's IndexError at run time."""
    model = IndexByItem()
    ep = unbroken.export(model, (torch.tensor(2), torch.randn(5, 5)))
    assert sum(n.target is torch.ops.aten.select.int for n in ep.graph.nodes) >= 3
    for index in range(-5, 5):
        y = torch.randn(5, 5)
        y_eager, y_program = y.clone(), y.clone()
        want = model(torch.tensor(index), y_eager)
        got = ep.module()(torch.tensor(index), y_program)
        assert all(torch.equal(g, w) for g, w in zip(got, want)), index
        assert torch.equal(y_program, y_eager), index
    for index in (5, -6):
        with pytest.raises(IndexError, match="out of range"):
            ep.module()(torch.tensor(index), torch.randn(5, 5))


class CheckedOutOfRange(torch.nn.Module):
    def forward(self, x, y):
        i = x.item()
        torch._check(i >= 7)
        return y[i]


def test_an_index_the_ranges_prove_out_of_bounds_is_eagers_index_error():
    with pytest.raises(unbroken.UnbrokenError, match="out of range"):
        unbroken.export(CheckedOutOfRange(), (torch.tensor(7), torch.randn(5, 5)))
