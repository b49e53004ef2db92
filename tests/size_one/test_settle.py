"""size_one.settle: a deferred size-1 check over input facts that are undefined at 1."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact
from unbroken import InputMismatchError


class ViewShorter(nn.Module):
    """``x.view(n - k, -1)``: the ``-1`` is ``4*n / (n - k)``, so the input fact the program
    asserts (``4*n % (n - k) == 0``) divides by zero at ``n = k``."""

    def __init__(self, k: int, reshape: bool = False):
        super().__init__()
        self.k, self.reshape = k, reshape

    def forward(self, x):
        rows = x.shape[0] - self.k
        return x.reshape(rows, -1) if self.reshape else x.view(rows, -1)


@pytest.mark.parametrize("k, example, reshape", [
    (1, 3, False), (1, 5, True), (2, 3, False), (2, 4, True), (3, 5, False),
], ids=["view_n-1", "reshape_n-1", "view_n-2", "reshape_n-2", "view_n-3"])
def test_a_view_whose_minus_one_divides_by_zero_at_some_size_is_exact_or_refused(
        k, example, reshape):
    """The audit put the size at 1 into the input fact ``4*n % (n - 1) == 0``: torch's
    ``Mod`` raised ZeroDivisionError, an internal error (UB999). An undefined fact is not
    false there: the size-1 set is checked like any other (and refused, as eager raises).
    Every size 0..11 is eager's bit for bit, or refused by module() with our own error."""
    model = ViewShorter(k, reshape)
    ep = unbroken.export(model, (torch.randn(example, 4),),
                         dynamic_shapes={"x": (Dim.DYNAMIC, None)})
    matched = 0
    for n in range(12):
        x = torch.randn(n, 4)
        try:
            want = model(x)
        except RuntimeError:
            with pytest.raises(InputMismatchError):
                ep.module()(x)
            continue
        try:
            got = ep.module()(x)
        except InputMismatchError:
            continue  # refusing an input eager accepts is conservative, never wrong
        assert_bit_exact(got, want)
        matched += 1
    assert matched >= 1


class MaskedBlocks(nn.Module):
    """Four blocks adding a mask whose batch broadcasts against the input's (the input fact
    ``mask_batch == batch or mask_batch == 1``): each block's nodes are checked at 1 for the
    same sets of the same symbols."""

    def forward(self, x, mask):
        for _ in range(4):
            x = (x + mask).softmax(-1).transpose(1, 2) * 2
        return x


def test_reachability_is_asked_once_per_set_while_settling(monkeypatch):
    """Whether an input can have a set of sizes at 1 (the input facts and refused sets
    allow it) is kept while the checks settle: asked once per set, symbols and facts, and
    the program (ranges, run-time assertions, sizes admitted at 1) is the one asking every
    time gives."""
    from unbroken.size_one import settle

    args = (torch.randn(3, 5, 5), torch.randn(3, 1, 5))
    spec = ({0: Dim.AUTO, 1: Dim.AUTO, 2: Dim.AUTO}, {0: Dim.AUTO, 2: Dim.AUTO})
    real, calls = settle._unreachable, []

    def counting(*arguments):
        calls.append(arguments[2])
        return real(*arguments)

    monkeypatch.setattr(settle, "_unreachable", counting)
    kept = unbroken.export(MaskedBlocks(), args, dynamic_shapes=spec)
    kept_calls = len(calls)
    plain_kept = settle._unreachable_kept
    monkeypatch.setattr(settle, "_unreachable_kept",
                        lambda _kept, *arguments: plain_kept({}, *arguments))
    calls.clear()
    asked = unbroken.export(MaskedBlocks(), args, dynamic_shapes=spec)
    assert len(calls) > kept_calls >= 1
    assert kept.graph_module.code == asked.graph_module.code
    assert kept.range_constraints == asked.range_constraints
    for batch, mask_batch, n in [(1, 1, 5), (4, 1, 1), (4, 4, 3), (2, 1, 7)]:
        x, mask = torch.randn(batch, n, n), torch.randn(mask_batch, 1, n)
        assert_bit_exact(kept.module()(x, mask), MaskedBlocks()(x, mask))


class ConvNorm(nn.Module):
    """A 3x3 convolution then batch norm on a channels-last input: the output's strides hold
    ``(h - 2) * (w - 2)``-style products, and the audit's questions about them divide by
    sizes that are negative with ``h`` or ``w`` at 1."""

    def __init__(self):
        super().__init__()
        self.conv, self.norm = nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4)

    def forward(self, x):
        return self.norm(self.conv(x.contiguous(memory_format=torch.channels_last)))


def test_an_expression_torch_refuses_at_one_is_undefined_there():
    """torch's sympy ``Mod``/``FloorDiv`` raise AssertionError for a divisor below 1 (not
    sympy's ZeroDivisionError): putting sizes at 1 into ``x % (s - 5)`` raised out of the
    audit, and a conv + batch norm under ``Dim.AUTO`` on every spatial dim was refused as
    "PyTorch raised an error" (UB120), where torch exports. Every substitution of sizes in
    the size-1 audit goes through ``at_values``: undefined there is an ArithmeticError, which
    each caller already reads as "not this set"."""
    import sympy
    from torch.utils._sympy.functions import Mod

    from unbroken.size_one.at_one import UndefinedThere, at_values, put_ones

    s = sympy.Symbol("s", integer=True, positive=True)
    for expr in (Mod(s + 6, s - 5), sympy.Eq(Mod(s + 6, s - 5), 0), Mod(s + 6, s - 1)):
        with pytest.raises(UndefinedThere if expr.has(s - 5) else ZeroDivisionError):
            at_values(expr, {s: sympy.Integer(1)})
        with pytest.raises(ArithmeticError):
            put_ones(expr, (s,))
    assert at_values(Mod(s + 6, s - 5), {s: sympy.Integer(8)}) == 2

    model = ConvNorm().eval()
    ep = unbroken.export(model, (torch.randn(2, 3, 7, 7),),
                         dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO},))
    matched = 0
    for batch, height, width in [(1, 4, 4), (2, 7, 7), (3, 5, 9), (2, 3, 4), (1, 8, 3)]:
        x = torch.randn(batch, 3, height, width)
        try:
            got = ep.module()(x)
        except InputMismatchError:
            continue  # refusing a size is conservative, never wrong
        want = model(x)
        assert_bit_exact(got, want)
        assert got.stride() == want.stride()
        matched += 1
    assert matched >= 3
