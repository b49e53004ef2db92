"""ExportDB's constrain_as_size example without its torch._check lines: a size from .item().

Source: torch/_export/db/examples/constrain_as_size_example.py (torch 2.13), with the checks
removed: `a = x.item(); return torch.zeros((a, 5))`.
"""
import torch

import unbroken


class ConstrainAsSizeExample(torch.nn.Module):
    def forward(self, x):
        a = x.item()
        return torch.zeros((a, 5))


unbroken.case(ConstrainAsSizeExample(), (torch.tensor(4),))
