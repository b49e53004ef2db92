"""The seeds' examples: the basic Linear+ReLU export and the graph breaks of the tutorial.

The graph-break tests check the *line* the error names: the expected line numbers are read from
this file's source (``line_of``), never hard-coded.
"""
from __future__ import annotations

import inspect
import os

import pytest
import torch

import unbroken

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


class MyModule(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(100, 10)

    def forward(self, x, y):
        return torch.nn.functional.relu(self.lin(x + y), inplace=True)


class Bad1(torch.nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return torch.sin(x)
        return torch.cos(x)


class Bad2(torch.nn.Module):
    def forward(self, x):
        x.data[0, 0] = 3
        return x


class Bad3(torch.nn.Module):
    def forward(self, x):
        x = x + 1
        return x + id(x)


class Bad4(torch.nn.Module):
    def forward(self, x):
        try:
            x = x + 1
            raise RuntimeError("bad")
        except:  # noqa: E722 -- the seed's exact code
            x = x + 2
        return x


def line_of(obj, text: str) -> int:
    """The line number in this file of the first line of ``obj``'s source containing ``text``."""
    lines, start = inspect.getsourcelines(obj)
    matches = [start + i for i, line in enumerate(lines) if text in line]
    assert matches, f"{text!r} not in the source of {obj}"
    return matches[0]


def call_targets(ep) -> list[str]:
    return [str(n.target) for n in ep.graph.nodes if n.op == "call_function"]


@pytest.fixture(scope="module")
def basic():
    torch.manual_seed(0)
    mod = MyModule()
    args = (torch.randn(8, 100), torch.randn(8, 100))
    return mod, args, unbroken.export(mod, args)


# -- the basic example ---------------------------------------------------------------------------

def test_basic_ops_are_add_linear_relu(basic):
    _, _, ep = basic
    targets = call_targets(ep)
    assert "aten.add.Tensor" in targets
    has_linear = "aten.linear.default" in targets
    has_addmm = "aten.addmm.default" in targets and (
        "aten.t.default" in targets or "aten.permute.default" in targets)
    assert has_linear or has_addmm, targets
    assert "aten.relu.default" in targets
    assert not any("relu_" in t for t in targets)
    assert "relu_" not in str(ep)


def test_basic_parameters_are_lifted(basic):
    _, _, ep = basic
    signature = ep.graph_signature
    placeholders = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    assert placeholders == ["p_lin_weight", "p_lin_bias", "x", "y"]
    assert list(signature.parameters) == ["lin.weight", "lin.bias"]
    assert dict(signature.inputs_to_parameters) == {"p_lin_weight": "lin.weight",
                                                    "p_lin_bias": "lin.bias"}
    assert list(signature.user_inputs) == ["x", "y"]
    assert list(signature.buffers) == []


def test_basic_module_matches_eager(basic):
    mod, args, ep = basic
    torch.testing.assert_close(ep.module()(*args), mod(*args))
    fresh = (torch.randn(8, 100), torch.randn(8, 100))
    torch.testing.assert_close(ep.module()(*fresh), mod(*fresh))


def test_basic_module_rejects_other_batch_size(basic):
    _, _, ep = basic
    with pytest.raises(unbroken.InputMismatchError) as info:
        ep.module()(torch.randn(10, 100), torch.randn(10, 100))
    assert "specialized at 8" in str(info.value)


def test_calling_the_program_points_to_module(basic):
    _, args, ep = basic
    with pytest.raises(Exception) as info:
        ep(*args)
    assert "module()" in str(info.value)


def test_basic_str_shows_graph_and_signature(basic):
    _, _, ep = basic
    text = str(ep)
    assert "p_lin_weight" in text and "f32[8, 100]" in text


# -- graph breaks --------------------------------------------------------------------------------

BREAKS = [
    pytest.param(Bad1, "if x.sum() > 0:", id="data-dependent-if"),
    pytest.param(Bad2, "x.data[0, 0] = 3", id="tensor-data"),
    pytest.param(Bad3, "return x + id(x)", id="builtin-id"),
]


def test_seed_try_raise_exports_what_eager_computes():
    # torch.export refuses the seed's bad4 (a graph break on `raise`); unbroken interprets the
    # exception table, so the handler runs as in eager: x + 1 + 2. A better answer.
    ep = unbroken.export(Bad4(), (torch.randn(3, 3),))
    x = torch.randn(3, 3)
    torch.testing.assert_close(ep.module()(x), Bad4()(x))
    torch.testing.assert_close(ep.module()(x), x + 3)


@pytest.mark.parametrize("cls, statement", BREAKS)
def test_graph_break_names_the_line(cls, statement):
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(cls(), (torch.randn(3, 3),))
    err = info.value
    assert err.frames, "a graph break must carry the user's stack"
    where = err.frames[-1]
    assert os.path.samefile(where.filename, __file__)
    assert where.lineno == line_of(cls, statement)
    assert where.source == statement
    assert where.function == "forward"
    assert err.code.startswith("UB")
    rendered = err.render()
    assert f"[{err.code}]" in rendered and statement in rendered


def test_data_dependent_if_hints_cond():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Bad1(), (torch.randn(3, 3),))
    assert "torch.cond" in info.value.hint


def test_graph_break_ids_are_distinct_per_kind():
    codes = set()
    for cls in (Bad1, Bad2, Bad3):
        with pytest.raises(unbroken.GraphBreakError) as info:
            unbroken.export(cls(), (torch.randn(3, 3),))
        codes.add(info.value.code)
    assert len(codes) == 3
