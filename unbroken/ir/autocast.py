"""``torch.autocast`` regions: the casts eager's autocast makes, recorded as ``_to_copy`` ops.

The trace computes on meta tensors, which carry no autocast dispatch key, so autocast never
runs on them. Which arguments an op's autocast kernel casts, and to what, is asked of the
dispatcher itself rather than a copied table: the op is called once on empty CPU stand-ins of
its arguments (same dtypes, no elements) under the live autocast state, and a dispatch mode
below autocast notes the casts it sees and stops the call before any kernel runs
(:func:`autocast_casts`). The autocast state is read when a leaf call starts
(:func:`enabled_devices`): inside a dispatch the autocast keys are excluded. The recorder then
records those casts and the op on the cast values: the program computes what eager computes
inside the region, with no autocast at run time.

An op with no autocast kernel falls through in eager, and the ops its decomposition calls are
cast one by one: the recorder decomposes such composite ops inside a region
(:func:`decomposes_under_autocast`).
"""
from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from ..symbolic.torch_compat import (
    TorchDispatchMode,
    autocast_enabled_devices,
    autocast_key_reached,
    disable_current_modes,
    has_autocast_kernel,
)

__all__ = ["enabled_devices", "autocast_casts", "decomposes_under_autocast"]

aten = torch.ops.aten
# how autocast casts (``Tensor.to(dtype)``, which reaches a mode as itself or as _to_copy)
_CASTS = frozenset({aten.to, aten._to_copy})


class _Stop(Exception):
    """Raised by the probe when autocast hands the op on: its casts are known."""


class _Probe(TorchDispatchMode):
    """Below autocast: answers casts with empty stand-ins of the new dtype, noting which
    stand-in became which dtype; stops at the first other op."""

    def __init__(self):
        super().__init__()
        self.cast_to: dict[int, torch.dtype] = {}

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func.overloadpacket in _CASTS:
            dtype = kwargs.get("dtype") or next(
                (a for a in args[1:] if isinstance(a, torch.dtype)), None)
            if dtype is not None:
                source = args[0]
                self.cast_to[id(source)] = dtype
                return torch.empty(source.shape, dtype=dtype)
        raise _Stop


def enabled_devices() -> tuple[str, ...]:
    """The device types autocast is enabled for, read outside any dispatch (inside one the
    autocast keys are excluded and it always reads as off)."""
    return autocast_enabled_devices()


def decomposes_under_autocast(func, device_type: str) -> bool:
    """True for a composite op without an autocast kernel: eager decomposes it and casts the
    ops it calls, so the trace must record those ops, not it."""
    return not has_autocast_kernel(func, device_type) and func._can_decompose()


def autocast_casts(func, args, kwargs, device_type: str) -> dict[int, torch.dtype]:
    """For ``func`` called on ``args``/``kwargs`` (meta tensors) inside an autocast region:
    ``{index of a flat tensor argument: the dtype eager's autocast casts it to}``."""
    if not has_autocast_kernel(func, device_type):
        return {}
    flat, spec = pytree.tree_flatten((args, kwargs))
    probe = _Probe()
    with disable_current_modes():  # the stand-ins are no ops of the trace
        stand_ins = [torch.empty((0,) * leaf.dim(), dtype=leaf.dtype)
                     if isinstance(leaf, torch.Tensor) else _concrete(leaf) for leaf in flat]
        call_args, call_kwargs = pytree.tree_unflatten(stand_ins, spec)
        try:
            with autocast_key_reached(device_type), probe:
                func(*call_args, **call_kwargs)
        except _Stop:
            pass
    return {i: probe.cast_to[id(s)] for i, s in enumerate(stand_ins)
            if isinstance(s, torch.Tensor) and id(s) in probe.cast_to
            and probe.cast_to[id(s)] != s.dtype}


def _concrete(value):
    """A Python value for a symbolic scalar (autocast reads dtypes only)."""
    if isinstance(value, torch.SymInt):
        return 0
    if isinstance(value, torch.SymFloat):
        return 0.0
    if isinstance(value, torch.SymBool):
        return False
    return value
