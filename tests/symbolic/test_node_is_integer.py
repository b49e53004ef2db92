"""``(n / k).is_integer()`` on a dynamic size (lucidrains' ``pad_to_multiple``): a condition
``n % k == 0`` on the sizes, so ``Dim.AUTO`` keeps every multiple (before: the quotient's
value was guarded, pinning n to its example). Compared bit for bit with eager."""
from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F
from torch.export import Dim

import unbroken


def _pad_to_multiple(tensor, multiple):
    seqlen = tensor.shape[-1]
    m = seqlen / multiple
    if m.is_integer():
        return tensor
    return F.pad(tensor, (0, math.ceil(m) * multiple - seqlen), value=0.5)


class _Padded(torch.nn.Module):
    def forward(self, x):
        return _pad_to_multiple(x, 4) * 2


@pytest.mark.parametrize(("example", "admitted", "refused"),
                         [(12, (8, 16, 40), (9, 13)), (9, (5, 13, 10), (8, 16))])
def test_is_integer_of_a_size_quotient_is_a_divisibility_condition(example, admitted, refused):
    model = _Padded()
    ep = unbroken.export(model, (torch.randn(2, example),),
                         dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO}})
    for n in admitted:
        x = torch.randn(3, n)
        assert torch.equal(ep.module()(x), model(x))
    for n in refused:  # the other side of the condition: refused, never a wrong answer
        with pytest.raises(unbroken.InputMismatchError, match="% 4"):
            ep.module()(torch.randn(3, n))
