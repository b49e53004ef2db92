"""resolve_dynamic_shapes: accepted specs, and every ExportUsageError path."""
from collections import namedtuple

import pytest
import sympy
import torch
from torch.export import Dim

from unbroken.symbolic.diagnostics import ExportUsageError
from unbroken.symbolic.env import ShapeEnvironment
from unbroken.symbolic.ranges import ValueRange
from unbroken.symbolic.spec import resolve_dynamic_shapes

Pair = namedtuple("Pair", "a b")


def _args():
    return {"x": torch.randn(4, 6), "ys": [torch.randn(4, 7), torch.randn(3)], "k": 3}


def _resolve(spec, args=None):
    env = ShapeEnvironment()
    return resolve_dynamic_shapes(args or _args(), spec, env), env


def test_none_is_all_static():
    out, env = _resolve(None)
    assert out == {"x": (4, 6), "ys": [(4, 7), (3,)], "k": 3} and env.symbols == {}


def test_shared_and_derived_dims():
    b, d = Dim("b", min=2, max=64), Dim("d")
    out, env = _resolve({"x": {0: b, 1: 2 * d}, "ys": [(b, d + 4), None], "k": None})
    s_b, s_d = out["x"][0], out["ys"][0][1] - 4
    assert out["x"][1] == 2 * s_d and out["ys"][0][0] == s_b and out["ys"][1] == (3,)
    assert env.var_ranges[s_b] == ValueRange(2, 64) and env.hint_of(s_d) == 3
    assert env.source_of(s_b) == "x.shape[0]" and env.symbols[s_b].name == "b"


def test_tuple_spec_and_same_name_dims_are_one_symbol():
    out, _ = _resolve(({0: Dim("b")}, [{0: Dim("b")}, None], None))
    assert out["x"][0] == out["ys"][0][0]


def test_auto_dynamic_static_hints_and_int_entries():
    args = {"x": torch.randn(1, 5, 6)}
    out, env = _resolve({"x": (Dim.AUTO, Dim.DYNAMIC(max=10), 6)}, args)
    assert out["x"][0] == 1 and isinstance(out["x"][1], sympy.Symbol) and out["x"][2] == 6
    assert env.var_ranges[out["x"][1]] == ValueRange(2, 10)
    out, _ = _resolve({"x": {0: Dim.STATIC, 1: Dim.AUTO}}, args)
    assert out["x"][0] == 1 and isinstance(out["x"][1], sympy.Symbol)


def test_nested_dict_and_namedtuple_inputs():
    args = {"inp": {"p": Pair(torch.randn(3, 2), torch.randn(5))}}
    out, _ = _resolve({"inp": {"p": Pair(None, {0: Dim("n")})}}, args)
    assert isinstance(out["inp"]["p"], Pair) and out["inp"]["p"].a == (3, 2)
    assert isinstance(out["inp"]["p"].b[0], sympy.Symbol)


def test_phantom_root_is_solved_from_derived_dim():
    dx = Dim("dx")
    out, env = _resolve({"x": {1: dx + 1}, "ys": None, "k": None})
    (root,) = env.symbols
    assert out["x"][1] == root + 1 and env.hint_of(root) == 5 and env.var_ranges[root].lower == 2


BAD_SPECS = [
    ({"x": None}, "missing key"),
    ({"x": None, "ys": None, "k": None, "z": None}, "not parameters"),
    ([None, None], "has 2 entries"),
    ("x", "must be None, a dict"),
    ({"x": {5: Dim("b")}, "ys": None, "k": None}, "names dimension 5"),
    ({"x": {"0": Dim("b")}, "ys": None, "k": None}, "must be ints"),
    ({"x": {0: "b"}, "ys": None, "k": None}, "expected a Dim"),
    ({"x": {0: Dim("b", max=3)}, "ys": None, "k": None}, "outside the range [2, 3]"),
    ({"x": {0: Dim("b", min=5)}, "ys": None, "k": None}, "outside the range [5, inf]"),
    ({"x": (Dim("b"),), "ys": None, "k": None}, "has 1 entries, but x has 2"),
    ({"x": Dim("b"), "ys": None, "k": None}, "single"),
    ({"x": None, "ys": [None], "k": None}, "has 1 entries but input ys"),
    ({"x": None, "ys": {"a": None}, "k": None}, "but input ys is a list"),
    ({"x": None, "ys": None, "k": {0: Dim("b")}}, "not a tensor"),
    ({"x": {0: Dim("b"), 1: Dim("b")}, "ys": None, "k": None}, "different example sizes"),
    ({"x": {0: Dim("b"), 1: Dim("b", max=10)}, "ys": None, "k": None},
     "two different Dims named 'b'"),
    ({"x": {0: Dim("b"), 1: 2 * Dim("b")}, "ys": None, "k": None}, "requires 8"),
    ({"x": {0: Dim("m", max=1)}, "ys": None, "k": None}, "max=1"),
    ({"x": {0: 5}, "ys": None, "k": None}, "static size 5"),
    ({"x": {1: 4 * Dim("q")}, "ys": None, "k": None}, "not of the form"),
    ({"x": None, "ys": [{0: Dim.AUTO(min=5)}, None], "k": None}, "outside the range [5"),
]


@pytest.mark.parametrize("spec,needle", BAD_SPECS)
def test_malformed_specs_raise_usage_errors(spec, needle):
    with pytest.raises(ExportUsageError) as info:
        _resolve(spec)
    assert needle in info.value.message, info.value.message
    assert info.value.hint


@pytest.mark.parametrize("entry", [Dim("b"), Dim.DYNAMIC])
def test_example_size_one_for_dynamic_dim_is_refused(entry):
    with pytest.raises(ExportUsageError) as info:
        _resolve({"x": {0: entry}}, {"x": torch.randn(1, 3)})
    assert "size 1" in info.value.message and ">= 2" in info.value.hint


def test_min_greater_than_max_from_dim_hint():
    hint = Dim.AUTO(min=2, max=8)
    object.__setattr__(hint, "min", 9)
    with pytest.raises(ExportUsageError, match="min=9 > max=8"):
        _resolve({"x": {0: hint}}, {"x": torch.randn(4)})
