"""Nested inputs and outputs: lists, dicts, tuples, namedtuples, dataclasses, constants."""
from __future__ import annotations

import collections
import dataclasses

import pytest
import torch
import torch.utils._pytree as pytree

from tests.behaviours.harness import Behaviour, params, program, side_by_side

Point = collections.namedtuple("Point", ["x", "y"])


@dataclasses.dataclass
class Pair:
    a: torch.Tensor
    b: torch.Tensor


@dataclasses.dataclass
class Mixed:
    flag: bool
    n: int
    t: torch.Tensor


@dataclasses.dataclass
class Holder:
    x: torch.Tensor
    ys: list
    zs: dict


for _cls in (Pair, Mixed, Holder):
    if _cls not in pytree.SUPPORTED_NODES:
        torch.export.register_dataclass(_cls, serialized_type_name=f"behaviours.{_cls.__name__}")


def _nested_in(self, x):
    return x["a"][0] + x["a"][1]["b"] * x["c"]


def _var_keyword(self, arg1, arg2, *args, kw1, kw2, **kwargs):
    return (arg1 + arg2[0][0] + args[0] + kw1[0] + kwargs["kw3"][0],
            arg2[1] + args[1] + kw2 + kwargs["kw4"])


def _mixed(self, d):
    return d.t * d.n if d.flag else d.t


def _out_nested(self, x, y):
    return {"sum": x + y, "parts": [x, (y * 2, {"neg": -x})]}


def _none_input(self, x, mask):
    if mask is None:
        return x * 2
    return x * mask


def _string_input(self, x, mode):
    return x.relu() if mode == "relu" else x.tanh()


def _tuple_of_lists(self, xs):
    total = xs[0][0]
    for group in xs:
        for t in group:
            total = total + t
    return total


BEHAVIOURS = [
    Behaviour("nested_dict_list_input", program(_nested_in),
              lambda: ({"a": [torch.randn(3), {"b": torch.randn(3)}], "c": torch.randn(3)},)),
    Behaviour("var_positional_and_keyword", program(_var_keyword),
              lambda: ((torch.ones(2, 3), [(torch.ones(2, 3),), torch.ones(3, 4)],
                        torch.ones(2, 3), torch.ones(3, 4)),
                       {"kw1": (torch.ones(2, 3),), "kw2": torch.ones(3, 4),
                        "kw3": (torch.ones(2, 3), torch.ones(3, 4)), "kw4": torch.ones(3, 4)}),
              kwargs=True),
    Behaviour("namedtuple_input", program(lambda self, p: p.x * p.y),
              lambda: (Point(torch.randn(3), torch.randn(3)),)),
    Behaviour("namedtuple_as_whole_args", program(lambda self, x, y: x + y),
              lambda: Point(torch.randn(3), torch.randn(3))),
    Behaviour("namedtuple_output", program(lambda self, x: Point(x + 1, x - 1)),
              lambda: (torch.randn(3),)),
    Behaviour("dataclass_input", program(lambda self, inp: torch.matmul(inp.a, inp.b)),
              lambda: (Pair(torch.randn(2, 2, 3), torch.randn(2, 3, 4)),)),
    Behaviour("dataclass_input_dynamic", program(lambda self, inp: torch.matmul(inp.a, inp.b)),
              lambda: (Pair(torch.randn(4, 2, 3), torch.randn(4, 3, 4)),),
              dynamic_shapes={"inp": [{0: torch.export.Dim("b")}, {0: torch.export.Dim("b")}]},
              more=(lambda: (Pair(torch.randn(6, 2, 3), torch.randn(6, 3, 4)),),)),
    Behaviour("dataclass_with_constants", program(_mixed),
              lambda: (Mixed(True, 3, torch.ones(3)),)),
    Behaviour("dataclass_output", program(lambda self, x: Pair(x * 2, x + 2)),
              lambda: (torch.randn(3),)),
    Behaviour("dataclass_nested_containers",
              program(lambda self, inp: inp.x + inp.ys[0] + inp.zs["k"]),
              lambda: (Holder(torch.randn(4), [torch.randn(4)], {"k": torch.randn(4)}),)),
    Behaviour("nested_outputs", program(_out_nested), lambda: (torch.randn(2), torch.randn(2))),
    Behaviour("none_input", program(_none_input), lambda: (torch.randn(3), None)),
    Behaviour("string_input", program(_string_input), lambda: (torch.randn(3), "relu")),
    Behaviour("tuple_of_lists_loop", program(_tuple_of_lists),
              lambda: (([torch.randn(2), torch.randn(2)], [torch.randn(2)]),)),
    Behaviour("int_input_specialized", program(lambda self, x, n: x * n),
              lambda: (torch.randn(3), 4), rejects=(lambda: (torch.randn(3), 5),)),
    Behaviour("float_input_specialized", program(lambda self, x, f: x * f),
              lambda: (torch.randn(3), 0.5), rejects=(lambda: (torch.randn(3), 2.5),)),
    Behaviour("bool_input_branch", program(lambda self, x, b: x + 1 if b else x - 1),
              lambda: (torch.randn(3), True), rejects=(lambda: (torch.randn(3), False),)),
    Behaviour("dict_output_order", program(lambda self, x: {"b": x * 2, "a": x + 1}),
              lambda: (torch.randn(2),)),
    Behaviour("empty_containers", program(lambda self, x, e, d: (x + len(e) + len(d), [], {})),
              lambda: (torch.randn(2), [], {})),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
