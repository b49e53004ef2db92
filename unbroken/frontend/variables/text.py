"""Text built from values the trace does not know yet: an f-string, ``str()``, ``repr()`` or
``format()`` of a tensor or of a symbolic size.

Building a string has no effect of its own: eager code often formats values into an error
message that only a failed check ever reads (``f"tokens: {n_tokens}"`` passed to a check that
holds). So the text is computed only when a use needs it:

- symbolic sizes are made concrete at the first use (each records a guard that the size equals
  its example value, at the line of that use); text nothing reads specializes nothing;
- a tensor's text shows its values, known only at run time: the string may be built, stored
  and passed around, and any use of its content is refused (UB105) at the line of the use.

Text made of constants only stays a plain constant (``ConstantVariable``).
"""
from __future__ import annotations

import torch
from torch.utils import _pytree as pytree

from ..graph_breaks import graph_break
from .base import VariableTracker
from .constant import ConstantVariable

__all__ = ["FormattedTextVariable", "format_text", "join_text"]

_SYMBOLS = ((torch.SymBool, bool), (torch.SymInt, int), (torch.SymFloat, float))


def _leaves(raw) -> list:
    """``raw``'s leaves, the elements of a ``torch.Size`` too."""
    leaves = []
    for leaf in pytree.tree_leaves(raw):
        leaves.extend(leaf if isinstance(leaf, torch.Size) else [leaf])
    return leaves


def _concrete(value):
    """``value`` with its symbolic sizes made concrete (each records a guard)."""
    if isinstance(value, torch.Size):
        return torch.Size([_concrete(e) for e in value])
    for sym, py in _SYMBOLS:
        if isinstance(value, sym):
            return py(value)
    return value


class FormattedTextVariable(VariableTracker):
    """A str whose text is computed when a use needs it (see the module docstring).

    parts:  the pieces in order: a str, or ``(value, convert, spec)``: ``value`` (unwrapped,
            with meta tensors and symbolic sizes in it, or text of this kind) formatted as
            ``format(convert(value), spec)``;
    output: the trace context (its stack names the line of the use, its errors wrap guards);
    where:  the user's frame that built the text (for messages);
    text:   the computed str, once a use needed it.
    """

    __slots__ = ("parts", "output", "where", "text")

    def __init__(self, parts: tuple, output, where):
        super().__init__(None)
        self.parts, self.output, self.where, self.text = parts, output, where, None

    def python_type(self) -> type:
        return str

    def unknown(self) -> bool:
        """True when a tensor's values are part of the text."""
        return any(_unknown(part[0]) for part in self.parts if not isinstance(part, str))

    def describe(self) -> str:
        where = f" (built at {self.where.short()})" if self.where is not None else ""
        return f"text made from a tensor's values{where}" if self.unknown() else \
            f"text made from symbolic sizes{where}"

    def is_constant(self) -> bool:
        return not self.unknown()

    def as_constant(self) -> str:
        if self.unknown():
            raise graph_break("UB105", f"{self.describe()} is used: eager's text shows the "
                              "tensor's values, known only at run time",
                              frames=self.output.user_frames(),
                              details="Formatting a tensor into a string is fine while nothing "
                              "reads the string (an error message for a check that holds); "
                              "reading it is a decision on tensor data.",
                              hint="Format sizes or constants only, or keep the value as a "
                              "tensor.")
        if self.text is None:
            with self.output.leaf_errors():
                self.text = "".join(part if isinstance(part, str) else
                                    _format(_value(part[0]), *part[1:])
                                    for part in self.parts)
        return self.text

    def unwrap(self, tx):
        return self.as_constant()

    def truth(self, tx) -> bool:
        return bool(self.as_constant())

    def items(self, tx) -> list:
        return ConstantVariable(self.as_constant()).items(tx)

    def length(self, tx):
        return len(self.as_constant())

    def getattr(self, tx, name: str) -> VariableTracker:
        return ConstantVariable(self.as_constant()).getattr(tx, name)


def _unknown(value) -> bool:
    if isinstance(value, FormattedTextVariable):
        return value.unknown()
    return any(isinstance(leaf, torch.Tensor) for leaf in _leaves(value))


def _value(value):
    """The Python value of a part: its symbolic sizes made concrete, nested text computed."""
    if isinstance(value, FormattedTextVariable):
        return value.as_constant()
    return pytree.tree_map(_concrete, value)


def _format(raw, convert, spec: str) -> str:
    return format(convert(raw) if convert else raw, spec)


def format_text(tx, value: VariableTracker, convert, spec: str) -> VariableTracker:
    """``format(convert(value), spec)`` (an f-string's ``{value!r:spec}``, ``str(value)``...):
    a constant when the value is one; otherwise text computed when used (module docstring)."""
    frames = tx.user_frames()
    where = frames[-1] if frames else None
    if isinstance(value, FormattedTextVariable):
        return FormattedTextVariable(((value, convert, spec),), tx.output, where)
    if value.is_constant():
        return ConstantVariable(_format(value.as_constant(), convert, spec))
    with tx.output.leaf_errors():
        raw = value.unwrap(tx)
    if not any(isinstance(leaf, (torch.Tensor, *(s for s, _ in _SYMBOLS)))
               for leaf in _leaves(raw)):
        return ConstantVariable(_format(raw, convert, spec))
    return FormattedTextVariable(((raw, convert, spec),), tx.output, where)


def join_text(tx, parts: list) -> VariableTracker:
    """``"".join(parts)`` of an f-string's pieces (``BUILD_STRING``): text computed when used
    if a piece is."""
    if not any(isinstance(p, FormattedTextVariable) for p in parts):
        return ConstantVariable("".join(p.as_constant() for p in parts))
    pieces = []
    for part in parts:
        pieces.extend(part.parts if isinstance(part, FormattedTextVariable)
                      else (part.as_constant(),))
    frames = tx.user_frames()
    return FormattedTextVariable(tuple(pieces), tx.output, frames[-1] if frames else None)
