import torch
import unbroken

from zoo.nets import Classifier


def make_cases():
    return [unbroken.case(Classifier(), (torch.randn(b, 4),)) for b in (2, 3)]
