"""``.tolist()`` of a small tensor of static shape reads each element with ``.item()`` (one
unbacked symbol each), as torch.export does; side by side with torch.export."""
from __future__ import annotations

import torch

import unbroken
from tests.exactness import assert_bit_exact


class Sizes(torch.nn.Module):
    def forward(self, x, y):
        a, b = x.tolist()
        torch._check(a >= 0)
        torch._check(b >= 0)
        return y * a + b, torch.zeros(a + b).sum()


class Nested(torch.nn.Module):
    def forward(self, x, y):
        rows = x.tolist()
        return y * rows[0][1] + rows[1][0], len(rows), len(rows[0])


def test_tolist_values_are_symbols_side_by_side():
    for model, args, other in (
            (Sizes(), (torch.tensor([1, 2]), torch.arange(3.0)),
             (torch.tensor([4, 0]), torch.arange(3.0))),
            (Nested(), (torch.tensor([[1.0, 2.0], [3.0, 4.0]]), torch.arange(3.0)),
             (torch.tensor([[5.0, -1.0], [0.5, 4.0]]), torch.arange(3.0)))):
        for program in (unbroken.export(model, args), torch.export.export(model, args)):
            assert_bit_exact(program.module()(*args), model(*args))
            assert_bit_exact(program.module()(*other), model(*other))


def test_tolist_of_a_large_tensor_is_still_refused():
    class Large(torch.nn.Module):
        def forward(self, x):
            return torch.tensor(x.tolist()).sum()

    try:
        unbroken.export(Large(), (torch.arange(1000),))
    except unbroken.GraphBreakError as error:
        assert error.code == "UB105"
    else:
        raise AssertionError("a 1000-element tolist() must be refused (one symbol per element)")
