"""The traced tensors live on ``meta`` and stand for tensors on the user's device.

Three places must see the user's device rather than ``meta``:

**Device arguments of a leaf call** (:func:`traced_device_arguments`). ``x.to("cpu")``,
``x.cpu()``, ``x.to("cpu", torch.float32)``, ``torch.as_tensor(x, device="cpu")`` return ``x``
itself in eager when ``x`` already is a CPU tensor of that dtype: the result aliases ``x``, and
an in-place write into it changes ``x``. Called on the meta stand-in, the same call sees a
device change and copies. A device argument naming the device the call's tensors stand for
is therefore passed as ``meta``: torch's own argument parsing and "returns self when nothing
changes" logic then decide, as in eager (the recorder records a requested ``meta`` device as
the user's).

**Python data made a tensor inside native code** (:func:`python_data_on_user_device`). Code
run natively in a leaf call (a library function registered with ``allow_in_graph``, a module of
PyTorch's) builds constants from Python data on "the device of its inputs":
``torch.asarray(0.0, device=x.device)`` with ``x`` the meta stand-in asks for ``meta``, where
the data would be lost before any op reaches the recorder. While recording, a torch function
mode sees such calls first and builds the tensor on the device the traced tensors stand for
(the recorder lifts it as a constant when an op reads it), as eager builds it on ``x``'s.

**torch's meta kernels** (:func:`devices_of`). Several of torch's meta kernels give a
different output layout per device, as the eager kernels do: on CPU, ``reflection_pad2d``,
``replication_pad2d``, ``pixel_shuffle``... keep a channels_last input's layout, on CUDA they
do not. They ask ``torch._meta_registrations.device_hint(tensor)``, which answers a fake
tensor's device, and ``"cuda"`` for a plain meta tensor — which is what the recorder computes
on. Without this, a trace of a channels_last CPU model got CUDA's contiguous strides where
eager's CPU kernels give channels_last, and a ``forward()`` that reads the layout
(``is_contiguous(memory_format=...)``, ``stride()``) silently took the other branch.
Two meta kernels do not ask: ``convolution``'s leaves every output contiguous (eager's layout
depends on the backend ATen selects: MKLDNN keeps channels_last, the slow 3-d kernel does not)
and ``native_group_norm``'s tests ``input.device``. For them (:data:`_CPU_LAYOUTS`) a Meta
kernel of ours runs torch's, then lays the outputs out as eager's CPU kernel does: the
convolution's format from ATen's own backend selection on empty CPU stand-ins of the inputs
(sizes at the example), the group norm's as its input suggests.

While a recorder records (:func:`devices_of`), ``device_hint`` answers, for a meta tensor of
that recorder, the type of the device it stands for (``Recorder.device_of``; a tensor made
inside a kernel: the recorder's default device). Anything else (another thread or context,
a real or fake tensor, a model that itself lives on ``meta``) gets torch's own answer. The
replacement is installed once for all concurrent recorders and removed when the last one
ends, on any exit; a trace keeps it installed from start to end (:func:`trace_wide`).
"""
from __future__ import annotations

import contextlib
import contextvars
import threading
import types

import torch
from torch.overrides import TorchFunctionMode

from ..symbolic.torch_compat import (
    DispatchKey,
    TensorBase,
    call_at_key,
    clear_dispatch_cache,
    cpu_convolution_memory_format,
    meta_device_hint,
    op_python_kernels,
    set_meta_device_hint,
    suggest_memory_format,
)
from .flat import tree_leaves

__all__ = ["PASS_THROUGH_CODE", "composite_layout", "devices_of", "has_composite_layout",
           "is_trace_mode", "needs_python_data_mode", "python_data_on_user_device",
           "trace_wide", "traced_device_arguments"]

_META = torch.device("meta")


def traced_device_arguments(recorder, fn, args: list, kwargs: dict):
    """``(fn, args, kwargs)`` of a leaf call with every device argument that names the device
    of the call's traced tensors replaced by ``meta`` (module docstring): the ``device=``
    keyword, ``Tensor.to``'s positional device, ``Tensor.cpu()`` (``to("cpu")``) and the legacy
    type names of ``Tensor.type`` (``"torch.FloatTensor"`` is the CPU float32 type). With no
    traced tensor among the arguments, the device is the recorder's default device; with
    traced tensors on several devices nothing is replaced (eager copies between them)."""
    if "device" not in kwargs and fn not in _DEVICE_POSITIONAL:
        return fn, args, kwargs  # (most calls: no device argument to replace)
    if fn in _DATA_CONSTRUCTORS and not _traced_leaves(recorder, args, kwargs):
        return fn, args, kwargs  # built from Python data: on meta the data would be lost
    device = _call_device(recorder, args, kwargs)
    if device is None:
        return fn, args, kwargs
    if "device" in kwargs and _names(kwargs["device"], device):
        kwargs = dict(kwargs, device=_META)
    if fn is torch.Tensor.to and len(args) > 1 and _names(args[1], device):
        args = [args[0], _META, *args[2:]]
    elif fn is torch.Tensor.cpu and device.type == "cpu":
        fn, args = torch.Tensor.to, [args[0], _META, *args[1:]]
    elif fn is torch.Tensor.type and len(args) > 1 and device.type == "cpu":
        args = [args[0], _legacy_cpu_dtype(args[1]), *args[2:]]
    return fn, args, kwargs


# The calls whose device (or device-naming type) may be passed without the ``device=`` keyword.
_DEVICE_POSITIONAL = frozenset([torch.Tensor.to, torch.Tensor.cpu, torch.Tensor.type])


# Constructors that copy Python data (or a real tensor) into a new tensor: with no traced
# tensor among their arguments, their device argument stays the user's.
_DATA_CONSTRUCTORS = frozenset([torch.tensor, torch.as_tensor, torch.asarray,
                                torch.Tensor.new_tensor, torch.from_numpy])


def _traced_leaves(recorder, args, kwargs) -> list:
    return [t for t in tree_leaves((args, kwargs))
            if isinstance(t, torch.Tensor) and t.device.type == "meta" and recorder.is_tracked(t)]


def _call_device(recorder, args, kwargs) -> torch.device | None:
    """The one device the call's traced tensors stand for (the default device without any),
    None when there are several or the user's device is ``meta`` itself."""
    devices = {recorder.device_of(t) for t in _traced_leaves(recorder, args, kwargs)}
    if not devices:
        devices = {recorder.default_device}
    if len(devices) != 1:
        return None
    (device,) = devices
    return None if device.type == "meta" else device


def _names(value, device: torch.device) -> bool:
    """Whether ``value`` is a device argument naming exactly ``device`` (``"cpu:0"`` is not
    ``"cpu"``: eager copies between them)."""
    if not isinstance(value, (str, torch.device)):
        return False
    try:
        return torch.device(value) == device
    except RuntimeError:  # a string that is not a device: not ours to judge
        return False


def _legacy_cpu_dtype(value):
    """``Tensor.type``'s argument as a dtype when it names a legacy CPU tensor type
    (``"torch.FloatTensor"``, ``torch.FloatTensor``), else unchanged."""
    if isinstance(value, type):
        name = f"{value.__module__}.{value.__name__}"
    else:
        name = value
    if not isinstance(name, str) or not name.startswith("torch.") or name.count(".") != 1:
        return value
    legacy = getattr(torch, name.removeprefix("torch."), None)
    dtype = getattr(legacy, "dtype", None)
    return dtype if isinstance(dtype, torch.dtype) and not getattr(legacy, "is_cuda", True) \
        else value

class _PythonDataMode(TorchFunctionMode):
    """See :func:`python_data_on_user_device`."""

    def __init__(self, recorder):
        super().__init__()
        self.recorder = recorder

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in _DATA_CONSTRUCTORS:
            kwargs = _data_device(self.recorder, func, args, kwargs)
        return func(*args, **kwargs)


def is_trace_mode(mode) -> bool:
    """True for the torch-function mode the recorder pushes while tracing (not the user's)."""
    return isinstance(mode, _PythonDataMode)


# The frame that calls every torch function while the mode is on: an error raised by the native
# callee (``x[::-1]``'s ValueError) appears raised there, which is the program's, not a bug.
PASS_THROUGH_CODE = _PythonDataMode.__torch_function__.__code__


# Modules of torch's C functions, each of which dispatches ``__torch_function__`` itself.
_DISPATCHING_MODULES = frozenset(["torch", "torch._C._nn", "torch._C._linalg", "torch._C._fft",
                                  "torch._C._special"])


def needs_python_data_mode(fn) -> bool:
    """Whether a leaf call of ``fn`` needs :func:`python_data_on_user_device`. Not for a C
    function of torch's (``torch.addmm``, ``F.linear``, ``Tensor.view``) other than the data
    constructors: it dispatches ``__torch_function__`` itself, so the mode would see that
    one call, pass it through unchanged, and be off while it runs (torch pops a function
    mode while the mode handles a call)."""
    if fn in _DATA_CONSTRUCTORS:
        return True
    if isinstance(fn, (types.MethodDescriptorType, types.WrapperDescriptorType)):
        return not issubclass(fn.__objclass__, TensorBase)
    if isinstance(fn, types.BuiltinFunctionType):
        if isinstance(fn.__self__, TensorBase):  # a method of a tensor, bound
            return False
        return getattr(fn, "__module__", None) not in _DISPATCHING_MODULES
    return True


def python_data_on_user_device(recorder):
    """While recording: a data constructor (``torch.tensor``, ``as_tensor``, ``asarray``,
    ``Tensor.new_tensor``) asked for ``meta`` on Python data (no tensor, no symbolic size
    in it) builds its tensor on the device the traced tensors stand for (module docstring)."""
    return _PythonDataMode(recorder)


def _data_device(recorder, func, args, kwargs) -> dict:
    """``kwargs`` with the device of a data constructor's Python data made the user's."""
    device = kwargs.get("device")
    if func is torch.Tensor.new_tensor and device is None and args and \
            isinstance(args[0], torch.Tensor) and args[0].device.type == "meta":
        device = _META  # on the receiver's device: the meta stand-in's
    if device is None or not isinstance(device, (str, torch.device)) or \
            torch.device(device).type != "meta":
        return kwargs
    data = args[1] if func is torch.Tensor.new_tensor else args[0] if args else \
        kwargs.get("data", kwargs.get("obj"))
    if any(isinstance(leaf, (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool))
           for leaf in torch.utils._pytree.tree_leaves(data)):
        return kwargs  # the recorder sees what it computes from traced values
    user = recorder.device_of(args[0]) if func is torch.Tensor.new_tensor and \
        recorder.is_tracked(args[0]) else recorder.default_device
    return kwargs if user.type == "meta" else dict(kwargs, device=user)


_active: contextvars.ContextVar = contextvars.ContextVar("unbroken_device_hint", default=None)
_lock = threading.Lock()
_users = 0             # recorders recording in any thread (under _lock)
_torch_hint = None     # torch's device_hint while ours is installed


class devices_of:  # noqa: N801 (used as a context manager function)
    """Meta kernels called in this thread/context see ``recorder``'s devices (module
    docstring). A class, not a generator: it is entered once per leaf call."""

    __slots__ = ("recorder", "token")

    def __init__(self, recorder):
        self.recorder = recorder
        self.token = None

    def __enter__(self) -> None:
        self.token = _active.set(self.recorder)
        try:
            _count_in()
        except BaseException:
            _active.reset(self.token)
            raise

    def __exit__(self, kind, exc, traceback) -> bool:
        try:
            _count_out()
        finally:
            _active.reset(self.token)
        return False


def trace_wide():
    """Keep the replacement installed for a whole trace (``exporter.trace``): each leaf call's
    :func:`devices_of` then only counts itself in, instead of installing the layout kernels
    and the device hint and removing them again (clearing four dispatch caches) per call.
    With no recorder active in a thread or context, what is installed answers as torch's
    own, so nothing else changes while it stays."""
    return _installed()


@contextlib.contextmanager
def _installed():
    _count_in()
    try:
        yield
    finally:
        _count_out()


def _count_in() -> None:
    """One more user of the replacement: the first installs it."""
    global _users, _torch_hint
    with _lock:
        if _users == 0:
            _torch_hint = meta_device_hint()
            set_meta_device_hint(_device_hint)
            _install_layout_kernels()
        _users += 1


def _count_out() -> None:
    """One user fewer: the last removes it."""
    global _users, _torch_hint
    with _lock:
        _users -= 1
        if _users == 0:
            set_meta_device_hint(_torch_hint)
            _torch_hint = None
            _uninstall_layout_kernels()


def _device_hint(tensor) -> str:
    recorder = _active.get()
    original = _torch_hint or meta_device_hint()  # torch's, once the last user is gone
    if recorder is None or not isinstance(tensor, torch.Tensor) or tensor.device.type != "meta":
        return original(tensor)
    device = recorder.device_of(tensor) if recorder.is_tracked(tensor) \
        else recorder.default_device
    return original(tensor) if device.type == "meta" else device.type


# --- meta kernels that do not ask device_hint ------------------------------------------------

def _hint(size) -> int:
    return size if isinstance(size, int) else int(size.node.hint)


def _stand_in(meta):
    """An empty real CPU tensor laid out as ``meta`` at the example's sizes."""
    if meta is None:
        return None
    return torch.empty_strided([_hint(s) for s in meta.shape], [_hint(s) for s in meta.stride()],
                               dtype=meta.dtype)


def _laid_out(meta: torch.Tensor, memory_format) -> torch.Tensor:
    """A meta tensor like ``meta`` in ``memory_format`` (a 3-d tensor in channels_last: as its
    4-d form with a unit dim 2, which is how ATen lays out a 1-d convolution)."""
    if memory_format == torch.contiguous_format:
        return meta
    if meta.dim() == 3 and memory_format == torch.channels_last:
        return _laid_out(meta.unsqueeze(2), memory_format).squeeze(2)
    return torch.empty(meta.shape, dtype=meta.dtype, device="meta", memory_format=memory_format)


def _convolution_layout(args, kwargs, out):
    input, weight, bias, stride, padding, dilation, transposed, output_padding, groups = args
    # The backend ATen selects, and so the layout, depends on the sizes, which the stand-ins
    # take from the example (MKLDNN lays a channels-last batch of 1 out contiguously, of 2 in
    # channels-last): asking whether each symbolic size is 1 lets the size-1 audit re-run
    # this at 1, where the stand-ins take 1, and compare the layouts.
    for size in (*input.shape, *weight.shape):
        is_one = size == 1  # a bool when torch decides it from the expression alone
        if isinstance(is_one, torch.SymBool):
            is_one.node.guard_or_false("", 0)
    memory_format = cpu_convolution_memory_format(
        _stand_in(input), _stand_in(weight), _stand_in(bias), stride=stride, padding=padding,
        dilation=dilation, transposed=transposed, output_padding=output_padding, groups=groups)
    return _laid_out(out, memory_format)


def _group_norm_layout(args, kwargs, out):
    memory_format = suggest_memory_format(args[0])
    return (_laid_out(out[0], memory_format), *out[1:])


def _composite_group_norm_layout(args, kwargs, out):
    return _laid_out(out, suggest_memory_format(args[0]))


# Composites kept whole whose C++ decomposition tests ``input.device()`` (``group_norm`` makes
# a CPU input contiguous in its suggested format, any other input plain contiguous).
_CPU_COMPOSITE_LAYOUTS = {
    torch.ops.aten.group_norm.default: _composite_group_norm_layout,
}


def has_composite_layout(op) -> bool:
    """Whether :func:`composite_layout` may lay ``op``'s output out anew."""
    return op in _CPU_COMPOSITE_LAYOUTS


def composite_layout(recorder, op, args, kwargs, out):
    """``out``, the meta output of the composite ``op`` computed by its decomposition, laid
    out as eager's kernel lays it out on the device of ``args[0]`` (module docstring)."""
    relayout = _CPU_COMPOSITE_LAYOUTS.get(op)
    if relayout is None or not isinstance(args[0], torch.Tensor):
        return out
    device = recorder.device_of(args[0]) if recorder.is_tracked(args[0]) \
        else recorder.default_device
    return relayout(args, kwargs, out) if device.type == "cpu" else out


_CPU_LAYOUTS = {
    torch.ops.aten.convolution.default: _convolution_layout,
    torch.ops.aten.native_group_norm.default: _group_norm_layout,
}
_saved_kernels: dict = {}


def _layout_kernel(op, relayout):
    def kernel(*args, **kwargs):
        out = call_at_key(op, DispatchKey.Meta, *args, **kwargs)
        recorder = _active.get()
        if recorder is None or not recorder.is_recording() and not recorder.is_tracked(args[0]):
            return out
        device = recorder.device_of(args[0]) if recorder.is_tracked(args[0]) \
            else recorder.default_device
        if device.type != "cpu":
            return out
        # laid out by ATen's backend selection, which reads the process's settings (MKLDNN
        # enabled...): the recorder keeps such outputs, and what is computed from them, to
        # the trace (``Recorder.device_layouts``)
        recorder.device_layouts += 1
        return relayout(args, kwargs, out)
    return kernel


def _install_layout_kernels() -> None:
    for op, relayout in _CPU_LAYOUTS.items():
        kernels = op_python_kernels(op)
        _saved_kernels[op] = kernels.pop(DispatchKey.Meta, None)
        kernels[DispatchKey.Meta] = _layout_kernel(op, relayout)
        clear_dispatch_cache(op)


def _uninstall_layout_kernels() -> None:
    while _saved_kernels:
        op, previous = _saved_kernels.popitem()
        kernels = op_python_kernels(op)
        kernels.pop(DispatchKey.Meta, None)
        if previous is not None:
            kernels[DispatchKey.Meta] = previous
        clear_dispatch_cache(op)
