"""Tests for unbroken.ir.input_checks: ep.module() refuses inputs the program was not exported
for (structure, dtype, rank, sizes against the ranges, derived dims, constants)."""
import pytest
import sympy
import torch

from tests.graph_builder import Builder, Range, aten, meta
from tests.ir.test_runtime import nested_program, sym_meta, symints
from unbroken.symbolic.diagnostics import InputMismatchError


# -- structure errors ----------------------------------------------------------------------------
def call_nested(*args, **kwargs):
    ep, _ = nested_program()
    return ep.module()(*args, **kwargs)


def test_wrong_positional_count():
    with pytest.raises(InputMismatchError, match=r"expects 2 positional argument\(s\) "
                       r"\(x, \[ys_0, ys_1\], mask=mask\), got 1"):
        call_nested(torch.ones(4), mask=torch.ones(4, dtype=torch.bool))


def test_missing_and_unexpected_kwargs():
    args = (torch.ones(4), [torch.ones(4), torch.ones(4)])
    with pytest.raises(InputMismatchError, match="missing keyword argument\\(s\\) 'mask'"):
        call_nested(*args)
    with pytest.raises(InputMismatchError, match="unexpected keyword argument\\(s\\) 'bias'"):
        call_nested(*args, mask=torch.ones(4, dtype=torch.bool), bias=1)


def test_wrong_container_structure():
    with pytest.raises(InputMismatchError, match=r"expected \(x, \[ys_0, ys_1\], mask=mask\), "
                       r"got \(Tensor, \[Tensor, Tensor, Tensor\], mask=Tensor\)"):
        call_nested(torch.ones(4), [torch.ones(4)] * 3, mask=torch.ones(4, dtype=torch.bool))


# -- leaf errors ---------------------------------------------------------------------------------
def simple_program(x_val, range_constraints=None, extra=()):
    """forward(x, *extra) = neg(x); extra inputs are (name, val) placeholders."""
    b = Builder()
    x = b.input("x", x_val)
    for name, val in extra:
        b.input(name, val)
    b.output(b.call(aten.neg.default, x))
    example = (torch.ones(1),) + tuple(torch.ones(1) for _ in extra)
    return b.program({}, {}, example, outputs=torch.empty(0),
                     range_constraints=range_constraints).module()


def test_not_a_tensor():
    with pytest.raises(InputMismatchError, match="Input x must be a tensor, got int"):
        simple_program(meta(3))(3)


def test_wrong_dtype():
    with pytest.raises(InputMismatchError, match="Input x must have dtype torch.float32, got "
                       "torch.int64") as info:
        simple_program(meta(3))(torch.ones(3, dtype=torch.int64))
    assert ".to(torch.float32)" in str(info.value)


def test_wrong_rank():
    with pytest.raises(InputMismatchError, match=r"Input x must have 2 dimension\(s\) \(shape "
                       r"\[8, 3\]\), got 1 \(shape \[3\]\)"):
        simple_program(meta(8, 3))(torch.ones(3))


def test_specialized_size():
    with pytest.raises(InputMismatchError,
                       match=r"x.shape\[0\] is specialized at 8, got 10") as info:
        simple_program(meta(8, 3))(torch.ones(10, 3))
    assert "dynamic_shapes" in str(info.value)


def test_dynamic_dim_in_range_runs():
    (s0,) = symints(8)
    m = simple_program(sym_meta(s0, 3), {s0.node.expr: Range(2, 16)})
    for n in (2, 5, 16):
        torch.testing.assert_close(m(torch.ones(n, 3)), -torch.ones(n, 3))


def test_dynamic_dim_out_of_range():
    (s0,) = symints(8)
    symbol = s0.node.expr
    m = simple_program(sym_meta(s0, 3), {symbol: Range(2, 16)})
    with pytest.raises(InputMismatchError, match=rf"x.shape\[0\]: {symbol} = 17 is outside the "
                       rf"range the program was exported for: {symbol} in \[2, 16\]"):
        m(torch.ones(17, 3))
    with pytest.raises(InputMismatchError, match=rf"{symbol} = 1 is outside"):
        m(torch.ones(1, 3))


def test_dynamic_dim_unbounded_above():
    (s0,) = symints(8)
    m = simple_program(sym_meta(s0, 3), {s0.node.expr: Range(2, sympy.oo)})
    assert m(torch.ones(1000, 3)).shape == (1000, 3)


def test_equal_dims_must_agree():
    (s0,) = symints(8)
    m = simple_program(sym_meta(s0, 3), {s0.node.expr: Range(2, 16)},
                       extra=[("y", sym_meta(s0))])
    m(torch.ones(4, 3), torch.ones(4))
    with pytest.raises(InputMismatchError, match=r"y.shape\[0\] = 5 but x.shape\[0\] = 4: the "
                       r"program was exported with these dimensions equal"):
        m(torch.ones(4, 3), torch.ones(5))


def test_derived_dim():
    (s0,) = symints(4)
    symbol = s0.node.expr
    m = simple_program(sym_meta(s0, 3), {symbol: Range(2, 8)}, extra=[("y", sym_meta(2 * s0))])
    m(torch.ones(3, 3), torch.ones(6))
    with pytest.raises(InputMismatchError, match=rf"y.shape\[0\] = 7 but the program requires it "
                       rf"to equal 2\*{symbol} = 6 \({symbol} = 3 from x.shape\[0\]\)"):
        m(torch.ones(3, 3), torch.ones(7))


def test_derived_dim_solved_from_itself():
    """Only a derived dim carries the symbol: it is solved from it, then checked in range."""
    (s0,) = symints(4)
    symbol = s0.node.expr
    b = Builder()
    y = b.input("y", sym_meta(2 * s0))
    b.output(b.call(aten.neg.default, y))
    m = b.program({}, {}, (torch.ones(8),), outputs=torch.empty(0),
                  range_constraints={symbol: Range(2, 8)}).module()
    m(torch.ones(10))
    with pytest.raises(InputMismatchError, match=rf"y.shape\[0\] = 7 is not of the form "
                       rf"2\*{symbol} for an integer {symbol}"):
        m(torch.ones(7))
    with pytest.raises(InputMismatchError, match=rf"y.shape\[0\] \(= 2\*{symbol}\): {symbol} = "
                       rf"9 is outside"):
        m(torch.ones(18))


def test_specialized_constant_input():
    b = Builder()
    x = b.input("x", meta(2))
    b.input("alpha", 2.0)
    b.input("mode", "fast")
    b.output(b.call(aten.mul.Tensor, x, 2.0))
    m = b.program({}, {}, (torch.ones(2), 2.0, "fast"), outputs=torch.empty(0)).module()
    torch.testing.assert_close(m(torch.ones(2), 2.0, "fast"), 2 * torch.ones(2))
    with pytest.raises(InputMismatchError, match="Input alpha was specialized to 2.0 at export "
                       "time, got 3.0"):
        m(torch.ones(2), 3.0, "fast")
    with pytest.raises(InputMismatchError, match="Input mode was specialized to 'fast'"):
        m(torch.ones(2), 2.0, "slow")
    with pytest.raises(InputMismatchError, match="specialized to 2.0 at export time, got 2"):
        m(torch.ones(2), 2, "fast")


def test_symint_input():
    (s0,) = symints(3)
    symbol = s0.node.expr
    b = Builder()
    x = b.input("x", meta(4))
    b.input("n", s0)
    b.output(b.call(aten.mul.Tensor, x, 1.0))
    m = b.program({}, {}, (torch.ones(4), 3), outputs=torch.empty(0),
                  range_constraints={symbol: Range(0, 5)}).module()
    m(torch.ones(4), 5)
    with pytest.raises(InputMismatchError, match=rf"n: {symbol} = 6 is outside"):
        m(torch.ones(4), 6)
    with pytest.raises(InputMismatchError, match="Input n must be an int, got float"):
        m(torch.ones(4), 1.5)
