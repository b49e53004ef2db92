"""Tensors autograd saves for backward, then written in place: eager's backward refuses them.

Eager: ``z = (y * w).sin()`` saves ``y`` (the gradient of ``w`` needs it); a later in-place
write into ``y`` (under ``no_grad`` or not) bumps its version counter, and ``backward`` through
``z`` raises "one of the variables needed for gradient computation has been modified by an
inplace operation". The functional program reads the old ``y`` and would return a gradient
computed from it: a silent wrong answer.

At each in-place write the recorder notes every op recorded with grad enabled that read the
written value (and the op that made it, which may save its own result: ``exp``); when the leaf
call ends (outside dispatch, where autograd records again) it asks :func:`saves_memory_of`
of each: the op is re-run on fresh meta stand-ins whose floating arguments require
grad, and the autograd graph it builds is searched for a saved tensor sharing memory with the
written one. Such an op's node is marked :data:`~unbroken.ir.meta_keys.SAVED_THEN_WRITTEN`;
``ExportedProgram.module()`` passes its outputs through :func:`refuse_backward`, which is the
identity forward and raises eager's error when backward reaches it — exactly when eager's
does.
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ..symbolic.size_one_hook import DryRunUndecided
from ..symbolic.torch_compat import OpOverload, disable_current_modes
from .ops import is_mutating

__all__ = ["refuse_backward", "saves_memory_of"]


def saves_memory_of(node: fx.Node, written: fx.Node, resize=None) -> bool:
    """Whether ``node``'s op, run with grad, saves for backward a tensor sharing memory with
    ``written`` (one of ``node``'s tensor arguments, or ``node`` itself: its result).

    resize: ``value -> value`` applied to the sizes and strides of the stand-ins (the size-1
    audit's re-run of this question with dims at 1); a question of that re-run its ranges
    leave open (``DryRunUndecided``) propagates."""
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return False
    stand_ins: dict = {}
    in_place = is_mutating(node.target)

    def stand_in(value):
        if not isinstance(value, fx.Node):
            return value
        meta = value.meta.get("val")
        if not isinstance(meta, torch.Tensor):
            return meta
        if value not in stand_ins:
            shape, stride = meta.shape, meta.stride()
            if resize is not None:
                shape, stride = [resize(x) for x in shape], [resize(x) for x in stride]
            fresh = torch.empty_strided(shape, stride, dtype=meta.dtype, device="meta")
            fresh.requires_grad_(fresh.is_floating_point() or fresh.is_complex())
            if in_place and fresh.requires_grad:  # autograd writes no leaf in place
                with disable_current_modes(), torch.enable_grad():
                    fresh = fresh.clone()
            stand_ins[value] = fresh
        return stand_ins[value]

    args, kwargs = pytree.tree_map(stand_in, (node.args, node.kwargs))
    try:
        with disable_current_modes(), torch.enable_grad():
            out = node.target(*args, **kwargs)
    except DryRunUndecided:
        raise
    except Exception:  # noqa: BLE001 - an op autograd cannot run on meta: nothing known saved
        return False
    outputs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    if written is node:
        memory = {_storage(t) for t in outputs}
    elif written in stand_ins:
        memory = {_storage(stand_ins[written])}
    else:
        return False
    try:
        saved = _saved_tensors(outputs)
    except RuntimeError:  # a saved tensor the op itself wrote (``y.mul_(y)``) cannot be read
        return in_place and written is node.args[0]
    return any(_storage(tensor) in memory for tensor in saved)


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


def _saved_tensors(outputs) -> list:
    """Every tensor saved by the autograd nodes that produced ``outputs`` (their whole graph:
    the stand-ins are fresh leaves, so it is this op's alone)."""
    seen, stack, saved = set(), [t.grad_fn for t in outputs if t.grad_fn is not None], []
    while stack:
        function = stack.pop()
        if function is None or id(function) in seen:
            continue
        seen.add(id(function))
        for name in dir(function):
            if name.startswith("_saved_"):
                value = getattr(function, name)
                values = value if isinstance(value, (tuple, list)) else (value,)
                saved.extend(v for v in values if isinstance(v, torch.Tensor))
        stack.extend(next_function for next_function, _ in function.next_functions)
    return saved


class _RefusedBackward(torch.autograd.Function):
    """Identity forward; backward raises eager's error (see the module docstring)."""

    @staticmethod
    def forward(ctx, tensor, message):
        ctx.message = message
        return tensor.clone()  # a fresh tensor, as the op's own output is

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(ctx.message)


def refuse_backward(tensor, message: str):
    """``tensor``, whose backward raises ``message`` (eager's "modified by an inplace
    operation")."""
    if not isinstance(tensor, torch.Tensor) or not tensor.requires_grad \
            or not torch.is_grad_enabled():
        return tensor
    return _RefusedBackward.apply(tensor, message)
