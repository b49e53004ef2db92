"""exporter.trace and symbolic.spec: a Python ``int`` input declared ``Dim.AUTO`` or
``Dim.DYNAMIC`` is a ``SymInt`` input of the program, as in torch.export: its range is what the
trace's decisions on it require (unbounded when none; an int may be 0, 1 or negative), every
value the range admits computes what eager computes, and the others are refused by
``module()`` naming the input.

Checked against eager on every value of a window around the example (hypothesis draws the
model and the example), and side by side with torch.export where both export."""
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim

import unbroken
from unbroken.ir.signature import ConstantArgument, SymIntArgument
from unbroken.symbolic.diagnostics import ExportUsageError, InputMismatchError
from unbroken.symbolic.torch_compat import int_oo

pytestmark = pytest.mark.matrix  # torch internals a release may change


class _Scale(torch.nn.Module):
    def forward(self, x, n):
        return x * n + n


class _Prefix(torch.nn.Module):
    def forward(self, x, n):
        return x[:n] * 2


class _Ones(torch.nn.Module):
    def forward(self, x, n):
        return torch.ones(n) + x.sum()


class _Branch(torch.nn.Module):
    def forward(self, x, n):
        if n > 3:
            return x + 1
        return x - 1


class _Arith(torch.nn.Module):
    def forward(self, x, n):
        return x / n, n // 2, n % 3, -n


class _Pinned(torch.nn.Module):
    def forward(self, x, n):
        if n == 5:
            return x + 1
        return x - 1


class _Repeat(torch.nn.Module):
    def forward(self, x, n):
        return x.repeat(n, 1)


MODELS = [_Scale, _Prefix, _Ones, _Branch, _Arith, _Repeat]


def _same(got, want) -> bool:
    got, want = torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)
    return len(got) == len(want) and all(
        torch.equal(a, b) if isinstance(a, torch.Tensor) else a == b for a, b in zip(got, want))


def _export(model, x, n, spec=Dim.AUTO, x_spec=None):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return unbroken.export(model, (x, n), dynamic_shapes=(x_spec, spec))


def _admitted(ep, value) -> bool:
    value_range = next(r for s, r in ep.range_constraints.items()
                       if str(s) == _int_symbol(ep))
    lower, upper = value_range.lower, value_range.upper
    return (lower == -int_oo or value >= int(lower)) and \
        (upper == int_oo or value <= int(upper))


def _int_symbol(ep) -> str:
    placeholder = [n for n in ep.graph.nodes if n.op == "placeholder"][-1]
    return str(placeholder.meta["val"].node.expr)


def test_an_auto_int_is_a_symint_placeholder_with_an_unbounded_range():
    ep = _export(_Scale(), torch.randn(4, 3), 4)
    user = ep.graph_signature.input_specs[-1]
    assert isinstance(user.arg, SymIntArgument)
    assert isinstance([n for n in ep.graph.nodes if n.op == "placeholder"][-1].meta["val"],
                      torch.SymInt)
    (value_range,) = ep.range_constraints.values()
    assert str(value_range.lower) == "-int_oo" and str(value_range.upper) == "int_oo"
    x = torch.randn(4, 3)
    for n in (-7, -1, 0, 1, 2, 4, 1000):  # ints are values: 0, 1 and negatives included
        assert _same(ep.module()(x, n), _Scale()(x, n))


def test_decisions_on_the_int_narrow_its_range_and_refuse_the_rest():
    x = torch.randn(8, 3)
    ep = _export(_Branch(), x, 5)
    (value_range,) = ep.range_constraints.values()
    assert int(value_range.lower) == 4
    assert _same(ep.module()(x, 4), _Branch()(x, 4))
    with pytest.raises(InputMismatchError, match=r"n: s\d+ = 3 is outside the range"):
        ep.module()(x, 3)


def test_a_relation_with_a_tensor_dim_is_checked_before_the_graph_runs():
    ep = _export(_Prefix(), torch.randn(8, 3), 4, x_spec={0: Dim.AUTO})
    x = torch.randn(6, 3)
    assert _same(ep.module()(x, 6), _Prefix()(x, 6))
    with pytest.raises(InputMismatchError, match="n <= x.shape"):
        ep.module()(x, 7)


def test_an_auto_int_the_code_pins_becomes_a_constant_and_dynamic_refuses():
    x = torch.randn(4, 3)
    ep = _export(_Pinned(), x, 5)
    assert isinstance(ep.graph_signature.input_specs[-1].arg, ConstantArgument)
    with pytest.raises(InputMismatchError, match="specialized to 5"):
        ep.module()(x, 6)
    with pytest.raises(unbroken.ConstraintViolationError, match="n == 5"):
        _export(_Pinned(), x, 5, spec=Dim.DYNAMIC)


def test_dynamic_int_bounds_and_named_dims():
    x = torch.randn(4, 3)
    ep = _export(_Scale(), x, 4, spec=Dim.DYNAMIC(min=0, max=9))
    (value_range,) = ep.range_constraints.values()
    assert (int(value_range.lower), int(value_range.upper)) == (0, 9)
    with pytest.raises(InputMismatchError, match="outside the range"):
        ep.module()(x, -1)
    with pytest.raises(InputMismatchError, match="outside the range"):
        ep.module()(x, 10)
    with pytest.raises(ExportUsageError, match="outside the range"):
        _export(_Scale(), x, 12, spec=Dim.AUTO(max=9))
    with pytest.raises(ExportUsageError, match="Use Dim.AUTO or Dim.DYNAMIC"):
        _export(_Scale(), x, 4, spec=Dim("n"))
    with pytest.raises(InputMismatchError, match="must be an int"):
        ep.module()(x, 2.5)


def test_int_inputs_beside_torch_export():
    """Where torch.export admits a value and unbroken does too, both compute eager's answer;
    unbroken never admits a value eager computes differently for."""
    x = torch.randn(8, 3)
    for model in (_Scale(), _Branch(), _Repeat()):
        ours = _export(model, x, 4)
        theirs = torch.export.export(model, (x, 4), dynamic_shapes=(None, Dim.AUTO))
        assert _same(ours.module()(x, 5), theirs.module()(x, 5))
        assert _same(ours.module()(x, 5), model(x, 5))


def test_round_trip_through_save_and_load(tmp_path):
    ep = _export(_Arith(), torch.randn(4, 3), 4)
    path = tmp_path / "int.pt2"
    unbroken.save(ep, path)
    loaded = unbroken.load(path)
    x = torch.randn(4, 3)
    assert _same(loaded.module()(x, -3), _Arith()(x, -3))


@settings(max_examples=25, deadline=None)
@given(model=st.sampled_from(MODELS), example=st.integers(-3, 9),
       auto_dim=st.booleans())
def test_every_admitted_value_computes_what_eager_computes(model, example, auto_dim):
    x = torch.randn(8, 3)
    try:
        ep = _export(model(), x, example, x_spec={0: Dim.AUTO} if auto_dim else None)
    except (RuntimeError, IndexError, ValueError):  # eager refuses it too (negative repeat)
        with pytest.raises(Exception):  # noqa: B017, PT011 (eager's own error, any type)
            model()(x, example)
        return
    placeholder = [n for n in ep.graph.nodes if n.op == "placeholder"][-1]
    for n in range(example - 6, example + 7):
        if not isinstance(placeholder.meta["val"], torch.SymInt):
            if n != example:
                with pytest.raises(InputMismatchError):
                    ep.module()(x, n)
            continue
        try:
            got = ep.module()(x, n)
        except InputMismatchError:
            assert not _admitted(ep, n) or not _admitted_by_assertions(ep, x, n)
            continue
        assert _same(got, model()(x, n)), (model, example, n)


def _admitted_by_assertions(ep, x, n) -> bool:
    """A value inside the range may still break a relation the program checks first."""
    try:
        ep.module().check_inputs(x, n)
    except InputMismatchError:
        return False
    return True
