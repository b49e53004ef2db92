"""The torch.export tutorial's data-dependent index: a value read with .item() indexes a tensor.

Source: https://pytorch.org/tutorials/intermediate/torch_export_tutorial.html, "Data-dependent
errors" (the `a = x.item()` used to index, fixed there with torch._check lines).
"""
import torch

import unbroken


class ItemIndex(torch.nn.Module):
    def forward(self, x, y):
        a = x.item()
        return y[a]


unbroken.case(ItemIndex(), (torch.tensor(2), torch.randn(5, 3)))
