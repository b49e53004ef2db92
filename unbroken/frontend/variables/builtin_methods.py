"""Methods of Python's builtin value types, called on values known at export time.

One table says, for every method of ``set``, ``frozenset``, ``dict``, ``list``, ``str``,
``bytes``, ``int``, ``float``, ``tuple``, ``range``, ``bool`` and ``complex``, what a call does:

- ``READS``: computes its result from the receiver and the arguments and leaves the receiver
  as it was. On constants it runs natively (CPython's own implementation is the semantics);
- ``MUTATES``: changes the receiver in place. Allowed only on a container the trace itself
  created: one that exists outside ``forward()`` (a module attribute, a global) would be
  changed by export and not by the exported program (UB107);
- ``REFUSED``: reflective methods whose answer is about the interpreter's copy, not the
  program's value (the buffer protocol, memory sizes), with the reason.

Every method of an immutable type only reads it; the mutating methods of the three mutable
types are listed. ``tests/frontend/test_builtin_methods.py`` checks the table against CPython
for every name ``dir()`` gives (a method missing from it fails), bound and unbound.

A method runs the same whether it is called bound (``s.difference(t)``) or unbound
(``set.difference(s, t)``): ``UnboundBuiltinMethodVariable`` calls the receiver's own model of
the type. The trackers of lists, tuples and dicts run these methods on a one-level native model
of themselves (``containers.call_container_method``); constants and sets of constants run them
here, in ``BuiltinMethodVariable``.
"""
from __future__ import annotations

import types

from ...symbolic.diagnostics.catalogue import graph_break
from .base import AttributeMissing, VariableTracker
from .native import PureCallableVariable

__all__ = ["BUILTIN_TYPES", "READS", "MUTATES", "REFUSED", "method_kind", "builtin_owner",
           "is_builtin_method", "BuiltinMethodVariable", "BuiltinClassFunctionVariable",
           "UnboundBuiltinMethodVariable", "check_mutable", "bind_native", "call_natively",
           "refuse", "STRUCTURAL"]

READS, MUTATES, REFUSED = "reads", "mutates", "refused"

BUILTIN_TYPES = (set, frozenset, dict, list, str, bytes, int, float, tuple, range, bool, complex)

# The methods that change their receiver, per mutable type (every other method only reads).
_MUTATING = {
    list: frozenset({"append", "clear", "extend", "insert", "pop", "remove", "reverse", "sort",
                     "__setitem__", "__delitem__", "__iadd__", "__imul__", "__init__"}),
    dict: frozenset({"clear", "pop", "popitem", "setdefault", "update", "__setitem__",
                     "__delitem__", "__ior__", "__init__"}),
    set: frozenset({"add", "clear", "difference_update", "discard", "intersection_update",
                    "pop", "remove", "symmetric_difference_update", "update", "__iand__",
                    "__ior__", "__isub__", "__ixor__", "__init__"}),
}

# Reflective methods whose answer describes the interpreter's copy of a value, not the value.
_REFUSED = {
    "__buffer__": "exposes the memory of the value (the buffer protocol)",
    "__release_buffer__": "releases a memory view of the value (the buffer protocol)",
    "__reduce__": "is the pickling protocol (it returns functions of `copyreg`, not a value)",
    "__reduce_ex__": "is the pickling protocol (it returns functions of `copyreg`, not a value)",
}
# On the mutable containers, the memory layout is the copy's own too.
_REFUSED_MUTABLE = {
    "__sizeof__": "measures the memory of the interpreter's copy of the container",
}

# Methods of list/tuple/dict that move elements without looking at their values: they run on
# a container holding tensors (each element opaque). The others compare, hash or print the
# elements and need constants.
STRUCTURAL = {
    list: frozenset({"append", "clear", "copy", "extend", "insert", "pop", "reverse",
                     "__add__", "__iadd__", "__mul__", "__rmul__", "__imul__", "__getitem__",
                     "__setitem__", "__delitem__", "__len__", "__iter__", "__reversed__",
                     "__init__", "__class_getitem__", "__getattribute__"}),
    tuple: frozenset({"__add__", "__mul__", "__rmul__", "__getitem__", "__len__", "__iter__",
                      "__getnewargs__", "__class_getitem__", "__getattribute__"}),
    dict: frozenset({"clear", "copy", "fromkeys", "get", "items", "keys", "pop", "popitem",
                     "setdefault", "update", "values", "__contains__", "__delitem__",
                     "__getitem__", "__ior__", "__or__", "__ror__", "__iter__", "__len__",
                     "__reversed__", "__setitem__", "__init__", "__class_getitem__",
                     "__getattribute__"}),
}


def builtin_owner(value) -> type | None:
    """The builtin type in the table whose methods ``value`` has (its exact type), or None."""
    cls = type(value)
    return cls if cls in BUILTIN_TYPES else None


def method_kind(owner: type, name: str) -> tuple[str, str]:
    """(kind, reason) for ``owner.name``: READS, MUTATES or REFUSED (the reason says why).
    ``name`` must be a method of ``owner``."""
    if name in _REFUSED:
        return REFUSED, _REFUSED[name]
    if owner in _MUTATING:
        if name in _REFUSED_MUTABLE:
            return REFUSED, _REFUSED_MUTABLE[name]
        if name in _MUTATING[owner]:
            return MUTATES, ""
    return READS, ""


def is_builtin_method(owner: type, name: str) -> bool:
    """``owner.name`` is a method the table describes (not a data attribute, not the class)."""
    return name != "__class__" and callable(getattr(owner, name, None))


def check_mutable(tx, container, what: str) -> None:
    """Refuse ``what`` (a mutation) on a list, dict, set, cell or object that lives outside
    the trace, or outside the torch.cond branch being traced. Every mutation the trace makes
    passes here (counted: ``Overlay.mutations``)."""
    tx.output.overlay.mutations += 1
    if getattr(container, "external", False):
        error = graph_break("UB107", f"{what} modifies {container.describe()}, which exists "
                            "outside forward()", frames=tx.user_frames())
        if not tx.output.recover(error):  # find-all mode: go on mutating the trace's copy
            raise error
    if tx.output.created_outside_branch(getattr(container, "created", 0)):
        raise graph_break("UB107", f"{what} modifies {container.describe()} from inside a "
                          "torch.cond branch (both branches are traced, one runs)",
                          frames=tx.user_frames())


def refuse(tx, owner: type, name: str, reason: str):
    """The graph break for a REFUSED method."""
    return graph_break("UB108", f"`{owner.__name__}.{name}` {reason}", frames=tx.user_frames())


def native_result(tx, receiver: VariableTracker, native_receiver, result) -> VariableTracker:
    """The tracker of a method's native result: the receiver itself when the method returned
    it (``s.__ior__(t)``), else a new value the trace owns."""
    return receiver if result is native_receiver else tx.wrap(result)


def bind_native(owner: type, name: str, value):
    """``owner``'s own method ``name`` bound to ``value`` (an instance of ``owner``), as
    ``owner.name.__get__(value)``: class methods bind to ``owner``, static ones stay unbound."""
    for klass in owner.__mro__:
        if name in vars(klass):
            raw = vars(klass)[name]
            return raw.__get__(value, owner) if hasattr(raw, "__get__") else raw
    raise AttributeError(name)


def call_natively(tx, fn, args: list, kwargs: dict):
    """``fn(*args, **kwargs)`` on Python values; the program's own exception (a KeyError, a
    TypeError for bad arguments) is raised at the user's line, as eager raises it."""
    try:
        return fn(*args, **kwargs)
    except Exception as exc:  # the program's own error: same as eager
        raise tx.user_exception(exc) from None


class BuiltinMethodVariable(VariableTracker):
    """``value.name`` for a constant ``value`` of a builtin type (or a set the trace made).

    receiver: the constant's tracker (its ``value`` is the Python object);
    owner:    the builtin type whose method is called (``type(value)``, or the class of an
              unbound call);
    name:     the method's name."""

    __slots__ = ("receiver", "owner", "name")

    def __init__(self, receiver, owner: type, name: str):
        super().__init__(None)
        self.receiver, self.owner, self.name = receiver, owner, name

    def python_type(self) -> type:
        return types.BuiltinMethodType

    def describe(self) -> str:
        return f"the method `{self.owner.__name__}.{self.name}` of {self.receiver.describe()}"

    def unwrap(self, tx):
        return bind_native(self.owner, self.name, self.receiver.value)

    def call(self, tx, args, kwargs) -> VariableTracker:
        kind, reason = method_kind(self.owner, self.name)
        if kind == REFUSED:
            raise refuse(tx, self.owner, self.name, reason)
        if self.name == "__getattribute__" and len(args) == 1 and args[0].is_constant():
            return _getattribute(tx, self.receiver, args[0].as_constant())
        if kind == MUTATES:
            check_mutable(tx, self.receiver, f"`.{self.name}()`")
        value = self.receiver.value
        method = bind_native(self.owner, self.name, value)
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            result = call_natively(tx, method, [a.as_constant() for a in args],
                                   {k: v.as_constant() for k, v in kwargs.items()})
            return native_result(tx, self.receiver, value, result)
        if isinstance(value, (set, frozenset)) and not kwargs:  # elements as sets hold them
            native = [_set_argument(tx, self.name, a) for a in args]
            return native_result(tx, self.receiver, value, call_natively(tx, method, native, {}))
        if kind == MUTATES:
            raise graph_break("UB117", f"`.{self.name}()` puts values that are not constants "
                              f"(tensors, sizes) into {self.receiver.describe()}",
                              frames=tx.user_frames())
        return PureCallableVariable(method).call(tx, args, kwargs)


# the set methods taking one element (the others take iterables, or sets for the operators)
_SET_ELEMENT_METHODS = frozenset({"add", "discard", "remove", "__contains__"})


def _set_argument(tx, name: str, argument):
    """An argument of a set's method as the set holds values (``tx.key_of``): one element,
    or the elements of an iterable (a set's own for a set)."""
    if name in _SET_ELEMENT_METHODS:
        return tx.key_of(argument)
    if isinstance(getattr(argument, "value", None), (set, frozenset)):
        return argument.value
    return [tx.key_of(element) for element in argument.items(tx)]


def _is_builtin_value(receiver) -> bool:
    return builtin_owner(getattr(receiver, "value", None)) is not None or \
        getattr(receiver, "models_builtin", False)


def _getattribute(tx, receiver, name: str) -> VariableTracker:
    """``obj.__getattribute__(name)``: the same as reading ``obj.name``."""
    try:
        return receiver.getattr(tx, name)
    except AttributeMissing:
        raise tx.user_exception(AttributeError(
            f"'{receiver.python_type().__name__}' object has no attribute '{name}'")) from None


class BuiltinClassFunctionVariable(PureCallableVariable):
    """A class-level function of a builtin type (``dict.fromkeys``, ``int.from_bytes``,
    ``str.maketrans``, ``range.__new__``): on constants it runs natively, with the program's
    own exception for bad arguments; on sizes and tensors it is a leaf call."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        if all(a.is_constant() for a in [*args, *kwargs.values()]):
            return tx.wrap(call_natively(tx, self.fn, [a.as_constant() for a in args],
                                         {k: v.as_constant() for k, v in kwargs.items()}))
        return super().call(tx, args, kwargs)


class UnboundBuiltinMethodVariable(VariableTracker):
    """``owner.name`` read from a builtin type (``set.difference``, ``str.join``,
    ``list.append``): a call with the receiver first runs the type's own method on it, the
    same as the bound call on a value of exactly that type."""

    __slots__ = ("owner", "name", "descriptor")

    def __init__(self, owner: type, name: str, descriptor, source=None):
        super().__init__(source)
        self.owner, self.name, self.descriptor = owner, name, descriptor

    def python_type(self) -> type:
        return type(self.descriptor)

    def describe(self) -> str:
        return f"`{self.owner.__name__}.{self.name}`"

    def is_constant(self) -> bool:
        return True

    def as_constant(self):
        return self.descriptor

    def unwrap(self, tx):
        return self.descriptor

    def getattr(self, tx, name):
        try:
            return tx.wrap(getattr(self.descriptor, name))
        except AttributeError:
            raise AttributeMissing(name) from None

    def call(self, tx, args, kwargs) -> VariableTracker:
        receiver = args[0] if args else None
        if self.owner is object and not (receiver is not None and _is_builtin_value(receiver)):
            return PureCallableVariable(self.descriptor).call(tx, args, kwargs)
        if receiver is None or not issubclass(receiver.python_type(), self.owner):
            # CPython's own TypeError ("descriptor 'x' for 'set' objects doesn't apply to...")
            call_natively(tx, self.descriptor, [a.unwrap(tx) for a in args], {})
            raise AssertionError("unreachable: the descriptor accepted a foreign receiver")
        bound = self.bind(tx, receiver)
        return bound.call(tx, list(args[1:]), dict(kwargs))

    def bind(self, tx, receiver) -> VariableTracker:
        """The method bound to ``receiver``, with this type's semantics."""
        native = getattr(receiver, "native_method", None)  # an object with a dict part
        bound = native(self.name, self.descriptor) if native is not None else None
        if bound is not None:
            return bound
        value_type = builtin_owner(getattr(receiver, "value", None))
        if value_type is not None:  # a constant, a set: object's methods act as its type's
            owner = value_type if self.owner is object else self.owner
            return BuiltinMethodVariable(receiver, owner, self.name)
        if getattr(receiver, "models_builtin", False):  # list/tuple/dict trackers
            return receiver.getattr(tx, self.name)
        kind, reason = method_kind(self.owner, self.name)
        if kind != READS:  # a subclass instance from outside: not the trace's to change
            raise graph_break("UB107" if kind == MUTATES else "UB108",
                              f"`{self.owner.__name__}.{self.name}` called on "
                              f"{receiver.describe()}" + (f": it {reason}" if reason else ""),
                              frames=tx.user_frames())
        return PureCallableVariable(bind_native(self.owner, self.name, receiver.unwrap(tx)))
