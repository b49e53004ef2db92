"""Expanding one nonzero() result to the shape of another: equal sizes are not known.

Source: https://github.com/pytorch/pytorch/issues/143495 (xadupre): `i = torch.nonzero(x); j =
torch.nonzero(y); je = j.expand(i.shape); return i + je` (bypassed there with
torch._check(i.shape[0] == j.shape[0])).
"""
import torch

import unbroken


class NonzeroExpand(torch.nn.Module):
    def forward(self, x, y):
        i = torch.nonzero(x)
        j = torch.nonzero(y)
        je = j.expand(i.shape)
        return i + je


unbroken.case(NonzeroExpand(), (torch.tensor([[0, 5], [6, 7], [8, 0]], dtype=torch.float32),
                                torch.tensor([[5, 0], [6, 7], [0, 8]], dtype=torch.float32)))
