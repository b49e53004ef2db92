"""Callables: user functions (inlined), PyTorch functions (leaf calls), closures' cells.

Bound methods are the object protocol's (``protocol.BoundMethodVariable``); native callables
are ``native``; builtins and classes, whose calls are the builtins' handlers, are in
``frontend.builtins``.
"""
from __future__ import annotations

import inspect
import types

from ...symbolic.diagnostics.catalogue import graph_break
from ..protocol import BoundMethodVariable
from ..sources import ClosureSource, ConstantSource
from .base import CREATION_ORDER, VariableTracker
from .constant import ConstantVariable, is_constant_value
from .containers import DictVariable, NamedTupleVariable, TupleVariable, tuple_fields
from .native import NativeCallableVariable
from .tensor import TensorVariable
from .torch_calls import call_torch_function

__all__ = ["UserFunctionVariable", "NestedFunctionVariable", "TorchFunctionVariable",
           "IgnoredCallVariable", "SignatureVariable", "TupleNewVariable", "CellVariable",
           "bind_arguments", "is_torch_callable", "is_pytorch_module_name", "python_callable",
           "CachedFunctionVariable", "AssumedConstantVariable"]


class CellVariable(VariableTracker):
    """A closure cell. ``contents``: the tracker it holds (None while unbound);
    ``external``: the cell of a function defined outside the trace, which a ``nonlocal``
    assignment would change for good (refused, UB107)."""

    __slots__ = ("contents", "created", "external")

    def __init__(self, contents: VariableTracker | None = None, source=None, *,
                 external: bool = False):
        super().__init__(source)
        self.contents = contents
        self.created = next(CREATION_ORDER)
        self.external = external

    def describe(self) -> str:
        return "a variable of an enclosing function"


DEFAULT_SOURCE = ConstantSource("a default argument value")


class UserFunctionVariable(VariableTracker):
    """A Python function from user code; calls are inlined. ``fn``: the function object."""

    __slots__ = ("fn",)

    def __init__(self, fn: types.FunctionType, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"the function `{self.fn.__qualname__}`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        cells = [CellVariable(_cell_contents(tx, cell, name), None, external=True)
                 for name, cell in zip(self.fn.__code__.co_freevars, self.fn.__closure__ or ())]
        bound = bind_arguments(tx, self.fn, args, kwargs, lambda v: tx.wrap(v, DEFAULT_SOURCE))
        return tx.inline_call(self.fn.__code__, self.fn.__globals__, bound, cells,
                              self.fn.__qualname__)

    def getattr(self, tx, name):
        return tx.wrap(getattr(self.fn, name))


def _cell_contents(tx, cell, name):
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell: a variable assigned later in the enclosing function
        return None
    return tx.wrap(value, ClosureSource(name))


def bind_arguments(tx, fn, args, kwargs, wrap_default) -> dict:
    """Bind trackers to ``fn``'s parameters; returns name -> tracker (``*args`` as a tuple
    tracker, ``**kwargs`` as a dict tracker), defaults wrapped with ``wrap_default``."""
    signature = _signature(fn)
    try:
        bound = signature.bind(*args, **kwargs)
    except TypeError as exc:
        raise tx.user_exception(TypeError(f"{fn.__qualname__}(): {exc}")) from None
    bound.apply_defaults()
    result = {}
    for name, value in bound.arguments.items():
        kind = signature.parameters[name].kind
        if kind is inspect.Parameter.VAR_POSITIONAL:
            value = TupleVariable([_as_tracker(v, wrap_default) for v in value])
        elif kind is inspect.Parameter.VAR_KEYWORD:
            value = DictVariable({k: _as_tracker(v, wrap_default) for k, v in value.items()})
        result[name] = _as_tracker(value, wrap_default)
    return result


def _as_tracker(value, wrap_default):
    return value if isinstance(value, VariableTracker) else wrap_default(value)


_SIGNATURES: dict = {}


def _signature(fn) -> inspect.Signature:
    key = fn if not isinstance(fn, types.FunctionType) else (fn.__code__, fn.__defaults__,
                                                               fn.__kwdefaults__)
    try:
        return _SIGNATURES[key]
    except (KeyError, TypeError):
        sig = inspect.signature(fn, follow_wrapped=False)  # the code we run, not __wrapped__
        try:
            _SIGNATURES[key] = sig
        except TypeError:
            pass
        return sig


class NestedFunctionVariable(VariableTracker):
    """A function created while tracing (``def`` or ``lambda`` inside traced code).

    code: its code object; f_globals: its globals; defaults / kwdefaults: trackers;
    closure: tuple of CellVariable shared with the defining frame; name: qualified name.
    """

    __slots__ = ("code", "f_globals", "defaults", "kwdefaults", "closure", "name")

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, name):
        super().__init__(None)
        self.code, self.f_globals, self.name = code, f_globals, name
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"the function `{self.name}`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.code.co_argcount == 1 and self.code.co_varnames[0] == ".0":
            # a comprehension's implicit iterator argument (not a valid identifier for inspect)
            return tx.inline_call(self.code, self.f_globals, {".0": args[0]},
                                  list(self.closure), self.name)
        skeleton = types.FunctionType(
            self.code, self.f_globals, self.code.co_name, tuple(self.defaults) or None,
            tuple(types.CellType() for _ in self.code.co_freevars) or None)
        skeleton.__kwdefaults__ = dict(self.kwdefaults) or None
        bound = bind_arguments(tx, skeleton, args, kwargs, lambda v: v)
        return tx.inline_call(self.code, self.f_globals, bound, list(self.closure), self.name)


class TorchFunctionVariable(NativeCallableVariable):
    """A PyTorch function or operator (``torch.add``, ``F.relu``, ``torch.ops.aten.add``):
    called as a leaf, its ATen ops recorded."""

    __slots__ = ()

    def describe(self) -> str:
        module = getattr(self.fn, "__module__", "torch")
        return f"`{module}.{getattr(self.fn, '__name__', self.fn)}`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        interpreted = None
        if isinstance(self.fn, types.FunctionType):  # torch's Python code can be interpreted
            interpreted = lambda: UserFunctionVariable(self.fn).call(tx, args, kwargs)  # noqa: E731
        return call_torch_function(tx, self.fn, args, kwargs, interpreted)


class IgnoredCallVariable(NativeCallableVariable):
    """``warnings.warn`` and logger methods: they report, they do not compute, so the call is
    dropped from the trace (its arguments were already evaluated) and returns None."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        return ConstantVariable(None)


class SignatureVariable(NativeCallableVariable):
    """``inspect.signature(f)``: read-only introspection, computed natively on the function
    the tracker stands for (a user function, a bound method, a module)."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        return tx.wrap(inspect.signature(python_callable(tx, args[0])))


def python_callable(tx, tracker):
    """The Python callable a tracker stands for, for introspection only (never called)."""
    if isinstance(tracker, BoundMethodVariable):
        return types.MethodType(python_callable(tx, tracker.function),
                                tracker.receiver.unwrap(tx))
    if isinstance(tracker, (UserFunctionVariable, NativeCallableVariable)):
        return tracker.fn
    if isinstance(tracker, NestedFunctionVariable):
        return types.FunctionType(tracker.code, tracker.f_globals, tracker.code.co_name)
    return tracker.unwrap(tx)


class TupleNewVariable(NativeCallableVariable):
    """``tuple.__new__(cls, iterable)``, which namedtuples' ``_make``/``_replace`` call."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        cls = args[0].as_constant()
        elements = args[1].items(tx) if len(args) > 1 else []
        if tuple_fields(cls) is not None:
            return NamedTupleVariable(elements, cls)
        if cls is tuple:
            return TupleVariable(elements)
        raise graph_break("UB108", f"`tuple.__new__` for the tuple subclass `{cls.__name__}`",
                          frames=tx.user_frames())


# Example programs shipped inside the torch package: user code, traced like any model.
_USER_CODE_IN_TORCH = ("torch._export.db.examples.",)


def is_pytorch_module_name(module: str) -> bool:
    """True for PyTorch's own library modules (``torch``, ``torch.nn.functional``...), not the
    example programs that ship inside the package (ExportDB's)."""
    return (module == "torch" or module.startswith("torch.")) and \
        not module.startswith(_USER_CODE_IN_TORCH)


def is_torch_callable(fn) -> bool:
    """True for callables that belong to PyTorch and are called as leaves."""
    module = getattr(fn, "__module__", None) or ""
    if isinstance(fn, (types.FunctionType, types.BuiltinFunctionType, types.MethodDescriptorType,
                       types.WrapperDescriptorType, types.BuiltinMethodType)):
        return is_pytorch_module_name(module)
    return False


class CachedFunctionVariable(NativeCallableVariable):
    """A function under ``functools.lru_cache``/``cache`` (``fn``: the cache wrapper;
    ``traced``: the tracker of the function it wraps).

    With constant arguments it is called natively when its result is a constant: the cache
    declares the result a function of the arguments (``is_torch_available()``, a parsed
    version), and eager makes the same call. Otherwise the wrapped function is traced."""

    __slots__ = ("traced",)

    def __init__(self, fn, traced: VariableTracker, source=None):
        super().__init__(fn, source)
        self.traced = traced

    def call(self, tx, args, kwargs) -> VariableTracker:
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            try:
                value = self.fn(*(a.as_constant() for a in args),
                                **{k: v.as_constant() for k, v in kwargs.items()})
            except Exception as exc:  # the program's own error, raised at its line
                raise tx.user_exception(exc) from None
            if is_constant_value(value):
                return ConstantVariable(value)
        return self.traced.call(tx, args, kwargs)


class AssumedConstantVariable(NativeCallableVariable):
    """A function decorated ``@torch._dynamo.assume_constant_result``: the decorator says its
    result is a constant of the program. It is called natively, once, on the example inputs
    (tensors that are inputs of forward() are passed as the example tensors), and its result
    is put into the graph as a constant, as torch.export does."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        values = [self._example(tx, a) for a in args]
        named = {k: self._example(tx, v) for k, v in kwargs.items()}
        try:
            result = self.fn(*values, **named)
        except Exception as exc:  # the function's own error on the example inputs
            raise tx.user_exception(exc) from None
        return tx.wrap(result)

    def _example(self, tx, tracker):
        if isinstance(tracker, TensorVariable):
            real = tx.output.example_value(tracker.meta)
            if real is None:
                raise graph_break(
                    "UB105", f"`{self.fn.__qualname__}` is marked assume_constant_result but is "
                    f"called with {tracker.describe()}, a value computed in forward(), which has "
                    "no example value", frames=tx.user_frames(),
                    details="Call it with inputs of forward() (or constants), or compute the "
                            "constant before export and store it on the module.")
            return real
        return tracker.unwrap(tx)
