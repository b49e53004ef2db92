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
from ..sources import AttrSource, ClosureSource, ConstantSource
from .base import CREATION_ORDER, AttributeMissing, VariableTracker
from .binding import BindingPlan
from .builtin_methods import check_mutable
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
        """Read natively (the function exists outside the trace): a missing attribute is the
        program's AttributeError; a container read (``f.__dict__``) is the function's own,
        which the trace may not change (it has a source, so it is external)."""
        try:
            value = getattr(self.fn, name)
        except AttributeError:
            raise AttributeMissing(name) from None
        return tx.wrap(value, AttrSource(self.source or ConstantSource(self.fn.__qualname__),
                                         name))


def _cell_contents(tx, cell, name):
    try:
        value = cell.cell_contents
    except ValueError:  # an empty cell: a variable assigned later in the enclosing function
        return None
    return tx.wrap(value, ClosureSource(name))


def bind_arguments(tx, fn, args, kwargs, wrap_default) -> dict:
    """Bind trackers to ``fn``'s parameters; returns name -> tracker (``*args`` as a tuple
    tracker, ``**kwargs`` as a dict tracker), defaults wrapped with ``wrap_default``."""
    plan = _binding_plan(fn)
    arguments = plan.bind(args, kwargs)
    if arguments is None:  # an error (or a keyword naming a positional-only parameter)
        try:
            bound = plan.signature.bind(*args, **kwargs)
        except TypeError as exc:
            raise tx.user_exception(TypeError(f"{fn.__qualname__}(): {exc}")) from None
        bound.apply_defaults()
        arguments = bound.arguments
    result = {}
    for name, value in arguments.items():
        kind = plan.kinds[name]
        if kind is inspect.Parameter.VAR_POSITIONAL:
            value = TupleVariable([_as_tracker(v, wrap_default) for v in value])
        elif kind is inspect.Parameter.VAR_KEYWORD:
            value = DictVariable({k: _as_tracker(v, wrap_default) for k, v in value.items()})
        result[name] = _as_tracker(value, wrap_default)
    return result


def _as_tracker(value, wrap_default):
    return value if isinstance(value, VariableTracker) else wrap_default(value)


_PLANS: dict = {}


def _binding_plan(fn) -> BindingPlan:
    """The binding plan of ``fn``'s signature, cached as the signature is."""
    key = fn if not isinstance(fn, types.FunctionType) else (fn.__code__, fn.__defaults__,
                                                               fn.__kwdefaults__)
    try:
        return _PLANS[key]
    except (KeyError, TypeError):
        plan = BindingPlan(_signature(fn))
        try:
            _PLANS[key] = plan
        except TypeError:
            pass
        return plan


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
    closure: tuple of CellVariable shared with the defining frame; name: qualified name;
    annotations: the ``(name, value, ...)`` trackers MAKE_FUNCTION got (flattened pairs).

    The function is the trace's own object, so its attributes may be written as CPython
    writes them (``functools.wraps``/``update_wrapper`` on a wrapper made in forward(), a
    decorator that tags the function): ``fields`` holds the struct fields written
    (``__name__``, ``__doc__``, ``__module__``...), ``namespace`` the function's ``__dict__``
    (a DictVariable, made on first use), ``created`` the creation stamp (a torch.cond branch
    may not write a function made before it, see ``check_mutable``).
    """

    __slots__ = ("code", "f_globals", "defaults", "kwdefaults", "closure", "name",
                 "annotations", "fields", "namespace", "created")

    def __init__(self, code, f_globals, defaults, kwdefaults, closure, name):
        super().__init__(None)
        self.code, self.f_globals, self.name = code, f_globals, name
        self.defaults, self.kwdefaults, self.closure = defaults, kwdefaults, closure
        self.annotations: list = []
        self.fields: dict[str, VariableTracker] = {}
        self.namespace: DictVariable | None = None
        self.created = next(CREATION_ORDER)

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"the function `{self.name}`"

    def skeleton(self) -> types.FunctionType:
        """A function object of the same code and globals, empty cells and no defaults: what
        CPython derives from the code alone (``__doc__``, ``__module__``), and the signature
        binder of a call."""
        return types.FunctionType(
            self.code, self.f_globals, self.code.co_name, None,
            tuple(types.CellType() for _ in self.code.co_freevars) or None)

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.code.co_argcount == 1 and self.code.co_varnames[0] == ".0":
            # a comprehension's implicit iterator argument (not a valid identifier for inspect)
            return tx.inline_call(self.code, self.f_globals, {".0": args[0]},
                                  list(self.closure), self.name)
        skeleton = self.skeleton()
        skeleton.__defaults__ = tuple(self.defaults) or None
        skeleton.__kwdefaults__ = dict(self.kwdefaults) or None
        bound = bind_arguments(tx, skeleton, args, kwargs, lambda v: v)
        return tx.inline_call(self.code, self.f_globals, bound, list(self.closure), self.name)

    # ----------------------------------------------------------------- attributes
    def dict_view(self) -> DictVariable:
        """The function's ``__dict__`` (the same tracker on every read, as the same dict)."""
        if self.namespace is None:
            self.namespace = DictVariable({})
            self.namespace.created = self.created
        return self.namespace

    def getattr(self, tx, name: str) -> VariableTracker:
        """``f.name`` as CPython reads it: the function type's fields first (data
        descriptors), then the function's ``__dict__``, then the type's other attributes."""
        if name in self.fields:
            return self.fields[name]
        field = _FIELD_READERS.get(name)
        if field is not None:
            return field(self, tx)
        if self.namespace is not None and name in self.namespace.entries:
            return self.namespace.entries[name]
        if name in ("__call__", "__get__"):
            return _FunctionMethod(self, name)
        if name == "__class__":
            return tx.wrap(types.FunctionType)
        if hasattr(types.FunctionType, name):
            raise graph_break("UB117", f"`{name}` of {self.describe()} (a function created "
                              "in forward())", frames=tx.user_frames())
        raise AttributeMissing(name)

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        """``f.name = value``: the function is the trace's, so the write is its own (eager
        changes only this new object). A field of the function type is checked as CPython
        checks it; anything else goes to the function's ``__dict__``."""
        check_mutable(tx, self, f"setting `.{name}` of a function")
        if name in _FIELD_WRITERS:
            _FIELD_WRITERS[name](self, tx, name, value)
        elif name in _FUNCTION_FIELDS:
            raise graph_break("UB107", f"assignment to `{name}` of {self.describe()}",
                              frames=tx.user_frames(),
                              details="Replacing what a function runs (its code or globals) "
                              "inside forward() is not modelled: build the function you need.")
        else:
            view = self.dict_view()
            check_mutable(tx, view, f"setting `.{name}` of a function")
            view.entries[name] = value

    def delattr(self, tx, name: str) -> None:
        """``del f.name``: an entry of the function's ``__dict__`` goes."""
        check_mutable(tx, self, f"deleting `.{name}` of a function")
        if name in _FUNCTION_FIELDS:
            raise graph_break("UB107", f"deletion of `{name}` of {self.describe()}",
                              frames=tx.user_frames())
        if self.namespace is None or name not in self.namespace.entries:
            raise tx.user_exception(AttributeError(name))
        check_mutable(tx, self.namespace, f"deleting `.{name}` of a function")
        del self.namespace.entries[name]

    def introspect(self, tx) -> types.FunctionType:
        """A function object standing for this one in introspection (``inspect.signature``):
        the same code, defaults, annotations and ``__dict__`` (``__wrapped__``,
        ``__signature__``), never called."""
        function = self.skeleton()
        function.__defaults__ = tuple(d.unwrap(tx) for d in self.defaults) or None
        function.__kwdefaults__ = {k: v.unwrap(tx) for k, v in self.kwdefaults.items()} or None
        function.__annotations__ = _annotations(self, tx).unwrap(tx)
        for name, value in self.fields.items():
            if name in ("__name__", "__qualname__", "__module__", "__doc__"):
                setattr(function, name, value.unwrap(tx))
        entries = self.namespace.entries if self.namespace is not None else {}
        if "__wrapped__" in entries:  # inspect.signature follows it
            function.__wrapped__ = python_callable(tx, entries["__wrapped__"])
        if "__signature__" in entries:
            function.__signature__ = entries["__signature__"].unwrap(tx)
        return function


class _FunctionMethod(VariableTracker):
    """``f.__call__`` (calls ``f``) or ``f.__get__`` (binds ``f`` to an instance, as a
    function read from a class binds) of a function created in forward()."""

    __slots__ = ("function", "name")

    def __init__(self, function: NestedFunctionVariable, name: str):
        super().__init__(None)
        self.function, self.name = function, name

    def describe(self) -> str:
        return f"`{self.function.name}.{self.name}`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.name == "__call__":
            return self.function.call(tx, args, kwargs)
        if not args or (args[0].is_constant() and args[0].as_constant() is None):
            if len(args) < 2 or (args[1].is_constant() and args[1].as_constant() is None):
                raise tx.user_exception(TypeError("__get__(None, None) is invalid"))
            return self.function  # read from the class: the function itself
        return BoundMethodVariable(args[0], self.function)


# The fields of a function object (data descriptors of its type: ``__type_params__`` from 3.12).
_FUNCTION_FIELDS = frozenset(name for name, value in vars(types.FunctionType).items()
                             if hasattr(type(value), "__set__"))


def _annotations(function: NestedFunctionVariable, tx) -> VariableTracker:
    """``f.__annotations__``: made from MAKE_FUNCTION's pairs on first read, then the same
    dict (a write to it stays)."""
    if "__annotations__" not in function.fields:
        pairs = function.annotations
        view = DictVariable({pairs[i].as_constant(): pairs[i + 1]
                             for i in range(0, len(pairs), 2)})
        view.created = function.created
        function.fields["__annotations__"] = view
    return function.fields["__annotations__"]


def _kwdefaults(function: NestedFunctionVariable, tx) -> VariableTracker:
    if not function.kwdefaults:
        return ConstantVariable(None)
    view = DictVariable({})
    view.entries = function.kwdefaults  # the function's own dict: a write to it stays
    return view


def _refused_read(function: NestedFunctionVariable, tx, name: str):
    raise graph_break("UB117", f"`{name}` of {function.describe()} (a function created in "
                      "forward())", frames=tx.user_frames())


_FIELD_READERS = {
    "__name__": lambda f, tx: ConstantVariable(f.code.co_name),
    "__qualname__": lambda f, tx: ConstantVariable(f.code.co_qualname),
    "__module__": lambda f, tx: tx.wrap(f.f_globals.get("__name__")),
    "__doc__": lambda f, tx: ConstantVariable(f.skeleton().__doc__),
    "__code__": lambda f, tx: ConstantVariable(f.code),
    "__defaults__": lambda f, tx: TupleVariable(list(f.defaults)) if f.defaults
    else ConstantVariable(None),
    "__kwdefaults__": _kwdefaults,
    "__annotations__": _annotations,
    "__dict__": lambda f, tx: f.dict_view(),
    "__type_params__": lambda f, tx: ConstantVariable(()),
    **{name: (lambda f, tx, name=name: _refused_read(f, tx, name))
       for name in ("__closure__", "__globals__", "__builtins__")},
}
_FIELD_READERS = {k: v for k, v in _FIELD_READERS.items() if k in _FUNCTION_FIELDS}


def _set_string(function, tx, name, value) -> None:
    if not (value.is_constant() and isinstance(value.as_constant(), str)):
        raise tx.user_exception(TypeError(f"{name} must be set to a string object"))
    function.fields[name] = value


def _set_any(function, tx, name, value) -> None:
    function.fields[name] = value


def _tuple_items(value) -> list | None:
    """The element trackers of a tuple (a constant one or a tuple tracker), else None."""
    if isinstance(value, TupleVariable) and issubclass(value.python_type(), tuple):
        return list(value.elements)
    if value.is_constant() and isinstance(value.as_constant(), tuple):
        return [ConstantVariable(v) for v in value.as_constant()]
    return None


def _set_defaults(function, tx, name, value) -> None:
    if value.is_constant() and value.as_constant() is None:
        function.defaults = []
    elif _tuple_items(value) is not None:
        function.defaults = _tuple_items(value)
    else:
        raise tx.user_exception(TypeError("__defaults__ must be set to a tuple object"))


def _set_kwdefaults(function, tx, name, value) -> None:
    if value.is_constant() and value.as_constant() is None:
        function.kwdefaults = {}
    elif isinstance(value, DictVariable):
        function.kwdefaults = value.entries  # the dict itself, as CPython keeps it
    else:
        raise tx.user_exception(TypeError("__kwdefaults__ must be set to a dict object"))


def _set_mapping(function, tx, name, value) -> None:
    """``__annotations__`` (None: a new empty dict on the next read) or ``__dict__``."""
    if name == "__annotations__" and value.is_constant() and value.as_constant() is None:
        function.fields.pop(name, None)
        function.annotations = []
        return
    if not isinstance(value, DictVariable):
        what = "a dict object" if name == "__annotations__" else "a dictionary"
        raise tx.user_exception(TypeError(f"{name} must be set to {what}"))
    if name == "__dict__":
        function.namespace = value
    else:
        function.fields[name] = value


def _set_type_params(function, tx, name, value) -> None:
    if _tuple_items(value) is None:
        raise tx.user_exception(TypeError("__type_params__ must be set to a tuple"))
    function.fields[name] = value


def _set_readonly(function, tx, name, value) -> None:
    raise tx.user_exception(AttributeError("readonly attribute"))


_FIELD_WRITERS = {
    "__name__": _set_string, "__qualname__": _set_string, "__module__": _set_any,
    "__doc__": _set_any, "__defaults__": _set_defaults, "__kwdefaults__": _set_kwdefaults,
    "__annotations__": _set_mapping, "__dict__": _set_mapping,
    "__type_params__": _set_type_params,
    "__closure__": _set_readonly, "__globals__": _set_readonly, "__builtins__": _set_readonly,
}


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
        return tracker.introspect(tx)
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
