"""Models with graph breaks that `unbroken fix` rewrites, and verifies against eager:

    unbroken fix examples/broken/fixable.py

Each fix is exported again and compared with the original model in eager, on inputs that
drive every decision of the patch both ways (`make demo` shows the first one).
"""
import torch

import unbroken


class GatedResidual(torch.nn.Module):
    """A branch on the data with several statements on each side: torch.cond."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(8, 8)

    def forward(self, x):
        h = self.proj(x)
        if h.mean() > 0:
            # strengthen the residual when the projection is positive on average
            h = torch.relu(h)
            out = x + 2 * h
        else:
            out = x - h.sigmoid()
        return out.tanh()


class ClampedLookup(torch.nn.Module):
    """An index read from a tensor: the torch._check lines that make it exportable."""

    def __init__(self):
        super().__init__()
        self.table = torch.nn.Parameter(torch.randn(10, 4))

    def forward(self, position):
        i = position.max().item()
        return self.table[i] * 2


class CheckedScale(torch.nn.Module):
    """An assert on tensor data, and a ternary: torch._check and torch.where."""

    def forward(self, x, scale):
        assert (scale > 0).all(), "scale must be positive"
        y = x * scale if x.sum() > 0 else x / scale
        return y


class CallCounter(torch.nn.Module):
    """A counter kept on self: the export would not keep it; a buffer does."""

    def __init__(self):
        super().__init__()
        self.steps = 0

    def forward(self, x):
        self.steps = self.steps + 1
        return x * self.steps


unbroken.case(GatedResidual(), (torch.randn(4, 8),))
unbroken.case(ClampedLookup(), (torch.tensor([3, 1, 7]),))
unbroken.case(CheckedScale(), (torch.randn(3, 5), torch.rand(5) + 0.5))
unbroken.case(CallCounter(), (torch.randn(2, 3),))
