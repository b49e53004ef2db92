"""max() of two data-dependent sizes.

Source: https://github.com/pytorch/pytorch/issues/135632 ("Real tensor prop failing for max(u0,
u1) call on export"): `return max(x.shape[0], y.shape[0])` on nonzero() results.
"""
import torch

import unbroken


class MaxOfSizes(torch.nn.Module):
    def forward(self, a, b):
        x, y = a.nonzero(), b.nonzero()
        return torch.zeros(max(x.shape[0], y.shape[0]))


unbroken.case(MaxOfSizes(), (torch.tensor([1.0, 0.0, 2.0]), torch.tensor([1.0, 1.0, 0.0, 3.0])))
