"""The torch.export tutorial's third graph break: id() of a tensor.

Source: https://pytorch.org/tutorials/intermediate/torch_export_tutorial.html, "Graph
Breaks", class Bad3: `x = x + 1; return x + id(x)`. No mechanical rewrite exists.
"""
import torch

import unbroken


class Bad3(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        return x + id(x)


unbroken.case(Bad3(), (torch.randn(3, 3),))
