"""An if on `x.all()`: torchdynamo.export "doesn't work with torch.all".

Source: https://github.com/pytorch/torchdynamo/issues/1767 (tugsbayasgalan, 2022): `x_bool =
torch.isfinite(x); if x.all(): return x.cos(); return x.sin()`; jansel's answer: torch.where.
"""
import torch

import unbroken


class AllBranch(torch.nn.Module):
    def forward(self, x):
        x_bool = torch.isfinite(x)  # noqa: F841 - as in the issue
        if x.all():
            return x.cos()
        return x.sin()


unbroken.case(AllBranch(), (torch.ones(6, 4),))
