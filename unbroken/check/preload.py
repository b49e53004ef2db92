"""Imported once by the forkserver of :mod:`unbroken.check.pool` before it forks any worker.

It imports what every export needs — torch, unbroken's pipeline, and the torch modules that a
first export loads lazily (``torch._dynamo`` and what it pulls in: about 350 modules, 1.4 s on
the CI machine) — and then exports a small model on meta tensors once, so that what a first
export fills lazily (op schemas, decomposition tables, solver set-up, caches) is filled before
the fork: a worker's export then costs what a second export costs in one process (for a small
model about 0.03 s instead of 0.2 s; ``benchmarks/check_scaling.py --probe`` shows the sums).
Meta tensors run no kernel, so no thread pool exists when the server forks (a fork of a process
whose OpenMP pool has started is unusable), and a worker starts warm instead of importing torch
again.
"""
import torch

import unbroken.exporter.pipeline
from unbroken.check import jobs  # noqa: F401
from unbroken.symbolic.diagnostics import UnbrokenError
from unbroken.symbolic.torch_compat import preload_dynamo

preload_dynamo()  # loaded by a first export anyway; here even if the warm-up fails


class _WarmUp(torch.nn.Module):
    """Linear, an activation, a reduction, a view: the ops most models start with."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(8, 8, device="meta")

    def forward(self, x):
        y = torch.relu(self.linear(x)).softmax(-1)
        return y.reshape(-1).sum() + x.mean()


def _warm_up() -> None:
    try:
        unbroken.exporter.pipeline.export(_WarmUp(), (torch.empty(2, 8, device="meta"),))
    except UnbrokenError:  # a warm-up only: the workers still work, they start colder
        pass


_warm_up()
