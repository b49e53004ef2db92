"""``wrap``: choose the tracker family for a Python value met during tracing.

It sits above every tracker family (it constructs them all); trackers reach it through
``tx.wrap`` (``variables.base.Interpreter``)."""
from __future__ import annotations

import abc
import collections
import collections.abc
import contextlib
import contextvars
import dataclasses
import enum
import functools
import importlib
import importlib.metadata
import importlib.util
import inspect
import itertools
import logging
import re
import sys
import types
import warnings
import weakref

import torch

from ...symbolic.diagnostics.catalogue import graph_break
from ...symbolic.torch_compat import (
    FUNCTION_APPLY,
    HigherOrderOperator,
    OpOverload,
    OpOverloadPacket,
    TensorBase,
    batched_inner,
    compiled_original,
    compiler_leaf,
    function_apply_class,
    unmodelled_tensor_class,
)
from ..builtins import BuiltinVariable, ClassVariable
from ..equivalents import PYTHON_EQUIVALENTS
from ..protocol import (
    BoundMethodVariable,
    CallbackVariable,
    class_attribute,
    python_getattribute,
)
from ..sources import ItemSource
from .autograd_function import AutogradFunctionApplyVariable
from .base import VariableTracker, hashable
from .builtin_methods import (
    BUILTIN_TYPES,
    BuiltinClassFunctionVariable,
    UnboundBuiltinMethodVariable,
)
from .constant import (
    CONSTANT_TYPES,
    ConstantVariable,
    Identity,
    IdentityVariable,
    SetVariable,
    TrackedKey,
    is_constant_value,
    is_tracked_key,
)
from .containers import (
    DictVariable,
    ListVariable,
    NamedTupleVariable,
    SizeVariable,
    SliceVariable,
    TupleVariable,
    tuple_fields,
)
from .functions import (
    AssumedConstantVariable,
    CachedFunctionVariable,
    IgnoredCallVariable,
    SignatureVariable,
    TorchFunctionVariable,
    TupleNewVariable,
    UserFunctionVariable,
    is_torch_callable,
)
from .grad_mode import (
    GRAD_MODE_CLASSES,
    GRAD_MODE_SPECIALS,
    GradModeSpecialVariable,
    GradModeVariable,
)
from .native import (
    CLASS_FACTORIES,
    ClassFactoryVariable,
    ContextVarWriteVariable,
    ImportModuleVariable,
    PureCallableVariable,
    RefusedCallableVariable,
)
from .nn_module import NNModuleVariable
from .numpy_values import (
    NumpyCallVariable,
    freeze,
    is_numpy_callable,
    is_numpy_type,
    is_numpy_value,
)
from .objects import (
    AnnotateVariable,
    ContextManagerVariable,
    ObjectNewVariable,
    ObjectSetattrVariable,
    ObjectVariable,
    PartialVariable,
    PythonModuleVariable,
)
from .tensor import SymbolicVariable, TensorVariable

__all__ = ["SUBCLASS_HINT", "wrap"]

# Modules whose functions are pure and may be called natively on unwrapped values.
_PURE_MODULES = ("math", "operator", "_operator", "cmath", "itertools")


# Functions outside builtins that the interpreter models itself (``builtins._HANDLERS``);
# a set: membership asks ``==`` only on a hash match (``chain.from_iterable`` is made anew on
# each attribute read, equal but not identical).
_MODELLED_FUNCTIONS = frozenset([functools.reduce, itertools.chain.from_iterable,
                                 dataclasses.fields, sys.exc_info,
                                 *([sys.exception] if hasattr(sys, "exception") else [])])


# Exactly these types (not subclasses) are constants: most values wrapped are (ints, strings,
# None, bools), answered by one set lookup before the chain of tests below.
_EXACT_CONSTANT_TYPES = frozenset(CONSTANT_TYPES)


def wrap(tx, value, source=None) -> VariableTracker:
    """The tracker for ``value``. Tensors must already be meta tensors known to the recorder,
    or real tensors, which are lifted as constants."""
    kind = type(value)
    if kind in _EXACT_CONSTANT_TYPES:
        return ConstantVariable(value, source)
    plain = _PLAIN_OBJECT_TYPES.get(kind)
    if plain is not None and plain[0] == kind.__mro__ and plain[1] == abc.get_cache_token() \
            and (not plain[2] or getattr(value, "__class__", None) is kind):
        # what the chain below concludes
        created = tx.output.native_objects.get(id(value))
        if created is not None and created.value is value:
            return created
        return ObjectVariable(value, source)
    if kind is types.FunctionType or kind is type or (
            kind is types.BuiltinFunctionType and _module_level(value)):
        return _wrap_callable(tx, value, source)
    return _builder_of(tx, value)(tx, value, source)


def _module_level(builtin) -> bool:
    """Whether a C function is one object for the process (``len``, ``torch.cat``: bound to
    its module or to nothing), unlike a C method bound to a value (``parts.append``), made
    anew on each attribute read."""
    owner = getattr(builtin, "__self__", None)
    return owner is None or type(owner) is types.ModuleType


def _wrap_callable(tx, value, source) -> VariableTracker:
    """A function, a class (metaclass ``type``) or a module-level C function: which tracker it
    gets depends on the value alone (the sets of modelled callables, ``allow_in_graph``
    registrations, what it is), none of which forward() changes: decided once per trace (a
    model's code reads the same few hundred of them, ``super`` and its classes at every
    method call) and built per read with its source. An object of the trace's own is its
    tracker, as in ``_builder_of``."""
    created = tx.output.native_objects.get(id(value))
    if created is not None and created.value is value:
        return created
    known = tx.output.wrap_builders.get(id(value))
    if known is None or known[0] is not value:  # (kept alive with it: its id stays its own)
        known = tx.output.wrap_builders[id(value)] = (value, _builder_of(tx, value))
    return known[1](tx, value, source)


def _builder_of(tx, value):
    """``(tx, value, source) -> tracker``: how ``wrap`` makes ``value``'s tracker."""
    if type(value) is TrackedKey:  # a dict key met again (a KeyError's argument): its tracker
        return lambda tx, value, source: value.tracker
    if _opaque_object(value):
        created = tx.output.native_objects.get(id(value))
        if created is not None and created.value is value:
            return lambda tx, value, source: created
        _note_plain_object_type(value)
        return _with_class(ObjectVariable)
    if isinstance(value, VariableTracker):
        return _itself
    if isinstance(value, torch.Tensor):
        return _wrap_tensor
    if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
        return _wrap_symbolic
    if isinstance(value, torch.Size):
        return _wrap_size
    if type(value) is Identity:  # id()'s value: compared and keyed with, never a graph input
        return _with_class(IdentityVariable)
    if is_constant_value(value) or isinstance(value, enum.Enum):
        return _constant
    if is_numpy_value(value):  # a constant of the trace, never written (see numpy_values)
        return _frozen_constant
    if callable(value) and hashable(value):
        if value in _IGNORED_CALLS:
            return _with_class(IgnoredCallVariable)
        if value in _NATIVE_QUERIES or _singledispatch_lookup(value):
            return _with_class(PureCallableVariable)
        if value in CLASS_FACTORIES:
            return _with_class(ClassFactoryVariable)
        if value in GRAD_MODE_SPECIALS:  # type(cm).__enter__(cm): the tracker's region
            return _with_class(GradModeSpecialVariable)
        if value in _MODELLED_FUNCTIONS:
            return _with_class(BuiltinVariable)
        equivalent = PYTHON_EQUIVALENTS.get(value)
        if equivalent is not None:  # itertools.count, groupby...: their Python equivalents
            return lambda tx, value, source: tx.wrap(equivalent)  # (a function or class)
        if value is inspect.signature:
            return _with_class(SignatureVariable)
        if value is getattr(torch.fx.traceback, "annotate", None):  # node metadata only
            return lambda tx, value, source: AnnotateVariable(source)
        if value is importlib.import_module:
            return _with_class(ImportModuleVariable)
        if compiler_leaf(value):  # torch.compiler.allow_in_graph: run on meta tensors, as
            return _with_class(TorchFunctionVariable)  # torch runs it on fake tensors
        if compiled_original(value) is not None:  # torch.compile, torch.compiler.disable
            return _wrap_compiled
    created = tx.output.native_objects.get(id(value))
    if created is not None and created.value is value:  # an object of the trace's own
        return lambda tx, value, source: created
    owner = value.__self__ if isinstance(value, types.MethodType) else None
    if isinstance(owner, GRAD_MODE_CLASSES):  # `self.clone` kept by @torch.inference_mode()
        return lambda tx, value, source: \
            GradModeVariable.from_instance(owner).getattr(tx, value.__name__)
    for check, builder in _BUILDERS:
        if check(value):
            return builder
    if isinstance(value, GRAD_MODE_CLASSES):  # e.g. no_grad().clone() in @torch.no_grad()
        return lambda tx, value, source: GradModeVariable.from_instance(value, source)
    if ContextManagerVariable.supports(value):
        return _with_class(ContextManagerVariable)
    _note_plain_object_type(value)
    return _with_class(ObjectVariable)


# The classes the chain of ``_builder_of`` gives a tracker of their own (or may: a container,
# a context manager). Any other object is a plain one, an ``ObjectVariable``.
_CHAIN_CLASSES = (VariableTracker, torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool,
                  *CONSTANT_TYPES, enum.Enum, torch.nn.Module, tuple, list, dict, set,
                  frozenset, slice, types.MappingProxyType, collections.abc.ItemsView,
                  collections.abc.KeysView, collections.abc.ValuesView, types.ModuleType, type,
                  types.GeneratorType, torch.autocast, *GRAD_MODE_CLASSES)


def _opaque_object(value) -> bool:
    """An object of a class that defines ``__getattribute__`` in Python and is none of the
    chain's: a plain object, told by its type alone. The chain's tests are ``isinstance``
    calls, and each failed one reads the value's ``__class__`` through that
    ``__getattribute__``: the user's code, run natively (a Hugging Face config's, ~90 calls
    on its first wrap), where the program never calls it. (A NumPy record array is of such
    a class: it stays the chain's.)"""
    kind = type(value)
    return python_getattribute(kind) and not callable(value) and \
        not issubclass(kind, _CHAIN_CLASSES) and not is_numpy_type(kind)


def _wrap_compiled(tx, value, source):
    """A wrapper TorchDynamo made of a callable (``torch.compile(f)``, a compiled module's
    ``forward``, ``torch.compiler.disable(f)``) is the callable inside it: the wrapper only
    sets TorchDynamo's frame hook around the call (run natively, it would have TorchDynamo
    compile the interpreter's own frames), and the capture runs no compiler."""
    return wrap(tx, compiled_original(value), source)


def _itself(tx, value, source):
    return value


def _constant(tx, value, source):
    return ConstantVariable(value, source)


def _frozen_constant(tx, value, source):
    return ConstantVariable(freeze(value), source)


def _wrap_size(tx, value, source):
    return SizeVariable([wrap(tx, v) for v in value], source)


@functools.cache
def _with_class(tracker_class):
    """The builder of trackers made as ``tracker_class(value, source)``."""
    return lambda tx, value, source: tracker_class(value, source)


# Classes whose instances ``wrap`` always makes ObjectVariables: class -> (its ``__mro__``,
# ``abc.get_cache_token()``) when that was concluded. Every test of the chain in ``wrap`` is an
# ``isinstance`` against a fixed class (whose metaclass is ``type`` or ``ABCMeta``: no
# ``__instancecheck__`` of its own), which for an object whose ``__class__`` is its type asks
# only the type's MRO and the ABC registrations; both are part of the key, so a changed
# ``__bases__`` or a new ``ABC.register`` decides afresh. The few tests that read the value
# itself are excluded: callables (the sets of functions modelled), containers (their items,
# their class's methods). The saving: an object whose class defines ``__getattribute__`` in
# Python (Hugging Face's configs) answers each ``isinstance`` with a call of it for
# ``__class__``, some 90 calls per wrap. Weak: classes made in a loop are not kept alive.
_PLAIN_OBJECT_TYPES: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_OBJECT_CLASS = object.__dict__["__class__"]
_VALUE_DEPENDENT = (tuple, list, dict, set, frozenset)


def _note_plain_object_type(value) -> None:
    kind = type(value)
    # ``value.__class__`` is read (a C-level lookup: a proxy's names its referent's class)
    # unless the class defines ``__getattribute__`` in Python: that is the user's code, never
    # run natively (an object of such a class is dispatched on its type; the program's own
    # ``isinstance`` is interpreted). A class-level ``__class__`` of its own: never plain.
    reads_class = not python_getattribute(kind)
    if callable(value) or issubclass(kind, _VALUE_DEPENDENT) or \
            class_attribute(kind, "__class__") is not _OBJECT_CLASS or \
            reads_class and getattr(value, "__class__", None) is not kind:
        return
    try:
        _PLAIN_OBJECT_TYPES[kind] = (kind.__mro__, abc.get_cache_token(), reads_class)
    except TypeError:  # a class that cannot be referenced weakly: decided each time
        pass


# Diagnostics output that does not change what forward() computes: dropped from the trace
# (``print`` too, as torch.export strict drops it: the program computes, it does not report);
# so are the warning filters, which only decide which of those reports are shown (changed
# by the trace they would outlive the export).
_LOGGING_METHODS = ("debug", "info", "warning", "warn", "error", "exception", "critical",
                    "fatal", "log")
_IGNORED_CALLS = frozenset([print, warnings.warn, warnings.warn_explicit, warnings.simplefilter,
                            warnings.filterwarnings, warnings.resetwarnings] + [
    getattr(owner, name) for owner in (logging, logging.Logger, logging.LoggerAdapter)
    for name in _LOGGING_METHODS if hasattr(owner, name)])


# Read-only queries of library state, called natively (interpreting them would walk into
# locks and caches): `if logger.isEnabledFor(logging.DEBUG):`.
# Installed-package metadata is fixed for the process: `is_torch_available()`-style probes
# in library code read it (interpreting importlib's finders would walk the file system).
_NATIVE_QUERIES = frozenset([logging.Logger.isEnabledFor, logging.Logger.getEffectiveLevel,
                             logging.Logger.hasHandlers, importlib.metadata.version,
                             importlib.metadata.distribution, importlib.metadata.metadata,
                             importlib.metadata.requires, importlib.util.find_spec])


def _singledispatch_lookup(value) -> bool:
    """``functools.singledispatch``'s ``dispatch(cls)``, the implementation registered for a
    class: a read of its registry, with a cache (weak references the trace cannot make) that
    only remembers what the registry answers; called natively, as the read-only queries above
    (the implementation it returns is the program's own function, interpreted)."""
    return type(value) is types.FunctionType and value.__module__ == "functools" and \
        value.__qualname__ == "singledispatch.<locals>.dispatch"


def _wrap_tensor(tx, value: torch.Tensor, source) -> VariableTracker:
    recorder = tx.output.recorder
    subclass = tx.output.unmodelled_class(value) or (
        None if recorder.is_tracked(value) else unmodelled_tensor_class(value))
    if subclass is not None:
        _refuse_subclass(tx, subclass, source)
    if not recorder.is_tracked(value) and value.requires_grad and source is not None and \
            not recorder.is_lifted(value):
        raise graph_break(
            "UB123", f"`{source.name()}` requires grad but is not a parameter, buffer or input "
                     "of the exported model", frames=tx.user_frames(),
            hint="Make it an nn.Parameter of the model (or of a registered submodule) in "
                 "__init__, or detach it if no gradient should reach it.")
    if not recorder.is_tracked(value) and not _batched_in_trace(recorder, value):
        hint = source.path().replace(".", "_") if source is not None else None
        value = recorder.lift_constant(value, hint)
    return TensorVariable(value, source, is_parameter=tx.output.is_parameter(value),
                          requires_grad=tx.output.requires_grad(value))


def _refuse_subclass(tx, subclass: type, source) -> None:
    """A tensor subclass (``unmodelled_tensor_class``: ``TwoTensor``, ``DTensor``) read by
    forward(): the trace holds a plain meta tensor for it, which would drop its behaviour."""
    what = f"`{source.name()}`" if source is not None else "a tensor in forward()"
    raise graph_break("UB117", f"{what} is a {subclass.__name__}, a tensor subclass that "
                      "unbroken cannot trace (its own __torch_dispatch__ / "
                      "__torch_function__ / __tensor_flatten__)", frames=tx.user_frames(),
                      details="The trace stands a plain tensor of the same dtype and sizes "
                      "in for it, which would not compute what the subclass computes in eager.",
                      hint=SUBCLASS_HINT)


SUBCLASS_HINT = ("Keep plain tensors in the model and its inputs: register the tensors the "
                 "subclass holds as the parameters or buffers themselves and compute with them.")


def _batched_in_trace(recorder, value: torch.Tensor) -> bool:
    """A ``torch.vmap`` batched tensor over a traced tensor (the interpreted ``vmap`` made it,
    or an op on one returned it): a value of the trace, whose ops the recorder sees on the
    tensor inside."""
    inner = batched_inner(value)
    return inner is not None and recorder.is_tracked(inner)


def _wrap_symbolic(tx, value, source) -> VariableTracker:
    node = value.node
    constant = node.maybe_as_int() if hasattr(node, "maybe_as_int") else None
    if constant is not None and isinstance(value, torch.SymInt):
        return ConstantVariable(constant, source)
    return SymbolicVariable(value, source)


def _wrap_tuple(tx, value, source):
    elements = [wrap(tx, v, ItemSource(source, i) if source else None) for i, v in enumerate(value)]
    if tuple_fields(type(value)) is not None:
        return NamedTupleVariable(elements, type(value), source)
    return TupleVariable(elements, source)


def _wrap_list(tx, value, source):
    return ListVariable([wrap(tx, v, ItemSource(source, i) if source else None)
                         for i, v in enumerate(value)], source, external=source is not None)


def _wrap_dict(tx, value, source):
    entries = {}
    for k, v in value.items():  # wrap's first case inline: mostly constants (a config's dict)
        item = ItemSource(source, k) if source else None
        entries[k] = ConstantVariable(v, item) if type(v) in _EXACT_CONSTANT_TYPES else \
            wrap(tx, v, item)
    return DictVariable(entries, source, type(value), external=source is not None)


def _wrap_mapping_view(tx, value, source):
    """``dict.items()``/``keys()``/``values()`` views (also OrderedDict's): a list snapshot."""
    if isinstance(value, collections.abc.ItemsView):
        return ListVariable([TupleVariable([wrap(tx, k), wrap(tx, v)]) for k, v in value])
    return ListVariable([wrap(tx, v) for v in value])


def _wrap_set(tx, value, source):
    """A set of constants; one from outside the trace (it has a source) is read-only."""
    return SetVariable(value, source, external=source is not None)


def _wrap_slice(tx, value, source):
    return SliceVariable([wrap(tx, v) for v in (value.start, value.stop, value.step)], source)


def _wrap_module(tx, value, source):
    return NNModuleVariable(value, tx.output.module_path(value, source))


def _wrap_python_module(tx, value, source):
    return PythonModuleVariable(value, source)


def _wrap_function(tx, value, source):
    if getattr(value, "_dynamo_marked_constant", False):  # @assume_constant_result
        return AssumedConstantVariable(value, source)
    if value is FUNCTION_APPLY:  # MyFunction.apply: a custom autograd.Function is traced
        return AutogradFunctionApplyVariable(value, source)
    if value.__code__ is _CONTEXT_MANAGER_FACTORY or _context_manager_body(value):
        return UserFunctionVariable(value, source)  # see _CONTEXT_MANAGER_FACTORY
    if is_torch_callable(value):
        return TorchFunctionVariable(value, source)
    return UserFunctionVariable(value, source)


# The function ``@contextlib.contextmanager`` makes of a generator function, whoever wrote it:
# interpreted, its generator too, for torch's (``sdpa_kernel``, ``disable_saved_tensors_hooks``,
# ``vmap``'s nesting) as for the program's own. A leaf call would hand back a native context
# manager whose body the trace cannot see; interpreted, the native calls of its body are leaf
# calls, and what they set is process state forward() must restore (``check_settings_restored``).
_CONTEXT_MANAGER_FACTORY = contextlib.contextmanager(lambda: (yield)).__code__


def _context_manager_body(fn: types.FunctionType) -> bool:
    """Whether ``fn`` is the generator function a ``@contextlib.contextmanager`` factory wraps:
    the name it is defined under (module, class) holds that factory. Its generator is
    interpreted with the factory: run natively (a leaf call runs a generator to its end), its
    exit would run before the ``with`` block does."""
    if not fn.__code__.co_flags & inspect.CO_GENERATOR or "<locals>" in fn.__qualname__:
        return False
    owner = sys.modules.get(fn.__module__)
    for name in fn.__qualname__.split("."):
        owner = inspect.getattr_static(owner, name, None)
        if owner is None:
            return False
    factory = owner.__func__ if isinstance(owner, (staticmethod, classmethod)) else owner
    return getattr(factory, "__code__", None) is _CONTEXT_MANAGER_FACTORY and \
        getattr(factory, "__wrapped__", None) is fn


def _wrap_builtin(tx, value, source):
    function_class = function_apply_class(value)
    if function_class is not None:  # MyFunction.apply read natively (torch 2.14+: a C method)
        return BoundMethodVariable(wrap(tx, function_class),
                                   AutogradFunctionApplyVariable(FUNCTION_APPLY, None))
    if value is object.__new__:
        return ObjectNewVariable(value, source)
    if _builtin_class_function(value):  # dict.fromkeys, int.from_bytes, str.maketrans...
        return BuiltinClassFunctionVariable(value, source)
    if type(getattr(value, "__self__", None)) in BUILTIN_TYPES:  # `"-".join` kept outside
        return _wrap_bound_builtin(tx, value)
    module = getattr(value, "__module__", None) or ""
    if module == "builtins":
        return BuiltinVariable(value, source)
    if module in _PURE_MODULES or module.startswith("math"):
        return PureCallableVariable(value, source)
    if is_torch_callable(value) or isinstance(value, (OpOverload,
                                                      OpOverloadPacket)):
        return TorchFunctionVariable(value, source)
    self_obj = getattr(value, "__self__", None)
    if type(self_obj) is contextvars.ContextVar and value.__name__ in ("set", "reset"):
        return ContextVarWriteVariable(value, source)
    if value is tuple.__new__:  # namedtuple._make / _replace build instances through it
        return TupleNewVariable(value, source)
    if self_obj is not None and not isinstance(self_obj, (types.ModuleType, type)):
        if value.__name__ in _READ_ONLY_METHODS:  # e.g. super().get(...) in a dict subclass
            return PureCallableVariable(value, source)
        return RefusedCallableVariable(
            value, source, "UB108", f"the native method `{value.__qualname__}` of an object "
            "that exists outside forward() may change it")
    return RefusedCallableVariable(
        value, source, "UB108", f"the native function `{getattr(value, '__qualname__', value)}` "
        f"from `{module or '?'}` is not supported")


# C methods of containers that only read: safe to call natively on an object from outside.
_READ_ONLY_METHODS = frozenset({"get", "keys", "values", "items", "__getitem__", "__contains__",
                                "__len__", "copy", "index", "count", "__iter__"})


def _builtin_class_function(value) -> bool:
    """A class-level function of a builtin type (a class method bound to the type, a static
    method such as ``str.maketrans``): pure, it only builds a new value."""
    owner = getattr(value, "__self__", None)
    if owner is None:  # a static method: found on the type its qualified name gives
        name = getattr(value, "__qualname__", "").partition(".")[0]
        owner = next((t for t in BUILTIN_TYPES if t.__name__ == name), None)
        return owner is not None and getattr(owner, value.__name__, None) is value
    return owner in BUILTIN_TYPES


def _wrap_bound_builtin(tx, value):
    """A method of a builtin value, bound outside the trace (``sep.join`` stored on an
    object): the value's own method, on its tracker; a mutable receiver is not the trace's."""
    receiver = wrap(tx, value.__self__)
    if hasattr(receiver, "external"):
        receiver.external = True
    owner = type(value.__self__)
    return UnboundBuiltinMethodVariable(owner, value.__name__,
                                        getattr(owner, value.__name__)).bind(tx, receiver)


def _wrap_method(tx, value, source):
    receiver = wrap(tx, value.__self__)
    return BoundMethodVariable(receiver, wrap(tx, value.__func__))


def _wrap_descriptor(tx, value, source):
    if value is FUNCTION_APPLY:  # torch 2.14+: Function.apply is a C class method
        return AutogradFunctionApplyVariable(value, source)
    owner = getattr(value, "__objclass__", None)
    if owner is not None and issubclass(owner, TensorBase):
        return TorchFunctionVariable(value, source)
    if value is object.__setattr__:
        return ObjectSetattrVariable(value, source)
    if owner is contextvars.ContextVar and value.__name__ in ("set", "reset"):
        return ContextVarWriteVariable(value, source)
    if owner is contextvars.ContextVar and value.__name__ == "get":  # reads the context
        return PureCallableVariable(value, source)
    if isinstance(value, types.MethodWrapperType) and value.__name__ == "__get__" and \
            isinstance(value.__self__, types.FunctionType):  # partialmethod binds through it
        return _function_get(tx, value.__self__)
    if isinstance(value, types.MethodWrapperType) and type(value.__self__) in BUILTIN_TYPES:
        return _wrap_bound_builtin(tx, value)  # `(3).__add__` kept outside the trace
    if (owner in BUILTIN_TYPES or owner is object) and \
            not isinstance(value, types.MethodWrapperType):
        return UnboundBuiltinMethodVariable(owner, value.__name__, value, source)
    if owner in (str, int, float, tuple, list, dict, bytes, object, re.Pattern, re.Match):
        return PureCallableVariable(value, source)
    return RefusedCallableVariable(value, source, "UB108",
                                   f"the native method `{value!r}` is not supported")


def _function_get(tx, function):
    """``function.__get__``: ``(obj, cls)`` gives the method of ``obj`` (the function itself
    for ``obj`` None), as a function binds when read from a class."""
    def bind(tx, args):
        if not args or (args[0].is_constant() and args[0].as_constant() is None):
            return wrap(tx, function)
        return BoundMethodVariable(args[0], wrap(tx, function))

    return CallbackVariable(bind, f"`{function.__qualname__}.__get__`")


def _wrap_class(tx, value, source):
    return ClassVariable(value, source)


def _wrap_partial(tx, value, source):
    return PartialVariable(wrap(tx, value.func), [wrap(tx, a) for a in value.args],
                           {k: wrap(tx, v) for k, v in value.keywords.items()}, outside=value)


def _wrap_generator(tx, value, source):
    raise graph_break("UB106", "a generator object is used in traced code", frames=tx.user_frames())


def _wrap_cached(tx, value, source):
    """A function under ``functools.lru_cache``/``cache``: called natively when every argument
    is a constant (the cache declares the result a function of its arguments, and eager calls
    it the same way: ``is_torch_available()``), else traced through the function itself."""
    return CachedFunctionVariable(value, wrap(tx, value.__wrapped__, source), source)


def _wrap_op(tx, value, source):
    return TorchFunctionVariable(value, source)


def _plain(value, base: type) -> bool:
    """A list/dict whose class does not override the container's own methods: its tracker
    may model it with the builtin semantics. Subclasses that do (a registry whose ``get``
    looks keys up differently) are objects: their methods are interpreted."""
    for klass in type(value).__mro__:
        if klass is base or klass.__module__ in ("collections", "builtins"):
            return True
        if any(name in vars(base) for name in vars(klass) if not name.startswith("__")
               or name in ("__getitem__", "__setitem__", "__contains__", "__iter__")):
            return False
    return True


_BUILDERS = [
    (lambda v: isinstance(v, torch.nn.Module), _wrap_module),
    (is_numpy_callable, lambda tx, value, source: NumpyCallVariable(value, source)),
    (lambda v: isinstance(v, tuple), _wrap_tuple),
    (lambda v: isinstance(v, list) and _plain(v, list), _wrap_list),
    (lambda v: isinstance(v, (dict, collections.OrderedDict)) and _plain(v, dict), _wrap_dict),
    # a read-only view of a dict (inspect.Signature.parameters): a dict that cannot change
    (lambda v: isinstance(v, types.MappingProxyType), _wrap_dict),
    (lambda v: isinstance(v, slice), _wrap_slice),
    # a set of constants; one the trace made may hold its tensors and objects (TrackedKey)
    (lambda v: type(v) in (set, frozenset) and all(is_constant_value(e) or is_tracked_key(e)
                                                   for e in v), _wrap_set),
    (lambda v: isinstance(v, (collections.abc.ItemsView, collections.abc.KeysView,
                              collections.abc.ValuesView)), _wrap_mapping_view),
    # higher-order operators (torch.ops.higher_order.cond...) are answered by torch_calls
    (lambda v: isinstance(v, (OpOverload, OpOverloadPacket,
                              HigherOrderOperator)), _wrap_op),
    (lambda v: isinstance(v, types.FunctionType), _wrap_function),
    (lambda v: isinstance(v, types.BuiltinFunctionType), _wrap_builtin),
    (lambda v: isinstance(v, types.MethodType), _wrap_method),
    (lambda v: isinstance(v, (types.MethodDescriptorType, types.WrapperDescriptorType,
                              types.MethodWrapperType, types.ClassMethodDescriptorType)),
     _wrap_descriptor),
    (lambda v: isinstance(v, type), _wrap_class),
    (lambda v: isinstance(v, types.ModuleType), _wrap_python_module),
    (lambda v: isinstance(v, functools.partial), _wrap_partial),
    (lambda v: isinstance(v, functools._lru_cache_wrapper), _wrap_cached),
    (lambda v: isinstance(v, types.GeneratorType), _wrap_generator),
]
