"""NumPy arithmetic on a tensor's array inside forward.

Source: the patterns of https://github.com/pytorch/pytorch/issues/111370 ("Tracker for
torch._numpy errors under dynamo"): a tensor turned into an array with .numpy(), NumPy
functions on it, and the result turned back with torch.from_numpy.
"""
import numpy as np
import torch

import unbroken


class NumpyClip(torch.nn.Module):
    def forward(self, x):
        a = x.numpy()
        return torch.from_numpy(np.clip(a * 2.0, 0.0, 1.0))


unbroken.case(NumpyClip(), (torch.randn(4, 3),))
