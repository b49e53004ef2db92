"""``prefer_deferred_runtime_asserts_over_guards`` (exporter.shapes): a condition the code puts
on named ``Dim``s that no ``Dim`` states directly (``n % 4 == 0``, a product of two sizes)
becomes a run-time assertion of the program instead of a refusal, as in torch.export; bounds,
values and equalities stay refusals with the suggested ``Dim`` (torch refuses them too). Side
by side with torch.export on the same programs, and every size of the declared ranges checked
against eager: the program either computes eager's result bit for bit or refuses the call
naming the condition."""
from __future__ import annotations

import inspect
import warnings

import pytest
import sympy
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact
from unbroken import ConstraintViolationError, InputMismatchError
from unbroken.exporter.shapes import _stated_by_a_dim

pytestmark = pytest.mark.matrix  # torch.export's side of the same flag, on every cell

FLAG = "prefer_deferred_runtime_asserts_over_guards"


class Quarters(nn.Module):
    """``x.reshape(-1, 4)`` of a (n, 3) input: needs ``3 * n % 4 == 0``."""

    def forward(self, x):
        return x.reshape(-1, 4) * 2


class Area(nn.Module):
    """A decision on the product of two sizes."""

    def forward(self, x):
        if x.shape[0] * x.shape[1] > 40:
            return x + 1
        return x - 1


class Threshold(nn.Module):
    """A bound on one size: a Dim states it (min=17)."""

    def forward(self, x):
        return x * 2 if x.shape[0] > 16 else x * 3


class Eight(nn.Module):
    """A value of one size: the dim is static."""

    def forward(self, x):
        return x.view(8, -1) * 2


class Sum(nn.Module):
    """Two sizes equal: one Dim."""

    def forward(self, x, y):
        return x + y


S, T = Dim("s", min=1, max=64), Dim("t", min=1, max=64)
DEFERRED = {"quarters": (Quarters, (torch.randn(8, 3),), {"x": {0: S}}),
            "area": (Area, (torch.randn(8, 6),), {"x": {0: S, 1: T}})}
STATED = {"threshold": (Threshold, (torch.randn(32, 3),), {"x": {0: S}}),
          "eight": (Eight, (torch.randn(8, 3),), {"x": {0: S}}),
          "sum": (Sum, (torch.randn(8, 3), torch.randn(8, 3)), {"x": {0: S}, "y": {0: T}})}


def _export(exporter, case, **flag):
    model_class, args, spec = case
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return exporter(model_class(), args, dynamic_shapes=spec, **flag)


def test_the_flag_is_in_the_signature_as_in_torch():
    ours = inspect.signature(unbroken.export).parameters
    theirs = inspect.signature(torch.export.export).parameters
    assert set(theirs) <= set(ours)
    assert ours[FLAG].default is False and ours[FLAG].kind is inspect.Parameter.KEYWORD_ONLY


@pytest.mark.parametrize("name", list(DEFERRED))
def test_a_condition_no_dim_states_is_deferred_as_torch_defers_it(name):
    case = DEFERRED[name]
    with pytest.raises(ConstraintViolationError):  # refused with the fix without the flag
        _export(unbroken.export, case)
    program = _export(unbroken.export, case, **{FLAG: True})
    peer = _export(torch.export.export, case, **{FLAG: True})
    asserts = [n for n in program.graph.nodes
               if n.target is torch.ops.aten._assert_scalar.default]
    assert asserts, "the condition is a run-time assertion of the graph"
    # the declared ranges are kept (no narrowing, no static dim)
    assert {str(r) for r in program.range_constraints.values()} <= {"VR[1, 64]", "VR[2, 64]"}
    assert len(program.range_constraints) == len(peer.range_constraints)
    args = case[1]
    assert_bit_exact(program.module()(*args), case[0]()(*args))


@pytest.mark.parametrize("name", list(STATED))
def test_a_condition_a_dim_states_is_still_refused_as_torch_refuses_it(name):
    case = STATED[name]
    with pytest.raises(ConstraintViolationError) as info:
        _export(unbroken.export, case, **{FLAG: True})
    assert "Suggested fix" in str(info.value) and "test_deferred_asserts.py" in str(info.value)
    with pytest.raises(Exception, match="Constraints violated"):
        _export(torch.export.export, case, **{FLAG: True})


def _eager_or_error(model, args):
    try:
        return model(*args), None
    except RuntimeError as error:
        return None, error


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(n=st.integers(2, 64), m=st.integers(2, 64))
def test_every_admitted_size_is_eager_or_refused_naming_the_condition(n, m):
    """Over the declared ranges: where the condition holds the program is eager's bit for
    bit; where it does not, ``module()`` refuses the call before running, naming it."""
    for name, args, holds in (("quarters", (torch.randn(n, 3),), 3 * n % 4 == 0),
                              ("area", (torch.randn(n, m),), n * m > 40)):
        case = DEFERRED[name]
        program = _programs()[name]
        model = case[0]()
        if holds:
            assert_bit_exact(program.module()(*args), model(*args))
            continue
        with pytest.raises(InputMismatchError, match="the exported program requires"):
            program.module()(*args)
        if name == "quarters":  # eager's reshape fails there too (Area's branch flips)
            assert _eager_or_error(model, args)[1] is not None


_CACHE: dict = {}


def _programs() -> dict:
    if not _CACHE:
        _CACHE.update({name: _export(unbroken.export, case, **{FLAG: True})
                       for name, case in DEFERRED.items()})
    return _CACHE


def test_dim_auto_still_adopts_what_the_code_requires():
    """``Dim.AUTO`` dims are not deferred: the program states the relation (a derived dim)."""
    args = (torch.randn(8, 3),)
    plain = unbroken.export(Quarters(), args, dynamic_shapes={"x": {0: Dim.AUTO}})
    flagged = unbroken.export(Quarters(), args, dynamic_shapes={"x": {0: Dim.AUTO}},
                              **{FLAG: True})
    assert str(plain.graph_module.code) == str(flagged.graph_module.code)
    assert plain.range_constraints.keys() == flagged.range_constraints.keys()


def test_the_deferred_program_saves_and_loads(tmp_path):
    program = _programs()["area"]
    path = tmp_path / "area.pt2"
    unbroken.save(program, path)
    loaded = unbroken.load(path)
    args = (torch.randn(8, 8),)
    assert_bit_exact(loaded.module()(*args), Area()(*args))
    with pytest.raises(Exception, match="40"):
        loaded.module()(torch.randn(2, 3))


s0, s1 = sympy.symbols("s0 s1", integer=True, positive=True)


@pytest.mark.parametrize("fact, stated", [
    (s0 > 16, True), (sympy.Eq(s0, 8), True), (sympy.Ne(s0, 5), True), (s0 * s0 < 50, True),
    (sympy.Eq(s0, s1), True), (sympy.Eq(s0, 2 * s1 + 1), True),
    (sympy.Eq(sympy.Mod(3 * s0, 4), 0), False), (s0 * s1 > 40, False),
    (sympy.Eq(s0 * s1, 12), False), (s0 < s1, False), (sympy.Eq(sympy.Max(s0, 4), s0), False),
])
def test_what_a_dim_states(fact, stated):
    assert _stated_by_a_dim(fact) is stated
