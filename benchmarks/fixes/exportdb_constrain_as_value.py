"""ExportDB's constrain_as_value example without its torch._check lines: an if on .item().

Source: torch/_export/db/examples/constrain_as_value_example.py (torch 2.13), with the two
`torch._check(a >= 0)` / `torch._check(a <= 5)` lines removed: `a = x.item(); if a < 6:
return y.sin(); return y.cos()`.
"""
import torch

import unbroken


class ConstrainAsValueExample(torch.nn.Module):
    def forward(self, x, y):
        a = x.item()
        if a < 6:
            return y.sin()
        return y.cos()


unbroken.case(ConstrainAsValueExample(), (torch.tensor(4), torch.randn(5, 5)))
