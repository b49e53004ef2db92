"""``out=`` variants (``torch.add(x, y, out=z)``, ``torch.max(x, 0, out=(v, i))``): the
functional overload computes the results, and each is written into its ``out=`` tensor with
``copy_``, which the recorder records as any in-place write (a buffer or user-input mutation
once functionalized, views of the target updated).

That is what eager's out kernel computes when each ``out=`` tensor already has the result's
shape and dtype: the kernel then writes the values the functional overload returns, keeping the
target's strides, and returns the targets. An empty tensor the trace made itself (composite
kernels allocate one for each output they discard) is resized by eager into new memory laid
out as the functional result: it becomes the result. Otherwise eager does more than write
values, and the call is refused (``UnsupportedError``, UB121, at the user's line):

* another shape: eager resizes the target in place (its storage and every view of it change);
* another dtype: some kernels then compute in the target's dtype (``sum(out=)`` accumulates in
  it), so the functional result cast to it need not be eager's.

As in eager, an ``out=`` call whose arguments require grad while grad mode is on fails
(autograd does not support ``out=``): UB120, eager's refusal.
"""
from __future__ import annotations

import torch

from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.torch_compat import is_view

__all__ = ["record_out_variant"]


def record_out_variant(recorder, func, form, args, kwargs):
    """Record ``func(*args, **kwargs)`` (an ``out=`` overload; ``form`` is
    ``ops.out_variant(func)``) through ``recorder`` as its functional overload then one
    ``copy_`` per target; returns the targets as the out kernel does."""
    functional, names = form
    targets = [kwargs[name] for name in names]
    rest = {key: value for key, value in kwargs.items() if key not in names}
    if torch.is_grad_enabled() and any(
            isinstance(a, torch.Tensor) and recorder._eager_requires_grad(a)
            for a in [*args, *rest.values()]):
        raise UnsupportedError(
            f"`{func}`: functions with out=... arguments don't support automatic "
            "differentiation, but one of the arguments requires grad (eager raises this "
            "too).", code="UB120", frames=recorder.frames_provider(),
            hint="call the op without `out=` and use its return value, or run it under "
                 "torch.no_grad().")
    with recorder:
        results = functional(*args, **rest)
    results = results if isinstance(results, (tuple, list)) else (results,)
    written = []
    for name, target, result in zip(names, targets, results, strict=True):
        if _fresh_and_empty(recorder, target) and target.dtype == result.dtype and \
                _shape_differs(target, result):
            _adopt(recorder, target, result)
        else:
            _check_target(recorder, func, name, target, result)
            written.append((target, result))
    with recorder:
        for target, result in written:
            target.copy_(result)
    return targets[0] if len(targets) == 1 else tuple(targets)


def _shape_differs(target, result) -> bool:
    return target.dim() != result.dim() or any(
        a != b for a, b in zip(target.shape, result.shape))


def _fresh_and_empty(recorder, target) -> bool:
    """An empty tensor the trace made (not an input, a buffer or a view; nothing else shares
    its memory), as composite kernels allocate for the outputs they discard: eager's resize
    gives it new memory, so it simply becomes the result."""
    if target.numel() != 0 or is_view(target) or recorder.aliases.is_aliased(target):
        return False
    producer = recorder.builder.producer(target)
    return producer is not None and producer.op == "call_function"


def _adopt(recorder, target, result) -> None:
    """``target`` (fresh and empty) becomes the result: eager's out kernel resizes it with the
    layout its functional form gives its result (TensorIterator's, or the structured
    kernel's), and writes the values. The result is the trace's own temporary, so the target
    simply holds its node; a result not dense gets a contiguous copy."""
    if not _dense(result):
        with recorder:
            result = result.clone(memory_format=torch.contiguous_format)
    # the meta tensor's own metadata (no mode is active here): sized, then laid out as it
    target.resize_(result.shape)
    target.as_strided_(result.shape, result.stride())
    recorder.bind(target, recorder.node_of(result), recorder.device_of(result))


def _dense(tensor) -> bool:
    """Its elements fill ``numel`` consecutive slots exactly once (a permutation of a
    contiguous layout)."""
    expected = 1
    for size, stride in sorted(zip(tensor.shape, tensor.stride()), key=lambda p: p[1]):
        if size != 1 and stride != expected:
            return False
        expected *= size
    return True


def _check_target(recorder, func, name: str, target, result) -> None:
    where = f"`{func}` writes into its `{name}=` tensor"
    if target.dtype != result.dtype:
        raise UnsupportedError(
            f"{where} of dtype {target.dtype}, but the result is {result.dtype}: eager's kernel "
            "then computes in the target's dtype, which is not supported.", code="UB121",
            frames=recorder.frames_provider(),
            hint=f"call the op without `{name}=` and convert its result with "
                 f".to({target.dtype}), or pass a `{name}=` tensor of dtype {result.dtype}.")
    if _shape_differs(target, result):
        raise UnsupportedError(
            f"{where} of shape {tuple(target.shape)}, but the result has shape "
            f"{tuple(result.shape)}: eager resizes the tensor in place, which is not "
            "supported.", code="UB121", frames=recorder.frames_provider(),
            hint=f"call the op without `{name}=` and use its return value, or pass a "
                 f"`{name}=` tensor of the result's shape.")
