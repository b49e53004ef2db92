"""The torch.export tutorial's first graph break: an if on the sum of the input.

Source: https://pytorch.org/tutorials/intermediate/torch_export_tutorial.html, "Graph
Breaks", class Bad1: `if x.sum() > 0: return torch.sin(x)` / `return torch.cos(x)`.
"""
import torch

import unbroken


class Bad1(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return torch.sin(x)
        return torch.cos(x)


unbroken.case(Bad1(), (torch.randn(3, 3),))
