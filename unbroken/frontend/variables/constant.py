"""Constants: values fully known at trace time."""
from __future__ import annotations

import types

import torch

from ...symbolic.diagnostics.catalogue import graph_break
from .base import CREATION_ORDER, AttributeMissing, VariableTracker
from .builtin_methods import BuiltinMethodVariable, builtin_owner, is_builtin_method
from .native import PureCallableVariable

__all__ = ["CONSTANT_TYPES", "ConstantVariable", "Identity", "IdentityVariable", "SetVariable",
           "TrackedKey", "hash_is_stable", "holds_tracked", "is_tracked_key", "key_value",
           "is_constant_value"]

CONSTANT_TYPES = (int, float, bool, complex, str, bytes, type(None), type(Ellipsis),
                  type(NotImplemented), torch.dtype, torch.device, torch.layout,
                  torch.memory_format, torch.finfo, torch.iinfo, range, types.CodeType,
                  types.UnionType)  # `A | B` of classes: isinstance(x, A | B)


def is_constant_value(value) -> bool:
    """True for immutable Python values that need no tracking (incl. tuples/slices of them)."""
    if isinstance(value, CONSTANT_TYPES):
        return True
    if isinstance(value, (tuple, frozenset)) and (type(value) in (tuple, frozenset)
                                                  or _is_struct_sequence(value)):
        return all(is_constant_value(v) for v in value)
    if isinstance(value, slice):
        return all(is_constant_value(v) for v in (value.start, value.stop, value.step))
    return False


def _is_struct_sequence(value) -> bool:
    """A C struct sequence (the interpreter's version, ``time.struct_time``): an immutable tuple
    with named fields that Python code cannot rebuild from its items."""
    kind = type(value)
    return hasattr(kind, "n_sequence_fields") and hasattr(kind, "n_fields")


class ConstantVariable(VariableTracker):
    """An immutable Python value known at trace time. ``value``: the value itself."""

    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return type(self.value)

    def describe(self) -> str:
        text = repr(self.value)
        return f"the constant {text if len(text) < 40 else text[:37] + '...'}"

    def is_constant(self) -> bool:
        return True

    def as_constant(self):
        return self.value

    def unwrap(self, tx):
        return self.value

    def truth(self, tx) -> bool:
        return bool(self.value)

    def items(self, tx) -> list:
        try:
            values = list(self.value)
        except TypeError:
            raise graph_break("UB117", f"{self.describe()} is not iterable") from None
        return [ConstantVariable(v) for v in values]

    def length(self, tx):
        return len(self.value)

    def getattr(self, tx, name: str) -> VariableTracker:
        try:
            attr = getattr(self.value, name)
        except AttributeError:
            raise AttributeMissing(name) from None
        owner = builtin_owner(self.value)
        if owner is not None and is_builtin_method(owner, name):
            return BuiltinMethodVariable(self, owner, name)
        if isinstance(attr, types.BuiltinMethodType) and attr.__self__ is self.value:
            return PureCallableVariable(attr)
        return tx.wrap(attr)


class SetVariable(ConstantVariable):
    """A ``set`` of constants (``value``: the set itself). Its methods run natively
    (``variables.builtin_methods``); the mutating ones only on a set the trace made.

    external: the set exists outside the trace (a module attribute, a global): reading it is
              fine, changing it would be a side effect the exported program cannot replay.
    created:  creation stamp (see ``check_mutable``)."""

    __slots__ = ("external", "created")

    def __init__(self, value: set, source=None, *, external=False):
        super().__init__(value, source)
        self.external = external
        self.created = next(CREATION_ORDER)

    def describe(self) -> str:
        where = f" `{self.source.name()}`" if self.source is not None else ""
        return f"the set{where}"

    # A set the trace made may hold tensors, modules, objects (``TrackedKey``): not a
    # constant then, its elements given back as their trackers.
    def is_constant(self) -> bool:
        return not any(is_tracked_key(v) for v in self.value)

    def items(self, tx) -> list:
        if self.is_constant():
            return super().items(tx)
        return [tx.wrap(v) for v in self.value]

    def unwrap(self, tx):
        if self.is_constant():
            return self.value
        return type(self.value)(key_value(tx, v) for v in self.value)


class TrackedKey:
    """A dict key that is not a constant: the tracker it is, hashed and compared as CPython
    hashes and compares the object it stands for. ``native``: that object, when its class
    hashes and compares in C (by identity: a tensor, a module, a function; a builtin's own
    hash), else None: its class's ``__hash__`` and ``__eq__`` are Python, interpreted
    (``hash``: what ``__hash__`` gave; ``stable``: whether that number is the same in every
    process, no ``id()`` or string hash in it). Identity is tested first, as CPython's
    lookups do. Made by ``containers.dict_key``; a set or dict the trace made holds them, and
    ``wrap`` gives a key met again its tracker."""

    __slots__ = ("tracker", "native", "hash", "stable", "output", "equal")

    def __init__(self, tracker, native, hash_value: int, stable: bool, output=None,
                 equal=None):
        self.tracker = tracker
        self.native = native
        self.hash = hash_value
        self.stable = stable
        self.output = output  # the trace's (its running translator compares)
        self.equal = equal    # (tx, left tracker, right tracker) -> bool, interpreted

    def __hash__(self) -> int:
        return self.hash

    def __eq__(self, other) -> bool:
        if isinstance(other, TrackedKey):
            if other.tracker is self.tracker or (
                    self.native is not None and other.native is self.native):
                return True
            if self.native is not None and other.native is not None:
                return bool(self.native == other.native)
            other_tracker = other.tracker
        else:
            if self.native is not None:
                return bool(self.native == other)
            other_tracker = ConstantVariable(other)
        owner = self if self.equal is not None else other
        tx = owner.output.site.translators[-1]
        return owner.equal(tx, self.tracker, other_tracker)

    def __repr__(self) -> str:
        return repr(self.native) if self.native is not None else self.tracker.describe()


def hash_is_stable(key) -> bool:
    """Whether ``hash()`` of a dict key (``containers.dict_key``'s result) is the same number
    in every process: numbers, tuples and frozensets of them, a ``__hash__`` computing one;
    not strings, bytes, None or objects hashed by identity."""
    if type(key) in (bool, int, float, complex):  # (an Identity is an int subclass: not)
        return True
    if isinstance(key, (tuple, frozenset)):
        return all(hash_is_stable(k) for k in key)
    if isinstance(key, TrackedKey):
        return key.stable
    return False


def key_value(tx, key):
    """The Python object a dict key stands for (a dict handed to native code)."""
    if isinstance(key, TrackedKey):
        return key.tracker.unwrap(tx)
    if type(key) is tuple and holds_tracked(key):
        return tuple(key_value(tx, k) for k in key)
    return key


def holds_tracked(key) -> bool:
    """Whether a tuple key holds a :class:`TrackedKey`, at any depth."""
    return any(isinstance(k, TrackedKey) or type(k) is tuple and holds_tracked(k)
               for k in key)


def is_tracked_key(key) -> bool:
    """Whether a dict key is (or holds) a tracker rather than a constant."""
    return isinstance(key, TrackedKey) or type(key) is tuple and holds_tracked(key)


class Identity(int):
    """A value of ``id()`` in the trace (or a hash another in every process: of a string, by
    identity), and whatever arithmetic makes of it (an ``int`` whose operators keep the
    type): the number is another in every run of eager's. ``frames``: the user's stack at
    the call (for the refusal, wherever it is); ``origin``: what made it, for the message."""

    frames: tuple = ()
    origin: str = "`id()`'s value"

    @classmethod
    def of(cls, value: int, frames: tuple, origin: str | None = None) -> Identity:
        made = cls(value)
        made.frames = frames
        if origin is not None:
            made.origin = origin
        return made


def _keeps_identity(name: str):
    method = getattr(int, name)

    def operator(self, *args):
        result = method(self, *args)
        return Identity.of(result, self.frames, self.origin) if type(result) is int else result
    operator.__name__ = name
    return operator


for _name in ("__add__", "__radd__", "__sub__", "__rsub__", "__mul__", "__rmul__",
              "__floordiv__", "__rfloordiv__", "__mod__", "__rmod__", "__pow__", "__rpow__",
              "__and__", "__rand__", "__or__", "__ror__", "__xor__", "__rxor__", "__lshift__",
              "__rlshift__", "__rshift__", "__rrshift__", "__neg__", "__pos__", "__abs__",
              "__invert__"):
    setattr(Identity, _name, _keeps_identity(_name))


class IdentityVariable(ConstantVariable):
    """An :class:`Identity` (``id()``'s value or one computed from it): a constant to compare
    and to key with (``copy.deepcopy``'s memo); refused where it would become part of the
    program (an operand of a PyTorch operation, an output), which would bake in a number
    eager computes anew in every run."""

    __slots__ = ()

    def unwrap(self, tx):
        error = graph_break("UB103", f"{self.value.origin} reaches the program: the number "
                            "is another in every run, so no program computes what eager does",
                            frames=tx.user_frames() or self.value.frames)
        if tx.output.recover(error):  # finding every break: go on, no graph effect
            return 0
        raise error
