"""A data-dependent conditional expression (ternary) in forward.

Source: the pattern of https://github.com/pytorch/pytorch/issues/93579 ("torchdynamo.export
doesn't work with data-dependent control flow"), written as a conditional expression.
"""
import torch

import unbroken


class Ternary(torch.nn.Module):
    def forward(self, x, y):
        out = x @ y if x.max() > y.max() else x @ y.t().t() * 0.5
        return out


unbroken.case(Ternary(), (torch.randn(3, 3), torch.randn(3, 3)))
