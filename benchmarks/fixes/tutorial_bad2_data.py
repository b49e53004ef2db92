"""The torch.export tutorial's second graph break: a write through Tensor.data.

Source: https://pytorch.org/tutorials/intermediate/torch_export_tutorial.html, "Graph
Breaks", class Bad2: `x.data[0, 0] = 3; return x`.
"""
import torch

import unbroken


class Bad2(torch.nn.Module):
    def forward(self, x):
        x.data[0, 0] = 3
        return x


unbroken.case(Bad2(), (torch.randn(3, 3),))
