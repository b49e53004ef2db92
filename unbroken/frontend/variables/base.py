"""The variable-tracker base class.

A variable tracker says what a Python value is during tracing and where it came from. The
interpreter's stack, locals and cells hold trackers, never raw values. Each family decides how
its values respond to the interpreter's questions: attribute access, calls, truth, iteration,
and ``unwrap`` (the plain Python value handed to a leaf call into PyTorch).

Trackers are immutable except the containers that model Python's mutable ones (list, dict,
cell), whose mutation during tracing mirrors the program's own.

Every tracker method receives ``tx``, the :class:`Interpreter` running the code: it is how the
value model reaches the interpreter above it (wrapping a Python value, inlining a user
function, a leaf call) without importing it.
"""
from __future__ import annotations

import itertools
import operator
from typing import Protocol

from ...symbolic.diagnostics.catalogue import graph_break
from ..sources import Source

__all__ = ["VariableTracker", "AttributeMissing", "CREATION_ORDER", "Interpreter", "hashable"]

# Stamps for mutable trackers (lists, dicts, cells, new objects): torch.cond branches may not
# change state stamped before the branch began.
CREATION_ORDER = itertools.count()


class AttributeMissing(Exception):
    """Raised by ``getattr`` when the attribute does not exist: ``hasattr``/``getattr`` with a
    default catch it; elsewhere the interpreter reports an AttributeError at the user's line."""


class Interpreter(Protocol):
    """What trackers may ask of the interpreter that runs them (the ``tx`` argument).

    ``frontend.translator.InstructionTranslator`` implements it and passes itself down with
    every call, so the value model depends on this interface, never on the interpreter.
    output: the trace-wide context, ``frontend.output.TraceContext`` (recorder, overlay of
    writes, "find them all" mode).
    """

    output: object

    def wrap(self, value, source: Source | None = None) -> VariableTracker:
        """The tracker for a Python value met during tracing (``variables.builder.wrap``)."""

    def call_leaf(self, fn, args: list, kwargs: dict) -> VariableTracker:
        """Call ``fn`` natively on the unwrapped arguments while the recorder records."""

    def inline_call(self, code, f_globals, bound: dict, closure, name: str) -> VariableTracker:
        """Run a user function's code object in a child frame; returns its result."""

    def binary_op(self, symbol: str, left, right) -> VariableTracker:
        """``left <symbol> right`` with the interpreter's operator semantics."""

    def key_of(self, value: VariableTracker):
        """The Python object a set or dict the trace made holds for ``value``: a constant's
        value, else a ``constant.TrackedKey`` (``containers.dict_key``)."""

    def zero_arg_super(self) -> tuple:
        """(class, receiver) of a bare ``super()`` in the running frame."""

    def user_frames(self) -> tuple:
        """The user's stack at the current instruction (for errors)."""

    def user_exception(self, exc: BaseException) -> Exception:
        """``exc`` raised by the traced program itself (its handlers may catch it)."""


class VariableTracker:
    """What a value is during tracing. ``source``: where it came from (or None)."""

    __slots__ = ("source",)

    def __init__(self, source: Source | None = None):
        self.source = source

    # What it is -------------------------------------------------------------
    def python_type(self) -> type:
        """The type the value has in eager Python (for isinstance/type)."""
        raise graph_break("UB117", f"cannot determine the type of {self.describe()}")

    def describe(self) -> str:
        """A short phrase for messages: 'a tensor', 'the list `xs`'."""
        where = f" `{self.source.name()}`" if self.source is not None else ""
        return f"a {type(self).__name__.removesuffix('Variable').lower()} value{where}"

    def is_constant(self) -> bool:
        """True when the value is fully known at trace time (no tensors, no symbols)."""
        return False

    def as_constant(self):
        """The Python value of a constant tracker."""
        raise graph_break("UB117", f"{self.describe()} is not a constant")

    # How it behaves ------------------------------------------------------------
    def unwrap(self, tx):
        """The plain Python value to pass to a leaf call (tensors become meta tensors)."""
        raise graph_break("UB113", f"{self.describe()} cannot be passed to a PyTorch function")

    def getattr(self, tx, name: str) -> VariableTracker:
        raise graph_break("UB117", f"cannot read attribute `{name}` of {self.describe()}")

    def setattr(self, tx, name: str, value: VariableTracker) -> None:
        raise graph_break("UB107", f"cannot assign attribute `{name}` of {self.describe()}")

    def call(self, tx, args: list, kwargs: dict) -> VariableTracker:
        raise graph_break("UB108", f"{self.describe()} is not callable during export")

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        """``self[index]``: folded natively when both are constants, else a leaf call."""
        if self.is_constant() and index.is_constant():
            container, key = self.as_constant(), index.as_constant()
            # only the program's own indexing runs in the try (IndexError, KeyError, an enum
            # lookup, a class's __class_getitem__...): whatever it raises, eager raises too
            try:
                value = container[key]
            except Exception as exc:
                raise tx.user_exception(exc) from None
            return tx.wrap(value)
        return tx.call_leaf(operator.getitem, [self, index], {})

    def truth(self, tx) -> bool:
        """Truth value for `if`/`while`/`and`/`or`."""
        return bool(self.as_constant())

    def items(self, tx) -> list:
        """The elements, for iteration and unpacking."""
        raise graph_break("UB117", f"cannot iterate over {self.describe()}")

    def length(self, tx):
        return len(self.items(tx))

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.describe()})"


# The attributes holding the object a tracker stands for, when it stands for one that exists
# outside it (``is`` compares them: ``opcodes.arithmetic.is_same``).
IDENTITY_ATTRIBUTES = ("meta", "module", "value", "fn", "outside")


def identity_of(tracker: VariableTracker) -> int:
    """``id()`` of what ``tracker`` stands for: the object in its identity attribute
    (:data:`IDENTITY_ATTRIBUTES`), else the tracker itself (a value the trace made)."""
    for attribute in IDENTITY_ATTRIBUTES:
        if hasattr(tracker, attribute):
            return id(getattr(tracker, attribute))
    return id(tracker)


def hashable(value) -> bool:
    """Whether ``value`` can be a dict key or set member (looked up in a table of
    functions: a ``functools.partial`` of a list, a bound method of an unhashable object
    cannot)."""
    try:
        hash(value)
    except TypeError:
        return False
    return True
