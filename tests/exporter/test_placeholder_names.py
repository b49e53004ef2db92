"""Placeholder names, constants and signature order as torch.export's: each program is
exported by both, and the input specs (kind, placeholder name, target), the placeholders and
the constants' names must be the same.

Where torch's two modes differ (unused and tied parameters: strict drops them, non-strict, the
default, keeps each FQN), unbroken is torch's default; mutations are functional in unbroken's
programs, so the outputs are compared with torch's after ``run_decompositions({})``."""
from __future__ import annotations

import pytest
import torch

import unbroken


class InputNamedLikeParameter(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(3))

    def forward(self, weight):
        return weight * self.weight


class InputNamedLikePlaceholderOfParameter(torch.nn.Module):
    """A user input ``p_x`` and a parameter ``x`` (whose placeholder would be ``p_x``)."""

    def __init__(self):
        super().__init__()
        self.x = torch.nn.Parameter(torch.randn(3))
        self.p_x = torch.nn.Parameter(torch.randn(3))

    def forward(self, x, p_x):
        return x + p_x + self.p_x + self.x


class InputNamedLikeBuffer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("x", torch.ones(3))

    def forward(self, b_x, x):
        return b_x + x + self.x


class TensorConstants(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.table = torch.tensor([1.0, 2.0, 3.0])  # an attribute: a constant named `table`
        self.unused = torch.tensor([7.0])

    def forward(self, x):
        return x + self.table + torch.tensor([4.0, 5.0, 6.0]) * torch.tensor([2.0])


class ConstantsReadButUnused(torch.nn.Module):
    """torch.export lifts a constant only where an op takes it (before removing dead code)."""

    def __init__(self):
        super().__init__()
        self.unread = torch.tensor([1.0, 2.0, 3.0])
        self.dead = torch.ones(3)

    def forward(self, x):
        unread = self.unread  # noqa: F841 - read into a local, never used: not an input
        made = torch.tensor([5.0])  # noqa: F841 - made and dropped: not an input
        dead = self.dead * 2  # noqa: F841 - taken by an op (dead): an input, as in torch
        return x + 1  # (a dropped tensor's number, lifted_tensor_0, is not given again)


class Nested(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([torch.nn.Linear(3, 3)])
        self.register_buffer("Scale", torch.ones(3))
        self.register_buffer("scratch", torch.zeros(3), persistent=False)

    def forward(self, X, ys, *, d, k=2):
        return self.layers[0](X) * self.Scale + ys[1] + d["Key"] * k + self.scratch


class InputsNamedLikeOps(torch.nn.Module):
    def forward(self, mul, add):
        return mul * add + add


PROGRAMS = {
    "input named like a parameter": (InputNamedLikeParameter(), (torch.randn(3),), {}),
    "input named like a parameter's placeholder": (
        InputNamedLikePlaceholderOfParameter(), (torch.randn(3), torch.randn(3)), {}),
    "input named like a buffer's placeholder": (
        InputNamedLikeBuffer(), (torch.randn(3), torch.randn(3)), {}),
    "tensor constants, one unused": (TensorConstants(), (torch.randn(3),), {}),
    "constants read but unused": (ConstantsReadButUnused(), (torch.randn(3),), {}),
    "nested inputs, kwargs, upper case": (
        Nested(), (torch.randn(2, 3), [torch.randn(3), torch.randn(3)]),
        {"d": {"Key": torch.randn(3)}, "k": 3}),
    "inputs named like ops": (InputsNamedLikeOps(), (torch.randn(3), torch.randn(3)), {}),
}


def _names(ep) -> dict:
    return {
        "inputs": [(s.kind.name, s.arg.name, s.target) for s in ep.graph_signature.input_specs],
        "placeholders": [n.name for n in ep.graph.nodes if n.op == "placeholder"],
        "constants": sorted(ep.constants),
        "state_dict": list(ep.state_dict),
        "user_inputs": list(ep.graph_signature.user_inputs),
    }


@pytest.mark.parametrize("name", list(PROGRAMS))
def test_names_and_order_are_torchs(name):
    model, args, kwargs = PROGRAMS[name]
    theirs = torch.export.export(model, args, kwargs)
    ours = unbroken.export(model, args, kwargs)
    assert _names(ours) == _names(theirs)
    torch.testing.assert_close(ours.module()(*args, **kwargs), model(*args, **kwargs))


class WritesBufferAndInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(1))

    def forward(self, x, y):
        self.count.add_(1)
        x.mul_(2)
        return y + self.count, x


def test_mutation_outputs_are_in_torchs_order():
    model, args = WritesBufferAndInput(), (torch.randn(3), torch.randn(3))
    theirs = torch.export.export(model, tuple(a.clone() for a in args)).run_decompositions({})
    ours = unbroken.export(model, tuple(a.clone() for a in args))
    def specs(ep):
        return [(s.kind.name, s.target) for s in ep.graph_signature.output_specs]
    assert specs(ours) == specs(theirs) == [
        ("BUFFER_MUTATION", "count"), ("USER_INPUT_MUTATION", "x"), ("USER_OUTPUT", None),
        ("USER_OUTPUT", None)]
