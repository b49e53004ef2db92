"""tolist() of a data-dependent-size result, returned to the caller.

Source: https://github.com/pytorch/pytorch/issues/126685 ("Dynamo fails to export
data-dependent Tensor.tolist"): `lambda x: torch.unique(x).tolist()`.
"""
import torch

import unbroken


class UniqueToList(torch.nn.Module):
    def forward(self, x):
        return torch.unique(x).tolist()


unbroken.case(UniqueToList(), (torch.tensor([3, 1, 3, 2]),))
