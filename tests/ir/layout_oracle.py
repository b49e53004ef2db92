"""The recorder's traced values against eager's CPU kernels, on torch's OpInfo sample inputs.

For one OpInfo sample and one input layout, :func:`compare` runs the op eagerly on real CPU
tensors and traced, as a leaf call runs it (meta stand-ins with the same sizes, strides and
dtypes bound to placeholders of a fresh :class:`~unbroken.ir.recorder.Recorder`, the Python
dispatcher on, composite ops kept whole, device arguments as ``call_leaf`` passes them), and
compares every tensor output: shape, dtype, strides (along dims longer than 1: a stride of a
dim of size 0 or 1 never decides an address) and whether it shares memory with the input.

Layouts of the sample's input (:data:`LAYOUTS`): as made, channels_last (4-d),
channels_last_3d (5-d), the last two dims transposed in memory, expanded along the last dim
(stride 0) and its dims of size 1 given unusual strides.
"""
from __future__ import annotations

import dataclasses

import torch
from torch._dispatch.python import enable_python_dispatcher
from torch.utils import _pytree as pytree

from unbroken.ir.composites import preserving
from unbroken.ir.devices import traced_device_arguments
from unbroken.ir.recorder import Recorder
from unbroken.symbolic.diagnostics import UnbrokenError


def _channels_last(t):
    return t.contiguous(memory_format=torch.channels_last) if t.dim() == 4 else None


def _channels_last_3d(t):
    return t.contiguous(memory_format=torch.channels_last_3d) if t.dim() == 5 else None


def _transposed(t):
    if t.dim() < 2 or t.shape[-1] < 2 or t.shape[-2] < 2:
        return None
    return t.transpose(-1, -2).contiguous().transpose(-1, -2)


def _expanded(t):
    if t.dim() < 1 or t.shape[-1] < 2:
        return None
    return t[..., :1].expand(t.shape)


def _size_one(t):
    """The same values with the dims of size 1 given strides contiguity would not give them
    (their strides never decide an address, so kernels may treat them either way). Sizes
    stay the sample's: a sample cut to another size may be invalid in ways eager kernels do
    not check (``lu_unpack`` corrupts the heap)."""
    if 1 not in t.shape or t.numel() == 0:
        return None
    strides = [7 * t.numel() + i if n == 1 else s
               for i, (n, s) in enumerate(zip(t.shape, t.contiguous().stride()))]
    out = torch.empty_strided(t.shape, strides, dtype=t.dtype)
    out.copy_(t)
    return out


LAYOUTS = {
    "contiguous": lambda t: t,
    "channels_last": _channels_last,
    "channels_last_3d": _channels_last_3d,
    "transposed": _transposed,
    "expanded": _expanded,
    "size_one": _size_one,
}


@dataclasses.dataclass(frozen=True)
class Outcome:
    """``kind``: ``"ok"``, ``"mismatch"`` (``detail`` says what differs), ``"refused"`` (the
    trace raised: an export would refuse), or ``"skipped"`` (eager fails, or the sample is
    not one a trace takes: sparse, quantized...)."""
    kind: str
    detail: str = ""


def _strided(t) -> bool:
    return isinstance(t, torch.Tensor) and t.layout == torch.strided and not t.is_quantized


def _meta(t: torch.Tensor) -> torch.Tensor:
    return torch.empty_strided(t.shape, t.stride(), dtype=t.dtype, device="meta")


def _significant_strides(t: torch.Tensor) -> tuple:
    """The strides that decide an address: none of an empty tensor's, none of a size-1 dim's."""
    if t.numel() == 0:
        return ()
    return tuple(s if n > 1 else None for s, n in zip(t.stride(), t.shape))


def _shares(a: torch.Tensor, b: torch.Tensor) -> bool:
    return a.untyped_storage()._cdata == b.untyped_storage()._cdata


def compare(fn, inp, args, kwargs) -> Outcome:
    """Eager ``fn(inp, *args, **kwargs)`` against its trace (module docstring)."""
    leaves = pytree.tree_leaves((inp, args, kwargs))
    tensors = [t for t in leaves if isinstance(t, torch.Tensor)]
    if not all(_strided(t) for t in tensors) or not _strided(inp):
        return Outcome("skipped", "not a strided dense tensor")
    try:
        with torch.no_grad():
            expected = fn(inp, *args, **kwargs)
    except Exception as error:  # noqa: BLE001 - any eager failure: nothing to compare
        return Outcome("skipped", f"eager raises {type(error).__name__}")
    recorder = Recorder()
    metas = {}
    for index, tensor in enumerate(tensors):
        if id(tensor) not in metas:
            metas[id(tensor)] = _meta(tensor)
            recorder.builder.add_placeholder(f"x{index}", metas[id(tensor)], user_input=True)
    traced_inp, traced_args, traced_kwargs = pytree.tree_map(
        lambda v: metas.get(id(v), v) if isinstance(v, torch.Tensor) else v,
        (inp, list(args), dict(kwargs)))
    call, call_args, call_kwargs = traced_device_arguments(
        recorder, fn, [traced_inp, *traced_args], traced_kwargs)
    try:
        with torch.no_grad(), enable_python_dispatcher(), preserving(recorder), \
                recorder.recording():
            got = call(*call_args, **call_kwargs)
    except UnbrokenError as error:
        return Outcome("refused", f"{type(error).__name__} [{error.code}]: {error.message}")
    except Exception as error:  # noqa: BLE001 - a leaf call's failure is a refusal (UB120)
        return Outcome("refused", f"{type(error).__name__}: {str(error)[:120]}")
    return _compare_outputs(expected, got, inp, metas[id(inp)])


def _compare_outputs(expected, got, inp, traced_inp) -> Outcome:
    expected_leaves, got_leaves = pytree.tree_leaves(expected), pytree.tree_leaves(got)
    if len(expected_leaves) != len(got_leaves):
        return Outcome("mismatch", f"{len(got_leaves)} outputs, eager {len(expected_leaves)}")
    for index, (e, g) in enumerate(zip(expected_leaves, got_leaves)):
        if not isinstance(e, torch.Tensor):
            continue
        if not isinstance(g, torch.Tensor):
            return Outcome("mismatch", f"output {index}: {type(g).__name__}, eager a tensor")
        if not _strided(e):
            continue
        ours = (tuple(g.shape), g.dtype, _significant_strides(g))
        theirs = (tuple(e.shape), e.dtype, _significant_strides(e))
        if ours != theirs:
            return Outcome("mismatch", f"output {index}: {ours}, eager {theirs}")
        if e.numel() and inp.numel() and _shares(e, inp) != _shares(g, traced_inp):
            return Outcome("mismatch", f"output {index}: shares the input's memory: "
                                       f"{_shares(g, traced_inp)}, eager {_shares(e, inp)}")
    return Outcome("ok")


def sweep(ops, samples_per_op: int, dtype=torch.float32, progress=None):
    """``(op name, variant, layout, Outcome)`` for up to ``samples_per_op`` samples of each
    OpInfo in ``ops`` (those supporting ``dtype`` on CPU), on every layout."""
    for op in ops:
        if dtype not in op.supported_dtypes("cpu"):
            continue
        try:
            samples = list(op.sample_inputs("cpu", dtype, requires_grad=False))
        except Exception:  # noqa: BLE001 - an OpInfo that cannot make samples here
            continue
        for sample in samples[:samples_per_op]:
            if not _strided(sample.input):
                continue
            for layout, make in LAYOUTS.items():
                inp = make(sample.input)
                if inp is None:
                    continue
                if progress is not None:
                    progress(op.name, op.variant_test_name, layout)
                outcome = compare(op.op, inp, sample.args, sample.kwargs)
                yield op.name, op.variant_test_name, layout, outcome
