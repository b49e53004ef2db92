"""Tensor indexes written as Python lists: constant index tensors, not meta tensors whose
values are lost (``x[[0, 2]]`` was refused with UB117 while ``x[torch.tensor([0, 2])]``
worked)."""
import torch
import torch.nn as nn

import unbroken


class ListIndexes(nn.Module):
    def forward(self, x):
        y = x.clone()
        y[[0, 2]] = 0
        return x[[0, 2]] + 1, x[..., [-2], :], x[:, [True, False, True]], y


def test_list_indexes_match_eager():
    x = torch.randn(3, 3, 4)
    ep = unbroken.export(ListIndexes(), (x,))
    for got, expected in zip(ep.module()(x), ListIndexes()(x)):
        assert torch.equal(got, expected)


def test_each_list_is_its_own_constant():
    """Two anonymous constants lifted under one name hint keep separate slots."""
    x = torch.randn(3, 3, 4)
    ep = unbroken.export(ListIndexes(), (x,))
    values = [tuple(t.tolist()) for t in ep.constants.values()]
    assert len(ep.constants) >= 4 and (-2,) in values and (0, 2) in values
