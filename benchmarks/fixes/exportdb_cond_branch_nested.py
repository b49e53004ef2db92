"""ExportDB's cond_branch_nested_function, as the Python if it replaces: helper functions called
on each side.

Source: torch/_export/db/examples/cond_branch_nested_function.py (torch 2.13): `true_fn` calls
`inner_true_fn(y) = x + y`, `false_fn` calls `inner_false_fn(y) = x - y`, `pred = x.shape[0]
< 10` (here a data-dependent predicate, the case cond is for).
"""
import torch

import unbroken


def inner_true_fn(y):
    return y + y


def inner_false_fn(y):
    return y - y * 2


class CondBranchNestedFunction(torch.nn.Module):
    def forward(self, x):
        if x.mean() < 0.5:
            out = inner_true_fn(x)
        else:
            out = inner_false_fn(x)
        return out


unbroken.case(CondBranchNestedFunction(), (torch.randn(3),))
