"""Imported once by the forkserver of :mod:`unbroken.check.pool` before it forks any worker.

It imports what every export needs — torch, unbroken's pipeline, and the torch modules that a
first export loads lazily (``torch._dynamo`` and what it pulls in: about 350 modules, 1.4 s on
the CI machine) — and runs no tensor op, so that no thread pool exists when the server forks.
A worker then starts warm in about 0.1 s instead of importing torch again.
"""
import torch  # noqa: F401
import torch._dynamo  # noqa: F401

import unbroken.pipeline  # noqa: F401
from unbroken.check import jobs  # noqa: F401
