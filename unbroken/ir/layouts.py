"""Output layouts eager's CPU kernels choose where torch's meta kernels choose another.

The recorder computes every op on meta tensors; a meta kernel gives an output's sizes and
dtype right, and for most ops its strides too. For the ops here it does not, and a
``forward()`` that reads the layout (``stride()``, ``is_contiguous()``) or a later
layout-dependent op (``view``, ``reshape``) would see something eager never gives. Each class
gets the traced output eager's CPU kernel would give (:func:`kernel_layout`, consulted only
for the ops listed, so other ops pay one dict lookup):

* **Elementwise ops whose meta kernel is a Python composition** (:data:`_ELEMENTWISE`:
  ``copysign`` is ``where(signbit(b), -abs(a), abs(a))``, ``floor_divide``, ``xlogy``...):
  the composition's first operand decides the layout, where eager's TensorIterator orders
  the dims by the strides of *all* operands, the first deciding ties. The output is laid
  out as TensorIterator lays it out (torch's ``compute_elementwise_output_strides``).
* **Batch norm** (:data:`_BATCH_NORMS`): eager's CPU kernel writes its output in the input's
  suggested memory format (a transposed input gives a contiguous output), and in
  evaluation mode returns *empty* saved statistics (shape ``(0,)``), where the meta kernels
  follow the input's strides and return one statistic per channel.
* **Clones of the input** (``as_strided_scatter``): eager clones the input
  (``preserve_format``: a non-dense input such as an expanded one becomes dense).
* **Kernels whose layout no meta kernel reproduces** (:data:`_PROBED`: the FFTs, whose
  pocketfft plan puts the transformed dims innermost; ``max_unpool``, ``channel_shuffle``
  and ``max_pool1d``, which keep a channels_last input's layout, or not, by their own
  rules): a *layout probe* runs eager's CPU kernel once on zero-filled CPU stand-ins with
  the inputs' sizes (the example's) and strides, and gives the traced output the same
  order of dims, with strides computed from its (symbolic) sizes (a size only tensor data
  decides runs at a stand-in value of 8: only sizes 0 and 1 lay a tensor out differently,
  and they decide no address). When eager's output is not dense, no order of dims
  describes it, and when eager's kernel refuses the stand-ins nothing is learnt: the op is
  refused (UB124) rather than traced with a layout eager might not give.

Only outputs on the CPU are relaid out: other devices' kernels have other rules, which the
meta kernels (asked through ``ir.devices``) follow better.
"""
from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.torch_compat import (
    all_op_names,
    disable_current_modes,
    elementwise_output_strides,
    is_non_overlapping_and_dense,
    python_dispatcher_disabled,
    suggest_memory_format,
)
from .ops import is_functional

__all__ = ["eager_sizes", "kernel_layout", "on_cpu", "relayout_reads_trace"]

aten = torch.ops.aten
_META = "meta"


def kernel_layout(op):
    """The function ``(recorder, op, args, kwargs, out) -> out`` relaying out ``op``'s meta
    output as eager's CPU kernel lays it out, or None for an op whose meta kernel already
    does (module docstring)."""
    table = _TABLE or _build_table()
    return table.get(op)


def relayout_reads_trace(op) -> bool:
    """Whether ``op``'s relayout reads more than its arguments' metadata (the layout probe
    runs eager's kernel on stand-ins that require grad as the trace's inputs do): only then
    is its output no function of the meta-output cache's key (``ir.meta_cache``). The
    elementwise, batch-norm and clone relayouts compute from the arguments' sizes, strides
    and dtypes alone."""
    return kernel_layout(op) is _probe


def eager_sizes(op, args, kwargs, out):
    """``out``, the meta output of ``op``, with the sizes eager's CPU kernel gives where they
    differ from the meta kernel's (batch norm's empty statistics in evaluation mode): what a
    check re-running a saved graph's ops compares the saved values with."""
    relayout = _BATCH_NORMS.get(op)
    return out if relayout is None else relayout(None, op, args, kwargs, out)


def on_cpu(recorder, args) -> bool:
    """Whether the op's first tensor argument stands for a CPU tensor."""
    first = args[0] if isinstance(args, (tuple, list)) and args else None
    for value in (first,) if isinstance(first, torch.Tensor) else pytree.tree_leaves(args):
        if isinstance(value, torch.Tensor):
            device = recorder.device_of(value) if recorder.is_tracked(value) \
                else recorder.default_device
            return device.type == "cpu"
    return recorder.default_device.type == "cpu"


# --- elementwise ops: TensorIterator's order of dims -----------------------------------------

def _elementwise(recorder, op, args, kwargs, out):
    if not isinstance(out, torch.Tensor) or out.dim() < 2:
        return out
    operands = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    if any(t.dim() > out.dim() for t in operands):
        return out
    broadcast = [t.expand(out.shape) for t in operands]
    strides = elementwise_output_strides(*broadcast)
    return torch.empty_strided(out.shape, strides, dtype=out.dtype, device=_META)


# --- batch norm ------------------------------------------------------------------------------

def _batch_norm(training_index):
    """Relayout of a batch norm whose ``training`` flag is argument ``training_index``
    (an int), always True (``True``) or always False (``False``)."""
    def relayout(recorder, op, args, kwargs, out):
        input = args[0]
        output = torch.empty(out[0].shape, dtype=out[0].dtype, device=_META,
                             memory_format=suggest_memory_format(input))
        training = training_index if isinstance(training_index, bool) else (
            args[training_index] if len(args) > training_index else kwargs.get("training"))
        if training:
            return (output, *out[1:])
        # evaluation: eager's CPU kernel saves no statistics (empty save_mean/save_invstd)
        empty = [torch.empty((0,), dtype=t.dtype, device=_META) for t in out[1:3]]
        return (output, *empty, *out[3:])
    return relayout


_BATCH_NORMS = {
    aten.native_batch_norm.default: _batch_norm(5),
    aten._native_batch_norm_legit.default: _batch_norm(5),
    aten._native_batch_norm_legit_functional.default: _batch_norm(5),
    aten._native_batch_norm_legit.no_stats: _batch_norm(3),
    aten._native_batch_norm_legit_no_training.default: _batch_norm(False),
    aten._batch_norm_with_update.default: _batch_norm(True),
    aten._batch_norm_with_update_functional.default: _batch_norm(True),
    aten._batch_norm_no_update.default: _batch_norm(False),
}


def _clone_of_input(recorder, op, args, kwargs, out):
    """The output is a clone of the input (``preserve_format``), then written."""
    return torch.empty_like(args[0], dtype=out.dtype)


# --- the layout probe ------------------------------------------------------------------------

class _Undecidable(Exception):
    """The probe cannot run the op at the example (a size only tensor data decides)."""


# The value a size only tensor data decides (an unbacked symbol) takes in a probe: any size
# of 2 or more lays a tensor out as any other (a size of 0 or 1 decides no address).
_UNBACKED_STAND_IN = 8


def _concrete(value, unbacked=_UNBACKED_STAND_IN):
    """A symbolic value at the example (unbacked symbols at ``unbacked``; None: undecidable)."""
    if not isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return value
    node = value.node
    if node.hint is not None:
        return node.hint
    expr, env = node.expr, node.shape_env
    try:
        values = {s: env.hint_of(s) for s in expr.free_symbols}
        if unbacked is None and None in values.values():
            raise _Undecidable
        concrete = expr.xreplace({s: unbacked if v is None else v for s, v in values.items()})
        return node.pytype(concrete)
    except (TypeError, ValueError, AttributeError) as error:
        raise _Undecidable from error


def example_value(value):
    """A symbolic scalar at the example (others as they are); None for one only tensor data
    decides."""
    try:
        return _concrete(value, unbacked=None)
    except _Undecidable:
        return None


def example_layout(tensor: torch.Tensor):
    """``(sizes, strides, storage offset)`` of ``tensor`` at the example, or None when a size
    only tensor data decides (an unbacked symbol) enters one."""
    try:
        values = [int(_concrete(v, unbacked=None)) for v in
                  (*tensor.shape, *tensor.stride(), tensor.storage_offset())]
    except _Undecidable:
        return None
    rank = tensor.dim()
    return values[:rank], values[rank:2 * rank], values[-1]


def storage_extent(sizes, strides, offset: int = 0) -> int:
    """Elements of storage a tensor so laid out reaches, from the storage's start."""
    if not all(sizes):
        return offset
    return offset + 1 + sum((n - 1) * s for n, s in zip(sizes, strides))


def _stand_in(tensor: torch.Tensor, requires_grad: bool) -> torch.Tensor:
    """A zero-filled CPU tensor with ``tensor``'s dtype, sizes and strides (at the example)."""
    sizes = [_concrete(s) for s in tensor.shape]
    strides = [_concrete(s) for s in tensor.stride()]
    memory = torch.zeros(storage_extent(sizes, strides), dtype=tensor.dtype)
    out = memory.as_strided(sizes, strides)
    if requires_grad and (tensor.dtype.is_floating_point or tensor.dtype.is_complex):
        out = out.detach().requires_grad_()
    return out


def _eager_output(recorder, op, args, kwargs):
    """``op`` run by eager's CPU kernel on stand-ins of its arguments (with eager's
    ``requires_grad``, which some composites consult, under the current grad mode)."""
    provider = recorder.requires_grad_provider

    def real(value):
        if isinstance(value, torch.Tensor):
            wants_grad = provider is not None and recorder.is_tracked(value) \
                and recorder._eager_requires_grad(value)
            return _stand_in(value, wants_grad)
        if isinstance(value, torch.device) and value.type == "meta":
            return torch.device("cpu")
        return _concrete(value)

    real_args, real_kwargs = pytree.tree_map(real, (list(args), dict(kwargs)))
    with disable_current_modes(), python_dispatcher_disabled():
        return op(*real_args, **real_kwargs)


def _dense_like(meta: torch.Tensor, eager: torch.Tensor) -> torch.Tensor:
    """A meta tensor with ``meta``'s (symbolic) sizes, dense in the order of dims
    ``eager``'s strides give (outermost first; ties in dim order)."""
    order = sorted(range(eager.dim()), key=lambda d: (-eager.stride()[d], d))
    strides = [0] * meta.dim()
    step = 1
    for dim in reversed(order):
        strides[dim] = step
        step = step * meta.shape[dim]
    return torch.empty_strided(meta.shape, strides, dtype=meta.dtype, device=_META)


def _probe(recorder, op, args, kwargs, out):
    name = getattr(op, "__name__", str(op))
    try:
        eager = _eager_output(recorder, op, args, kwargs)
    except _Undecidable:
        raise _refusal(recorder, name, "a size of its input could not be given a value at "
                       "which to run eager's kernel") from None
    except RuntimeError as error:  # eager refuses the stand-ins (sizes of unbacked symbols)
        raise _refusal(recorder, name, f"eager's kernel refused stand-ins of its inputs at the "
                       f"example's sizes ({error})".splitlines()[0]) from None
    flat_out, spec = pytree.tree_flatten(out)
    flat_eager = pytree.tree_leaves(eager)
    if len(flat_eager) != len(flat_out):
        return out
    relaid = []
    for meta, real in zip(flat_out, flat_eager):
        if not isinstance(meta, torch.Tensor) or not isinstance(real, torch.Tensor) \
                or real.dim() != meta.dim():
            relaid.append(meta)
            continue
        if real.numel() > 1 and not is_non_overlapping_and_dense(real):
            raise _refusal(recorder, name, f"eager's CPU kernel returns a tensor with strides "
                           f"{tuple(real.stride())} for sizes {tuple(real.shape)} at the "
                           "example, which is not a dense layout of its sizes")
        relaid.append(_dense_like(meta, real))
    return pytree.tree_unflatten(relaid, spec)


def _refusal(recorder, name, why) -> UnsupportedError:
    return UnsupportedError(
        f"the layout (strides) of `{name}`'s output cannot be traced: {why}; a program that "
        "reads it (stride(), is_contiguous(), view()) could take another branch than eager",
        code="UB124", frames=recorder.frames_provider(),
        hint="Pass the operator a contiguous input (`x.contiguous()`); for an operator of "
             "your own (torch.library), return a dense tensor from its kernel "
             "(`.contiguous()` inside it).")


# --- the table -------------------------------------------------------------------------------

# Elementwise ops (all overloads) whose meta kernel is a Python composition that loses
# TensorIterator's layout (found by the OpInfo differential, tests/ir/test_recorder_layouts.py).
# ``packet.overload`` names one overload only (``div``'s true division is a prim and right).
_ELEMENTWISE = ("copysign", "floor_divide", "div.Tensor_mode", "div.Scalar_mode", "xlogy",
                "special_xlog1py", "special_xlogy", "binary_cross_entropy",
                "native_dropout_backward")
# Ops (all functional overloads) whose output layout only eager's kernel knows: the FFTs
# (every ``fft_*`` op but the frequency factories and the shifts, which are views and rolls)
# and these.
_PROBED = ("max_unpool2d", "max_unpool3d", "channel_shuffle", "native_channel_shuffle",
           "_fft_c2c", "_fft_r2c", "_fft_c2r")
_TABLE: dict = {}


def _overloads(name: str) -> list:
    name, _, only = name.partition(".")
    packet = getattr(aten, name, None)
    if packet is None:
        return []
    return [getattr(packet, overload) for overload in packet.overloads()
            if not only or overload == only]


def _build_table() -> dict:
    table = {}
    for name in _ELEMENTWISE:
        for op in _overloads(name):
            if is_functional(op):
                table[op] = _elementwise
    ffts = [name.removeprefix("aten::") for name in all_op_names()
            if name.startswith("aten::fft_") and "freq" not in name and "shift" not in name]
    for name in (*_PROBED, *ffts):
        for op in _overloads(name):
            if is_functional(op):
                table[op] = _probe
    table.update(_BATCH_NORMS)
    table[aten.as_strided_scatter.default] = _clone_of_input
    table[aten.max_pool1d.default] = _probe  # a composite kept whole (``ir.composites``)
    _TABLE.update(table)
    return _TABLE
