"""Models that strict export must refuse, each with the fix in a comment.

Not part of `make demo` (which must pass); run it to see the diagnostics:

    unbroken check examples/broken/
"""
import torch

import unbroken


class DataDependentBranch(torch.nn.Module):
    def forward(self, x):
        # Fix: torch.cond(x.sum() > 0, torch.sin, torch.cos, (x,))
        if x.sum() > 0:
            return torch.sin(x)
        return torch.cos(x)


class ObjectIdentity(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        # Fix: id() of a tensor is not a tensor computation; drop it or use a constant.
        return x + id(x)


class TensorData(torch.nn.Module):
    def forward(self, x):
        # Fix: x = x.clone(); x[0, 0] = 3  (or torch.index_put)
        x.data[0, 0] = 3
        return x


class Legacy(torch.nn.Module):
    """Several breaks: `unbroken check` lists all of them in one run."""

    def __init__(self):
        super().__init__()
        self.calls = 0

    def forward(self, x):
        if x.mean() > 0:               # UB101: use torch.cond or torch.where
            x = x * 2
        self.calls = self.calls + 1    # UB107: keep counters in a buffer
        scale = len(x.tolist())        # UB105: x.shape[0] gives the same without the data
        return x * scale + id(x)       # UB103: drop id()


unbroken.case(DataDependentBranch(), (torch.randn(3, 3),))
unbroken.case(Legacy(), (torch.randn(3, 3),))
unbroken.case(ObjectIdentity(), (torch.randn(3, 3),))
unbroken.case(TensorData(), (torch.randn(3, 3),))

if __name__ == "__main__":
    for model in (DataDependentBranch(), ObjectIdentity(), TensorData()):
        try:
            unbroken.export(model, (torch.randn(3, 3),))
        except unbroken.GraphBreakError as err:
            print(err.render(), end="\n\n")
