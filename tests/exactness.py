"""Bit-exactness with eager, the default oracle of the model tests.

An exported program runs the same ATen kernels as eager on the same inputs, so its outputs
must equal eager's bit for bit: a tolerance would hide a recorded op or a kept composite that
computes differently (a decomposition reordering a sum, a fused kernel replaced by its parts).
A tolerance is allowed only with a reason naming the kernel that is genuinely
nondeterministic or that torch itself runs differently outside eager.
"""
from __future__ import annotations

import pytest
import torch
from torch.utils import _pytree as pytree

from unbroken.symbolic.diagnostics import InputMismatchError


def assert_bit_exact(got, want, *, atol: float = 0.0, reason: str = "") -> None:
    """``got`` has ``want``'s structure and every tensor equals eager's bit for bit (NaNs in the
    same places), with the same dtype, shape and ``requires_grad``; ``atol`` > 0 needs a
    ``reason``."""
    if atol and not reason:
        raise ValueError("a tolerance needs a reason naming the kernel that is not exact")
    got_leaves, got_spec = pytree.tree_flatten(got)
    want_leaves, want_spec = pytree.tree_flatten(want)
    assert got_spec == want_spec, f"structure differs:\n{got_spec}\n!=\n{want_spec}"
    for index, (a, b) in enumerate(zip(got_leaves, want_leaves, strict=True)):
        if not isinstance(b, torch.Tensor):
            assert a == b, f"leaf {index}: {a!r} != {b!r}"
            continue
        assert isinstance(a, torch.Tensor), f"leaf {index}: {type(a).__name__}, want a tensor"
        assert (a.dtype, a.shape) == (b.dtype, b.shape), \
            f"leaf {index}: {a.dtype}{list(a.shape)} != {b.dtype}{list(b.shape)}"
        assert a.requires_grad == b.requires_grad, f"leaf {index}: requires_grad differs"
        if atol:
            torch.testing.assert_close(a, b, atol=atol, rtol=0, equal_nan=True,
                                       msg=lambda m, i=index: f"leaf {i} ({reason}): {m}")
        elif not torch.equal(a.detach(), b.detach()):
            same_nans = torch.isnan(a).equal(torch.isnan(b)) if a.is_floating_point() else False
            if not (same_nans and torch.equal(a.detach().nan_to_num(0.0),
                                              b.detach().nan_to_num(0.0))):
                diff = (a.detach().double() - b.detach().double()).abs().max().item()
                raise AssertionError(f"leaf {index}: not bit-exact with eager, max |diff| {diff}")


FAST_PATH = ("eval-mode eager under no_grad runs PyTorch's fused attention fast path "
             "(_native_multi_head_attention / _transformer_encoder_layer_fwd); exported with grad "
             "on, the program records the differentiable path eager takes there, and module() "
             "refuses a no_grad call (tests/frontend/test_nn_fast_paths.py exports under no_grad)")


def assert_matches_eager(module, model, args, *, fast_path: bool = False) -> None:
    """``module(*args)`` equals ``model(*args)`` bit for bit under ``no_grad``. A model whose eager
    no_grad call takes torch.nn's fused fast path (``fast_path``), exported with grad on, is
    compared bit for bit with eager with grad on, and its no_grad call is refused: eager takes
    another kernel there (``FAST_PATH``)."""
    if not fast_path:
        with torch.no_grad():
            got, want = module(*args), model(*args)
        assert_bit_exact(got, want)
        return
    with torch.no_grad(), pytest.raises(InputMismatchError, match="fused fast path"):
        module(*args)
    with torch.enable_grad():
        assert_bit_exact(module(*args), model(*args))


def assert_one_refused_and_the_rest_exact(model, example: torch.Tensor, spec, *, match: str,
                                          batches=(2, 5), scale: float = 10.0) -> None:
    """``model`` exported from ``example`` under ``spec`` (a ``Dim.AUTO`` batch): its batch
    keeps ``[2, ...]``, ``module()`` refuses batch 1 with a message matching ``match``, and
    every batch of ``batches`` is eager's bit for bit."""
    import unbroken  # the package under test, imported where it is used

    ep = unbroken.export(model, (example,), dynamic_shapes=spec)
    assert {int(r.lower) for r in ep.range_constraints.values()} == {2}
    with pytest.raises(InputMismatchError, match=match):
        ep.module()(torch.randn(1, *example.shape[1:]))
    for batch in batches:
        x = torch.randn(batch, *example.shape[1:]) * scale
        assert_bit_exact(ep.module()(x), model(x))
