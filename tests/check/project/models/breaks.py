import torch
import unbroken


class TwoBreaks(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            x = x + 1
        return x + id(x)


unbroken.case(TwoBreaks(), (torch.ones(3),))
