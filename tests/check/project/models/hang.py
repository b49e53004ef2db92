import torch
import unbroken


def spin(x):
    while True:
        x = x + 1
    return x


unbroken.case(spin, (torch.randn(2),))
