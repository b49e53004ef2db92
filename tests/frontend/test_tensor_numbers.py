"""``int(t)``, ``float(t)`` and ``bool(t)`` of a one-element tensor (``frontend.builtins``):
the value ``t.item()`` reads at run time, converted as eager converts it (no decision taken,
no specialization to the example's value), differentially against eager on drawn values."""
from __future__ import annotations

import math

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

import unbroken
from unbroken import GraphBreakError

CONVERSIONS = {"int": int, "float": float, "bool": bool}
DTYPES = {"float32": torch.float32, "float64": torch.float64, "int64": torch.int64,
          "int32": torch.int32, "bool": torch.bool}


class Convert(torch.nn.Module):
    def __init__(self, conversion):
        super().__init__()
        self.conversion = conversion

    def forward(self, t, y):
        number = self.conversion(t)
        return y * number, number


def _values(dtype):
    if dtype is torch.bool:
        return st.booleans()
    if dtype.is_floating_point:
        return st.floats(-1e6, 1e6, allow_nan=False, width=32)
    return st.integers(-(2 ** 31), 2 ** 31 - 1)


_PAIRS = [(c, d) for c in CONVERSIONS for d in DTYPES if not (d == "bool" and c != "bool")]


@pytest.mark.parametrize("conversion, dtype", _PAIRS)
@settings(max_examples=25, deadline=None)
@given(data=st.data())
def test_a_conversion_computes_eagers_number_for_every_value(conversion, dtype, data):
    model = Convert(CONVERSIONS[conversion])
    dtype = DTYPES[dtype]
    shape = data.draw(st.sampled_from([(), (1,), (1, 1)]), label="shape")
    y = torch.randn(3)
    program = _exported(conversion, dtype, shape, y)
    value = data.draw(_values(dtype), label="value")
    t = torch.full(shape, value, dtype=dtype)
    got, expected = program.module()(t, y), model(t, y)
    assert type(got[1]) is type(expected[1]) and got[1] == expected[1]
    torch.testing.assert_close(got[0], expected[0])


_PROGRAMS: dict = {}


def _exported(conversion, dtype, shape, y):
    key = (conversion, dtype, shape)
    if key not in _PROGRAMS:  # one export per kind; the drawn values run through it
        example = torch.ones(shape, dtype=dtype)
        _PROGRAMS[key] = unbroken.export(Convert(CONVERSIONS[conversion]), (example, y))
    return _PROGRAMS[key]


def test_the_program_reads_the_value_instead_of_keeping_the_examples():
    program = unbroken.export(Convert(float), (torch.tensor([2]), torch.ones(2)))
    assert [n for n in program.graph.nodes if n.target is torch.ops.aten.item.default]
    assert program.module()(torch.tensor([-7]), torch.ones(2))[1] == -7.0
    # int() of a float truncates toward zero, as Python's int() does
    truncating = unbroken.export(Convert(int), (torch.tensor(2.5), torch.ones(2)))
    assert truncating.module()(torch.tensor(-2.7), torch.ones(2))[1] == math.trunc(-2.7)


class Decides(torch.nn.Module):
    def forward(self, x):
        if bool(x.sum() > 0):  # MARK
            return x + 1
        return x - 1


def test_a_decision_on_the_converted_value_is_refused_at_its_line():
    with pytest.raises(GraphBreakError) as info:
        unbroken.export(Decides(), (torch.randn(4),))
    assert info.value.code == "UB105" and "if bool(x.sum() > 0)" in str(info.value)
    assert "VR[0, 1]" in str(info.value)  # a bool item is 0 or 1


@pytest.mark.parametrize("conversion, tensor", [
    (float, torch.ones(2)),  # not one element: eager raises
    (int, torch.tensor(True)),  # int of a bool tensor: not modelled
    (float, torch.tensor(1 + 2j)),  # complex: eager raises for float()
])
def test_unmodelled_conversions_stay_refused(conversion, tensor):
    with pytest.raises(GraphBreakError) as info:
        unbroken.export(Convert(conversion), (tensor, torch.ones(2)))
    assert info.value.code == "UB105"
    assert f"`{conversion.__name__}()` of" in str(info.value)
