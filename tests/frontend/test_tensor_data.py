"""frontend.variables.tensor_data: tensors built from Python data holding symbolic scalars.

The oracle is eager: ``ep.module()`` on the example inputs and on other admitted sizes and
item values gives eager's values and dtype, and the sizes stay dynamic (no range collapses to
one value, and other sizes are admitted)."""
import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim

import unbroken

# The leaves a template may hold: a symbolic expression of the sizes or of an item, or a
# Python constant (the name is the leaf; constants stand for themselves).
LEAVES = {
    "n": lambda x, u, f, b: x.shape[0],
    "m": lambda x, u, f, b: x.shape[1],
    "n+2m": lambda x, u, f, b: x.shape[0] + 2 * x.shape[1],
    "n/2": lambda x, u, f, b: x.shape[0] / 2,
    "-1.5m": lambda x, u, f, b: x.shape[1] * -1.5,
    "n>m": lambda x, u, f, b: x.shape[0] > x.shape[1],
    "int item": lambda x, u, f, b: u.item(),
    "float item": lambda x, u, f, b: f.item(),
    "bool item": lambda x, u, f, b: b.item(),
}
SYMBOLIC = sorted(LEAVES)
CONSTANTS = [3, -2, 0, 0.5, -7.25, True, False]


def _fill(template, x, u, f, b):
    if isinstance(template, list):
        return [_fill(element, x, u, f, b) for element in template]
    if isinstance(template, str):
        return LEAVES[template](x, u, f, b)
    return template


class Build(torch.nn.Module):
    """``torch.tensor`` (or another spelling) of the data a template describes."""

    def __init__(self, template, dtype=None, spelling="tensor"):
        super().__init__()
        self.template, self.dtype, self.spelling = template, dtype, spelling

    def forward(self, x, u, f, b):
        data = _fill(self.template, x, u, f, b)
        if self.spelling == "as_tensor":
            return torch.as_tensor(data, dtype=self.dtype)
        if self.spelling == "new_tensor":
            return x.new_tensor(data)
        if self.dtype is None:
            return torch.tensor(data)
        return torch.tensor(data, dtype=self.dtype)


def _inputs(n, m, item_int, item_float, item_bool):
    return (torch.randn(n, m), torch.tensor(item_int), torch.tensor(item_float),
            torch.tensor(item_bool))


EXAMPLE = _inputs(3, 5, 4, 2.5, True)
OTHERS = [_inputs(6, 2, -3, -1.25, False), _inputs(2, 2, 0, 0.0, True),
          _inputs(9, 4, 11, 7.75, False)]
SPECS = {
    "named": ({0: Dim("a"), 1: Dim("b")}, None, None, None),
    "auto": ({0: Dim.AUTO, 1: Dim.AUTO}, None, None, None),
    "static": None,
}


def _assert_matches_eager(model, spec):
    ep = unbroken.export(model, EXAMPLE, dynamic_shapes=SPECS[spec])
    for inputs in [EXAMPLE, *([] if spec == "static" else OTHERS)]:
        got, want = ep.module()(*inputs), model(*inputs)
        assert got.dtype == want.dtype and got.shape == want.shape, (got, want)
        assert not got.requires_grad
        torch.testing.assert_close(got, want, rtol=0, atol=0, equal_nan=True)
    for symbol, bounds in ep.range_constraints.items():
        assert bounds.lower != bounds.upper, f"{symbol} specialized: {bounds}"
    return ep


@st.composite
def templates(draw):
    """A rectangular nesting (0 to 3 levels, 1 to 3 wide) whose first leaf is symbolic."""
    shape = draw(st.lists(st.integers(1, 3), max_size=3))
    leaves = [draw(st.sampled_from(SYMBOLIC))]
    leaves += draw(st.lists(st.sampled_from(SYMBOLIC + CONSTANTS),
                            min_size=math.prod(shape) - 1, max_size=math.prod(shape) - 1))
    for width in reversed(shape):
        leaves = [leaves[i:i + width] for i in range(0, len(leaves), width)]
    return leaves[0]


DTYPES = [None, None, torch.int64, torch.int32, torch.float32, torch.float64, torch.bool]


@settings(max_examples=30, deadline=None, derandomize=True, database=None)
@given(templates(), st.sampled_from(DTYPES), st.sampled_from(sorted(SPECS)))
def test_a_tensor_of_symbolic_scalars_is_eagers_for_every_admitted_input(template, dtype,
                                                                          spec):
    """Every nesting of sizes, size expressions and items (int, float, bool) mixed with
    constants: eager's values and dtype (inferred or given), sizes kept dynamic."""
    _assert_matches_eager(Build(template, dtype), spec)


@pytest.mark.parametrize("spec", sorted(SPECS))
@pytest.mark.parametrize("template, dtype", [
    (["n", "m"], torch.int64),          # torch.tensor([x.shape[0], x.shape[1]])
    (["n", 2.5], torch.float32),        # an int and a float: the default float dtype
    (["n>m", True], torch.bool),        # bools stay bool
    (["n>m", 1], torch.int64),          # a bool and an int: int64
    (["bool item"], torch.bool),
    (["float item", "int item"], torch.float32),
    ([[1, 2], ["n", 3]], torch.int64),  # a constant row next to a symbolic one
])
def test_the_inferred_dtype_is_torch_tensors(template, dtype, spec):
    assert _assert_matches_eager(Build(template), spec).module()(*EXAMPLE).dtype == dtype


@pytest.mark.parametrize("spelling", ["as_tensor", "new_tensor"])
def test_as_tensor_and_new_tensor_build_the_same_tensor(spelling):
    _assert_matches_eager(Build([["n", "m"], ["n/2", "int item"]], spelling=spelling), "named")


class TensorOfShape(torch.nn.Module):
    def forward(self, x):
        return torch.tensor(x.shape), torch.tensor(x.size(), dtype=torch.float64)


def test_a_tensor_of_the_shape_keeps_the_sizes_dynamic():
    """torch.tensor(x.shape) specialized both sizes (UB003) where torch.export computes them
    in the graph: one scalar_tensor per size, stacked."""
    model = TensorOfShape()
    ep = unbroken.export(model, (torch.randn(3, 5),),
                         dynamic_shapes=({0: Dim("a"), 1: Dim("b")},))
    targets = [node.target for node in ep.graph.nodes if node.op == "call_function"]
    assert torch.ops.aten.scalar_tensor.default in targets
    assert torch.ops.aten.stack.default in targets
    for shape in [(3, 5), (7, 2), (2, 11)]:
        got, want = ep.module()(torch.randn(shape)), model(torch.randn(shape))
        assert [t.dtype for t in got] == [t.dtype for t in want]
        torch.testing.assert_close(got, want)


class LegacyConstructors(torch.nn.Module):
    def forward(self, x):
        n, m = x.shape
        return (torch.LongTensor([n, m]), torch.FloatTensor([[n], [m / 4]]),
                torch.BoolTensor([n > m]), torch.IntTensor([n, 7]))


def test_legacy_tensor_types_build_the_data_with_their_dtype():
    model = LegacyConstructors()
    ep = unbroken.export(model, (torch.randn(3, 5),), dynamic_shapes=({0: Dim("a"), 1: Dim("b")},))
    for shape in [(3, 5), (8, 2)]:
        x = torch.randn(shape)
        got, want = ep.module()(x), model(x)
        assert [t.dtype for t in got] == [t.dtype for t in want]
        torch.testing.assert_close(got, want)


class LegacyShape(torch.nn.Module):
    def forward(self, x):
        return torch.FloatTensor(x.shape[1]).shape[0] + x


def test_a_legacy_type_given_sizes_still_makes_a_tensor_of_that_shape():
    """``torch.FloatTensor(k)`` is an uninitialized tensor of k elements, not the data [k]."""
    model = LegacyShape()
    ep = unbroken.export(model, (torch.randn(3, 5),))
    torch.testing.assert_close(ep.module()(torch.ones(3, 5)), model(torch.ones(3, 5)))


class RaggedData(torch.nn.Module):
    def forward(self, x):
        return torch.tensor([[x.shape[0], 1], [2]])


def test_ragged_data_raises_eagers_error():
    with pytest.raises(unbroken.RefusalError):
        unbroken.export(RaggedData(), (torch.randn(3, 5),), dynamic_shapes=({0: Dim("a")},))
