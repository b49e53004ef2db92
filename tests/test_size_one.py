"""unbroken.size_one: a dim declared min=1 admits 1 at run time exactly when a trace at size 1
gives the same program; otherwise the program keeps [2, ...] and refuses 1 with a clear error.

Oracle: eager at size 1 (and at other sizes)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.export import Dim
from torch.testing import assert_close

import unbroken
from unbroken import InputMismatchError


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 4)

    def forward(self, x, y):
        return torch.relu(self.l(x + y)).softmax(-1)


def test_batch_one_is_admitted_when_the_program_is_the_same():
    batch = Dim("batch", min=1, max=64)
    model = Mlp()
    ep = unbroken.export(model, (torch.randn(4, 8), torch.randn(4, 8)),
                         dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 1
    for n in (1, 2, 7):
        x, y = torch.randn(n, 8), torch.randn(n, 8)
        assert_close(ep.module()(x, y), model(x, y))


class BranchOnOne(nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:  # a different program for batch 1
            return x * 2
        return x + 1


def test_batch_one_is_refused_when_size_one_takes_another_path():
    ep = unbroken.export(BranchOnOne(), (torch.randn(4, 3),),
                         dynamic_shapes={"x": {0: Dim("batch", min=1)}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 2
    with pytest.raises(InputMismatchError, match="Sizes 0 and 1"):
        ep.module()(torch.randn(1, 3))


class Pairs(nn.Module):
    def forward(self, x, y):
        return x.view(-1, 2, 3).sum(1) + y


def test_derived_dim_with_a_root_of_min_1():
    d = Dim("d", min=1, max=16)
    ep = unbroken.export(Pairs(), (torch.randn(8, 3), torch.randn(4, 3)),
                         dynamic_shapes={"x": {0: 2 * d}, "y": {0: d}})
    for n in (1, 3):  # x of 2 rows (d = 1) and of 6
        x, y = torch.randn(2 * n, 3), torch.randn(n, 3)
        assert_close(ep.module()(x, y), Pairs()(x, y))


def test_auto_with_min_1():
    model = Mlp()
    auto = {0: Dim.AUTO(min=1)}
    ep = unbroken.export(model, (torch.randn(4, 8), torch.randn(4, 8)),
                         dynamic_shapes={"x": auto, "y": auto})
    x, y = torch.randn(1, 8), torch.randn(1, 8)
    assert_close(ep.module()(x, y), model(x, y))
