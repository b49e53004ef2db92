"""Other Python objects: classes, Python modules, plain objects, partials, context managers,
``super()``."""
from __future__ import annotations

import abc
import inspect
import operator
import types

import torch

from ..graph_breaks import graph_break
from .base import CREATION_ORDER, AttributeMissing, VariableTracker
from .constant import ConstantVariable

__all__ = ["GetterVariable", "ObjectVariable", "NewObjectVariable", "construct_user_object", "ClassVariable", "PythonModuleVariable", "PartialVariable",
           "ContextManagerVariable", "SuperVariable", "resolve_attribute"]

# Context managers that may be entered natively inside forward(): they change autograd or
# autocast state only, which does not change the recorded ATen ops of an inference graph.
_GRAD_MODES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled, torch.inference_mode)


def resolve_attribute(tx, receiver: VariableTracker, obj, name: str, source):
    """Python's attribute lookup on ``obj`` (data descriptors, instance dict, class attributes),
    with functions bound to ``receiver`` and properties inlined. Returns None when the
    attribute is not found through these routes."""
    from ..sources import AttrSource
    from .builder import wrap
    from .functions import BoundMethodVariable

    try:
        static = inspect.getattr_static(obj, name)
    except AttributeError:
        return None
    attr_source = AttrSource(source, name) if source is not None else None
    if isinstance(static, property):
        if static.fget is None:
            raise AttributeMissing(name)
        return wrap(tx, static.fget).call(tx, [receiver], {})
    if isinstance(static, staticmethod):
        return wrap(tx, static.__func__, attr_source)
    if isinstance(static, classmethod):
        return BoundMethodVariable(wrap(tx, type(obj)), wrap(tx, static.__func__))
    instance_dict = getattr(obj, "__dict__", {})
    if isinstance(static, types.FunctionType) and name not in instance_dict:
        return BoundMethodVariable(receiver, wrap(tx, static))
    if isinstance(static, (types.MemberDescriptorType, types.GetSetDescriptorType)):
        return wrap(tx, getattr(obj, name), attr_source)
    return wrap(tx, static, attr_source)


def call_protocol(tx, receiver, obj, name: str, args) -> VariableTracker | None:
    """Call ``obj``'s class method ``name`` (``__iter__``, ``__len__``, ``__contains__``,
    ``__getitem__``...): interpreted when the class defines it in Python, called natively
    when it is a read-only C method of a container base; None when the class has none."""
    from .builder import wrap

    method = _class_attribute(type(obj), name)
    if isinstance(method, types.FunctionType):
        return wrap(tx, method).call(tx, [receiver, *args], {})
    if method is not None and isinstance(receiver, NewObjectVariable):
        native = receiver.native_method(name, method)
        return None if native is None else native.call(tx, list(args), {})
    if method is not None and name in ("__len__", "__contains__", "__getitem__", "__iter__"):
        return tx.call_leaf(getattr(obj, name), args, {})
    return None


def getattr_fallback(tx, receiver, cls, name: str, default=None):
    """Python calls ``cls.__getattr__`` when normal lookup fails: inline it when the user's
    class defines one (other than ``default``); else the attribute is missing."""
    fallback = _class_attribute(cls, "__getattr__")
    if isinstance(fallback, types.FunctionType) and fallback is not default:
        from .builder import wrap

        return wrap(tx, fallback).call(tx, [receiver, ConstantVariable(name)], {})
    raise AttributeMissing(name)


class _UserProtocols:
    """Iteration and len() of a user object go through its own __iter__/__len__, traced."""

    def items(self, tx) -> list:
        iterator = call_protocol(tx, self, self.value, "__iter__", [])
        if iterator is None:
            return super().items(tx)
        return iterator.items(tx)

    def length(self, tx):
        result = call_protocol(tx, self, self.value, "__len__", [])
        return super().length(tx) if result is None else result


class ObjectVariable(_UserProtocols, VariableTracker):
    """A Python object read during tracing (a config object, an enum...). ``value``: the object.
    Attribute reads are tracked; writes are refused (side effects on Python state)."""

    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        where = f" `{self.source.name()}`" if self.source is not None else ""
        return f"the {type(self.value).__name__} object{where}"

    def unwrap(self, tx):
        return self.value

    def truth(self, tx) -> bool:
        cls = type(self.value)
        if hasattr(cls, "__bool__") or hasattr(cls, "__len__"):
            raise graph_break("UB117", f"truth value of {self.describe()} (a user-defined "
                              "__bool__/__len__)", frames=tx.user_frames())
        return True

    def getattr(self, tx, name: str) -> VariableTracker:
        custom = _class_attribute(type(self.value), "__getattribute__")
        if isinstance(custom, types.FunctionType):  # the class decides every lookup
            from .builder import wrap

            return wrap(tx, custom).call(tx, [self, ConstantVariable(name)], {})
        return self.plain_getattr(tx, name)

    def plain_getattr(self, tx, name: str) -> VariableTracker:
        """``object.__getattribute__`` (then ``__getattr__``), seeing the trace's writes."""
        from ..output import DELETED

        written = tx.output.overlay.read(self.value, name)
        if written is DELETED:
            return getattr_fallback(tx, self, type(self.value), name)
        if written is not None:
            return written
        found = resolve_attribute(tx, self, self.value, name, self.source)
        if found is None:
            return getattr_fallback(tx, self, type(self.value), name)
        return found

    def delattr(self, tx, name: str) -> None:
        """``del obj.name`` on an object from outside: an overlay entry (must end restored)."""
        from ..output import DELETED

        original = self.plain_getattr(tx, name) if hasattr(self.value, name) else None
        tx.output.overlay.write(self.value, name, DELETED, original, tx.user_frames())

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        """A write to an object that outlives forward(): kept in the trace's overlay; it must
        be undone before forward() returns (``token = var.set(x) ... var.reset(token)``),
        else export refuses it (UB107)."""
        if isinstance(_class_attribute(type(self.value), name), property) or \
                type(self.value).__module__.startswith("torch"):
            # PyTorch's own objects are read by native code, which the overlay cannot reach
            return super().setattr(tx, name, value)
        original = self.getattr(tx, name) if hasattr(self.value, name) else None
        tx.output.overlay.write(self.value, name, value, original, tx.user_frames())

    def call(self, tx, args, kwargs):
        call = getattr(type(self.value), "__call__", None)
        if isinstance(call, types.FunctionType):
            from .builder import wrap

            return wrap(tx, call).call(tx, [self, *args], kwargs)
        return super().call(tx, args, kwargs)


class NewObjectVariable(_UserProtocols, VariableTracker):
    """An instance of a user class created while tracing (a dataclass output, a helper object,
    a context manager). It is local to the trace, so its attributes may be written.

    value:      the instance, made by its class's ``__new__`` without ``__init__`` (its own
                state stays empty: the trackers below hold it);
    attributes: attribute name -> tracker, in assignment order;
    mapping:    for a ``dict`` subclass (Hugging Face's ``ModelOutput``), the dict part, as a
                DictVariable that the inherited C methods (``__setitem__``, ``keys``...) act on.
    """

    __slots__ = ("value", "attributes", "created", "mapping")

    def __init__(self, value, mapping=None):
        super().__init__(None)
        self.value = value
        self.attributes: dict[str, VariableTracker] = {}
        self.created = next(CREATION_ORDER)
        self.mapping = mapping

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        return f"the {type(self.value).__name__} object created in forward()"

    def getattr(self, tx, name: str) -> VariableTracker:
        static = _class_attribute(type(self.value), name)
        if name in self.attributes and not _is_data_descriptor(static):
            return self.attributes[name]
        if name == "__dict__":
            from .containers import DictVariable

            return DictVariable(self.attributes)
        native = self.native_method(name, static)
        if native is not None:
            return native
        found = resolve_attribute(tx, self, self.value, name, None)
        if found is None:
            return getattr_fallback(tx, self, type(self.value), name)
        return found

    def native_method(self, name: str, static) -> VariableTracker | None:
        """An inherited C method acting on this object's trackers (dict methods on the mapping,
        ``object.__setattr__`` on the attributes), or None."""
        from .containers import ContainerMethodVariable

        owner = getattr(static, "__objclass__", None)
        if self.mapping is not None and owner is not None and issubclass(owner, dict) \
                and owner is not object:
            return ContainerMethodVariable(self.mapping, name)
        if name == "__setattr__" and owner is object:
            return _raw_setattr(self)
        return None

    def raw_setattr(self, tx, name: str, value: VariableTracker) -> None:
        """``object.__setattr__``: store the attribute, ignoring the class's ``__setattr__``."""
        from .containers import check_mutable

        check_mutable(tx, self, f"setting `.{name}`")
        self.attributes[name] = value

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        custom = _class_attribute(type(self.value), "__setattr__")
        if isinstance(custom, types.FunctionType):  # the class's own __setattr__ decides
            from .builder import wrap

            wrap(tx, custom).call(tx, [self, ConstantVariable(name), value], {})
            return
        static = _class_attribute(type(self.value), name)
        if isinstance(static, property):
            if static.fset is None:
                raise tx.user_exception(AttributeError(f"can't set attribute '{name}'"))
            from .builder import wrap

            wrap(tx, static.fset).call(tx, [self, value], {})
            return
        self.raw_setattr(tx, name, value)

    def unwrap(self, tx):
        """A real instance holding the unwrapped attribute values and dict entries (for
        outputs: pytree then flattens it if its class is registered)."""
        cls = type(self.value)
        instance = cls.__new__(cls)
        for name, value in self.attributes.items():
            object.__setattr__(instance, name, value.unwrap(tx))
        if self.mapping is not None:
            base = next(k for k in cls.__mro__ if k.__module__ in ("builtins", "collections"))
            for key, value in self.mapping.entries.items():
                base.__setitem__(instance, key, value.unwrap(tx))
        return instance

    def truth(self, tx) -> bool:
        if self.mapping is not None and not isinstance(
                _class_attribute(type(self.value), "__bool__"), types.FunctionType):
            return bool(self.mapping.entries)
        for method in ("__bool__", "__len__"):
            if isinstance(_class_attribute(type(self.value), method), types.FunctionType):
                result = self.getattr(tx, method).call(tx, [], {})
                return bool(result.as_constant()) if result.is_constant() else result.truth(tx)
        return True

    def call(self, tx, args, kwargs):
        return self.getattr(tx, "__call__").call(tx, args, kwargs)


def _class_attribute(cls, name):
    for klass in cls.__mro__:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return None


def _is_data_descriptor(value) -> bool:
    return hasattr(type(value), "__set__") or hasattr(type(value), "__delete__")


def construct_user_object(tx, cls, args, kwargs):
    """``cls(*args, **kwargs)`` for a plain user class: a new instance whose ``__init__`` is
    interpreted. Returns None when the class is not plain (custom ``__new__`` or metaclass)."""
    from .builder import wrap
    from .containers import DictVariable

    mapping_base = issubclass(cls, dict) and not isinstance(
        _class_attribute(cls, "__new__"), (types.FunctionType, staticmethod))
    if (cls.__new__ is not object.__new__ and not mapping_base) or \
            type(cls) not in (type, abc.ABCMeta):
        return None
    instance = NewObjectVariable(cls.__new__(cls), DictVariable({}) if mapping_base else None)
    init = _class_attribute(cls, "__init__")
    if isinstance(init, types.FunctionType):
        wrap(tx, init).call(tx, [instance, *args], kwargs)
    elif mapping_base:
        instance.native_method("update", _class_attribute(cls, "update")).call(
            tx, list(args[:1]), kwargs)
    elif args or kwargs:
        raise tx.user_exception(TypeError(f"{cls.__name__}() takes no arguments"))
    return instance


def set_attribute_natively(tx, fn, args) -> VariableTracker | None:
    """``object.__setattr__(obj, name, value)`` (frozen dataclasses' ``__init__``) on an object
    created in the trace; None when ``fn``/``args`` are something else."""
    if fn is object.__setattr__ and len(args) == 3 and isinstance(args[0], NewObjectVariable):
        args[0].attributes[args[1].as_constant()] = args[2]
        return ConstantVariable(None)
    return None


class ClassVariable(ConstantVariable):
    """A class (a constant whose calls construct instances). ``value``: the class object."""

    __slots__ = ()

    def describe(self) -> str:
        return f"the class `{self.value.__qualname__}`"

    def getattr(self, tx, name):
        from ..sources import AttrSource
        from .builder import wrap

        try:
            static = inspect.getattr_static(self.value, name)
        except AttributeError:
            raise AttributeMissing(name) from None
        if isinstance(static, classmethod):
            from .functions import BoundMethodVariable

            return BoundMethodVariable(self, wrap(tx, static.__func__))
        return wrap(tx, getattr(self.value, name),
                    AttrSource(self.source, name) if self.source else None)

    def call(self, tx, args, kwargs) -> VariableTracker:
        from ..builtins import construct

        return construct(tx, self.value, args, kwargs)


class PythonModuleVariable(ConstantVariable):
    """A Python module object (``torch``, ``math``, ``F``): a constant whose attributes are
    wrapped with their source. ``value``: the module."""

    __slots__ = ()

    def describe(self) -> str:
        return f"the module `{self.value.__name__}`"

    def getattr(self, tx, name):
        from ..sources import AttrSource
        from .builder import wrap

        try:
            value = getattr(self.value, name)
        except AttributeError:
            raise AttributeMissing(name) from None
        return wrap(tx, value, AttrSource(self.source, name) if self.source else None)


class PartialVariable(VariableTracker):
    """``functools.partial(func, *args, **kwargs)``: calls ``func`` with the stored arguments."""

    __slots__ = ("func", "args", "kwargs")

    def __init__(self, func, args, kwargs):
        super().__init__(None)
        self.func, self.args, self.kwargs = func, list(args), dict(kwargs)

    def describe(self) -> str:
        return f"a partial of {self.func.describe()}"

    def call(self, tx, args, kwargs):
        return self.func.call(tx, [*self.args, *args], {**self.kwargs, **kwargs})


class GetterVariable(VariableTracker):
    """``operator.itemgetter(*items)`` / ``operator.attrgetter(*names)`` made in forward.
    kind: the class (itemgetter or attrgetter); keys: the constant items or dotted names."""

    __slots__ = ("kind", "keys")

    def __init__(self, kind, keys):
        super().__init__(None)
        self.kind, self.keys = kind, list(keys)

    def describe(self) -> str:
        return f"`{self.kind.__name__}({', '.join(map(repr, self.keys))})`"

    def call(self, tx, args, kwargs):
        from .containers import TupleVariable

        values = [self._get(tx, args[0], key) for key in self.keys]
        return values[0] if len(values) == 1 else TupleVariable(values)

    def _get(self, tx, obj, key):
        from ..opcodes.containers import subscript
        from ..opcodes.loads import load_attribute

        if self.kind is operator.itemgetter:
            return subscript(tx, obj, ConstantVariable(key))
        for name in key.split("."):
            obj = load_attribute(tx, obj, name)
        return obj


class ContextManagerVariable(ObjectVariable):
    """A context manager that is entered natively (grad mode). ``value``: the instance."""

    __slots__ = ()

    @staticmethod
    def supports(value) -> bool:
        if isinstance(value, _GRAD_MODES):
            return True
        return isinstance(value, torch.autocast) and not getattr(value, "_enabled", True)

    def describe(self) -> str:
        return f"the context manager `{type(self.value).__name__}`"

    def enter(self, tx) -> tuple[VariableTracker, VariableTracker]:
        """Enter natively; returns (the exit callable to push, the value ``as`` binds)."""
        from .builder import wrap

        result = self.value.__enter__()
        exit_fn = _native_exit(self.value)
        return exit_fn, (ConstantVariable(None) if result is None else wrap(tx, result))


class CallbackVariable(VariableTracker):
    """A callable that the interpreter implements itself: ``callback(tx, args)`` gives the
    result. Used for ``object.__setattr__``/``__getattribute__`` bound to traced objects, a
    native context manager's ``__exit__``, and no-op base ``__init__`` calls.
    what: a short description for messages."""

    __slots__ = ("callback", "what")

    def __init__(self, callback, what: str):
        super().__init__(None)
        self.callback, self.what = callback, what

    def describe(self) -> str:
        return self.what

    def call(self, tx, args, kwargs):
        return self.callback(tx, args)


def _raw_setattr(target):
    def callback(tx, args):
        target.raw_setattr(tx, args[0].as_constant(), args[1])
        return ConstantVariable(None)

    return CallbackVariable(callback, "object.__setattr__")


def _raw_getattr(target):
    def callback(tx, args):
        name = args[0].as_constant()
        try:
            return target.plain_getattr(tx, name)
        except AttributeMissing:
            raise tx.user_exception(AttributeError(name)) from None

    return CallbackVariable(callback, "object.__getattribute__")


def _native_exit(manager):
    def callback(tx, args):
        raw = [a.unwrap(tx) for a in args] or [None, None, None]
        return ConstantVariable(bool(manager.__exit__(*raw)))

    return CallbackVariable(callback, f"`{type(manager).__name__}.__exit__`")


class SuperVariable(VariableTracker):
    """``super(cls, obj)``. ``cls``: the class to start after; ``receiver``: obj's tracker;
    ``obj``: the underlying Python object."""

    __slots__ = ("cls", "receiver", "obj")

    def __init__(self, cls, receiver, obj):
        super().__init__(None)
        self.cls, self.receiver, self.obj = cls, receiver, obj

    def describe(self) -> str:
        return f"super({self.cls.__name__})"

    def getattr(self, tx, name):
        from .builder import wrap
        from .functions import BoundMethodVariable

        mro = type(self.obj).__mro__
        for klass in mro[mro.index(self.cls) + 1:]:
            if name in klass.__dict__:
                static = klass.__dict__[name]
                if isinstance(static, types.FunctionType):
                    return BoundMethodVariable(self.receiver, wrap(tx, static))
                if isinstance(static, property):
                    return wrap(tx, static.fget).call(tx, [self.receiver], {})
                if isinstance(self.receiver, NewObjectVariable):
                    native = self.receiver.native_method(name, static)
                    if native is not None:
                        return native
                if name == "__getattribute__" and isinstance(self.receiver, ObjectVariable):
                    return _raw_getattr(self.receiver)
                return wrap(tx, getattr(super(self.cls, self.obj), name))
        raise AttributeMissing(name)
