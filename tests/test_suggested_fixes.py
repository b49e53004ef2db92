"""Suggested fixes end to end: the printed dynamic_shapes is pasted (exec'd) as a user would,
and exporting with it must succeed and match eager over the sizes it admits."""
import re

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import unbroken
from unbroken.exporter import pipeline, shapes


def _suggested_code(error) -> str:
    match = re.search(r"(from torch.export import Dim\n.*?\n\})", error.details, re.S)
    assert match, error.render()
    return match.group(1)


def _paste(error) -> dict:
    scope: dict = {}
    exec(_suggested_code(error), scope)  # what a user does with the message
    return scope["dynamic_shapes"]


def _refused(model, args, spec):
    with pytest.raises(unbroken.ConstraintViolationError) as info:
        unbroken.export(model, args, dynamic_shapes=spec)
    return info.value


class DynamicModel(nn.Module):
    """The seed tutorial's model: x + y broadcasts, Linear(5, 3), flatten + z."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(5, 3)

    def forward(self, w, x, y, z):
        x0 = x + y
        x1 = self.l(w)
        x2 = x0.flatten()
        x3 = x2 + z
        return x1, x3


def test_seed_dynamic_model_fix_exports():
    args = (torch.randn(6, 5), torch.randn(4), torch.randn(8, 4), torch.randn(32))
    spec = {"w": (Dim("w0"), Dim("w1")), "x": (Dim("x0"),), "y": (Dim("y0"), Dim("y1")),
            "z": (Dim("z0"),)}
    model = DynamicModel()
    error = _refused(model, args, spec)
    assert "w.shape[1] == 5" in error.details
    ep = unbroken.export(model, args, dynamic_shapes=_paste(error))
    w = torch.randn(11, 5)
    torch.testing.assert_close(ep.module()(w, *args[1:]), model(w, *args[1:]))


class Broadcast(nn.Module):
    def forward(self, x, y):
        return x * 2 + y


def test_two_dims_become_one():
    args = (torch.randn(6, 3), torch.randn(6, 3))
    error = _refused(Broadcast(), args, {"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    assert "equals" in error.details
    ep = unbroken.export(Broadcast(), args, dynamic_shapes=_paste(error))
    assert len(ep.range_constraints) == 1
    x, y = torch.randn(9, 3), torch.randn(9, 3)
    torch.testing.assert_close(ep.module()(x, y), Broadcast()(x, y))


class Pairs(nn.Module):
    def forward(self, x):
        return x.view(-1, 4, 2).sum(1)


def test_divisibility_becomes_a_derived_dim():
    error = _refused(Pairs(), (torch.randn(16, 2),), {"x": {0: Dim("n", max=100)}})
    code = _suggested_code(error)
    assert "4 * _n" in code
    ep = unbroken.export(Pairs(), (torch.randn(16, 2),), dynamic_shapes=_paste(error))
    for n in (8, 12, 100):
        x = torch.randn(n, 2)
        torch.testing.assert_close(ep.module()(x), Pairs()(x))
    for n in (6, 4):  # not a multiple of 4; a root of 1 (dynamic sizes start at 2)
        with pytest.raises(unbroken.InputMismatchError):
            ep.module()(torch.randn(n, 2))


class PicksRow(nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:      # specializes a branch: needs x.shape[0] >= 5
            return x[4]
        return x[0]


def test_a_branch_on_a_size_tightens_the_range():
    error = _refused(PicksRow(), (torch.randn(8, 3),), {"x": {0: Dim("rows")}})
    assert "rows = Dim(\"rows\", min=5)" in _suggested_code(error)
    ep = unbroken.export(PicksRow(), (torch.randn(8, 3),), dynamic_shapes=_paste(error))
    x = torch.randn(5, 3)
    torch.testing.assert_close(ep.module()(x), PicksRow()(x))


class Rows4(nn.Module):
    def forward(self, x):
        return x.view(-1, 4) * 2


def test_view_into_rows_suggests_a_multiple_not_a_static_dim():
    # x.view(-1, 4) also asks `x.shape[0] // 4 != 1` (strides): the multiple 4*k, k >= 2,
    # settles it, so the fix is the derived dim, not "make x static" (issue 8)
    error = _refused(Rows4(), (torch.randn(16),), {"x": {0: Dim("n")}})
    assert "4 * _n" in _suggested_code(error)
    ep = unbroken.export(Rows4(), (torch.randn(16),), dynamic_shapes=_paste(error))
    x = torch.randn(36)
    torch.testing.assert_close(ep.module()(x), Rows4()(x))


class PairAndDict(nn.Module):
    def forward(self, x, pair, extra):
        return x.view(-1, 4).sum(1), pair[0] + pair[1], extra["a"] * extra["b"]


def test_fix_for_dims_inside_containers():
    args = (torch.randn(16), (torch.randn(5, 3), torch.randn(5, 3)),
            {"a": torch.randn(2), "b": 3})
    spec = {"x": {0: Dim("n")}, "pair": ({0: Dim("p")}, {0: Dim("q")}),
            "extra": {"a": None, "b": None}}
    error = _refused(PairAndDict(), args, spec)
    code = _suggested_code(error)
    assert '"pair": ({0: p}, {0: p}),' in code and '"x": {0: 4 * _n},' in code
    ep = unbroken.export(PairAndDict(), args, dynamic_shapes=_paste(error))
    fresh = (torch.randn(24), (torch.randn(7, 3), torch.randn(7, 3)), {"a": torch.randn(2), "b": 3})
    for got, want in zip(ep.module()(*fresh), PairAndDict()(*fresh)):
        torch.testing.assert_close(got, want)


def test_a_bug_while_verifying_the_fix_is_raised_not_dropped(monkeypatch):
    """The fix search re-exports with the suggestion; a bug in that re-export (InternalError)
    must surface, not read as "no fix found"."""
    run = pipeline.run_stages

    def run_or_fail(call, options):
        if not options.suggest_fixes:  # the verifying re-export
            raise unbroken.InternalError("a bug planted by the test")
        return run(call, options)

    monkeypatch.setattr(pipeline, "run_stages", run_or_fail)
    args = (torch.randn(6, 3), torch.randn(6, 3))
    with pytest.raises(unbroken.InternalError, match="planted"):
        unbroken.export(Broadcast(), args, dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})


def test_the_fix_is_searched_once_per_refusal(monkeypatch):
    """Issue 11 item 5: the solver's fix search ran twice on the same violations."""
    calls = []
    search = shapes.suggest_fix

    def counted(*args, **kwargs):
        calls.append(args[0])
        return search(*args, **kwargs)

    monkeypatch.setattr(shapes, "suggest_fix", counted)
    args = (torch.randn(6, 3), torch.randn(6, 3))
    with pytest.raises(unbroken.ConstraintViolationError) as info:
        unbroken.export(Broadcast(), args, dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    assert "Suggested fix" in info.value.details
    assert len(calls) == 1
