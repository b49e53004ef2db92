"""ExportDB's cond_closed_over_variable, written as the Python if it replaces.

Source: torch/_export/db/examples/cond_closed_over_variable.py (torch 2.13): `torch.cond(pred,
true_fn, false_fn, [x + 1])` with `true_fn = lambda x: x + y.cos()`, `false_fn = lambda x: x +
y.sin()` closing over `y`; here the if/else the example documents as its unexportable form.
"""
import torch

import unbroken


class CondClosedOverVariable(torch.nn.Module):
    def forward(self, pred, x):
        x = x + 1
        if pred:
            return x + x.cos()
        return x + x.sin()


unbroken.case(CondClosedOverVariable(), (torch.tensor(True), torch.randn(3, 2)))
