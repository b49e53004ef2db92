"""The program cases of the corpus: every ExportDB example shipped inside torch, and the seed
tutorial's examples (the torch.export tutorial this project started from).

ExportDB cases use the example's own inputs and ``dynamic_shapes`` in both modes (they have no
resized call). Seed cases are exported static by default; under ``--dynamic`` with
``Dim.AUTO`` on every dim the tutorial makes dynamic, then run on resized inputs.
"""
from __future__ import annotations

import copy

import torch
from corpus_cases import Case
from torch._higher_order_ops.map import map as torch_map
from torch.export import Dim

AUTO = Dim.AUTO


def exportdb_cases() -> list[Case]:
    """One case per ``torch._export.db.examples`` entry, enumerated (not listed by hand)."""
    # Imported here, not at the top: importing the package runs every example module (seconds
    # per process), which the worker of a Hugging Face case does not need.
    from torch._export.db.examples import all_examples

    cases = []
    for name, example in sorted(all_examples().items()):
        def fixed(example=example):
            return (example.example_args, dict(example.example_kwargs or {}),
                    example.dynamic_shapes)

        cases.append(Case(name, "exportdb", lambda e=example: copy.deepcopy(e.model),
                          fixed=fixed))
    return cases


# --- the seed tutorial's examples ----------------------------------------------------------

class MyModule(torch.nn.Module):
    """Basic usage: Linear + in-place ReLU."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x, y):
        return torch.nn.functional.relu(self.lin(x + y), inplace=True)


class DynamicModel(torch.nn.Module):
    """The tutorial's dynamic-shapes model: under Dim.AUTO, torch gives
    ``w:[s0, 5] x:[s2] y:[s3, s2] z:[s2*s3]``."""

    def __init__(self):
        super().__init__()
        self.l = torch.nn.Linear(5, 3)

    def forward(self, w, x, y, z):
        x0 = x + y
        x1 = self.l(w)
        x2 = x0.flatten()
        x3 = x2 + z
        return x1, x3


class Bad1Fixed(torch.nn.Module):
    """Data-dependent control flow rewritten with ``torch.cond``."""

    def forward(self, x):
        def true_fn(x):
            return torch.sin(x)

        def false_fn(x):
            return torch.cos(x)

        return torch.cond(x.sum() > 0, true_fn, false_fn, [x])


class MapModule(torch.nn.Module):
    """``map`` over the first dim."""

    def forward(self, xs, y, z):
        def body(x, y, z):
            return x + y + z

        return torch_map(body, xs, y, z)


class ItemIndex(torch.nn.Module):
    """A value read from a tensor, bounded with ``torch._check``, used as an index."""

    def forward(self, x, y):
        a = x.item()
        torch._check(a >= 0)
        torch._check(a < y.shape[0])
        return y[a]


class ItemRepeat(torch.nn.Module):
    """A value read from a tensor used as a repeat count (the tutorial's rewrite)."""

    def forward(self, x, y):
        a = x.item()
        b = y.unsqueeze(0).repeat(a, 1)
        return b + a


def _seed(name, build, args, spec, resized) -> Case:
    return Case(f"seed_{name}", "seed", build, fixed=lambda: (args(), {}, None),
                auto=spec, resized=lambda: (resized(), {}))


def seed_cases() -> list[Case]:
    r = torch.randn
    return [
        _seed("basic", MyModule, lambda: (r(8, 100), r(8, 100)),
              lambda: ({0: AUTO}, {0: AUTO}), lambda: (r(5, 100), r(5, 100))),
        _seed("dynamic_model", DynamicModel, lambda: (r(6, 5), r(4), r(8, 4), r(32)),
              lambda: ((AUTO, AUTO), (AUTO,), (AUTO, AUTO), (AUTO,)),
              lambda: (r(7, 5), r(3), r(5, 3), r(15))),
        _seed("cond", Bad1Fixed, lambda: (r(3, 3),), lambda: ((AUTO, AUTO),),
              lambda: (r(5, 4),)),
        _seed("map", MapModule, lambda: (torch.ones(6, 4), torch.tensor(5), torch.tensor(4)),
              lambda: ({0: AUTO}, None, None),
              lambda: (torch.ones(3, 4), torch.tensor(5), torch.tensor(4))),
        _seed("item_index", ItemIndex, lambda: (torch.tensor(32), r(60)),
              lambda: (None, {0: AUTO}), lambda: (torch.tensor(5), r(40))),
        _seed("item_repeat", ItemRepeat, lambda: (torch.tensor(32), r(60)),
              lambda: (None, {0: AUTO}), lambda: (torch.tensor(5), r(40))),
    ]
