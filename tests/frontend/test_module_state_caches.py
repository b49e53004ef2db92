"""Lists, dicts and sets held by the model's modules (an eval-mode attention-bias cache filled
by item assignment, a list appended to) live in the trace's overlay like attributes: forward()
reads back what it wrote, the program computes what eager's first call computes, and the
model is left unchanged, as torch.export leaves it."""
from __future__ import annotations

import warnings

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.frontend.overlay import StateWriteWarning


class BiasCache(torch.nn.Module):
    """A causal-bias cache keyed by length, plus a list and a set of what was seen."""

    def __init__(self):
        super().__init__()
        self.cache = {}
        self.seen = []
        self.lengths = set()
        self.nested = {"masks": []}

    def forward(self, x):
        n = x.shape[-1]
        if n not in self.cache:
            self.cache[n] = torch.triu(torch.full((n, n), -1.0), 1)
        self.seen.append(n)
        self.lengths.add(n)
        self.nested["masks"].append(self.cache[n] * 2)
        return x @ self.cache[n] + len(self.seen) + len(self.lengths), self.nested["masks"][-1]


def _state(model):
    return (dict(model.cache), list(model.seen), set(model.lengths), dict(model.nested),
            list(model.nested["masks"]))


def test_module_caches_live_in_the_overlay_and_leave_no_trace():
    x = torch.randn(2, 4)
    model = BiasCache().eval()
    before = _state(model)
    with pytest.warns(StateWriteWarning):  # eager's next call would see the filled cache
        ours = unbroken.export(model, (x,))
    assert _state(model) == before == ({}, [], set(), {"masks": []}, [])
    peer = torch.export.export(BiasCache().eval(), (x,))  # (torch's leaves the set changed)
    for program in (ours, peer):
        assert_bit_exact(program.module()(x), BiasCache()(x))  # eager's first call


def test_a_container_only_read_does_not_warn():
    class Reads(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.scales = {"a": 2.0, "b": 3.0}
            self.order = ["b", "a"]

        def forward(self, x):
            return x * self.scales[self.order[0]] + len(self.scales)

    x = torch.randn(3)
    with warnings.catch_warnings():
        warnings.simplefilter("error", StateWriteWarning)
        program = unbroken.export(Reads(), (x,))
    assert_bit_exact(program.module()(x), Reads()(x))


def test_a_global_container_is_still_not_the_traces_to_change():
    registry = {}

    class Registers(torch.nn.Module):
        def forward(self, x):
            registry["seen"] = True
            return x + 1

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Registers(), (torch.randn(3),))
    assert info.value.code == "UB107"
    assert registry == {}
