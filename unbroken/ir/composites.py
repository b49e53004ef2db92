"""Keep selected composite operators whole in the recorded graph.

A ``TorchDispatchMode`` sees operators only after their CompositeImplicitAutograd kernels have
decomposed them (``linear`` arrives as ``t`` + ``addmm``, ``lstm`` as one ``mm`` per time
step). torch.export's output keeps such operators whole, which keeps graphs small, lets
``run_decompositions`` target them, and lets an LSTM keep a dynamic sequence length.

While tracing, :func:`preserving` installs a Python kernel at the CompositeImplicitAutograd key
of each operator in :data:`PRESERVED` (the Python dispatcher is on during tracing). When the
recorder of the trace running in the calling thread/context is recording, the kernel records
the operator as one node and computes its meta output by running the C++ decomposition with
recording suspended; anywhere else (another thread, no trace) it runs the decomposition as
torch would. The kernels are installed once for all concurrent traces and removed when the
last one ends, on any exit.

Only functional operators whose outputs never alias their inputs are listed: keeping an
aliasing or mutating composite whole (``dropout`` in eval returns its input, ``batch_norm``
updates running statistics) would hide the aliasing from functionalization.
"""
from __future__ import annotations

import contextlib
import contextvars
import threading

import torch

from ..symbolic.torch_compat import (
    DispatchKey,
    call_at_key,
    clear_dispatch_cache,
    op_python_kernels,
)

__all__ = ["KEEP_WHOLE_WHEN", "PRESERVED", "preserving"]

aten = torch.ops.aten
_CIA = DispatchKey.CompositeImplicitAutograd

PRESERVED = (
    aten.linear.default,
    aten.conv1d.default, aten.conv2d.default, aten.conv3d.default,
    aten.conv1d.padding, aten.conv2d.padding, aten.conv3d.padding,
    aten.conv_transpose1d.default, aten.conv_transpose2d.input, aten.conv_transpose3d.input,
    aten.scaled_dot_product_attention.default,
    aten.layer_norm.default, aten.group_norm.default,
    aten.matmul.default,
    aten.softmax.int, aten.log_softmax.int,
    aten.lstm.input, aten.gru.input, aten.rnn_tanh.input, aten.rnn_relu.input,
    aten.embedding_bag.padding_idx,  # else _embedding_bag_forward_only: fails under autograd
    # Eager runs these as one fused kernel; the Python decompositions torch registers for the
    # Python dispatcher (index arithmetic for interpolation, where() for the shrinks) round
    # differently (bilinear upsampling: 1.5e-8 off eager). Kept whole, the program runs
    # eager's kernel bit for bit.
    *(getattr(getattr(aten, name), overload)
      for name in ("upsample_nearest1d", "upsample_nearest2d", "upsample_nearest3d",
                   "_upsample_nearest_exact1d", "_upsample_nearest_exact2d",
                   "_upsample_nearest_exact3d", "upsample_linear1d", "upsample_bilinear2d",
                   "upsample_bicubic2d", "upsample_trilinear3d")
      for overload in ("vec", "default")),
    aten.hardshrink.default, aten.softshrink.default,
    # Eager's CPU max_pool1d has a kernel of its own (contiguous output) unless a gradient is
    # recorded; its decomposition (max_pool2d_with_indices) keeps the input's layout. Kept
    # whole, the program runs eager's choice and the trace learns its layout from eager's
    # kernel (``ir.layouts``' probe).
    aten.max_pool1d.default,
    # Eager's einsum squeezes size-1 dims and picks its permutes and bmm by the sizes: a
    # program of its decomposition traced at batch >= 2 is not the one eager runs at batch 1
    # (and at 1 its layouts differ). Kept whole, the program runs eager's einsum at every
    # size, as torch.export's graphs do. With one operand einsum may return a view of it
    # (``"ij->ji"``): those calls are decomposed (``KEEP_WHOLE_WHEN``).
    aten.einsum.default,
)


# Preserved ops kept whole only for the calls a predicate on the call's arguments accepts
# (the others run their decomposition, recorded op by op).
def _attention_backend_chosen_at_run_time() -> bool:
    """Whether ``scaled_dot_product_attention`` is kept whole: its call in the program chooses
    a backend by the caller's settings when it runs, as eager's did (on the CPU: the fused
    flash kernel where it applies, else the math one). Not while the flash backend is off and
    the math one on (``torch.nn.attention.sdpa_kernel(SDPBackend.MATH)`` in forward(), or set
    before export): eager ran the math backend, whose ops are recorded, so the program computes
    what eager did whatever the caller's settings."""
    cuda = torch.backends.cuda
    return cuda.flash_sdp_enabled() or not cuda.math_sdp_enabled()


KEEP_WHOLE_WHEN = {
    aten.einsum.default: lambda equation, tensors, *rest, **kwargs: len(tensors) >= 2,
    aten.scaled_dot_product_attention.default:
        lambda *args, **kwargs: _attention_backend_chosen_at_run_time(),
}


# Composites with a Python decomposition (used under the Python dispatcher) that aliases
# unlike eager's C++ composite: torch's ``dropout`` decomposition returns ``input.clone()`` in
# eval mode or at p=0, where eager returns ``input`` itself (a write into the result changes
# the input). While a trace runs in this thread, they run eager's C++ composite instead, for the
# calls where the two differ (op -> predicate on the call's arguments).
EAGER_COMPOSITES = {
    aten.dropout.default: lambda input, p, train: not train or p == 0,
}


# The recorder of the trace running in this thread (and asyncio task), or None. The kernels
# are installed process-wide while any trace runs; each consults this, so a thread or task
# that is not tracing gets the original behaviour.
_active_recorder: contextvars.ContextVar = contextvars.ContextVar("unbroken_recorder",
                                                                   default=None)
_lock = threading.Lock()
_traces = 0            # traces running in any thread (under _lock)
_saved: dict = {}      # (op, key) -> the Python kernel torch had there, or None


def _cpp_decomposition(op, args, kwargs):
    return call_at_key(op, _CIA, *args, **kwargs)


def _kernel(op, previous):
    """The recording kernel; ``previous`` is a Python CIA kernel torch already had (e.g. the
    LSTM decomposition), used to compute the meta output instead of the C++ one, and run as
    is where no trace is active."""
    def decompose(op, args, kwargs):
        return previous(*args, **kwargs) if previous is not None \
            else _cpp_decomposition(op, args, kwargs)

    whole_when = KEEP_WHOLE_WHEN.get(op)

    def kernel(*args, **kwargs):
        recorder = _active_recorder.get()
        if recorder is not None and recorder.is_recording() \
                and (whole_when is None or whole_when(*args, **kwargs)):
            return recorder.record_composite(op, args, kwargs, decompose)
        return decompose(op, args, kwargs)

    return kernel


# Keys at which torch may already hold a Python kernel for one of these ops (the LSTM
# decomposition is registered at all three); ours must sit at each of them.
_KEYS = (_CIA, DispatchKey.Autograd, DispatchKey.Meta)


@contextlib.contextmanager
def preserving(recorder):
    """Record the :data:`PRESERVED` ops whole into ``recorder`` for the duration, in this
    thread and context only. torch's kernels are restored when the last running trace ends,
    whatever ends it (an exception, ``KeyboardInterrupt``)."""
    token = _active_recorder.set(recorder)
    try:
        with _installed():
            yield
    finally:
        _active_recorder.reset(token)


@contextlib.contextmanager
def _installed():
    global _traces
    with _lock:
        if _traces == 0:
            _install()
        _traces += 1
    try:
        yield
    finally:
        with _lock:
            _traces -= 1
            if _traces == 0:
                _uninstall()


def _eager_kernel(op, previous):
    """Eager's C++ composite for the calls of ``op`` :data:`EAGER_COMPOSITES` names in a tracing
    thread/context, ``previous`` otherwise."""
    def kernel(*args, **kwargs):
        if _active_recorder.get() is not None and EAGER_COMPOSITES[op](*args, **kwargs):
            return _cpp_decomposition(op, args, kwargs)
        return previous(*args, **kwargs) if previous is not None \
            else _cpp_decomposition(op, args, kwargs)

    return kernel


def _install() -> None:
    try:
        for op in EAGER_COMPOSITES:
            for key in _KEYS:
                previous = op_python_kernels(op).get(key)
                if previous is None or isinstance(previous, DispatchKey):
                    continue
                _saved[(op, key)] = op_python_kernels(op).pop(key)
                op_python_kernels(op)[key] = _eager_kernel(op, previous)
            clear_dispatch_cache(op)
        for op in PRESERVED:
            for key in _KEYS:
                previous = op_python_kernels(op).get(key)
                if isinstance(previous, DispatchKey) or (previous is None and key is not _CIA):
                    continue
                _saved[(op, key)] = op_python_kernels(op).pop(key, None)
                # what ``op.py_impl(key)`` stores, without building its typing aliases (a
                # millisecond per export, every export)
                op_python_kernels(op)[key] = _kernel(op, previous)
            clear_dispatch_cache(op)
    except BaseException:
        _uninstall()
        raise


def _uninstall() -> None:
    while _saved:
        (op, key), previous = _saved.popitem()
        op_python_kernels(op).pop(key, None)
        if previous is not None:
            op_python_kernels(op)[key] = previous
        clear_dispatch_cache(op)
