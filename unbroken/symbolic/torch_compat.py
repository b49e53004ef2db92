"""Every place unbroken reaches into torch's internals, in one module.

unbroken builds on torch's operators, meta kernels, decompositions, ``torch.fx`` and
``torch.export``'s container. Public, stable API (``torch.fx.Graph``, ``torch.export.Dim``,
``torch.ops``, ``torch.utils._pytree``) is used directly everywhere. Everything else — private
modules and attributes, ``torch._C`` bindings, the pieces ``ExportedProgram``'s constructor and
torch's verifier need — is reached through a name defined here, with a docstring saying what it
is for and which torch releases it serves. A new torch release means editing this file only:
nothing else in the package tests the torch version (``tests/symbolic/test_torch_compat.py``
checks that).

Tested releases: ``TESTED_TORCH`` (2.13, 2.14, 2.15). On any other release importing unbroken
warns once, with :class:`UntestedTorchWarning`.

Entries whose torch module costs a noticeable part of a second to import are *lazy* (``_LAZY``):
resolved on first use, so that ``import unbroken`` costs little more than ``import torch``.
torch's sympy vocabulary (``torch.utils._sympy``, ``torch.fx.experimental.symbolic_shapes``)
pulls in sympy (~0.6 s); ``torch.export._unlift`` pulls in ``torch._dynamo`` (~1.4 s), needed
only by ``ExportedProgram.module()``. ``from .torch_compat import ValueRanges`` works as for
any other entry (the module's ``__getattr__`` imports and caches it).

This module is in the lowest layer (``symbolic``): it imports torch, never unbroken.
"""
from __future__ import annotations

import contextlib
import importlib
import inspect
import re
import sys
import types
import warnings

import torch
import torch._C
import torch._decomp
import torch._dispatch.python
import torch._export.verifier
import torch._higher_order_ops.wrap
import torch._meta_registrations
import torch._ops
import torch._prims_common
import torch._subclasses.fake_tensor
import torch.export.dynamic_shapes
import torch.export.exported_program
import torch.fx._lazy_graph_module
import torch.fx.experimental._config
import torch.fx.passes.shape_prop
import torch.fx.traceback
import torch.nn.modules.activation
import torch.nn.modules.module
import torch.overrides
import torch.utils._python_dispatch

__all__ = [
    "TESTED_TORCH", "parse_version", "TORCH_VERSION", "UntestedTorchWarning", "warn_if_untested",
    "sym_sqrt", "DerivedDim",
    "StaticDim", "DimHint", "DimHintType", "OpOverload", "OpOverloadPacket", "HigherOrderOperator",
    "DispatchKey", "TensorBase", "enable_python_dispatcher", "TorchDispatchMode",
    "disable_current_modes", "pop_mode_temporarily", "op_python_kernels", "clear_dispatch_cache",
    "call_at_key", "forget_static_answers", "op_schema", "overload_name", "is_view",
    "view_base", "version_counter", "batched_inner", "unmodelled_tensor_class",
    "functorch_depth",
    "restore_functorch_depth", "suspend_functorch", "resume_functorch",
    "FUNCTORCH_DIFFERENTIATION", "MODE_PUSHES",
    "dispatch_modes", "function_modes", "restore_mode_stacks", "local_dispatch_keys",
    "set_local_dispatch_key", "inference_mode_guard", "set_grad_enabled", "CreationMeta",
    "creation_meta", "parse_to_arguments", "FUNCTION_APPLY", "DEFAULT_SETUP_CONTEXT",
    "function_apply_class",
    "wrap_with_set_grad_enabled", "map_function", "scan_function", "FakeTensor",
    "FakeTensorMode", "fake_of_meta",
    "TensorMetadata", "extract_tensor_metadata", "symbolic_shapes_config", "Verifier",
    "TrainingIRVerifier", "SpecViolationError", "NodeSource", "NodeSourceAction",
    "core_aten_decompositions", "LazyGraphModule", "DeferredCodeGraphModule",
    "new_exported_program",
    "GLOBAL_MODULE_HOOKS", "global_module_hooks", "preload_dynamo", "compiler_leaf",
    "GLOBAL_SETTINGS", "global_settings", "changed_settings", "restore_settings",
    "compiled_original",
    "SYMPY_FUNCTION_NAMES", "custom_fake_kernel", "fake_ctx", "auto_functionalized",
    "torch_exception_class", "user_error_type", "EXPORT_PREDICATES", "export_predicate",
    "export_flags", "has_autocast_kernel", "autocast_enabled_devices", "autocast_key_reached",
    "TORCHSCRIPT_CALLABLES", "elementwise_output_strides", "is_non_overlapping_and_dense",
    "has_symbolic_sizes",
    "all_op_names", "python_dispatcher_disabled",
    "NN_FAST_PATH_FORWARDS", "MAKE_FX_TRACING", "NN_FAST_PATH_HELPERS",
    "ENCODER_LAYER_FORWARD", "NESTED_FROM_MASK", "NESTED_FROM_MASK_LEFT_ALIGNED",
    "NESTED_TENSOR_BUILDERS", "NATIVE_MULTI_HEAD_ATTENTION",
    "numpy_on_torch_function", "numpy_on_torch_call",
]

TESTED_TORCH = ((2, 13), (2, 14), (2, 15))
"""The torch releases (major, minor) CI runs unbroken on (``ci/torch-<release>.txt``)."""


def parse_version(text: str) -> tuple[int, int]:
    """``"2.14.1+cu130"`` -> ``(2, 14)``; a string without a leading ``major.minor`` is
    ``(0, 0)`` (untested)."""
    match = re.match(r"(\d+)\.(\d+)", text)
    return (int(match[1]), int(match[2])) if match else (0, 0)


TORCH_VERSION = parse_version(torch.__version__)
"""The running torch's (major, minor). Only this module branches on it."""


class UntestedTorchWarning(UserWarning):
    """The running torch is not one unbroken is tested with: exports may fail with an
    ``InternalError`` where torch's internals changed, or refuse what a tested release
    captures. Install a tested release (see ``TESTED_TORCH``) or report what broke."""


_warned = False


def warn_if_untested(version: str | None = None) -> bool:
    """Warn (once per process) when torch ``version`` (default: the running one) is outside
    ``TESTED_TORCH``. Returns True when this call warned. Called at ``import unbroken``."""
    global _warned
    version = torch.__version__ if version is None else version
    if _warned or parse_version(version) in TESTED_TORCH:
        return False
    _warned = True
    tested = ", ".join(f"{major}.{minor}" for major, minor in TESTED_TORCH)
    warnings.warn(f"unbroken is tested with torch {tested}; this is torch {version}. Exports "
                  "may fail where torch's internals changed: install a tested release, or "
                  "report what broke.", UntestedTorchWarning, stacklevel=2)
    return True


def _since(major: int, minor: int) -> bool:
    return TORCH_VERSION >= (major, minor)


# --- sympy vocabulary: torch's size functions, infinity and ranges (all releases) -----------

# Lazy (``_LAZY``): ``sympy_functions``, ``OPAQUE_SQRT``, ``int_oo``, ``ValueRanges`` and the
# size functions ``SYMPY_FUNCTION_NAMES`` (``FloorDiv`` ...), all from ``torch.utils._sympy``.

SYMPY_FUNCTION_NAMES = ("CeilToInt", "CleanDiv", "FloatPow", "FloatTrueDiv", "FloorDiv",
                        "FloorToInt", "Identity", "IntTrueDiv", "Max", "Min", "Mod",
                        "PowByNatural", "PythonMod", "RoundToInt", "ToFloat", "TruncToFloat",
                        "TruncToInt")
"""torch's sympy size functions unbroken's expressions use (``unbroken.symbolic.expr``), each
an entry of this module, resolved lazily from ``torch.utils._sympy.functions`` (all
releases)."""

sym_sqrt = torch._sym_sqrt
"""``torch._sym_sqrt``: what ``math.sqrt`` of a SymInt means to torch (all releases)."""


# --- dynamic_shapes spec: torch's Dim classes (all releases) --------------------------------

DerivedDim = torch.export.dynamic_shapes._DerivedDim
"""``2 * Dim("x")``: a dim derived from a root ``Dim`` (all releases)."""

StaticDim = torch.export.dynamic_shapes._StaticDim
"""A ``Dim`` whose min equals its max (a static size spelled as a Dim; all releases)."""

DimHint = torch.export.dynamic_shapes._DimHint
"""``Dim.AUTO`` / ``Dim.DYNAMIC`` / ``Dim.STATIC`` objects (all releases)."""

DimHintType = torch.export.dynamic_shapes._DimHintType
"""The kinds of ``DimHint`` (``AUTO``, ``DYNAMIC``, ``STATIC``; all releases)."""


# --- operators and the dispatcher (all releases) ---------------------------------------------

OpOverload = torch._ops.OpOverload
"""``torch.ops.aten.add.Tensor``: one overload of an operator (a graph node's target)."""

OpOverloadPacket = torch._ops.OpOverloadPacket
"""``torch.ops.aten.add``: all overloads of an operator."""

HigherOrderOperator = torch._ops.HigherOrderOperator
"""``torch.ops.higher_order.cond`` and friends: operators taking subgraphs."""

DispatchKey = torch._C.DispatchKey
"""The dispatcher's keys (``CompositeImplicitAutograd``, ``Meta``, ``Autograd`` ...)."""

TensorBase = torch._C.TensorBase
"""The C base class of ``torch.Tensor``: its method descriptors are torch calls."""

enable_python_dispatcher = torch._dispatch.python.enable_python_dispatcher
"""Context manager under which torch's Python decompositions and meta kernels run (needed for
symbolic sizes: without it, symbolic ``expand`` fails). All releases."""

TorchDispatchMode = torch.utils._python_dispatch.TorchDispatchMode
"""Base class of a mode that sees every ATen call (unbroken's recorder)."""

disable_current_modes = torch.utils._python_dispatch._disable_current_modes
"""Context manager: run with no dispatch mode active (all releases)."""

pop_mode_temporarily = torch.utils._python_dispatch._pop_mode_temporarily
"""Context manager: run with the innermost dispatch mode popped (all releases)."""


def op_python_kernels(op) -> dict:
    """``op.py_kernels``: the Python kernels an ``OpOverload`` holds, by dispatch key (a live
    dict: writing it installs or removes a kernel; call :func:`clear_dispatch_cache` after)."""
    return op.py_kernels


def clear_dispatch_cache(op) -> None:
    """Forget ``op``'s cached kernel choice after :func:`op_python_kernels` changed."""
    op._dispatch_cache.clear()


def call_at_key(op, key, *args, **kwargs):
    """Run ``op``'s kernel registered at dispatch ``key`` (e.g. its C++ decomposition)."""
    return op._op_dk(key, *args, **kwargs)


TORCHSCRIPT_CALLABLES = (torch.jit.ScriptFunction, torch._C.ScriptMethod)
"""TorchScript's compiled callables (a scripted function, a scripted module's method)."""


_AUTOCAST_KEYS = {"cpu": "AutocastCPU", "cuda": "AutocastCUDA", "xpu": "AutocastXPU",
                  "mps": "AutocastMPS"}


def has_autocast_kernel(op, device_type: str) -> bool:
    """True when ``op`` has a kernel at the autocast dispatch key of ``device_type`` (its
    arguments are cast there, and the ops it calls are not); False for a fallthrough (the ops
    its decomposition calls are autocast one by one)."""
    key = _AUTOCAST_KEYS.get(device_type, "AutocastPrivateUse1")
    return torch._C._dispatch_has_kernel_for_dispatch_key(op.name(), key)


@contextlib.contextmanager
def autocast_key_reached(device_type: str):
    """Let calls reach the autocast dispatch key of ``device_type`` again (inside a
    ``__torch_dispatch__`` the keys above the Python key are excluded)."""
    key = getattr(DispatchKey, _AUTOCAST_KEYS[device_type])
    was_excluded = torch._C._dispatch_tls_is_dispatch_key_excluded(key)
    torch._C._dispatch_tls_set_dispatch_key_excluded(key, False)
    try:
        yield
    finally:
        torch._C._dispatch_tls_set_dispatch_key_excluded(key, was_excluded)


def autocast_enabled_devices() -> tuple[str, ...]:
    """The device types autocast is enabled for in this thread (empty: none)."""
    if not torch._C._is_any_autocast_enabled():
        return ()
    return tuple(d for d in ("cpu", "cuda", "xpu", "mps")
                 if torch.amp.is_autocast_available(d) and torch.is_autocast_enabled(d))


def meta_device_hint():
    """``torch._meta_registrations.device_hint``: the device type torch's meta kernels assume
    for a tensor (a fake tensor's device; ``"cuda"`` for a plain meta tensor). Kernels whose
    output layout differs per device (convolution, padding, group norm...) read it at call
    time from that module (all releases)."""
    return torch._meta_registrations.device_hint


def set_meta_device_hint(function) -> None:
    """Install ``function`` as :func:`meta_device_hint` (restore the previous one after)."""
    torch._meta_registrations.device_hint = function


def cpu_convolution_memory_format(input, weight, bias, **options) -> torch.memory_format:
    """The memory format eager's CPU ``convolution`` gives its output for these real CPU
    tensors: the backend ATen selects (MKLDNN, the slow kernels...), then that backend's
    format (``_select_conv_backend``, ``_conv_determine_backend_memory_format``; all releases).
    ``options``: ``stride``, ``padding``, ``dilation``, ``transposed``, ``output_padding``,
    ``groups``."""
    backend = torch._C._select_conv_backend(input, weight, bias=bias, **options)
    if weight.dim() == 3:  # 1-d: ATen decides on the 2-d form (as torch's fake kernel does)
        input, weight = input.contiguous().unsqueeze(2), weight.unsqueeze(2)
    return torch._C._conv_determine_backend_memory_format(input, weight, backend)


def suggest_memory_format(tensor: torch.Tensor) -> torch.memory_format:
    """The memory format ATen's ``Tensor::suggest_memory_format`` names for ``tensor``'s
    layout, as torch's Python references compute it (symbolic sizes too; all releases)."""
    return torch._prims_common.suggest_memory_format(tensor)


def forget_static_answers(shape_env) -> None:
    """Drop what a torch ``ShapeEnv`` remembers of the questions its ranges answered
    (``_maybe_evaluate_static`` and its other ``_lru_cache`` methods): they are cleared when
    its version counter moves, which a change of ``var_to_range`` alone does not do. Call it
    after widening a range (an answer proven under the narrower one is stale)."""
    shape_env._version_counter += 1


def op_schema(op) -> torch._C.FunctionSchema:
    """The ``FunctionSchema`` of an ``OpOverload`` (arguments, alias info, mutability)."""
    return op._schema


def overload_name(op) -> str:
    """``"Tensor"`` for ``aten.add.Tensor`` (``"default"`` for the unnamed overload)."""
    return op._overloadname


def is_view(tensor: torch.Tensor) -> bool:
    """Whether autograd knows ``tensor`` as a view of another (``tensor._is_view()``)."""
    return tensor._is_view()


def view_base(tensor: torch.Tensor) -> torch.Tensor | None:
    """The tensor a view was made from (``tensor._base``), None for a non-view."""
    return tensor._base


def version_counter(tensor: torch.Tensor) -> int | None:
    """The tensor's version counter (``tensor._version``): bumped by every in-place write.
    None for an inference tensor (made under ``torch.inference_mode()``), which has none."""
    return None if tensor.is_inference() else tensor._version


_TENSOR_HOOKS = ("__torch_function__", "__torch_dispatch__")


def unmodelled_tensor_class(tensor: torch.Tensor) -> type | None:
    """The class of ``tensor`` when it is a subclass whose behaviour a plain meta stand-in
    would drop (the trace sees a dense tensor of its dtype and sizes): a traceable wrapper
    subclass (``__tensor_flatten__``: ``TwoTensor``, ``DTensor``), or a class with its own
    ``__torch_dispatch__`` or ``__torch_function__`` (torch's own classes' ``__torch_function__``
    aside: ``nn.Parameter`` disables it). None for any other tensor; torch's fake and
    functional tensors are none of the user's."""
    cls = type(tensor)
    if cls is torch.Tensor or cls is torch.nn.Parameter or \
            cls.__module__.startswith("torch._subclasses"):
        return None
    if torch.utils._python_dispatch.is_traceable_wrapper_subclass(tensor):
        return cls
    own = [hook for hook in _TENSOR_HOOKS
           if inspect.getattr_static(cls, hook, None) is not
           inspect.getattr_static(torch.Tensor, hook, None)]
    if cls.__module__.split(".")[0] == "torch":
        own = [hook for hook in own if hook != "__torch_function__"]
    return cls if own else None


def batched_inner(tensor: torch.Tensor) -> torch.Tensor | None:
    """The tensor a ``torch.vmap`` batched tensor wraps, through every level of nested
    ``vmap`` (``torch._C._functorch``: ``is_batchedtensor``, ``get_unwrapped``); None for a
    tensor that is not one. The dispatcher's modes see that tensor, never the wrapper."""
    functorch = torch._C._functorch
    if not functorch.is_batchedtensor(tensor):
        return None
    while functorch.is_batchedtensor(tensor):
        tensor = functorch.get_unwrapped(tensor)
    return tensor


def functorch_depth() -> int:
    """How many functorch transforms (``vmap``, ``grad``...) are open in this thread."""
    return torch._C._functorch.get_dynamic_layer_stack_depth()


def restore_functorch_depth(depth: int) -> None:
    """Close the functorch transforms opened beyond ``depth`` (innermost first, each one's
    thread-local dispatch keys undone): what a trace that stopped inside ``vmap`` left open."""
    if functorch_depth() > depth:
        torch._C._functorch.pop_dynamic_layer_stack_and_undo_to_depth(depth)


def _functorch_differentiation() -> dict:
    from torch._functorch import eager_transforms

    entries = {}
    for owner, name, transform in (
            (torch._C._functorch, "_grad_increment_nesting",
             "torch.func.grad / vjp / jacrev / hessian"),
            (eager_transforms, "enter_jvp_nesting", "torch.func.jvp / jacfwd"),
            (torch._C._functorch, "_func_increment_nesting", "torch.func.functionalize")):
        if hasattr(owner, name):
            entries[getattr(owner, name)] = transform
    return entries


FUNCTORCH_DIFFERENTIATION = _functorch_differentiation()
"""The calls by which torch.func's differentiating transforms (and ``functionalize``) open
their level, each with the transforms that make it: ``grad``, ``vjp``, ``jacrev`` and
``hessian`` through a native call; ``jvp`` and ``jacfwd`` through ``enter_jvp_nesting``,
torch's Python, which also counts the level in a global of torch's (a leaf call running it
would leave that count behind, so the refusal comes before it)."""


MODE_PUSHES = (torch.overrides.TorchFunctionMode.__enter__, TorchDispatchMode.__enter__,
               torch.overrides._push_mode, torch.utils._python_dispatch._push_mode,
               torch._C._push_on_torch_function_stack, torch._C._push_on_torch_dispatch_stack)
"""The calls that enter a torch function mode or dispatch mode: the classes' ``__enter__``
(what ``with mode:`` calls), torch's ``_push_mode`` helpers, and the native pushes they end
in."""


def suspend_functorch(depth: int) -> list:
    """Take the functorch transforms opened beyond ``depth`` off this thread's stack (their
    dispatch keys with them), outermost first: what :func:`resume_functorch` puts back."""
    functorch = torch._C._functorch
    layers = []
    while functorch.get_dynamic_layer_stack_depth() > depth:
        layers.append(functorch.pop_dynamic_layer_stack())
    layers.reverse()
    return layers


def resume_functorch(layers: list) -> None:
    """Put back the transforms :func:`suspend_functorch` took off."""
    for layer in layers:
        torch._C._functorch.push_dynamic_layer_stack(layer)


# --- process-wide dispatcher state (saved and restored around a trace; all releases) ---------

def dispatch_modes() -> tuple:
    """The torch-dispatch modes on the stack, outermost first."""
    return tuple(torch._C._get_dispatch_stack_at(i)
                 for i in range(torch._C._len_torch_dispatch_stack()))


def function_modes() -> tuple:
    """The torch-function modes on the stack, outermost first."""
    return tuple(torch._C._get_function_stack_at(i)
                 for i in range(torch._C._len_torch_function_stack()))


def restore_mode_stacks(dispatch: tuple, function: tuple) -> None:
    """Pop or push modes until both mode stacks are ``dispatch`` and ``function``."""
    _restore_stack(dispatch, torch._C._len_torch_dispatch_stack,
                   torch.utils._python_dispatch._pop_mode,
                   torch.utils._python_dispatch._push_mode)
    _restore_stack(function, torch._C._len_torch_function_stack,
                   torch.overrides._pop_mode, torch.overrides._push_mode)


def _restore_stack(saved: tuple, length, pop, push) -> None:
    while length() > len(saved):
        pop()
    for mode in saved[length():]:
        push(mode)


def local_dispatch_keys() -> tuple:
    """The thread-local included and excluded dispatch key sets (``DispatchKeySet``s)."""
    return (torch._C._dispatch_tls_local_include_set(),
            torch._C._dispatch_tls_local_exclude_set())


def set_local_dispatch_key(key, *, included: bool | None = None,
                           excluded: bool | None = None) -> None:
    """Add ``key`` to / remove it from the thread-local included or excluded set."""
    if included is not None:
        torch._C._dispatch_tls_set_dispatch_key_included(key, included)
    if excluded is not None:
        torch._C._dispatch_tls_set_dispatch_key_excluded(key, excluded)


def inference_mode_guard(enabled: bool):
    """A guard object holding inference mode at ``enabled`` for as long as it lives."""
    return torch._C._InferenceMode(enabled)


# --- grad mode and autograd views (all releases) ---------------------------------------------

set_grad_enabled = torch._C._set_grad_enabled
"""``torch._C._set_grad_enabled(flag)``: the call ``with torch.no_grad()`` makes, and the
grad-mode node of exported graphs (torch's programs have it too)."""


def _backend_flag(owner, path: str, attribute: str) -> tuple:
    return (f"{path}.{attribute}", lambda: getattr(owner, attribute),
            lambda value: setattr(owner, attribute, value))


def _sdp_flag(kind: str) -> tuple:
    cuda = torch.backends.cuda
    return (f"torch.backends.cuda.enable_{kind}_sdp", getattr(cuda, f"{kind}_sdp_enabled"),
            getattr(cuda, f"enable_{kind}_sdp"))


GLOBAL_SETTINGS = (
    ("torch.autograd.set_detect_anomaly",
     lambda: (torch.is_anomaly_enabled(), torch.is_anomaly_check_nan_enabled()),
     lambda value: torch.set_anomaly_enabled(*value)),
    ("torch.use_deterministic_algorithms",
     lambda: (torch.are_deterministic_algorithms_enabled(),
              torch.is_deterministic_algorithms_warn_only_enabled()),
     lambda value: torch.use_deterministic_algorithms(value[0], warn_only=value[1])),
    ("torch.set_deterministic_debug_mode", torch.get_deterministic_debug_mode,
     torch.set_deterministic_debug_mode),
    ("torch.set_float32_matmul_precision", torch.get_float32_matmul_precision,
     torch.set_float32_matmul_precision),
    ("torch.set_num_threads", torch.get_num_threads, torch.set_num_threads),
    ("torch.set_warn_always", torch.is_warn_always_enabled, torch.set_warn_always),
    ("torch.set_autocast_enabled('cpu')", lambda: torch.is_autocast_enabled("cpu"),
     lambda value: torch.set_autocast_enabled("cpu", value)),
    ("torch.set_autocast_dtype('cpu')", lambda: torch.get_autocast_dtype("cpu"),
     lambda value: torch.set_autocast_dtype("cpu", value)),
    ("torch.set_autocast_cache_enabled", torch.is_autocast_cache_enabled,
     torch.set_autocast_cache_enabled),
    _backend_flag(torch.backends.mkldnn, "torch.backends.mkldnn", "enabled"),
    *(_backend_flag(torch.backends.cudnn, "torch.backends.cudnn", flag)
      for flag in ("enabled", "benchmark", "deterministic", "allow_tf32")),
    _backend_flag(torch.backends.cuda.matmul, "torch.backends.cuda.matmul", "allow_tf32"),
    *(_sdp_flag(kind) for kind in ("flash", "mem_efficient", "math", "cudnn")),
)
"""torch's process-wide settings a later eager call depends on, each ``(name, get, set)``
through public API (the same in 2.13, 2.14 and 2.15): what an export must leave as it found
them (``exporter.process_state``), and what forward() may not change (``frontend.output``:
a program cannot replay it, and eager computes under the changed setting). A setting a call
in forward() changes before it runs is refused by name (``torch.set_num_threads``...); these
catch the rest (``torch.autograd.set_detect_anomaly(True)``, whose constructor sets the mode)."""


def global_settings() -> tuple:
    """The current value of each of ``GLOBAL_SETTINGS``."""
    return tuple(get() for _, get, _ in GLOBAL_SETTINGS)


def changed_settings(before: tuple) -> list[str]:
    """The names of the ``GLOBAL_SETTINGS`` whose value is no longer the one in ``before``."""
    return [name for (name, get, _), value in zip(GLOBAL_SETTINGS, before) if get() != value]


def restore_settings(before: tuple) -> None:
    """Set back each of ``GLOBAL_SETTINGS`` whose value is not the one in ``before`` (only
    those: setting one may warn, or touch another, as the matmul precision does)."""
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        for (_, get, put), value in zip(GLOBAL_SETTINGS, before):
            if get() != value:
                put(value)


CreationMeta = torch._C._autograd.CreationMeta
"""How a view was made (``DEFAULT``, ``NO_GRAD_MODE``, ``MULTI_OUTPUT_NODE`` ...): decides
whether eager allows an in-place write through it."""


def creation_meta(view: torch.Tensor):
    """The ``CreationMeta`` of a view tensor."""
    return torch._C._autograd._get_creation_meta(view)


def parse_to_arguments(*args, **kwargs) -> tuple:
    """What ``module.to(*args, **kwargs)`` means: ``(device, dtype, non_blocking,
    memory_format)`` as torch parses it."""
    return torch._C._nn._parse_to(*args, **kwargs)


# --- autograd.Function ----------------------------------------------------------------------

FUNCTION_APPLY = (torch.autograd.Function.__dict__["apply"] if _since(2, 14)
                  else torch.autograd.Function.__dict__["apply"].__func__)
"""What ``MyFunction.apply`` binds to the class. torch 2.13: ``Function.apply`` is a Python
``classmethod`` and this is its function; 2.14+: it is ``_C._FunctionBase``'s C class method
(a ``classmethod_descriptor``), called with the class as first argument. Either way the
frontend models ``MyFunction.apply`` as this object bound to ``MyFunction``."""


DEFAULT_SETUP_CONTEXT = torch.autograd.function._SingleLevelFunction.setup_context
"""The ``setup_context`` a Function inherits when it defines none: such a Function's
``forward`` takes ``ctx`` first (old style). All releases."""


def function_apply_class(value) -> type | None:
    """The ``torch.autograd.Function`` subclass that ``value`` is ``apply`` bound to
    (``MyFunction.apply`` read natively), or None. torch 2.13: a bound method whose
    ``__func__`` is ``FUNCTION_APPLY``; 2.14+: a builtin method of the class."""
    owner = getattr(value, "__self__", None)
    if not (isinstance(owner, type) and issubclass(owner, torch.autograd.Function)):
        return None
    if getattr(value, "__func__", None) is FUNCTION_APPLY:
        return owner
    try:
        static = inspect.getattr_static(owner, getattr(value, "__name__", ""))
    except AttributeError:
        return None
    return owner if static is FUNCTION_APPLY else None


# --- higher-order operators (all releases) ---------------------------------------------------

wrap_with_set_grad_enabled = torch._higher_order_ops.wrap.wrap_with_set_grad_enabled
"""The higher-order op torch's programs hold grad-mode regions in."""

map_function = importlib.import_module("torch._higher_order_ops.map").map
"""``torch._higher_order_ops.map.map(f, xs, *args)`` (the function, not the module that
``torch._higher_order_ops`` re-exports under the same name)."""

importlib.import_module("torch._higher_order_ops.scan")
scan_function = sys.modules["torch._higher_order_ops.scan"].scan
"""``torch._higher_order_ops.scan(combine_fn, init, xs, *, dim=0, reverse=False)`` (torch
2.14 adds ``length=None``): the user-facing function, which the package re-exports under the
module's name."""


# --- fake tensors and torch's ShapeEnv (after the capture, for torch's tools) ---------------

FakeTensor = torch._subclasses.fake_tensor.FakeTensor
"""torch's fake tensor (``node.meta["val"]`` as torch's tools read it)."""

FakeTensorMode = torch._subclasses.fake_tensor.FakeTensorMode
"""The mode fake tensors are made under (holds a torch ``ShapeEnv``)."""


def fake_of_meta(mode, meta: torch.Tensor, device: torch.device):
    """A fake tensor of ``mode`` on ``device`` wrapping ``meta``, a fresh meta tensor that
    nothing else holds: the converter's ``from_meta_and_device`` without its memo (a weak
    table from the meta tensor to its fake one, for converting the same tensor again: a
    fresh tensor never is; a third of the conversion's cost, most of a static program's
    build of its fake values)."""
    return FakeTensor(mode, meta, device)

# Lazy (``_LAZY``): ``ShapeEnv``, torch's shape environment.

TensorMetadata = torch.fx.passes.shape_prop.TensorMetadata
"""``node.meta["tensor_meta"]`` as torch's export writes it."""

extract_tensor_metadata = torch.fx.passes.shape_prop._extract_tensor_metadata
"""``TensorMetadata`` of a tensor (all releases)."""

symbolic_shapes_config = torch.fx.experimental._config
"""torch's symbolic-shapes switches (``backed_size_oblivious`` ...); ``.patch(...)``."""


# --- ExportedProgram's construction and torch's verifiers ------------------------------------

Verifier = torch._export.verifier.Verifier
"""torch's verifier of the ATen dialect (``ExportedProgram.verifiers`` after decomposition)."""

TrainingIRVerifier = torch._export.verifier.TrainingIRVerifier
"""torch's verifier of the training-IR dialect (what ``export()`` produces)."""

SpecViolationError = torch._export.verifier.SpecViolationError
"""What torch's verifiers raise."""

LazyGraphModule = torch.fx._lazy_graph_module._LazyGraphModule
"""A ``GraphModule`` whose ``recompile()`` only marks the code stale: the code is generated
when first read or called. The graph an export builds goes through several passes that each
``recompile()``; the program's own module generates it when first needed
(:class:`DeferredCodeGraphModule`). All releases."""


class _GeneratedForward:
    """``forward`` of a :class:`DeferredCodeGraphModule` whose code is not generated yet: read
    from an instance, it generates the code (which then replaces it on the instance's class)
    and gives the generated method, so ``inspect.signature(gm.forward)``, ``symbolic_trace``
    and a plain call see the graph's own parameters, never ``_lazy_forward(*args,
    **kwargs)``; read from the class, it is what ``_LazyGraphModule._needs_recompile`` tests
    for."""

    def __get__(self, instance, owner):
        if instance is None:
            return owner._lazy_forward
        instance.real_recompile()
        return type(instance).forward.__get__(instance, type(instance))


_GENERATED_FORWARD = _GeneratedForward()


class DeferredCodeGraphModule(LazyGraphModule):
    """The graph module of a program :func:`new_exported_program` builds: its Python code is
    generated when first needed (``.code``, ``str()``, pickling, reading or calling
    ``forward``), never by the constructor. torch's ``ExportedProgram`` constructor generates
    it at once (``GraphModule(root, graph)``), ~7% of a static export (a Hugging Face GPT-2:
    ~10 ms of ~150), which ``module()``, saving, printing, ``run_decompositions`` and
    AOTInductor never use (they read the graph). All releases."""

    @classmethod
    def recompile(cls) -> None:  # the code is stale: generated again when next needed
        cls.forward = _GENERATED_FORWARD


def new_exported_program(cls, *, root, graph, graph_signature, state_dict, range_constraints,
                         module_call_graph, example_inputs=None, constants=None,
                         verifiers=None):
    """``cls(root, graph, ...)`` for ``cls`` a subclass of torch's ``ExportedProgram``: what
    its constructor does (the same in 2.13, 2.14 and 2.15: the graph's codegen reset to
    torch's flat one, the module, torch's duplicate-``getitem`` pass, the fields, the
    verifiers, ``validate()``, the guards' code), with the graph module a
    :class:`DeferredCodeGraphModule`. ``tests/symbolic/test_torch_compat.py`` checks, on each
    release, that it sets the attributes torch's constructor sets, to equal values."""
    program = cls.__new__(cls)
    graph._codegen = torch.fx.graph.CodeGen()
    module = DeferredCodeGraphModule(root, graph)
    if isinstance(root, torch.fx.GraphModule):
        module.meta.update(root.meta)
    exported = torch.export.exported_program
    exported._common_getitem_elimination_pass(module, graph_signature, module_call_graph)
    program._graph_module = module
    program._graph_signature = graph_signature
    program._state_dict = state_dict
    program._range_constraints = range_constraints
    if module_call_graph is None:
        raise TypeError("module_call_graph must not be None")
    program._module_call_graph = module_call_graph
    program._example_inputs = example_inputs
    program._constants = constants or {}
    program._verifiers = list(verifiers or [Verifier])
    program.validate()
    program._guards_code = exported._convert_guards_to_code(module)
    return program


NodeSource = torch.fx.traceback.NodeSource
"""Provenance record of a node (``node.meta["from_node"]``)."""

NodeSourceAction = torch.fx.traceback.NodeSourceAction
"""What made a node (``CREATE``, ``REPLACE``)."""

# Lazy (``_LAZY``): ``StatefulGraphModule``, ``unlift_lifted_states``.


# --- decompositions -----------------------------------------------------------------------

def core_aten_decompositions() -> dict:
    """A new dict of the table ``run_decompositions()`` lowers to core ATen with: torch's
    ``core_aten_decompositions()`` materialized (every namespace's CompositeImplicitAutograd
    ops added, each with its decomposition).

    Materializing asks the dispatcher for its CompositeImplicitAutograd registrations once per
    namespace and walks every op of every namespace (~18 ms a call); the result is kept and
    given again (copied) while what it is made from is unchanged: the dispatcher's
    CompositeImplicitAutograd registrations (a custom op defined or a library destroyed since),
    the op namespaces loaded, and torch's post-autograd decomposition registry (an entry
    registered or replaced since). All releases."""
    key = (frozenset(torch._C._dispatch_get_registrations_for_dispatch_key(
        "CompositeImplicitAutograd")), tuple(torch.ops._dir))
    registry = torch._decomp.global_decomposition_table["post_autograd"]
    kept = _CORE_TABLE.get("kept")
    if kept is None or kept[0] != key or kept[1] != registry:
        table = dict(torch._decomp.core_aten_decompositions().items())
        kept = _CORE_TABLE["kept"] = (key, dict(registry), table)
    return dict(kept[2])


_CORE_TABLE: dict = {}  # "kept" -> (registrations and namespaces, registry copy, table)


# --- nn.Module internals --------------------------------------------------------------------

GLOBAL_MODULE_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks",
                       "_global_backward_hooks", "_global_backward_pre_hooks")
"""Names, in ``torch.nn.modules.module``, of the hook dicts every module call consults."""


def global_module_hooks(name: str):
    """The global hook dict ``name`` of ``GLOBAL_MODULE_HOOKS`` (None if torch has none)."""
    return getattr(torch.nn.modules.module, name, None)


# --- torch.distributed ----------------------------------------------------------------------

def collective_remaps() -> tuple[dict, dict]:
    """``({dist.all_reduce: its traceable stand-in, ...}, {ReduceOp: "sum", ...})``: the
    in-place c10d collectives that tracing rewrites to functional collectives (whose ops take
    the group by name and the reduction as a string, values a graph can hold), as torch's own
    tracer does (``_functional_collectives.traceable_collective_remaps``); empty without
    torch.distributed."""
    import torch.distributed as dist

    if not dist.is_available():
        return {}, {}
    from torch.distributed import _functional_collectives as funcol

    return (dict(getattr(funcol, "traceable_collective_remaps", {})),
            dict(getattr(funcol, "REDUCE_OP_TO_STR", {})))


# --- torch's tracer -------------------------------------------------------------------------

def preload_dynamo() -> None:
    """Import ``torch._dynamo`` (what a first export loads lazily anyway), so that a warm-up
    pays for it once."""
    import torch._dynamo  # noqa: F401


def compiled_original(fn):
    """The callable inside ``fn`` when ``fn`` is a wrapper TorchDynamo made of it, else None:
    ``torch.compile(f)`` (and ``torch._dynamo.optimize``/``run``), the ``forward`` of a
    ``torch.compile(module)``, ``torch.compiler.disable(f)``. Such a wrapper only steers
    TorchDynamo (it sets the frame-evaluation hook around the call), and torch's tracers run
    the callable inside it (strict export inlines it; a disabled one strict export refuses, the
    default non-strict export traces). Told as torch's ``innermost_fn`` tells it, one level:
    ``_torchdynamo_orig_callable`` on a wrapper whose ``_torchdynamo_wrapper_id`` is its own id
    (a ``functools.wraps`` copy of a wrapper carries the attribute, not the id); the same
    attributes in 2.13, 2.14 and 2.15."""
    if not isinstance(fn, types.FunctionType):
        return None
    inner = fn.__dict__.get("_torchdynamo_orig_callable")
    if inner is None or fn.__dict__.get("_torchdynamo_wrapper_id") != id(fn) \
            or not callable(inner):
        return None
    return inner


def compiler_leaf(fn) -> bool:
    """True when ``fn`` was registered with ``torch.compiler.allow_in_graph`` (or
    ``torch._dynamo.nonstrict_trace``): torch's tracer does not look inside it, it runs it on
    fake tensors and records the ops it dispatches (einx registers its operations so).

    As torch's tracer does for every callable it meets, the registrations torch keeps for the
    library ``fn`` belongs to are made first (``trace_rules``' lazy module inits: for einops,
    its torch backend is warmed up, so that its first call inside a trace finds it cached, as
    under torch.export). Read from ``torch._dynamo.trace_rules`` (imported here: an export
    loads it anyway); the same sets and hook in 2.13, 2.14 and 2.15."""
    rules = sys.modules.get("torch._dynamo.trace_rules") or \
        importlib.import_module("torch._dynamo.trace_rules")
    # base module name -> the inits not run yet: the call is skipped when it would find none
    # for fn's module (wrap() asks this of every callable it meets)
    module = getattr(fn, "__module__", None)
    if not isinstance(module, str) or module.split(".")[0] in rules._lazy_module_init:
        rules._maybe_init_lazy_module(fn)
    key = id(fn)
    return key in rules._allowed_callable_ids() or key in rules._nonstrict_trace_callable_ids()


def auto_functionalized():
    """torch's ``higher_order.auto_functionalized`` (v1): ``(op, **arguments)`` -> the op's
    outputs then the new values of the arguments its schema writes, in schema order (it
    clones them, calls the op on the clones). torch's own functionalization records a custom
    op that writes its arguments so; ``ExportedProgram.module()`` and ``run_decompositions``
    run it. The same operator and result layout in 2.13, 2.14 and 2.15."""
    from torch._higher_order_ops.auto_functionalize import auto_functionalized as operator

    return operator


def custom_fake_kernel(op):
    """The fake kernel ``torch.library.register_fake`` gave the custom operator ``op`` (an
    OpOverload outside aten/prims), or None. torch installs it as the op's Meta kernel behind
    a ``torch.library.get_ctx()`` that raises; the trace calls it under its own context
    (:func:`fake_ctx`). Read from ``torch._library.simple_registry.singleton`` (the same
    registry in 2.13, 2.14 and 2.15)."""
    namespace = getattr(op, "namespace", "aten")
    if namespace in ("aten", "prims", "prim"):
        return None
    from torch._library import simple_registry

    name = op._schema.name
    if not simple_registry.singleton._data.get(name):
        return None
    holder = simple_registry.singleton.find(name).fake_impl
    return holder.kernel


@contextlib.contextmanager
def fake_ctx(ctx):
    """``torch.library.get_ctx()`` returns ``ctx`` inside (``torch._library.fake_impl``'s
    ctx getter, set as torch's fake tensor mode sets it: 2.13-2.15)."""
    from torch._library.fake_impl import set_ctx_getter

    with set_ctx_getter(lambda: ctx):
        yield


# --- torch's exception classes (drop-in errors) ---------------------------------------------

_TORCH_EXCEPTIONS = {
    "Unsupported": ("torch._dynamo.exc", "Unsupported"),
    "UserError": ("torch._dynamo.exc", "UserError"),
    "GuardOnDataDependentSymNode": ("torch.fx.experimental.symbolic_shapes",
                                    "GuardOnDataDependentSymNode"),
    "ConstraintViolationError": ("torch.fx.experimental.symbolic_shapes",
                                 "ConstraintViolationError"),
}
"""The torch exception classes unbroken's errors also are (``unbroken.symbolic.diagnostics.
drop_in``), by name: ``torch._dynamo.exc`` for what ``torch.export`` (strict) raises, the
symbolic-shapes classes for what non-strict export and ``ShapeEnv`` raise. The same in 2.13,
2.14 and 2.15 (``tests/symbolic/test_drop_in_errors.py`` measures it)."""


def torch_exception_class(name: str) -> type:
    """torch's exception class ``name`` (a key of ``_TORCH_EXCEPTIONS``). Its module is
    imported on first use: ``torch._dynamo.exc`` drags in ``torch._dynamo`` (about 1.4 s cold),
    which ``import unbroken`` must not pay for; an export loads it anyway."""
    module, attribute = _TORCH_EXCEPTIONS[name]
    return getattr(importlib.import_module(module), attribute)


def user_error_type(name: str):
    """The member ``name`` of ``torch._dynamo.exc.UserErrorType`` (``CONSTRAINT_VIOLATION``,
    ``INVALID_INPUT``, ``ANTI_PATTERN``...): the ``error_type`` torch's ``UserError`` carries."""
    return getattr(importlib.import_module("torch._dynamo.exc").UserErrorType, name)


# --- "am I compiling / exporting" -----------------------------------------------------------

EXPORT_PREDICATES = (
    ("torch.compiler", "is_compiling", True),
    ("torch.compiler", "is_exporting", True),
    ("torch.compiler", "is_dynamo_compiling", True),
    ("torch._dynamo", "is_compiling", True),
    ("torch._dynamo.external_utils", "is_compiling", True),
    ("torch._utils", "is_compiling", True),
    ("torch.jit", "is_scripting", False),
    ("torch.jit", "is_tracing", False),
    ("torch.jit._trace", "is_tracing", False),
    ("torch._C", "_get_tracing_state", None),
    ("torch.fx._symbolic_trace", "is_fx_tracing", False),
    ("torch.fx._symbolic_trace", "is_fx_symbolic_tracing", False),
)
"""Every predicate by which torch's code and the libraries built on it ask whether they run
under a compiler or an exporter: (module, name, the answer inside torch.export(strict=True)),
measured against torch.export in tests/frontend/test_export_predicates.py. Library helpers
(transformers' ``is_torchdynamo_compiling``...) are interpreted and end in one of these."""


def export_predicate(fn) -> tuple[bool, object]:
    """``(True, answer)`` when ``fn`` is one of ``EXPORT_PREDICATES`` (by identity; a module
    not imported yet holds none), else ``(False, None)``."""
    for module, name, answer in EXPORT_PREDICATES:
        owner = sys.modules.get(module)
        if owner is not None and getattr(owner, name, None) is fn:
            return True, answer
    return False, None


# --- torch.nn's fast paths (the same functions and predicates in 2.13, 2.14, 2.15) ---------

NN_FAST_PATH_FORWARDS = (torch.nn.MultiheadAttention.forward,
                         torch.nn.TransformerEncoderLayer.forward,
                         torch.nn.TransformerEncoder.forward)
"""The forwards of torch.nn that choose a fused kernel in eval mode when no gradient is
recorded (``torch._native_multi_head_attention``, ``torch._transformer_encoder_layer_fwd``, a
nested tensor built from the padding mask) by a chain of predicates
(``unbroken.frontend.variables.nn_fast_paths`` answers them as eager does)."""

MAKE_FX_TRACING = torch.nn.modules.activation._is_make_fx_tracing
"""``MultiheadAttention``'s "am I traced by make_fx or export" predicate (True under
``torch.export``: the fast path is skipped there)."""

NN_FAST_PATH_HELPERS = (torch.nn.modules.activation._check_arg_device,
                        torch.nn.modules.activation._arg_requires_grad)
"""``MultiheadAttention``'s checks that a tensor is on a device its fused kernel serves and
whether it requires grad: they read ``x.device`` and ``x.requires_grad``, which the trace
answers as eager (the user's device, eager's flag) only when it interprets them."""

NATIVE_MULTI_HEAD_ATTENTION = torch._native_multi_head_attention
"""``MultiheadAttention``'s fused kernel (``aten._native_multi_head_attention``). Without
``need_weights`` eager's returns ``(out, None)``; its meta kernel ``(out, empty(0))``."""

ENCODER_LAYER_FORWARD = torch._transformer_encoder_layer_fwd
"""``TransformerEncoderLayer``'s fused kernel (``aten._transformer_encoder_layer_fwd``): on a
dense input with a key-padding mask (``mask_type`` 1), or on the nested tensor
``TransformerEncoder`` builds (no mask)."""

NESTED_FROM_MASK = torch._nested_tensor_from_mask
"""``TransformerEncoder``'s conversion of its input to a nested tensor: the first
``mask.sum(1)`` positions of each row (``unbroken.frontend.variables.nn_fast_paths`` holds it
densely)."""

NESTED_FROM_MASK_LEFT_ALIGNED = torch._nested_tensor_from_mask_left_aligned
"""``TransformerEncoder``'s check that a padding mask pads on the right only (reads the
mask's data)."""

NESTED_TENSOR_BUILDERS = (NESTED_FROM_MASK, torch._nested_tensor_from_tensor_list)
"""The private constructors of a nested tensor torch.nn calls (``TransformerEncoder``'s fast
path): an exported program holds no nested tensor (the first, inside ``TransformerEncoder``,
is held densely)."""


@contextlib.contextmanager
def export_flags():
    """torch's compiling / exporting flags set for the duration of a trace, as torch.export
    sets them (``torch._export.utils._compiling_state_context``): torch's own code that runs
    natively (a leaf module's forward) then takes its export path. Restored on exit."""
    compiler = torch.compiler
    saved = (compiler._is_compiling_flag, compiler._is_exporting_flag)
    compiler._is_compiling_flag = compiler._is_exporting_flag = True
    try:
        yield
    finally:
        compiler._is_compiling_flag, compiler._is_exporting_flag = saved


def _numpy_on_torch():
    """``torch._numpy`` (imported on first use: it reads ``torch._dynamo.config`` for NumPy's
    default dtypes, float64 and int64, on every tested release)."""
    return importlib.import_module("torch._numpy")


def numpy_on_torch_function(module: str, name: str):
    """The ``torch._numpy`` counterpart of NumPy's ``numpy[.linalg|.fft].<name>`` (functions
    written with torch ops on ``torch._numpy.ndarray``, which wraps a tensor), or None when
    torch has none (``torch._numpy`` covers most of NumPy's array API; all tested releases)."""
    tnp = _numpy_on_torch()
    sub = module.split(".")[1] if module.count(".") else ""
    namespace = tnp if not sub else getattr(tnp, sub, None) if sub in ("linalg", "fft") else None
    if namespace is None or name.startswith("_"):
        return None
    fn = getattr(namespace, name, None)
    return fn if callable(fn) and not isinstance(fn, type) else None


def numpy_on_torch_call(fn, args, kwargs, to_numpy_type):
    """``fn(*args, **kwargs)`` with every tensor in the arguments (nested in lists, tuples,
    dicts) seen as a ``torch._numpy.ndarray`` wrapping it, and every ``torch._numpy`` value in
    the result turned back: an ndarray into its tensor, a dtype or scalar type into
    ``to_numpy_type(name)`` (NumPy's own). ``fn`` runs torch ops on the tensors (all tested
    releases; ``torch._numpy.ndarray(t)`` keeps ``t`` as ``.tensor``)."""
    tnp = _numpy_on_torch()

    def into(value):
        if isinstance(value, torch.Tensor):
            return tnp.ndarray(value)
        if type(value) in (list, tuple):
            return type(value)(into(v) for v in value)
        if type(value) is dict:
            return {k: into(v) for k, v in value.items()}
        return value

    def back(value):
        if isinstance(value, tnp.ndarray):
            return value.tensor
        if isinstance(value, tnp._dtypes.DType):
            return to_numpy_type(value.name, False)
        if isinstance(value, type) and issubclass(value, tnp.generic):
            return to_numpy_type(value.name, True)
        if type(value) in (list, tuple):
            return type(value)(back(v) for v in value)
        return value

    return back(fn(*into(list(args)), **into(dict(kwargs))))


# --- lazy entries: resolved on first use (see the module docstring) --------------------------

_LAZY: dict[str, tuple[str, str | None, str]] = {
    "sympy_functions": (
        "torch.utils._sympy.functions", None,
        "``torch.utils._sympy.functions``: torch's Python-semantics size functions "
        "(``FloorDiv``, ``Mod``, ``PythonMod``, ``Max`` ...), the vocabulary of unbroken's "
        "expressions too (so torch's meta kernels and unbroken build the same expressions). "
        "All tested releases."),
    "OPAQUE_SQRT": (
        "torch.utils._sympy.functions", "OpaqueUnaryFn_sqrt",
        "The sympy function ``torch._sym_sqrt`` of a size builds (None if torch has none)."),
    "int_oo": (
        "torch.utils._sympy.numbers", "int_oo",
        "torch's integer infinity (bounds of unbounded ``ValueRanges``; all releases)."),
    "ValueRanges": (
        "torch.utils._sympy.value_ranges", "ValueRanges",
        "torch's range type, in ``ExportedProgram.range_constraints`` (all releases)."),
    "ShapeEnv": (
        "torch.fx.experimental.symbolic_shapes", "ShapeEnv",
        "torch's shape environment (only built at the boundary to torch's tools)."),
    "StatefulGraphModule": (
        "torch.export._unlift", "_StatefulGraphModule",
        "Base class of ``ExportedProgram.module()``'s result (its module imports "
        "``torch._dynamo``)."),
    "unlift_lifted_states": (
        "torch.export._unlift", "_unlift_exported_program_lifted_states",
        "torch's unlifting: parameters and buffers back under their module paths, a callable "
        "module (``ExportedProgram.module()``)."),
    **{name: ("torch.utils._sympy.functions", name,
              f"torch's sympy size function ``{name}`` (see ``SYMPY_FUNCTION_NAMES``).")
       for name in SYMPY_FUNCTION_NAMES},
}
"""name -> (torch module, attribute or None for the module itself, what the entry is for):
the entries imported on first use. ``OPAQUE_SQRT`` is None where torch has no such function."""

__all__ += list(_LAZY)  # the lazy entries are entries like the others


def __getattr__(name: str):
    """Resolve a lazy entry of ``_LAZY`` on first use and keep it as a module global."""
    try:
        module_name, attribute, _ = _LAZY[name]
    except KeyError:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}") from None
    module = importlib.import_module(module_name)
    value = module if attribute is None else getattr(module, attribute, None)
    globals()[name] = value
    return value


def elementwise_output_strides(*tensors) -> tuple:
    """The strides TensorIterator gives the output of an elementwise op over ``tensors``
    (already broadcast to one shape), as torch's Python references compute them: the
    operands' dims ordered by their strides, the first operand deciding ties (symbolic sizes
    too; all releases)."""
    return tuple(torch._prims_common.compute_elementwise_output_strides(*tensors))


def is_non_overlapping_and_dense(tensor: torch.Tensor) -> bool:
    """Whether ``tensor``'s elements fill its memory exactly once, in some order of its dims
    (``Tensor::is_non_overlapping_and_dense``; torch 2.13 names it ``..._or_false``, earlier
    releases without the suffix)."""
    check = getattr(torch._prims_common, "is_non_overlapping_and_dense_or_false", None) \
        or torch._prims_common.is_non_overlapping_and_dense
    return check(tensor)


def has_symbolic_sizes(tensor: torch.Tensor) -> bool:
    """Whether a size, stride or the storage offset of ``tensor`` is symbolic
    (``TensorImpl::has_symbolic_sizes_strides``, one C call; all releases)."""
    return tensor._has_symbolic_sizes_strides


def all_op_names() -> list:
    """The qualified names (``"aten::fft_rfft"``) of every operator the dispatcher holds
    (``torch._C._dispatch_get_all_op_names``; all releases)."""
    return torch._C._dispatch_get_all_op_names()


def python_dispatcher_disabled():
    """Context manager: the Python dispatcher off (eager's C++ kernels only; all releases)."""
    return torch._C._DisablePythonDispatcher()
