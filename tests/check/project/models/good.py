import torch
import unbroken


class Scale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x):
        return torch.relu(self.lin(x * 2))


unbroken.case(Scale(), (torch.randn(2, 4),))
