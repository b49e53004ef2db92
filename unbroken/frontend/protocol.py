"""The object protocol on trackers: attribute lookup, method binding, special-method calls,
subscript, iteration and calls.

This is the one place that says how Python's own protocols run on variable trackers. Each
tracker family answers the questions in its methods (``getattr``, ``getitem``, ``items``,
``call``); the operations below are what the interpreter, the builtins and the trackers
themselves use to ask them, and the parts of Python's semantics that several families share:

- ``lookup``: ``object.__getattribute__``/``type.__getattribute__``/``super()`` lookup through
  the class dicts, with the descriptor protocol applied on trackers (functions bind to the
  receiver, properties are inlined, static and class methods unwrap);
- ``getattr_fallback``: the class's ``__getattr__`` when normal lookup fails;
- ``special_method`` / ``call_special``: a special method (``__len__``, ``__enter__``...) as
  Python's implicit calls find it: on the class, never on the instance;
- ``load_attribute`` / ``read_attribute``: ``obj.name`` with a missing attribute reported as
  the program's ``AttributeError``, or as None for ``hasattr``/``getattr(..., default)``;
- ``subscript``, ``iterate``, ``call``: ``obj[index]``, ``iter(obj)`` to a list, ``f(...)``.

It sits below every tracker family (it needs only the tracker base class and constants); the
trackers reach the interpreter through ``tx`` (see ``variables.base.Interpreter``).
"""
from __future__ import annotations

import functools
import inspect
import types

from ..symbolic.diagnostics.catalogue import TracedException
from ..symbolic.torch_compat import FUNCTION_APPLY
from .sources import AttrSource
from .variables.base import AttributeMissing, VariableTracker
from .variables.constant import ConstantVariable

__all__ = ["BoundMethodVariable", "CallbackVariable", "class_attribute", "lookup",
           "getattr_fallback", "special_method", "call_special", "call_python", "load_attribute",
           "read_attribute",
           "subscript", "iterate", "call"]

_MISSING = object()
_DESCRIPTOR_FIELDS = (types.MemberDescriptorType, types.GetSetDescriptorType)


class BoundMethodVariable(VariableTracker):
    """``obj.method``: ``receiver`` is passed as the first argument of ``function``."""

    __slots__ = ("receiver", "function")

    def __init__(self, receiver: VariableTracker, function: VariableTracker):
        super().__init__(None)
        self.receiver = receiver
        self.function = function

    def python_type(self) -> type:
        return types.MethodType

    def describe(self) -> str:
        return f"the method {self.function.describe()} of {self.receiver.describe()}"

    def call(self, tx, args, kwargs) -> VariableTracker:
        return self.function.call(tx, [self.receiver, *args], kwargs)

    def getattr(self, tx, name):
        if name == "__self__":
            return self.receiver
        if name == "__func__":
            return self.function
        return self.function.getattr(tx, name)


class CallbackVariable(VariableTracker):
    """A callable that the interpreter implements itself: ``callback(tx, args)`` gives the
    result. Used for ``object.__setattr__``/``__getattribute__`` bound to traced objects and a
    native context manager's ``__exit__``. what: a short description for messages."""

    __slots__ = ("callback", "what")

    def __init__(self, callback, what: str):
        super().__init__(None)
        self.callback, self.what = callback, what

    def describe(self) -> str:
        return self.what

    def call(self, tx, args, kwargs):
        return self.callback(tx, args)


def _find(cls: type, name: str, after: type | None = None):
    """What Python's type lookup finds for ``name``: the first entry in the ``__dict__`` of
    ``cls.__mro__`` (only the classes after ``after``, for ``super(after, obj)``)."""
    mro = cls.__mro__
    for klass in mro[mro.index(after) + 1:] if after is not None else mro:
        if name in klass.__dict__:
            return klass.__dict__[name]
    return _MISSING


def class_attribute(cls: type, name: str, after: type | None = None):
    """The raw class-dict entry for ``name`` along ``cls.__mro__`` (after ``after``), or
    None."""
    found = _find(cls, name, after)
    return None if found is _MISSING else found


def static_attribute(obj, name: str):
    """``inspect.getattr_static(obj, name)``, or ``_MISSING``. Read directly for an instance
    of a class whose MRO classes all have the metaclass ``type`` (lookup asks this of every
    attribute read on an object): ``getattr_static`` then finds the first class dict holding
    ``name`` (``type``'s own dict, immutable, shadows no class's ``__dict__``), and the
    instance dict unless a class of the MRO defines ``__dict__`` other than as its own slot;
    it made a dozen calls and raised a TypeError per read for that. Anything else (a class,
    other metaclasses, an instance attribute with a class attribute of the same name, whose
    answer depends on the latter being a data descriptor) is asked of ``inspect``."""
    kind = type(obj)
    mro = kind.__mro__ if type(kind) is type else None
    if mro is None or type in mro:
        return _inspect_static(obj, name)
    shadow = _MISSING  # the first ``__dict__`` of a class that is not its own slot
    found = _MISSING
    for klass in mro:
        if type(klass) is not type:
            return _inspect_static(obj, name)
        namespace = klass.__dict__
        if found is _MISSING:
            found = namespace.get(name, _MISSING)
        if shadow is _MISSING and "__dict__" in namespace:
            slot = namespace["__dict__"]
            if not (type(slot) is types.GetSetDescriptorType and slot.__name__ == "__dict__"
                    and slot.__objclass__ is klass):
                shadow = slot
    if shadow is not _MISSING and type(shadow) is not types.MemberDescriptorType:
        return found  # no instance dict is read
    try:
        own = object.__getattribute__(obj, "__dict__")
    except AttributeError:
        own = {}
    value = dict.get(own, name, _MISSING)
    if value is _MISSING:
        return found
    return value if found is _MISSING else _inspect_static(obj, name)


def _inspect_static(obj, name: str):
    try:
        return inspect.getattr_static(obj, name)
    except AttributeError:
        return _MISSING


def python_getattribute(cls: type) -> bool:
    """Whether the ``__getattribute__`` that ``cls``'s instances use is written in Python
    (interpreted where the program reads an attribute; never to be run natively). Read
    through the class (CPython's cached type lookup: a function found in the MRO comes back
    as itself), not by walking the MRO: ``wrap`` asks it of most values it builds."""
    return type(getattr(cls, "__getattribute__", None)) is types.FunctionType


def has_plain_attribute(obj, name: str) -> bool:
    """Whether ``object.__getattribute__`` finds ``name`` on ``obj`` (its instance dict or its
    class), asked without running any of the user's code: ``hasattr`` would call a
    ``__getattribute__`` or ``__getattr__`` the class defines in Python, natively."""
    return static_attribute(obj, name) is not _MISSING


def raw_instance_dict(obj) -> dict:
    """``obj.__dict__`` as ``object.__getattribute__`` reads it (never through a
    ``__getattribute__`` its class defines in Python), or an empty dict when it has none."""
    try:
        own = object.__getattribute__(obj, "__dict__")
    except (AttributeError, TypeError):
        return {}
    return own if isinstance(own, dict) else {}


def is_data_descriptor(value) -> bool:
    return hasattr(type(value), "__set__") or hasattr(type(value), "__delete__")


def lookup(tx, receiver: VariableTracker, name: str, *, instance=None, cls: type | None = None,
           after: type | None = None, source=None) -> VariableTracker | None:
    """Python's attribute lookup of ``name`` on trackers; None when it finds nothing (the
    caller then tries ``__getattr__`` or reports the attribute missing).

    receiver: the tracker of the value read from (functions found on its class bind to it,
              properties are called with it);
    instance: the Python object behind it, when there is one: its ``__dict__`` is searched
              and C-level fields (``__slots__`` members, getset descriptors) are read on it.
              A class is looked up as ``type.__getattribute__`` does (class methods bind to
              it, everything else is read natively);
    cls:      the class, when there is no instance (a namedtuple holding tensors);
    after:    read as ``super(after, instance)``: the MRO after ``after``, no instance dict,
              C-level attributes bound natively by ``super``;
    source:   where the value came from; attributes read from it get an ``AttrSource``.
    """
    # Every test here is on ``type(...)``, never ``isinstance`` on the value: a failed
    # ``isinstance`` reads the value's ``__class__`` through its class's ``__getattribute__``,
    # which for a class that defines one in Python (Hugging Face's configs) is the user's
    # code run natively, outside the trace (that call is interpreted, where the program
    # makes it). Likewise the instance dict and C-level fields are read past it.
    attr_source = AttrSource(source, name) if source is not None else None
    if issubclass(type(instance), type) and after is None:
        return _lookup_on_class(tx, receiver, instance, name, attr_source)
    own = False
    if instance is not None and after is None:
        static = static_attribute(instance, name)
        if static is _MISSING:
            return None
        own = name in raw_instance_dict(instance)
    else:
        static = _find(cls if instance is None else type(instance), name, after)
        if static is _MISSING:
            return None
    owner = cls if instance is None else type(instance)
    kind = type(static)
    if issubclass(kind, property):
        if static.fget is None:
            raise AttributeMissing(name)
        return call_python(tx, static.fget, [receiver])
    if issubclass(kind, functools.cached_property) and instance is not None and not own \
            and after is None:
        return _cached_property(tx, receiver, instance, static, name)
    if issubclass(kind, staticmethod):
        return tx.wrap(static.__func__, attr_source)
    if issubclass(kind, classmethod) or static is FUNCTION_APPLY:
        return BoundMethodVariable(tx.wrap(owner), tx.wrap(_class_method_function(static)))
    if kind is types.FunctionType and not own:
        return BoundMethodVariable(receiver, tx.wrap(static))
    native = owner if instance is None else \
        super(after, instance) if after is not None else instance
    field = kind in _DESCRIPTOR_FIELDS
    if not own and after is None and not field:
        bound = _bind_descriptor(tx, receiver, static, owner, instance)
        if bound is not None:
            return bound
    if field and native is instance:  # what ``object.__getattribute__`` does with it
        value = static.__get__(instance, owner)
        if name == "__dict__" and type(value) is dict:
            return _instance_dict(tx, value, attr_source)
        return tx.wrap(value, attr_source)
    if native is not instance:  # through ``super`` or on the class itself
        return tx.wrap(getattr(native, name), attr_source)
    if type(static) is types.MethodDescriptorType and instance is not None and \
            static.__objclass__.__module__ != "builtins":
        # a C method of a native object's class (``ContextVar.get``): bound to the receiver,
        # its tracker decides the call (builtin types' methods are their trackers' own)
        return BoundMethodVariable(receiver, tx.wrap(static, attr_source))
    return tx.wrap(static, attr_source)


def _instance_dict(tx, value: dict, source) -> VariableTracker:
    """The tracker of an outside object's ``__dict__`` (``super().__getattribute__("__dict__")
    .get(key)`` in a config's ``__getattribute__``: every attribute read of the config reads
    it). One tracker per dict, whatever path reached it, while its keys and values are the
    same objects: it is external (the trace cannot change it: a change is refused), so sharing
    it gives what CPython gives, one dict (``a.__dict__ is vars(a)``); its source is the first
    path's. Each read used to wrap all its entries again (40-100 times per export of a
    transformers model)."""
    key = id(value)
    contents = (tuple(map(id, value)), tuple(map(id, value.values())))
    known = tx.output.instance_dicts.get(key)
    if known is not None and known[0] is value and known[1] == contents:
        return known[2]
    tracker = tx.wrap(value, source)
    if getattr(tracker, "external", False):  # (kept alive with it: its id stays its own)
        tx.output.instance_dicts[key] = (value, contents, tracker)
    return tracker


def _bind_descriptor(tx, receiver, static, owner: type, instance):
    """Any other descriptor on the class (``functools.lru_cache`` installed as a method,
    ``partialmethod``, ``cached_property``, a descriptor class of the program's own), bound
    as Python binds it: a ``__get__`` written in Python is interpreted; a C one (the cache
    wrapper's) is asked natively, and the method it binds to the instance gets the receiver's
    tracker. None when ``static`` is not a descriptor (a plain class attribute)."""
    get = class_attribute(type(static), "__get__")
    if get is None or isinstance(static, types.BuiltinFunctionType):
        return None
    if isinstance(get, types.FunctionType):
        return call_python(tx, get, [tx.wrap(static), receiver, tx.wrap(owner)])
    if instance is None or isinstance(static, _BUILTIN_TYPE_METHODS):
        return None
    bound = static.__get__(instance, owner)  # a C binding: no effect but the bound object
    if isinstance(bound, types.MethodType) and bound.__self__ is instance:
        return BoundMethodVariable(receiver, tx.wrap(bound.__func__))
    return None


# Methods of builtin types (inherited by a subclass): bound by their own trackers.
_BUILTIN_TYPE_METHODS = (types.MethodDescriptorType, types.WrapperDescriptorType,
                         types.ClassMethodDescriptorType)


def _lookup_on_class(tx, receiver, cls: type, name: str, attr_source):
    try:
        static = inspect.getattr_static(cls, name)
    except AttributeError:
        return None
    if isinstance(static, classmethod) or static is FUNCTION_APPLY:
        return BoundMethodVariable(receiver, tx.wrap(_class_method_function(static)))
    return tx.wrap(getattr(cls, name), attr_source)


def _class_method_function(static):
    """The callable a class method binds to its class: a ``classmethod``'s function, or the C
    class method itself (``Function.apply`` on torch 2.14+, called with the class first)."""
    return static.__func__ if isinstance(static, classmethod) else static


def _cached_property(tx, receiver, instance, prop, name: str) -> VariableTracker:
    """A ``functools.cached_property`` not yet in the instance's ``__dict__``: its function
    runs once per trace, as eager's first read runs it (eager then keeps the value in the
    object's ``__dict__``; the trace keeps it to itself, so the export leaves the object as
    it was, and each call of the program has the value eager's calls read)."""
    key = (id(instance), name)
    known = tx.output.cached_properties.get(key)
    if known is not None and known[0] is instance:
        return known[1]
    value = call_python(tx, prop.func, [receiver])
    tx.output.cached_properties[key] = (instance, value)
    return value


def getattr_fallback(tx, receiver, cls: type, name: str, default=None) -> VariableTracker:
    """Python calls ``cls.__getattr__`` when normal lookup fails: inline it when the user's
    class defines one (other than ``default``); else the attribute is missing."""
    fallback = class_attribute(cls, "__getattr__")
    if isinstance(fallback, types.FunctionType) and fallback is not default:
        return call_python(tx, fallback, [receiver, ConstantVariable(name)])
    raise AttributeMissing(name)


def call_python(tx, fn, args: list, kwargs: dict | None = None) -> VariableTracker:
    """Call the Python callable ``fn`` found on a class (a method, a property getter, a hook)
    on trackers: user functions are inlined."""
    return tx.wrap(fn).call(tx, list(args), dict(kwargs or {}))


# Special methods that only read a container: safe to call natively on an object from outside.
_READ_ONLY_SPECIALS = ("__len__", "__contains__", "__getitem__", "__iter__")


def special_method(tx, receiver, cls: type, name: str) -> VariableTracker | None:
    """The special method ``name`` that Python's implicit calls (``with``, ``bool()``, a call)
    use: looked up on ``cls`` only, an instance attribute of that name is ignored; bound to
    ``receiver``. None unless the class defines it in Python."""
    method = class_attribute(cls, name)
    if isinstance(method, types.FunctionType):
        return BoundMethodVariable(receiver, tx.wrap(method))
    return None


def call_special(tx, receiver, instance, name: str, args: list, native=None,
                 kwargs: dict | None = None) -> VariableTracker | None:
    """Call the special method ``name`` (``__iter__``, ``__len__``, ``__getitem__``...) of
    ``instance``'s class, as Python does for its protocols: interpreted when the class defines
    it in Python; ``native(name, method)`` gives the tracker of an inherited C method when the
    receiver models one (a dict subclass created in the trace); a read-only C method of a
    container base is called natively. None when the class has no such method."""
    method = class_attribute(type(instance), name)
    if isinstance(method, types.FunctionType):
        return call_python(tx, method, [receiver, *args], kwargs)
    if method is not None and native is not None:
        bound = native(name, method)
        return None if bound is None else bound.call(tx, list(args), dict(kwargs or {}))
    if method is not None and name in _READ_ONLY_SPECIALS:
        return tx.call_leaf(getattr(instance, name), args, {})
    return None


def load_attribute(tx, obj: VariableTracker, name: str) -> VariableTracker:
    """``obj.name``; a missing attribute is the program's own ``AttributeError``."""
    try:
        return obj.getattr(tx, name)
    except AttributeMissing:
        raise tx.user_exception(AttributeError(
            f"'{obj.python_type().__name__}' object has no attribute '{name}'")) from None


def read_attribute(tx, obj: VariableTracker, name: str) -> VariableTracker | None:
    """``obj.name``, or None when it does not exist (``hasattr``, ``getattr`` with a default):
    missing, or the program's own ``AttributeError`` raised while computing it."""
    try:
        return obj.getattr(tx, name)
    except (AttributeMissing, TracedException) as missing:
        if isinstance(missing, TracedException) and \
                not isinstance(missing.exception, AttributeError):
            raise
        return None


def subscript(tx, container: VariableTracker, index: VariableTracker) -> VariableTracker:
    """``container[index]``."""
    return container.getitem(tx, index)


def iterate(tx, value: VariableTracker) -> list:
    """The elements ``iter(value)`` yields, as a list of trackers."""
    return value.items(tx)


def call(tx, callee: VariableTracker, args, kwargs) -> VariableTracker:
    """``callee(*args, **kwargs)`` on trackers."""
    return callee.call(tx, list(args), dict(kwargs))
