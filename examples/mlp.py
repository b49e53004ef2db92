"""A multi-layer perceptron: the smallest model worth exporting.

    unbroken check examples/mlp.py     # export the case declared below
    python examples/mlp.py             # export it and print the program
"""
import torch
from torch import nn

import unbroken


class MLP(nn.Module):
    def __init__(self, d_in=16, hidden=64, d_out=10):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(d_in, hidden), nn.ReLU(),
                                 nn.Linear(hidden, hidden), nn.ReLU(),
                                 nn.Linear(hidden, d_out))

    def forward(self, x):
        return torch.log_softmax(self.net(x), dim=-1)


torch.manual_seed(0)
model = MLP().eval()
example = (torch.randn(8, 16),)

unbroken.case(model, example)

if __name__ == "__main__":
    program = unbroken.export(model, example)
    print(program)
    torch.testing.assert_close(program.module()(*example), model(*example))
    print("module() matches eager")
