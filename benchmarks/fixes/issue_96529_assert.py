"""A Python assert on tensor values inside forward.

Source: https://github.com/pytorch/pytorch/issues/96529 ("DataDependentOutputException:
aten._local_scalar_dense.default when using assert"; the reporter notes torch._assert works).
"""
import torch

import unbroken


class AssertPositive(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(4, 4)

    def forward(self, x):
        assert (x.abs() < 1e4).all(), "input out of range"
        return self.linear(x).relu()


unbroken.case(AssertPositive(), (torch.randn(2, 4),))
