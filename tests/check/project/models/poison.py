import torch
import unbroken
from torch.overrides import TorchFunctionMode


def double(x):
    return x * 2


unbroken.case(double, (torch.randn(2),), name="poisoner")


class Broken(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        raise RuntimeError("torch is broken in this process")


Broken().__enter__()  # never exited: every later torch call in this process fails
