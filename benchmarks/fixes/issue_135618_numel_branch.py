"""An if on the number of elements of a nonzero() result (a data-dependent size).

Source: https://github.com/pytorch/pytorch/issues/135618 (test_export.py in the traceback:
`if y.numel() < 200:` on a value produced from the data).
"""
import torch

import unbroken


class NumelBranch(torch.nn.Module):
    def forward(self, x):
        y = x.nonzero()
        if y.numel() < 200:
            return x.sum() * 2
        return x.sum() - 1


unbroken.case(NumelBranch(), (torch.tensor([0.0, 1.0, 2.0, 0.0]),))
