"""Python containers whose elements are trackers: tuple, list, dict, torch.Size, iterators,
and their methods (``xs.append(t)``, ``d.items()``...)."""
from __future__ import annotations

import collections
import functools
import inspect
import types

import torch

from ...symbolic.diagnostics.catalogue import GraphBreakError, TracedException, graph_break
from ..protocol import (
    CallbackVariable,
    call_python,
    class_attribute,
    lookup,
    read_attribute,
    subscript,
)
from .base import CREATION_ORDER, AttributeMissing, VariableTracker
from .binding import BindingPlan
from .builtin_methods import (
    MUTATES,
    REFUSED,
    STRUCTURAL,
    bind_native,
    call_natively,
    check_mutable,
    method_kind,
    refuse,
)
from .constant import (
    ConstantVariable,
    TrackedKey,
    holds_tracked,
    is_constant_value,
    is_tracked_key,
    key_value,
)
from .native import PureCallableVariable
from .tensor import SymbolicVariable, TensorVariable

__all__ = ["check_mutable", "GeneratorVariable", "TupleVariable", "ListVariable", "SizeVariable",
           "NamedTupleVariable", "DictVariable", "DictViewVariable", "IteratorVariable",
           "SliceVariable",
           "ContainerMethodVariable", "call_container_method", "dict_key", "merged_entries",
           "key_tracker",
           "sorted_trackers",
           "index_lists_as_tensors"]


class SequenceVariable(VariableTracker):
    """Base of tuple/list trackers. ``elements``: the element trackers, in order."""

    __slots__ = ("elements",)
    python_class: type = tuple
    models_builtin = True  # the builtin type's own methods apply (builtin_methods)

    def __init__(self, elements, source=None):
        super().__init__(source)
        self.elements = list(elements)

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        where = f" `{self.source.name()}`" if self.source is not None else ""
        return f"the {self.python_class.__name__}{where}"

    def is_constant(self) -> bool:
        return all(e.is_constant() for e in self.elements)

    def as_constant(self):
        return self.python_class(e.as_constant() for e in self.elements)

    def unwrap(self, tx):
        return self.python_class(e.unwrap(tx) for e in self.elements)

    def truth(self, tx) -> bool:
        return bool(self.elements)

    def items(self, tx) -> list:
        return list(self.elements)

    def length(self, tx):
        return len(self.elements)

    def rebuild(self, elements) -> SequenceVariable:
        """A new tracker of the same kind with other elements."""
        return type(self)(elements)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if not index.is_constant():
            return super().getitem(tx, index)
        key = index.as_constant()
        if isinstance(key, slice):
            return self.rebuild(self.elements[key])
        try:
            return self.elements[key]
        except IndexError:
            message = f"{self.python_class.__name__} index out of range"
            raise tx.user_exception(IndexError(message)) from None
        except TypeError as exc:
            raise tx.user_exception(exc) from None

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "__class__":  # (was taken for a method: `[].__class__ is list` False)
            return tx.wrap(self.python_type())
        if not hasattr(self.python_class, name):
            raise AttributeMissing(name)
        return ContainerMethodVariable(self, name)


class TupleVariable(SequenceVariable):
    """A tuple."""

    __slots__ = ()
    python_class = tuple


class SizeVariable(TupleVariable):
    """A ``torch.Size``: a tuple of ints and symbolic ints."""

    __slots__ = ()
    python_class = torch.Size

    def rebuild(self, elements):
        return SizeVariable(elements)

    def unwrap(self, tx):
        return torch.Size([e.unwrap(tx) for e in self.elements])

    def as_constant(self):
        return torch.Size([e.as_constant() for e in self.elements])


def tuple_fields(cls) -> tuple | None:
    """Field names of a namedtuple or a struct sequence (``torch.return_types.max``)."""
    fields = getattr(cls, "_fields", None)
    if fields is None and hasattr(cls, "n_fields"):
        fields = getattr(cls, "__match_args__", None)
    return tuple(fields) if fields is not None else None


class NamedTupleVariable(TupleVariable):
    """A namedtuple or struct-sequence instance. ``cls``: its class."""

    __slots__ = ("cls",)

    def __init__(self, elements, cls, source=None):
        super().__init__(elements, source)
        self.cls = cls

    def python_type(self) -> type:
        return self.cls

    def rebuild(self, elements):
        return TupleVariable(elements)

    def _build(self, values):
        if hasattr(self.cls, "_fields"):
            return self.cls(*values)
        return self.cls(tuple(values))  # a struct sequence takes one sequence

    def unwrap(self, tx):
        return self._build([e.unwrap(tx) for e in self.elements])

    def as_constant(self):
        return self._build([e.as_constant() for e in self.elements])

    def getattr(self, tx, name: str) -> VariableTracker:
        fields = tuple_fields(self.cls)
        if name in fields:
            return self.elements[fields.index(name)]
        if name == "__class__":
            return tx.wrap(self.cls)
        if name in vars(tuple) and class_attribute(self.cls, name) is vars(tuple)[name]:
            return super().getattr(tx, name)  # tuple's own methods, on the element trackers
        found = lookup(tx, self, name, cls=self.cls)
        if found is None:
            raise AttributeMissing(name)
        return found


class ListVariable(SequenceVariable):
    """A list; mutated in place by the traced code's own list operations.

    external: the list exists outside the trace (a module attribute, a global, a default
    argument): mutating it would be a side effect the exported program cannot replay, so it is
    refused (see ``check_mutable``)."""

    __slots__ = ("external", "created")
    python_class = list

    def __init__(self, elements, source=None, *, external=False):
        super().__init__(elements, source)
        self.external = external
        self.created = next(CREATION_ORDER)

    def rebuild(self, elements):
        return ListVariable(elements)


class SliceVariable(VariableTracker):
    """A slice whose bounds may be symbolic. ``parts``: (start, stop, step) trackers."""

    __slots__ = ("parts",)

    def __init__(self, parts, source=None):
        super().__init__(source)
        self.parts = tuple(parts)

    def python_type(self) -> type:
        return slice

    def is_constant(self) -> bool:
        return all(p.is_constant() for p in self.parts)

    def as_constant(self):
        return slice(*(p.as_constant() for p in self.parts))

    def unwrap(self, tx):
        return slice(*(p.unwrap(tx) for p in self.parts))

    def getattr(self, tx, name: str) -> VariableTracker:
        if name in _SLICE_FIELDS:  # the bounds as given (None where left out)
            return self.parts[_SLICE_FIELDS.index(name)]
        if name == "indices" and self.is_constant():  # of a length: CPython's own
            return PureCallableVariable(self.as_constant().indices)
        if name == "__class__":
            return tx.wrap(slice)
        return super().getattr(tx, name)


_SLICE_FIELDS = ("start", "stop", "step")


class DictVariable(VariableTracker):
    """A dict with constant (hashable, trace-time known) keys. ``entries``: key -> tracker."""

    __slots__ = ("entries", "python_class", "external", "created")
    models_builtin = True  # dict's own methods apply (builtin_methods)

    def __init__(self, entries: dict, source=None, python_class: type = dict, *,
                 external=False):
        super().__init__(source)
        self.entries = dict(entries)
        self.python_class = python_class
        self.external = external
        self.created = next(CREATION_ORDER)

    def python_type(self) -> type:
        return self.python_class

    def describe(self) -> str:
        where = f" `{self.source.name()}`" if self.source is not None else ""
        return f"the dict{where}"

    def is_constant(self) -> bool:
        return all(v.is_constant() for v in self.entries.values()) and \
            not any(is_tracked_key(k) for k in self.entries)

    def as_constant(self):
        return _dict_of(self.python_class, {k: v.as_constant() for k, v in self.entries.items()})

    def unwrap(self, tx):
        return _dict_of(self.python_class,
                        {key_value(tx, k): v.unwrap(tx) for k, v in self.entries.items()})

    def truth(self, tx) -> bool:
        return bool(self.entries)

    def items(self, tx) -> list:
        return [key_tracker(k) for k in self.entries]

    def length(self, tx):
        return len(self.entries)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        if not key.is_constant():
            return super().getitem(tx, key)
        return self.entry(tx, key)

    def entry(self, tx, key: VariableTracker) -> VariableTracker:
        """``d[key]`` for any key a dict tracker can hold (constants, identity-hashed objects)."""
        k = dict_key(key, tx)
        if k not in self.entries:
            raise tx.user_exception(KeyError(k))
        return self.entries[k]

    def has_key(self, key: VariableTracker, tx=None) -> bool:
        """Whether ``key`` (a tracker) is one of the keys."""
        return dict_key(key, tx) in self.entries

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "__class__":
            return tx.wrap(self.python_type())
        if self.python_class is not dict and \
                isinstance(class_attribute(self.python_class, name), types.FunctionType):
            # a dict subclass's method written in Python (``Counter.update``, which counts,
            # ``most_common``, ``+``): interpreted on this tracker, as on the dict it is
            found = lookup(tx, self, name, cls=self.python_class)
            if found is not None:
                return found
        if hasattr(dict, name) or (name in _ORDERED_DICT_METHODS
                                   and issubclass(self.python_class, collections.OrderedDict)):
            return ContainerMethodVariable(self, name)
        if hasattr(self.python_class, name):  # defaultdict.default_factory...: not modelled
            raise graph_break("UB117", f"the attribute `{name}` of {self.describe()} is not "
                              "supported", frames=tx.user_frames())
        raise AttributeMissing(name)


def _dict_of(cls: type, entries: dict):
    """A dict of class ``cls`` with ``entries``: a ``Counter`` built from pairs would count
    the pairs, so a subclass is made empty (``__new__``) and filled as a dict; an
    ``OrderedDict`` by its own constructor, which keeps its order."""
    if cls is dict:
        return entries
    if issubclass(cls, collections.OrderedDict):
        return cls(entries)
    made = cls.__new__(cls)
    dict.update(made, entries)
    return made


class DefaultDictVariable(DictVariable):
    """A ``collections.defaultdict`` made in the trace: ``d[key]`` of a missing key calls the
    factory (traced, like any call) and keeps its result, as ``__missing__`` does.
    ``factory``: the tracker of ``default_factory`` (a constant None: no default)."""

    __slots__ = ("factory",)

    def __init__(self, entries: dict, factory: VariableTracker, source=None):
        super().__init__(entries, source, collections.defaultdict)
        self.factory = factory

    def describe(self) -> str:
        return "the defaultdict"

    def as_constant(self):
        return collections.defaultdict(self.factory.as_constant(),
                                       {k: v.as_constant() for k, v in self.entries.items()})

    def unwrap(self, tx):
        return collections.defaultdict(self.factory.unwrap(tx),
                                       {k: v.unwrap(tx) for k, v in self.entries.items()})

    def is_constant(self) -> bool:
        return self.factory.is_constant() and super().is_constant()

    def entry(self, tx, key: VariableTracker) -> VariableTracker:
        k = dict_key(key, tx)
        if k in self.entries or self.factory.is_constant() and self.factory.as_constant() is None:
            return super().entry(tx, key)
        check_mutable(tx, self, "a missing key's default (`__missing__`)")
        value = self.entries[k] = self.factory.call(tx, [], {})
        return value

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "default_factory":
            return self.factory
        return super().getattr(tx, name)


def _interpreted_equal(tx, left, right) -> bool:
    """``left == right`` for keys of the program's own classes: ``__eq__`` interpreted, the
    reflected one when it gives NotImplemented, else identity (CPython's fallback)."""
    for first, second in ((left, right), (right, left)):
        value = getattr(first, "value", None)
        method = class_attribute(type(value), "__eq__") if value is not None else None
        if isinstance(method, types.FunctionType):
            result = call_python(tx, method, [first, second], None)
            if not (result.is_constant() and result.as_constant() is NotImplemented):
                return result.truth(tx)
    return left is right


def key_tracker(key) -> VariableTracker:
    """The tracker of a dict key as :func:`dict_key` made it: the tracker itself, a tuple of
    them, or the constant."""
    if isinstance(key, TrackedKey):
        return key.tracker
    if type(key) is tuple and holds_tracked(key):
        return TupleVariable([key_tracker(k) for k in key])
    return ConstantVariable(key)


def _native_hashing(obj) -> bool:
    """Whether ``obj``'s class hashes and compares in C (identity for most objects)."""
    cls = type(obj)
    return not isinstance(class_attribute(cls, "__hash__"), types.FunctionType) and \
        not isinstance(class_attribute(cls, "__eq__"), types.FunctionType) and \
        cls.__hash__ is not None


def _reduced_hash(number: int) -> int:
    """What ``hash()`` makes of the int a ``__hash__`` returned, as CPython's: kept when it
    fits a machine word (-1, the C error value, becomes -2), else the int's own hash."""
    if not -2 ** 63 <= number < 2 ** 63:
        return hash(number)
    return -2 if number == -1 else int(number)


def dict_key(key: VariableTracker, tx=None):
    """The Python key for a tracker used as a dict key: a constant's value, a tuple of
    keys for a tuple holding trackers, else a :class:`TrackedKey` — for objects hashed in C
    (modules, functions, tensors: by identity) and for objects of the program's own classes
    whose ``__hash__`` is Python (interpreted, with ``tx``; TypeError for an unhashable
    class, as CPython's)."""
    if key.is_constant():
        return key.as_constant()
    if isinstance(key, TensorVariable):
        return TrackedKey(key, key.meta, hash(key.meta), False)
    if type(key) is TupleVariable:
        return tuple(dict_key(element, tx) for element in key.elements)
    identity = getattr(key, "module", None) or getattr(key, "fn", None)
    if identity is None and not isinstance(key, SymbolicVariable):
        identity = getattr(key, "value", None)
    if identity is not None:
        if _native_hashing(identity):
            return TrackedKey(key, identity, hash(identity), False)
        method = class_attribute(type(identity), "__hash__")
        if tx is not None and method is None:
            raise tx.user_exception(TypeError(f"unhashable type: '{type(identity).__name__}'"))
        if tx is not None and isinstance(method, types.FunctionType):
            result = call_python(tx, method, [key], None)
            number = result.as_constant() if result.is_constant() else None
            if not isinstance(number, int):
                if result.is_constant():
                    raise tx.user_exception(TypeError("__hash__ method should return an integer"))
                raise graph_break("UB117", f"the hash of {key.describe()} is not a constant",
                                  frames=tx.user_frames())
            stable = type(number) in (int, bool)  # an Identity (id(), a string's hash): not
            return TrackedKey(key, None, _reduced_hash(number), stable, tx.output,
                              _interpreted_equal)
    raise graph_break("UB117", f"{key.describe()} used as a dict key or set element (those "
                      "must be constants, tensors, modules, functions or objects)")


# the class of CPython's iterator over each builtin iterable (what ``type(iter(x))`` is)
ITERATOR_TYPES = {cls: type(iter(empty)) for cls, empty in (
    (list, []), (tuple, ()), (dict, {}), (set, set()), (frozenset, frozenset()), (str, ""),
    (bytes, b""), (range, range(0)), (type({}.keys()), {}.keys()),
    (type({}.values()), {}.values()), (type({}.items()), {}.items()))}


class IteratorVariable(VariableTracker):
    """An iterator over a materialized list of trackers. ``pending``: what is left;
    ``kind``: the class of CPython's iterator it stands for (a tuple's by default)."""

    __slots__ = ("pending", "kind")

    def __init__(self, elements, source=None, kind=None):
        super().__init__(source)
        self.pending = list(elements)
        self.kind = kind

    def python_type(self) -> type:
        return self.kind or ITERATOR_TYPES[tuple]

    def describe(self) -> str:
        return "an iterator"

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "__class__":
            return tx.wrap(self.python_type())
        return super().getattr(tx, name)

    def next(self):
        """The next element, or None when exhausted."""
        return self.pending.pop(0) if self.pending else None

    def items(self, tx) -> list:
        rest, self.pending = self.pending, []
        return rest

    def unwrap(self, tx):
        return iter([e.unwrap(tx) for e in self.items(tx)])


class ChainVariable(IteratorVariable):
    """``itertools.chain(*iterables)``: the iterators of the iterables, drawn from in turn as
    the chain is consumed (so an iterator or generator among them advances when CPython's
    would). ``sources``: the iterators left."""

    __slots__ = ("sources",)

    def __init__(self, sources):
        super().__init__([])
        self.sources = list(sources)

    def describe(self) -> str:
        return "an itertools.chain"

    def next(self):
        while self.sources:
            value = self.sources[0].next()
            if value is not None:
                return value
            self.sources.pop(0)
        return None

    def items(self, tx) -> list:
        values = []
        while (value := self.next()) is not None:
            values.append(value)
        return values


class GeneratorVariable(IteratorVariable):
    """A generator created while tracing. ``translator``: the paused translator of its body,
    resumed by each ``next()`` until it yields or returns (so the body runs lazily, in the same
    order relative to the consumer as in CPython). ``send`` resumes it with a value for its
    ``yield``; ``throw`` raises an exception where the body is paused (contextlib's
    ``__exit__`` does, for an exception out of a ``with`` block of a ``@contextmanager``);
    ``close`` raises ``GeneratorExit`` there."""

    __slots__ = ("translator", "done", "started")

    def __init__(self, translator):
        super().__init__([])
        self.translator = translator
        self.done = False
        self.started = False

    def python_type(self) -> type:
        return type(x for x in ())

    def describe(self) -> str:
        return f"the generator `{self.translator.name}`"

    def next(self):
        return self._advance(ConstantVariable(None))

    def _advance(self, sent: VariableTracker):
        """Resume the body with ``sent`` as the value of its ``yield``: what it yields
        next, or None once it has returned."""
        if self.done:
            return None
        self.started = True
        self.translator.push(sent)  # the value `yield` evaluates to
        try:
            value = self.translator.resume()
        except TracedException as error:
            if not isinstance(error.exception, StopIteration):
                raise
            # PEP 479: a StopIteration escaping the body is a RuntimeError (3.12+ compile this
            # into the body, CALL_INTRINSIC_1; 3.11 does it in the generator object)
            runtime = RuntimeError("generator raised StopIteration")
            runtime.__cause__ = error.exception
            raise TracedException(runtime, frames=error.frames) from None
        self.done = value is None
        return value

    def items(self, tx) -> list:
        values = []
        while (value := self.next()) is not None:
            values.append(value)
        return values

    def returned(self) -> VariableTracker:
        """What the body returned, once it has (``return v``; None at its end): the value of
        a ``yield from`` over the generator, and of the StopIteration it ends with."""
        value = self.translator.returned
        return ConstantVariable(None) if value is None else value

    def stop_iteration(self, tx) -> TracedException:
        """The StopIteration a call on the finished generator raises: carrying what the body
        returned, as CPython's (a value that is not a constant is refused when it is read
        into the exception, as any exception argument that is)."""
        value = self.returned()
        args = () if value.is_constant() and value.as_constant() is None else (value.unwrap(tx),)
        return TracedException(StopIteration(*args), frames=tx.user_frames())

    def delegate(self) -> VariableTracker | None:
        """The iterator the ``yield from`` where the body is paused delegates to, else None:
        the yield of a ``yield from`` loop is followed by ``RESUME 2`` (3.11-3.13), with
        the iterator under it on the stack."""
        translator = self.translator
        if not self.started or self.done or translator.ip >= len(translator.instructions):
            return None
        following = translator.instructions[translator.ip]
        if following.name == "RESUME" and following.arg == 2 and translator.stack:
            return translator.stack[-1]
        return None

    def leave_delegation(self, result: VariableTracker) -> None:
        """The paused ``yield from`` ends with ``result`` as its value: the body goes on
        where the loop's SEND exits, the iterator taken off the stack (by END_SEND there
        from 3.12, by SEND itself in 3.11)."""
        translator = self.translator
        back = translator.instructions[translator.ip + 1]  # JUMP_BACKWARD_NO_INTERRUPT
        send = translator.instructions[back.target]
        if translator.instructions[send.target].name != "END_SEND":
            translator.pop()
        translator.push(result)
        translator.ip = send.target

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "throw":
            return CallbackVariable(self._throw, "the method `throw` of a generator")
        if name == "send":
            return CallbackVariable(self._send, "the method `send` of a generator")
        if name == "close":
            return CallbackVariable(self._close, "the method `close` of a generator")
        return super().getattr(tx, name)  # gi_frame, gi_running...: refused as before

    def _send(self, tx, args) -> VariableTracker:
        """``gen.send(value)``: the body resumes with ``value`` as its ``yield``'s value;
        returns what it yields next, StopIteration once it returns (CPython's errors for a
        wrong call and a value sent to a generator that has not started)."""
        if len(args) != 1:
            raise tx.user_exception(TypeError(
                f"{self.python_type().__name__}.send() takes exactly one argument "
                f"({len(args)} given)"))
        if self.done:
            raise self.stop_iteration(tx)
        value = args[0]
        if not self.started and not (value.is_constant() and value.as_constant() is None):
            raise tx.user_exception(TypeError(
                "can't send non-None value to a just-started generator"))
        yielded = self._advance(value)
        if yielded is None:
            raise self.stop_iteration(tx)
        return yielded

    def _close(self, tx, args) -> VariableTracker:
        """``gen.close()``: ``GeneratorExit`` raised where the body is paused; the body may
        clean up (``finally``) and must not yield again (RuntimeError, as CPython's). A
        generator that never started, or finished, just ends."""
        if args:
            raise tx.user_exception(TypeError(
                f"{self.python_type().__name__}.close() takes no arguments ({len(args)} given)"))
        if not self.started or self.done:
            self.done = True
            return ConstantVariable(None)
        try:
            self._throw(tx, [ConstantVariable(GeneratorExit)])
        except TracedException as error:
            if isinstance(error.exception, (GeneratorExit, StopIteration)):
                return ConstantVariable(None)
            raise
        # it yielded: still paused there, as CPython leaves it
        raise tx.user_exception(RuntimeError("generator ignored GeneratorExit"))

    def _throw(self, tx, args) -> VariableTracker:
        """``gen.throw(value)`` (``gen.throw(type, value, traceback)`` before 3.12): the body
        resumes by raising it at its ``yield``; returns what it yields next. Raised back if
        the body does not catch it, StopIteration if the body returns."""
        if not args:
            raise tx.user_exception(TypeError("throw expected at least 1 argument, got 0"))
        raw = [a.unwrap(tx) for a in args]
        value = raw[1] if len(raw) > 1 and raw[1] is not None else raw[0]
        if isinstance(value, type) and issubclass(value, BaseException):
            value = value()
        if not isinstance(value, BaseException):
            raise tx.user_exception(TypeError("exceptions must derive from BaseException"))
        translator = self.translator
        if self.done:  # finished: raised right here
            raise TracedException(value, frames=tx.user_frames())
        receiver = self.delegate()
        if receiver is not None:  # paused in a `yield from`: the iterator gets it first
            outcome, payload = self._throw_into(tx, receiver, value)
            if outcome == "yield":  # the body stays paused in its `yield from`
                return payload
            if outcome == "return":  # the `yield from` gives what the iterator returned
                self.leave_delegation(payload)
                return self._resume_after_throw(tx)
            value = payload
        # where it is paused: a yield, or the start of its body (no handler covers that); the
        # value sent on resuming is pushed first, as CPython's (3.12's CLEANUP_THROW expects it)
        paused_at = translator.instructions[translator.ip - 1]
        translator.paused = False
        try:
            translator.output.site.translators.append(translator)
            try:
                if self.started:
                    translator.push(ConstantVariable(None))
                translator.handle_exception(TracedException(value), paused_at)
            finally:
                translator.output.site.translators.pop()
        except TracedException:
            self.done = True
            raise
        return self._resume_after_throw(tx)

    def _resume_after_throw(self, tx) -> VariableTracker:
        self.translator.paused = False
        try:
            yielded = self.translator.resume()
        except TracedException:
            self.done = True
            raise
        if yielded is None:
            self.done = True
            raise self.stop_iteration(tx)
        return yielded

    def _throw_into(self, tx, receiver, value: BaseException):
        """``throw(value)`` into the generator while its ``yield from`` delegates to
        ``receiver``, as CPython's: GeneratorExit closes the iterator, then is raised in the
        body; another exception is thrown into a generator, whose next yield is the body's
        (``("yield", value)``), whose return ends the ``yield from`` (``("return",
        value)``) and whose exception is raised in the body instead (``("raise",
        exception)``); an iterator without ``throw`` lets it raise in the body."""
        if isinstance(receiver, GeneratorVariable):
            try:
                if isinstance(value, GeneratorExit):
                    receiver._close(tx, [])
                    return "raise", value
                return "yield", receiver._throw(tx, [ConstantVariable(value)])
            except TracedException as error:
                if isinstance(error.exception, StopIteration) and \
                        not isinstance(value, GeneratorExit):
                    return "return", receiver.returned()
                return "raise", error.exception
        if not isinstance(receiver, IteratorVariable) and class_attribute(
                receiver.python_type(),
                "close" if isinstance(value, GeneratorExit) else "throw") is not None:
            raise graph_break("UB106", f"`throw()` into a `yield from` over "
                              f"{receiver.describe()}, an iterator with its own "
                              "`throw`/`close`", frames=tx.user_frames())
        return "raise", value


class ContainerMethodVariable(VariableTracker):
    """A bound method of a list/tuple/dict tracker, implemented on the trackers themselves."""

    __slots__ = ("container", "name")

    def __init__(self, container, name: str):
        super().__init__(None)
        self.container = container
        self.name = name

    def describe(self) -> str:
        return f"the method `{self.name}` of {self.container.describe()}"

    def call(self, tx, args, kwargs) -> VariableTracker:
        return call_container_method(tx, self.container, self.name, args, kwargs)


# ----------------------------------------------------------------- methods
# Methods of list/tuple/dict trackers (``xs.append(t)``, ``d.items()``, ...). Methods that only
# read constant data run natively on the constant form; methods that move trackers around are
# implemented here on the element lists, so tensors inside stay tracked.

_NONE = ConstantVariable(None)
_TRUE = ConstantVariable(True)


@functools.cache
def _handler_plan(handler) -> BindingPlan:
    """The binding plan of a method handler (module functions: made once, not per call)."""
    return BindingPlan(inspect.signature(handler))


def call_container_method(tx, container, name: str, args: list, kwargs: dict) -> VariableTracker:
    """``container.name(*args, **kwargs)`` for a list/tuple/dict tracker.

    The methods implemented here on the trackers run first (cheap: no copy of the container;
    tensors and callables stay tracked); arguments they cannot take on constants go to CPython's
    own method, as do the other methods: on a native model of the container, each tracked
    element opaque (``_call_on_native_model``)."""
    owner = _BUILTIN_MODEL.get(type(container))
    if owner is not None and container.python_type() is not owner:
        owner = None  # an OrderedDict, a mapping proxy: their own methods differ
    table = _DICT_METHODS if isinstance(container, DictVariable) else _SEQUENCE_METHODS
    if owner is None and isinstance(container, DictVariable) and issubclass(
            container.python_class, collections.OrderedDict) and name in _ORDERED_DICT_METHODS:
        table = _ORDERED_DICT_METHODS  # its own methods, on the ordered entries
    handler = table.get(name)
    if handler is not None:
        plan = _handler_plan(handler)  # the method's own arity (the handlers take the same
        if plan.bind((tx, container, *args), kwargs) is None:  # parameters)
            try:
                plan.signature.bind(tx, container, *args, **kwargs)
            except TypeError as exc:
                raise tx.user_exception(TypeError(f"{name}(): {exc}")) from None
        try:
            return handler(tx, container, *args, **kwargs)
        except (TypeError, ValueError, IndexError, KeyError, GraphBreakError):
            # arguments the handler cannot take (an unhashable key, `extend(2)`): on
            # constants CPython's own method says what happens (its error, as eager's)
            if owner is None or not _all_constant(container, args, kwargs):
                raise
    if owner is not None:
        return _call_on_native_model(tx, container, owner, name, args, kwargs)
    if container.is_constant() and all(a.is_constant() for a in args):
        method = getattr(container.as_constant(), name)
        return tx.wrap(method(*(a.as_constant() for a in args),
                               **{k: v.as_constant() for k, v in kwargs.items()}))
    raise graph_break("UB117", f"the method `{name}` of {container.describe()} is not supported "
                      "on values that hold tensors")


def _all_constant(container, args, kwargs) -> bool:
    """The native model of the call holds no opaque element."""
    model = _NativeModel()
    model.container(container)
    for value in [*args, *kwargs.values()]:
        model.container(value)
    return not model.opaque


class _Element:
    """Stands for a tracked element (a tensor, a nested container, an object) inside the
    native model of a container: methods that only move elements carry it along unseen."""

    __slots__ = ("tracker",)

    def __init__(self, tracker):
        self.tracker = tracker


class _NativeModel:
    """A one-level native model of list/tuple/dict trackers: constants as themselves, every
    other element as an ``_Element`` standing for its tracker; and back."""

    def __init__(self):
        self.opaque = False  # some element is not a constant

    def element(self, tracker):
        if isinstance(tracker, ConstantVariable) and is_constant_value(tracker.value):
            return tracker.value
        self.opaque = True
        return _Element(tracker)

    def container(self, tracker):
        if type(tracker) is ListVariable:
            return [self.element(e) for e in tracker.elements]
        if type(tracker) is TupleVariable:
            return tuple(self.element(e) for e in tracker.elements)
        if type(tracker) is DictVariable:
            return {k: self.element(v) for k, v in tracker.entries.items()}
        return self.element(tracker)

    def tracker(self, tx, value):
        if isinstance(value, _Element):
            return value.tracker
        if type(value) is list:
            return ListVariable([self.tracker(tx, v) for v in value])
        if type(value) is tuple and any(isinstance(v, _Element) for v in value):
            return TupleVariable([self.tracker(tx, v) for v in value])
        if type(value) is dict:
            return DictVariable({k: self.tracker(tx, v) for k, v in value.items()})
        if type(value).__name__.endswith("iterator"):
            return IteratorVariable([self.tracker(tx, v) for v in value])
        return tx.wrap(value)


def _call_on_native_model(tx, container, owner: type, name: str, args, kwargs):
    """``owner.name(container, *args)`` run by CPython on the native model of the container
    and of its arguments; a mutation is written back into the container's tracker."""
    kind, reason = method_kind(owner, name)
    if kind == REFUSED:
        raise refuse(tx, owner, name, reason)
    if kind == MUTATES:
        check_mutable(tx, container, f"`.{name}()`")
    model = _NativeModel()
    receiver = model.container(container)
    values = [model.container(a) for a in args]
    named = {k: model.container(v) for k, v in kwargs.items()}
    if model.opaque and name not in STRUCTURAL[owner]:
        raise graph_break("UB117", f"the method `{name}` of {container.describe()} compares "
                          "or prints elements that are not constants (tensors, sizes, objects)",
                          frames=tx.user_frames())
    result = call_natively(tx, bind_native(owner, name, receiver), values, named)
    if kind == MUTATES:
        if isinstance(container, DictVariable):  # in place: views share the entries
            entries = {k: model.tracker(tx, v) for k, v in receiver.items()}
            container.entries.clear()
            container.entries.update(entries)
        else:
            container.elements[:] = [model.tracker(tx, v) for v in receiver]
    return container if result is receiver else model.tracker(tx, result)


def _mutable(tx, container, name):
    if not isinstance(container, (ListVariable, DictVariable)):
        raise tx.user_exception(AttributeError(f"'tuple' object has no attribute '{name}'"))
    check_mutable(tx, container, f"`.{name}()`")


def _append(tx, xs, value):
    _mutable(tx, xs, "append")
    xs.elements.append(value)
    return _NONE


def _extend(tx, xs, values):
    _mutable(tx, xs, "extend")
    xs.elements.extend(values.items(tx))
    return _NONE


def _insert(tx, xs, index, value):
    _mutable(tx, xs, "insert")
    xs.elements.insert(index.as_constant(), value)
    return _NONE


def _pop(tx, xs, index=None):
    _mutable(tx, xs, "pop")
    if not xs.elements:
        raise tx.user_exception(IndexError("pop from empty list"))
    return xs.elements.pop(-1 if index is None else index.as_constant())


def _clear(tx, xs):
    _mutable(tx, xs, "clear")
    xs.elements.clear() if isinstance(xs, ListVariable) else xs.entries.clear()
    return _NONE


def _reverse(tx, xs):
    _mutable(tx, xs, "reverse")
    xs.elements.reverse()
    return _NONE


def _copy(tx, xs):
    if isinstance(xs, DefaultDictVariable):
        return DefaultDictVariable(xs.entries, xs.factory)
    if isinstance(xs, DictVariable):
        return DictVariable(xs.entries, python_class=xs.python_class)
    return ListVariable(xs.elements)


def _index(tx, xs, value, *bounds):
    """``xs.index(value[, start[, stop]])``: the bounds as a slice's (negative from the end),
    CPython's message when it is not there (the bounds were ignored: ``[1, 2, 1].index(1, 1)``
    gave 0)."""
    if len(bounds) > 2:
        raise tx.user_exception(TypeError(
            f"index expected at most 3 arguments, got {len(bounds) + 1}"))
    limits = [b.as_constant() for b in bounds]
    for limit in limits:
        if not hasattr(type(limit), "__index__"):
            raise tx.user_exception(TypeError(
                "slice indices must be integers or have an __index__ method"))
    limits += [None] * (2 - len(limits))
    start, stop, _ = slice(*limits).indices(len(xs.elements))
    for i in range(start, stop):
        if _equal(tx, xs.elements[i], value):
            return ConstantVariable(i)
    raise tx.user_exception(ValueError("tuple.index(x): x not in tuple"
                                       if isinstance(xs, TupleVariable) else
                                       f"{_shown(value)} is not in list"))


def _shown(value) -> str:
    return repr(value.as_constant()) if value.is_constant() else "value"


def _count(tx, xs, value):
    return ConstantVariable(sum(_equal(tx, e, value) for e in xs.elements))


def _remove(tx, xs, value):
    _mutable(tx, xs, "remove")
    index = _index(tx, xs, value).as_constant()
    del xs.elements[index]
    return _NONE


def _sort(tx, xs, key=None, reverse=None):
    _mutable(tx, xs, "sort")
    xs.elements[:] = sorted_trackers(tx, xs.elements, key, reverse)
    return _NONE


def _equal(tx, a, b) -> bool:
    if a is b:
        return True
    if a.is_constant() and b.is_constant():
        return a.as_constant() == b.as_constant()
    return tx.call_leaf(lambda x, y: x == y, [a, b], {}).truth(tx)


_SEQUENCE_METHODS = {"append": _append, "extend": _extend, "insert": _insert, "pop": _pop,
                     "clear": _clear, "reverse": _reverse, "copy": _copy, "index": _index,
                     "count": _count, "remove": _remove, "sort": _sort}


class DictViewVariable(VariableTracker):
    """``d.keys()``, ``d.values()`` or ``d.items()`` of a dict tracker (``kind``): a live
    view (it shows the dict's later changes), iterated, measured and searched as CPython's,
    of the view types (``isinstance(d.keys(), list)`` is False). Keys and items views holding
    constants compare with and combine into sets natively (``d.keys() & {"a"}``,
    ``d.keys() == {"a", "b"}``: a list snapshot made the first a TypeError and the second
    False); a values view equals only itself, as CPython's."""

    __slots__ = ("mapping", "kind")

    TYPES = {"keys": type({}.keys()), "values": type({}.values()), "items": type({}.items())}

    def __init__(self, mapping: DictVariable, kind: str):
        super().__init__(None)
        self.mapping, self.kind = mapping, kind

    def python_type(self) -> type:
        return self.TYPES[self.kind]

    def describe(self) -> str:
        return f"the {self.kind} of {self.mapping.describe()}"

    def items(self, tx) -> list:
        entries = self.mapping.entries
        if self.kind == "keys":
            return [key_tracker(k) for k in entries]
        if self.kind == "values":
            return list(entries.values())
        return [TupleVariable([key_tracker(k), v]) for k, v in entries.items()]

    def length(self, tx):
        return len(self.mapping.entries)

    def truth(self, tx) -> bool:
        return bool(self.mapping.entries)

    def is_constant(self) -> bool:
        # a values view compares by identity (``vs == vs`` only): never folded as a value
        if any(is_tracked_key(k) for k in self.mapping.entries):
            return False
        return self.kind == "keys" or self.kind == "items" and \
            all(v.is_constant() for v in self.mapping.entries.values())

    def as_constant(self):
        """The view of a dict of the constants (its values None for a keys view)."""
        real = {k: None if self.kind == "keys" else v.as_constant()
                for k, v in self.mapping.entries.items()}
        return getattr(real, self.kind)()

    def unwrap(self, tx):
        return getattr({key_value(tx, k): v.unwrap(tx)
                        for k, v in self.mapping.entries.items()}, self.kind)()

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "__class__":
            return tx.wrap(self.python_type())
        if name == "isdisjoint" and self.is_constant():
            view = self.as_constant()  # of a dict made here: reading it changes nothing
            return CallbackVariable(lambda tx, args: ConstantVariable(view.isdisjoint(
                *(a.as_constant() for a in args))), f"`{self.kind}().isdisjoint`")
        if name == "isdisjoint" or hasattr(self.python_type(), name):
            raise graph_break("UB117", f"`{name}` of {self.describe()} holding traced values",
                              frames=tx.user_frames())
        raise AttributeMissing(name)


def _items(tx, d):
    return DictViewVariable(d, "items")


def _keys(tx, d):
    return DictViewVariable(d, "keys")


def _values(tx, d):
    return DictViewVariable(d, "values")


def _get(tx, d, key, default=_NONE):
    return d.entries.get(dict_key(key, tx), default)


def _dict_pop(tx, d, key, *default):
    _mutable(tx, d, "pop")
    k = dict_key(key, tx)
    if k in d.entries:
        return d.entries.pop(k)
    if default:
        return default[0]
    raise tx.user_exception(KeyError(k))


def _setdefault(tx, d, key, default=_NONE):
    k = dict_key(key, tx)
    if k not in d.entries:
        _mutable(tx, d, "setdefault")
    return d.entries.setdefault(k, default)


def merged_entries(tx, other) -> list:
    """The ``(key, value tracker)`` pairs ``dict(other)`` and ``d.update(other)`` take, as
    CPython's merge: a dict's entries (a dict subclass made in the trace that keeps dict's
    iteration, a ``Counter``, its own); a mapping's ``keys()`` and ``other[key]``; else the
    pairs ``other`` yields (CPython's message for an element that is not one)."""
    mapping = getattr(other, "mapping", None)
    if isinstance(mapping, DictVariable) and other.python_type().__iter__ is dict.__iter__ \
            and other.python_type().keys is dict.keys:
        other = mapping
    if isinstance(other, DictVariable):
        return list(other.entries.items())
    keys = read_attribute(tx, other, "keys") if hasattr(other.python_type(), "keys") else None
    if keys is not None:
        return [(dict_key(k, tx), subscript(tx, other, k))
                for k in keys.call(tx, [], {}).items(tx)]
    pairs = []
    for index, pair in enumerate(other.items(tx)):
        parts = pair.items(tx)
        if len(parts) != 2:
            raise tx.user_exception(ValueError(
                f"dictionary update sequence element #{index} has length {len(parts)}; "
                "2 is required"))
        pairs.append((dict_key(parts[0], tx), parts[1]))
    return pairs


def _update(tx, d, other=None, **kwargs):
    _mutable(tx, d, "update")
    if other is not None:
        d.entries.update(merged_entries(tx, other))
    d.entries.update(kwargs)
    return _NONE


def _dict_setitem(tx, d, key, value):
    _mutable(tx, d, "__setitem__")
    d.entries[dict_key(key, tx)] = value
    return _NONE


def _dict_getitem(tx, d, key):
    return d.entry(tx, key)


def _dict_delitem(tx, d, key):
    _mutable(tx, d, "__delitem__")
    k = dict_key(key, tx)
    if k not in d.entries:
        raise tx.user_exception(KeyError(k))
    d.entries.pop(k)
    return _NONE


def _dict_contains(tx, d, key):
    return ConstantVariable(dict_key(key, tx) in d.entries)


def _dict_len(tx, d):
    return ConstantVariable(len(d.entries))


def _dict_iter(tx, d):
    return IteratorVariable([key_tracker(k) for k in d.entries], kind=ITERATOR_TYPES[dict])


_DICT_METHODS = {"__setitem__": _dict_setitem, "__getitem__": _dict_getitem,
                 "__delitem__": _dict_delitem, "__contains__": _dict_contains,
                 "__len__": _dict_len, "__iter__": _dict_iter,
                 "items": _items, "keys": _keys, "values": _values, "get": _get,
                 "pop": _dict_pop, "setdefault": _setdefault, "update": _update, "clear": _clear,
                 "copy": _copy}

def _move_to_end(tx, d, key, last=_TRUE):
    _mutable(tx, d, "move_to_end")
    k = dict_key(key, tx)
    if k not in d.entries:
        raise tx.user_exception(KeyError(k))
    value = d.entries.pop(k)
    if last.truth(tx):
        d.entries[k] = value
    else:
        rest = dict(d.entries)
        d.entries.clear()
        d.entries[k] = value
        d.entries.update(rest)
    return _NONE


def _ordered_popitem(tx, d, last=_TRUE):
    _mutable(tx, d, "popitem")
    if not d.entries:
        raise tx.user_exception(KeyError("dictionary is empty"))
    k = next(reversed(d.entries)) if last.truth(tx) else next(iter(d.entries))
    return TupleVariable([key_tracker(k), d.entries.pop(k)])


# OrderedDict's methods that differ from dict's (``popitem(last=False)``) or that dict lacks
_ORDERED_DICT_METHODS = {"move_to_end": _move_to_end, "popitem": _ordered_popitem}

# The trackers that model a builtin type exactly: its other methods run on a native model.
_BUILTIN_MODEL = {ListVariable: list, TupleVariable: tuple, DictVariable: dict}

assert all(hasattr(list, n) for n in _SEQUENCE_METHODS), "unknown list method in table"
assert all(hasattr(dict, n) for n in _DICT_METHODS), "unknown dict method in table"


# ----------------------------------------------------------------- sorting
class _Opaque:
    """Stands for a non-constant value inside a sort key: comparing it is refused (Python
    would compare the values themselves), but a key decided before reaching it sorts fine
    (``sorted(module_dict.items())`` with distinct names)."""

    def _refuse(self, other):
        raise _Incomparable

    __lt__ = __gt__ = __le__ = __ge__ = _refuse

    def __eq__(self, other):
        return self is other

    __hash__ = object.__hash__


class _Incomparable(Exception):
    pass


def _sort_key(tracker):
    if tracker.is_constant():
        return tracker.as_constant()
    if isinstance(tracker, TupleVariable):
        return tuple(_sort_key(e) for e in tracker.elements)
    return _Opaque()


def sorted_trackers(tx, items, key=None, reverse=None) -> list:
    """Sort trackers like Python's stable sort, calling ``key`` through the interpreter
    (``key=None`` given explicitly: no key, as CPython)."""
    if key is not None and key.is_constant() and key.as_constant() is None:
        key = None
    keys = [_sort_key(key.call(tx, [v], {}) if key is not None else v) for v in items]
    try:
        order = sorted(range(len(items)), key=lambda i: keys[i],
                       reverse=bool(reverse.as_constant()) if reverse is not None else False)
    except _Incomparable:
        raise graph_break("UB117", "sorting needs to compare values that are not constants "
                          "(tensors, modules, objects)", frames=tx.user_frames()) from None
    return [items[i] for i in order]


def index_lists_as_tensors(tx, index):
    """``x[[0, 2]]``, ``x[..., [-2], :]``: each flat list of constant ints (or bools) in a tensor
    index becomes a constant index tensor made here, on the CPU. Left to PyTorch, the list
    would become a tensor on the indexed tensor's device, which is the meta device while
    tracing: its values would be lost. A flat list of bools (a mask known now) becomes the
    positions it keeps. Other indexes are returned unchanged."""
    if type(index) is TupleVariable:
        parts = [index_lists_as_tensors(tx, p) for p in index.elements]
        changed = any(a is not b for a, b in zip(parts, index.elements))
        return TupleVariable(parts) if changed else index
    if not isinstance(index, ListVariable) or not index.elements:
        return index
    values = index.unwrap(tx)
    if not all(type(v) in (int, bool) for v in values):
        return index  # PyTorch reads a list of lists (or of slices) as a tuple of indexes
    if all(type(v) is bool for v in values):  # a constant 1-d mask: the positions it keeps
        return tx.wrap(torch.tensor([i for i, keep in enumerate(values) if keep]))
    return tx.wrap(torch.tensor(values))
