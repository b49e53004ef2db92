import torch
import unbroken
from torch.export import Dim


class Pairs(torch.nn.Module):
    def forward(self, x):
        return x.view(-1, 4, 2).sum(1)


unbroken.case(Pairs(), (torch.randn(16, 2),), dynamic_shapes={"x": {0: Dim("n", max=100)}})
