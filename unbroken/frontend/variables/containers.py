"""Python containers whose elements are trackers: tuple, list, dict, torch.Size, iterators."""
from __future__ import annotations

import torch

from ..graph_breaks import graph_break
from .base import CREATION_ORDER, AttributeMissing, VariableTracker
from .constant import ConstantVariable

__all__ = ["check_mutable", "GeneratorVariable", "TupleVariable", "ListVariable", "SizeVariable", "NamedTupleVariable", "DictVariable",
           "IteratorVariable", "SliceVariable", "ContainerMethodVariable"]


class SequenceVariable(VariableTracker):
    """Base of tuple/list trackers. ``elements``: the element trackers, in order."""

    __slots__ = ("elements",)
    python_class: type = tuple

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

    def rebuild(self, elements) -> "SequenceVariable":
        """A new tracker of the same kind with other elements."""
        return type(self)(elements)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        key = index.as_constant()
        if isinstance(key, slice):
            return self.rebuild(self.elements[key])
        try:
            return self.elements[key]
        except IndexError:
            raise tx.user_exception(IndexError(f"{self.python_class.__name__} index out of range"))
        except TypeError as exc:
            raise tx.user_exception(exc)

    def getattr(self, tx, name: str) -> VariableTracker:
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
        import inspect
        import types

        from .builder import wrap
        from .functions import BoundMethodVariable

        try:
            static = inspect.getattr_static(self.cls, name)
        except AttributeError:
            raise AttributeMissing(name) from None
        if isinstance(static, types.FunctionType):
            return BoundMethodVariable(self, wrap(tx, static))
        if isinstance(static, property):
            return wrap(tx, static.fget).call(tx, [self], {})
        return wrap(tx, getattr(self.cls, name))  # classmethods come bound to the class


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


def check_mutable(tx, container, what: str) -> None:
    """Refuse ``what`` (a mutation) on a list, dict, cell or object that lives outside the
    trace, or outside the torch.cond branch being traced."""
    if getattr(container, "external", False):
        error = graph_break("UB107", f"{what} modifies {container.describe()}, which exists "
                            "outside forward()", frames=tx.user_frames())
        if not tx.output.recover(error):  # find-all mode: go on mutating the trace's copy
            raise error
    if tx.output.created_outside_branch(getattr(container, "created", 0)):
        raise graph_break("UB107", f"{what} modifies {container.describe()} from inside a "
                          "torch.cond branch (both branches are traced, one runs)",
                          frames=tx.user_frames())


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


class DictVariable(VariableTracker):
    """A dict with constant (hashable, trace-time known) keys. ``entries``: key -> tracker."""

    __slots__ = ("entries", "python_class", "external", "created")

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
        return all(v.is_constant() for v in self.entries.values())

    def as_constant(self):
        return self.python_class((k, v.as_constant()) for k, v in self.entries.items())

    def unwrap(self, tx):
        return self.python_class((k, v.unwrap(tx)) for k, v in self.entries.items())

    def truth(self, tx) -> bool:
        return bool(self.entries)

    def items(self, tx) -> list:
        return [ConstantVariable(k) for k in self.entries]

    def length(self, tx):
        return len(self.entries)

    def getitem(self, tx, key: VariableTracker) -> VariableTracker:
        k = dict_key(key)
        if k not in self.entries:
            raise tx.user_exception(KeyError(k))
        return self.entries[k]

    def getattr(self, tx, name: str) -> VariableTracker:
        if not hasattr(dict, name):
            raise AttributeMissing(name)
        return ContainerMethodVariable(self, name)


def dict_key(key: VariableTracker):
    """The Python key for a tracker used as a dict key: a constant's value, or the object
    itself for values hashed by identity (modules, functions, objects, tensors)."""
    if key.is_constant():
        return key.as_constant()
    from .tensor import SymbolicVariable, TensorVariable

    if isinstance(key, TensorVariable):
        return key.meta
    identity = getattr(key, "module", None) or getattr(key, "fn", None)
    if identity is None and not isinstance(key, SymbolicVariable):
        identity = getattr(key, "value", None)
    if identity is not None and type(identity).__hash__ is object.__hash__:
        return identity
    raise graph_break("UB117", f"{key.describe()} used as a dict key (keys must be constants "
                      "or objects hashed by identity)")


class IteratorVariable(VariableTracker):
    """An iterator over a materialized list of trackers. ``pending``: what is left."""

    __slots__ = ("pending",)

    def __init__(self, elements, source=None):
        super().__init__(source)
        self.pending = list(elements)

    def python_type(self) -> type:
        return type(iter(()))

    def describe(self) -> str:
        return "an iterator"

    def next(self):
        """The next element, or None when exhausted."""
        return self.pending.pop(0) if self.pending else None

    def items(self, tx) -> list:
        rest, self.pending = self.pending, []
        return rest

    def unwrap(self, tx):
        return iter([e.unwrap(tx) for e in self.items(tx)])


class GeneratorVariable(IteratorVariable):
    """A generator created while tracing. ``translator``: the paused translator of its body,
    resumed by each ``next()`` until it yields or returns (so the body runs lazily, in the same
    order relative to the consumer as in CPython). ``send``/``throw`` are not supported."""

    __slots__ = ("translator", "done")

    def __init__(self, translator):
        super().__init__([])
        self.translator = translator
        self.done = False

    def python_type(self) -> type:
        return type(x for x in ())

    def describe(self) -> str:
        return f"the generator `{self.translator.name}`"

    def next(self):
        if self.done:
            return None
        self.translator.push(ConstantVariable(None))  # the value `yield` evaluates to
        value = self.translator.resume()
        self.done = value is None
        return value

    def items(self, tx) -> list:
        values = []
        while (value := self.next()) is not None:
            values.append(value)
        return values


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
        from .container_methods import call_container_method

        return call_container_method(tx, self.container, self.name, args, kwargs)
