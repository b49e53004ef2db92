"""Dynamic shapes: Dim ranges, shared and derived dims, AUTO/DYNAMIC/STATIC, spec errors."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim

from tests.behaviours.harness import Behaviour, params, program, side_by_side

AUTO, DYNAMIC, STATIC = Dim.AUTO, Dim.DYNAMIC, Dim.STATIC


def _r(*shapes):
    """Builder of random inputs of these shapes."""
    return lambda: tuple(torch.randn(*s) for s in shapes)


def _conv(self):
    self.conv = nn.Conv2d(3, 8, 3, padding=1)
    self.pool = nn.MaxPool2d(3)


def _lin(self):
    self.lin = nn.Linear(4, 4)


batch = Dim("batch", min=2, max=64)
dimx = Dim("dimx", min=3, max=6)
dimy = Dim("dimy", min=5, max=7)


def _branch_on_shape(self, x):
    if x.shape[0] == 4:
        return x + 1
    return x


def _le6(self, x, c):
    if x.shape[0] <= 6:
        return x + 1, c + 2
    return x - 1, c - 2


def _even_odd(self, w):
    if w.shape[0] % 2 == 0:
        return w[::2]
    return w[1:-1:2]


def _int_placeholder(ep):
    value = [n for n in ep.graph.nodes if n.op == "placeholder"][-1].meta["val"]
    assert isinstance(value, torch.SymInt), f"the int input is not a SymInt: {value!r}"


def _int_branch(self, x, n):
    if n > 3:
        return x + n
    return x - n


def _range_max(ep):
    uppers = {int(r.upper) for r in ep.range_constraints.values() if r.upper != float("inf")
              and str(r.upper) != "int_oo"}
    assert 64 in uppers, f"batch's max (64) not among the ranges: {ep.range_constraints}"


def _placeholders_symbolic(ep):
    shapes = [n.meta["val"].shape for n in ep.graph.nodes if n.op == "placeholder"
              and n.name in ep.graph_signature.user_inputs]
    assert all(isinstance(s[0], torch.SymInt) for s in shapes), shapes


def _max_sizes(self, x, y):
    s1 = max(x.shape[0], y.shape[0])
    z = torch.zeros((s1, x.shape[1]), dtype=x.dtype)
    z[: x.shape[0]] = x
    z[: y.shape[0]] += y
    return z


BEHAVIOURS = [
    Behaviour("dim_batch_other_sizes", program(lambda self, x: self.lin(x).relu(), _lin),
              _r((8, 4)), dynamic_shapes={"x": {0: batch}},
              more=(_r((3, 4)), _r((64, 4))), rejects=(_r((65, 4)), _r((8, 5))),
              check=_range_max),
    Behaviour("dim_example_outside_min", program(lambda self, x: x + 1), _r((3,)),
              expect="refuses", dynamic_shapes={"x": {0: Dim("dim_x", min=6)}}),
    Behaviour("shared_dim_two_inputs", program(lambda self, x, y: x * y), _r((5, 3), (5, 3)),
              dynamic_shapes=({0: Dim("n")}, {0: Dim("n")}), more=(_r((9, 3), (9, 3)),),
              rejects=(_r((9, 3), (8, 3)),)),
    Behaviour("code_equates_two_dims", program(lambda self, x, y: x + y), _r((5,), (5,)),
              expect="refuses", dynamic_shapes=({0: Dim("a")}, {0: Dim("b")})),
    Behaviour("derived_dim_double", program(lambda self, x, y: x + y[::2]), _r((5,), (10,)),
              dynamic_shapes=({0: dimx}, {0: 2 * dimx}), more=(_r((3,), (6,)),),
              rejects=(_r((4,), (9,)), _r((7,), (14,)))),
    Behaviour("derived_dim_example_mismatch", program(lambda self, x, y: x + y[1:][::2]),
              _r((5,), (11,)), expect="refuses",
              dynamic_shapes=({0: dimx}, {0: 2 * dimx - 1})),
    Behaviour("derived_dim_integer", program(_even_odd), _r((10,)),
              dynamic_shapes=({0: dimx * 2},), more=(_r((8,)),), rejects=(_r((9,)), _r((14,)))),
    Behaviour("derived_dim_not_integer", program(_even_odd), _r((10,)), expect="refuses",
              dynamic_shapes=({0: dimx * 2 + 1},)),
    Behaviour("derived_dim_out_of_order",
              program(lambda self, x, y, z: x + y[1:] + z[2:]), _r((5,), (6,), (7,)),
              dynamic_shapes=({0: dimy - 1}, {0: dimy}, {0: dimy + 1}),
              more=(_r((6,), (7,), (8,)),), rejects=(_r((6,), (7,), (5,)),)),
    Behaviour("derived_dim_repeated", program(lambda self, u, v: u[::2] + v[::2]),
              _r((10,), (10,)), dynamic_shapes=({0: dimx * 2}, {0: dimx * 2}),
              more=(_r((8,), (8,)),)),
    Behaviour("static_by_default_branch", program(_branch_on_shape), _r((4, 5)),
              rejects=(_r((5, 5)),)),
    Behaviour("dynamic_dim_specialized_by_branch", program(_branch_on_shape), _r((4, 5)),
              expect="refuses", dynamic_shapes={"x": {0: Dim("d")}}),
    Behaviour("dim_range_narrowed_by_code", program(_le6), _r((5,), (4,)), expect="refuses",
              dynamic_shapes=({0: Dim("dim", min=3)}, None)),
    Behaviour("prefer_deferred_asserts_over_guards",
              program(lambda self, x: x.reshape(-1, 4) * 2), _r((8, 3)),
              dynamic_shapes={"x": {0: Dim("n", min=1, max=64)}},
              options={"prefer_deferred_runtime_asserts_over_guards": True},
              more=(_r((4, 3)), _r((64, 3))), rejects=(_r((5, 3)),)),
    Behaviour("auto_equal_dims", program(lambda self, x, y, z: x + y + z),
              _r((6, 3), (6, 3), (6, 3)), dynamic_shapes=((AUTO, AUTO),) * 3,
              more=(_r((4, 4), (4, 4), (4, 4)), _r((1, 1), (1, 1), (1, 1))),
              rejects=(_r((4, 4), (4, 4), (4, 3)),)),
    Behaviour("auto_static_one_specializes_all", program(lambda self, x, y, z: x + y + z),
              _r((6, 3), (6, 3), (6, 3)),
              dynamic_shapes={"x": (AUTO, AUTO), "y": (AUTO, AUTO), "z": (AUTO, None)},
              more=(_r((4, 3), (4, 3), (4, 3)),), rejects=(_r((4, 4), (4, 4), (4, 4)),)),
    Behaviour("auto_constant_relation", program(lambda self, x, y: x + y[4:]), _r((6,), (10,)),
              dynamic_shapes=((AUTO,), (AUTO,)), more=(_r((10,), (14,)), _r((2,), (6,))),
              rejects=(_r((10,), (13,)),)),
    Behaviour("auto_linear_relation", program(lambda self, x, y: x[1::4] + y),
              _r((21,), (5,)), dynamic_shapes=((AUTO,), (AUTO,)),
              more=(_r((33,), (8,)), _r((30,), (8,))), rejects=(_r((34,), (8,)),)),
    Behaviour("auto_size_one", program(lambda self, x: x * 2 + x.sum(0)),
              _r((6, 3)), dynamic_shapes=((AUTO, AUTO),), more=(_r((1, 3)), _r((1, 1)))),
    Behaviour("auto_size_zero", program(lambda self, x: x * 2 + x.sum(0)),
              _r((6, 3)), dynamic_shapes=((AUTO, AUTO),), more=(_r((0, 3)),),
              unbroken_fails="by design (docs/dynamic-shapes.md, sizes 0 and 1): a dynamic "
                             "dim's range starts at 1, module() refuses size 0 with "
                             "InputMismatchError; torch admits 0 (issue 21 if it is to change)"),
    Behaviour("dynamic_specialized_refuses",
              program(lambda self, x, z: (x[:3]) * z), _r((4,), (3,)), expect="refuses",
              dynamic_shapes=({0: DYNAMIC}, {0: DYNAMIC})),
    Behaviour("static_marker", program(lambda self, x: x.sum(1)), _r((4, 5)),
              dynamic_shapes={"x": (DYNAMIC, STATIC)}, more=(_r((7, 5)),),
              rejects=(_r((4, 6)),)),
    Behaviour("dims_helper", program(lambda self, x: x.reshape(-1).sum() + x.shape[0]),
              _r((2, 3)), dynamic_shapes={"x": tuple(torch.export.dims("d0", "d1"))},
              more=(_r((5, 7)),)),
    Behaviour("tuple_spec_skips_argument", program(lambda self, a, b: a.sum() + b.sum()),
              _r((4, 4), (4, 4)), dynamic_shapes=(None, {0: Dim("dim")}),
              more=(_r((4, 4), (7, 4)),), rejects=(_r((5, 4), (7, 4)),)),
    Behaviour("conv_dynamic_batch", program(lambda self, x, y: self.pool(
        (self.conv(x) + y).relu()), _conv), _r((2, 3, 16, 16), (2, 8, 16, 16)),
              dynamic_shapes={"x": {0: Dim("b")}, "y": {0: Dim("b")}},
              more=(_r((5, 3, 16, 16), (5, 8, 16, 16)),), check=_placeholders_symbolic),
    Behaviour("conv_dynamic_spatial", program(lambda self, x: self.conv(x).mean((2, 3)), _conv),
              _r((1, 3, 12, 10)), dynamic_shapes={"x": {2: Dim("h", min=4),
                                                        3: Dim("w", min=4)}},
              more=(_r((1, 3, 9, 17)),)),
    Behaviour("slice_with_max_int", program(
        lambda self, x: torch.ops.aten.slice.Tensor(x, 0, 0, 9223372036854775807)),
              _r((10, 3)), dynamic_shapes={"x": {0: Dim("dim")}}, more=(_r((4, 3)),)),
    Behaviour("floordiv_slice", program(lambda self, x: x[x.size(0) // 2:] * 2), _r((10,)),
              dynamic_shapes={"x": {0: DYNAMIC}}, more=(_r((7,)),)),
    Behaviour("polynomial_slice_end",
              program(lambda self, x, y: x[:, : y.shape[0] ** 2 - 3 * y.shape[0]]),
              _r((4, 4), (4, 4)), dynamic_shapes=((DYNAMIC, DYNAMIC), (DYNAMIC, DYNAMIC))),
    Behaviour("max_of_sizes", program(_max_sizes), _r((6, 3), (4, 3)),
              dynamic_shapes=({0: DYNAMIC}, {0: DYNAMIC}), more=(_r((2, 3), (5, 3)),)),
    Behaviour("reshape_minus_one", program(lambda self, x: x.reshape(x.shape[0], -1, 2)),
              _r((3, 4, 6)), dynamic_shapes={"x": {0: Dim("b")}}, more=(_r((5, 4, 6)),)),
    Behaviour("view_minus_one_divides_by_size_minus_one",
              program(lambda self, x: x.view(x.shape[0] - 1, -1)), _r((3, 4)),
              dynamic_shapes={"x": (DYNAMIC, None)}, more=(_r((5, 4)),),
              rejects=(_r((4, 4)), _r((1, 4)), _r((0, 4)))),
    Behaviour("cat_split_dynamic", program(
        lambda self, x, y: torch.cat([x, y], 0).split([x.shape[0], y.shape[0]])[1] * 2),
              _r((3, 4), (5, 4)), dynamic_shapes=({0: Dim("a")}, {0: Dim("b")}),
              more=(_r((2, 4), (7, 4)),)),
    Behaviour("broadcast_dynamic", program(lambda self, x, y: x + y), _r((4, 1, 5), (3, 5)),
              dynamic_shapes=({0: Dim("p"), 2: Dim("q")}, {0: Dim("r"), 1: Dim("q")}),
              more=(_r((2, 1, 6), (7, 6)),)),
    Behaviour("list_spec_shared_dim", program(lambda self, x, y: x + y[0]),
              lambda: (torch.randn(4), [torch.randn(4)]),
              dynamic_shapes={"x": (Dim("dim", max=10),), "y": [(Dim("dim", max=10),)]},
              more=(lambda: (torch.randn(7), [torch.randn(7)]),)),
    Behaviour("spec_dict_wrong_key", program(lambda self, x: x + 2), _r((4,)),
              expect="refuses", dynamic_shapes={"k": {0: Dim("dim")}}),
    Behaviour("spec_wrong_length", program(lambda self, x: x + 2), _r((4, 8, 6)),
              expect="refuses", dynamic_shapes={"x": (Dim("dim"), None)}),
    Behaviour("spec_structure_mismatch",
              program(lambda self, x: x["k"][0] + x["k"][1]),
              lambda: ({"k": [torch.rand(4), torch.rand(4)]},), expect="refuses",
              dynamic_shapes=({"k": (Dim("dim"), Dim("dim"))},)),
    Behaviour("spec_nested_dict_list",
              program(lambda self, x: x["k"]["k1"][0] + x["k"]["k2"][0]),
              lambda: ({"k": {"k1": [torch.rand(4)], "k2": [torch.rand(4)]}},),
              dynamic_shapes=({"k": {"k2": [(Dim("dim"),)], "k1": [(Dim("dim"),)]}},),
              more=(lambda: ({"k": {"k1": [torch.rand(6)], "k2": [torch.rand(6)]}},),)),
    Behaviour("spec_for_kwargs", program(lambda self, a, kw1, kw2: a.sum() + kw1.sum()
                                          - kw2.sum()),
              lambda: ((torch.randn(4, 4),), {"kw2": torch.ones(4, 4), "kw1": torch.zeros(4, 4)}),
              kwargs=True, dynamic_shapes=({0: Dim("d")}, {0: Dim("k1")}, None),
              more=(lambda: ((torch.randn(7, 4),), {"kw2": torch.ones(4, 4),
                                                     "kw1": torch.zeros(9, 4)}),)),
    Behaviour("interpolate_dynamic", program(lambda self, x: F.interpolate(
        x, scale_factor=2.0, mode="nearest")), _r((1, 2, 5, 6)),
              dynamic_shapes={"x": {2: Dim("h"), 3: Dim("w")}}, more=(_r((1, 2, 7, 3)),)),
    Behaviour("view_as_sizes_product", program(lambda self, x: x.view(x.shape[0] * x.shape[1])),
              _r((3, 4)), dynamic_shapes={"x": (Dim("a"), Dim("b"))}, more=(_r((5, 2)),)),
    Behaviour("symint_output", program(lambda self, x: (x.size(0) + x.size(1) + x[0],
                                                        x.size(0))),
              _r((2, 3)), dynamic_shapes={"x": (Dim("d0"), Dim("d1"))}, more=(_r((4, 5)),)),
    Behaviour("int_input_auto", program(lambda self, x, n: x[:n] * n),
              lambda: (torch.randn(8, 3), 4),
              dynamic_shapes=({0: Dim.AUTO}, Dim.AUTO),
              more=(lambda: (torch.randn(8, 3), 6), lambda: (torch.randn(6, 3), 3)),
              rejects=(lambda: (torch.randn(5, 3), 7),), check=_int_placeholder),
    Behaviour("int_input_dynamic_branch", program(_int_branch), lambda: (torch.randn(3), 5),
              dynamic_shapes=(None, Dim.DYNAMIC), more=(lambda: (torch.randn(3), 9),),
              rejects=(lambda: (torch.randn(3), 2),), check=_int_placeholder),
    Behaviour("tensor_of_dynamic_sizes",
              program(lambda self, x: torch.tensor([x.shape[0], x.shape[1]])),
              _r((3, 5)), dynamic_shapes={"x": (Dim("a"), Dim("b"))}, more=(_r((4, 7)),)),
    Behaviour("tensor_of_shape_auto", program(lambda self, x: torch.tensor(x.shape)),
              _r((3, 5)), dynamic_shapes={"x": (AUTO, AUTO)}, more=(_r((4, 7)), _r((2, 2)))),
    Behaviour("tensor_of_size_expressions_dynamic",
              program(lambda self, x: torch.tensor([[x.shape[0] * 1.5, 2],
                                                    [x.shape[1] > 3, x.shape[0] // 2]])),
              _r((3, 5)), dynamic_shapes={"x": (DYNAMIC, DYNAMIC)},
              more=(_r((4, 2)), _r((9, 11)))),
    Behaviour("new_tensor_of_sizes",
              program(lambda self, x: x.new_tensor([x.shape[1], x.shape[0]]) + x[0, 0]),
              _r((3, 5)), dynamic_shapes={"x": (Dim("a"), Dim("b"))}, more=(_r((6, 2)),)),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
