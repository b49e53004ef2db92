"""Errors: what both exporters must refuse (at export, or in module() at run time), and the
export calls that are malformed."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim
from torch.testing._internal.two_tensor import TwoTensor

from tests.behaviours.harness import Behaviour, params, program, side_by_side


def _raise(self, x):
    raise ValueError("this model always fails")


def _while_data(self, x):
    while x.sum() > 0:
        x = x - 1
    return x


def _print(self, x):
    print("shape", x.shape)
    return x * 2


def _data_attr(self, x):
    return x.data * 2


def _tensor_attribute(self, x):
    x.tag = "input"
    return x + 1


def _seed(self, x):
    torch.manual_seed(0)
    return x + torch.rand(x.shape)


def _backward(self, x):
    y = (x * 2).sum()
    y.backward()
    return x.grad


def _numpy(self, x):
    return torch.from_numpy(x.numpy() * 2)


def _inference_mode(self, x):
    with torch.inference_mode():
        y = x * 2
    return y + 1


def _assert_data(self, x):
    assert (x > 0).all(), "negative input"
    return x.log()


def _check_data(self, x):
    torch._check(x.shape[0] > 1)
    return x.sum()


_a5 = Dim("a", max=5)
_a10 = Dim("a", max=10)


def _subclass_parameter(self):
    self.p = torch.nn.Parameter(TwoTensor(torch.ones(3), 2 * torch.ones(3)))


BEHAVIOURS = [
    Behaviour("subclass_parameter_attribute", program(
        lambda self, x: x + (self.p * 2).a, _subclass_parameter), lambda: (torch.randn(3),),
              unbroken_fails="tensor subclasses are not traced (no __tensor_flatten__ "
              "support): refused with UB117 at the line that reads one"),
    Behaviour("subclass_made_in_forward", program(
        lambda self, x: (TwoTensor(x, x * 2) + 1).b), lambda: (torch.randn(4),),
              torch_fails="a TwoTensor built in forward(): 'Cannot access data pointer of "
              "Tensor'"),
    Behaviour("forward_raises", program(_raise), lambda: (torch.randn(2),), expect="refuses"),
    Behaviour("python_while_on_data", program(_while_data), lambda: (torch.rand(3),),
              expect="refuses"),
    Behaviour("print_in_forward", program(_print), lambda: (torch.randn(2),)),
    Behaviour("tensor_data_attribute", program(_data_attr), lambda: (torch.randn(2),),
              torch_fails="comparing the output with eager raises inside torch (a .data "
                          "tensor in the graph)"),
    Behaviour("attribute_set_on_tensor", program(_tensor_attribute), lambda: (torch.randn(2),)),
    Behaviour("manual_seed_in_forward", program(_seed), lambda: (torch.randn(2),),
              expect="refuses"),
    Behaviour("backward_in_forward", program(_backward),
              lambda: (torch.randn(2, requires_grad=True),), expect="refuses"),
    Behaviour("numpy_round_trip", program(_numpy), lambda: (torch.randn(3),)),
    Behaviour("inference_mode_region", program(_inference_mode), lambda: (torch.randn(3),)),
    Behaviour("assert_on_data_refused_or_checked", program(_assert_data),
              lambda: (torch.rand(3) + 0.1,), rejects=(lambda: (-torch.ones(3),),),
              torch_fails="Dynamo rewrites an assert on data into a run-time check only in the "
                          "frame it starts in: inlined from forward(), it refuses "
                          "(data-dependent branching)"),
    Behaviour("check_on_static_shape", program(_check_data), lambda: (torch.randn(3),)),
    Behaviour("same_dim_name_two_ranges", program(lambda self, x, y: x.sum() + y.sum()),
              lambda: (torch.randn(3), torch.randn(3)), expect="refuses",
              dynamic_shapes=({0: _a5}, {0: _a10})),
    Behaviour("kwargs_not_a_dict", program(lambda self, x: x * 2),
              lambda: ((torch.randn(2),), [1]), kwargs=True, expect="refuses"),
    Behaviour("args_not_a_tuple", program(lambda self, x: x * 2),
              lambda: torch.randn(2), expect="refuses"),
    Behaviour("dynamic_shape_for_int_input", program(lambda self, x, n: x * n),
              lambda: (torch.randn(2), 3), expect="refuses",
              dynamic_shapes=({0: Dim("d")}, {0: Dim("n")})),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
