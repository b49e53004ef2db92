"""Custom operators: torch.library.custom_op with fake kernels, mutating ops, composite ops."""
from __future__ import annotations

import pytest
import torch

from tests.behaviours.harness import Behaviour, params, program, side_by_side


@torch.library.custom_op("behaviours::scale_add", mutates_args=())
def scale_add(x: torch.Tensor, y: torch.Tensor, alpha: float) -> torch.Tensor:
    return x * alpha + y


@scale_add.register_fake
def _(x, y, alpha):
    return torch.empty_like(x)


@torch.library.custom_op("behaviours::bump_", mutates_args={"x"})
def bump_(x: torch.Tensor, by: int) -> None:
    x.add_(by)


@bump_.register_fake
def _(x, by):
    return None


@torch.library.custom_op("behaviours::split_two", mutates_args=())
def split_two(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    return x[:, :1].clone(), x[:, 1:].clone()


@split_two.register_fake
def _(x):
    return x.new_empty(x.shape[0], 1), x.new_empty(x.shape[0], x.shape[1] - 1)


@torch.library.custom_op("behaviours::no_fake", mutates_args=())
def no_fake(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


torch.library.define("behaviours::composite", "(Tensor x) -> Tensor")


@torch.library.impl("behaviours::composite", "CompositeImplicitAutograd")
def _composite(x):
    return x.sin() + x.cos()


@torch.library.custom_op("behaviours::nonzero_count", mutates_args=())
def nonzero_count(x: torch.Tensor) -> torch.Tensor:
    return x.nonzero()


@nonzero_count.register_fake
def _(x):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(n, x.dim(), dtype=torch.int64)


def _bump(self, x):
    bump_(x, 2)
    return x * 3


def _has_custom(ep):
    names = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert any("scale_add" in t for t in names), names


def _decomposed_has_no_composite(ep):
    decomposed = ep.run_decompositions()
    targets = {str(n.target) for n in decomposed.graph.nodes if n.op == "call_function"}
    assert not any("composite" in t for t in targets), targets


BEHAVIOURS = [
    Behaviour("custom_op_functional", program(lambda self, x, y: scale_add(x, y, 2.0) + 1),
              lambda: (torch.randn(3), torch.randn(3)), check=_has_custom),
    Behaviour("custom_op_dynamic", program(lambda self, x, y: scale_add(x, y, 0.5)),
              lambda: (torch.randn(4, 2), torch.randn(4, 2)),
              dynamic_shapes=({0: torch.export.Dim("n")}, {0: torch.export.Dim("n")}),
              more=(lambda: (torch.randn(7, 2), torch.randn(7, 2)),)),
    Behaviour("custom_op_mutates_input", program(_bump), lambda: (torch.randn(3),)),
    Behaviour("custom_op_two_outputs", program(lambda self, x: split_two(x)[1] * 2),
              lambda: (torch.randn(3, 4),)),
    Behaviour("custom_op_without_fake_refused", program(lambda self, x: no_fake(x)),
              lambda: (torch.randn(3),), expect="refuses"),
    Behaviour("composite_op_decomposes", program(
        lambda self, x: torch.ops.behaviours.composite(x)), lambda: (torch.randn(3),),
              check=_decomposed_has_no_composite),
    Behaviour("custom_op_dynamic_output_size", program(
        lambda self, x: nonzero_count(x).sum()), lambda: (torch.tensor([0.0, 1.0, 2.0]),),
              more=(lambda: (torch.tensor([1.0, 1.0, 2.0]),),)),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
