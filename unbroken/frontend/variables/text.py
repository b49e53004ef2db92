"""Text built from values the trace does not know yet: an f-string, ``str()``, ``repr()``,
``format()`` or ``str.format``/``format_map`` of a tensor or of a symbolic size.

Building a string has no effect of its own: eager code often formats values into an error
message that only a failed check ever reads (``f"tokens: {n_tokens}"`` passed to a check that
holds). So the text is computed only when a use needs it:

- symbolic sizes are made concrete at the first use (each records a guard that the size equals
  its example value, at the line of that use); text nothing reads specializes nothing;
- a tensor's text shows its values, known only at run time: the string may be built, stored
  and passed around, and any use of its content is refused (UB105) at the line of the use.

What eager's formatting raises whatever the data is raised where the text is built (a spec
the type of a 0-d tensor's item rejects, a spec on a tensor of more dims, a missing field),
checked by formatting stand-ins of the same kinds; a failure that depends on the value itself
(``{:c}`` of an item out of range) is not foreseen. Text made of constants only stays a plain
constant (``ConstantVariable``).
"""
from __future__ import annotations

import string
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from ...symbolic.diagnostics.catalogue import graph_break
from .base import VariableTracker

__all__ = ["FormattedTextVariable", "format_call", "format_text", "is_str_format", "join_text"]

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
        if self.text is not None:
            return self.text
        if self.unknown():
            error = graph_break("UB105", f"{self.describe()} is used: eager's text shows the "
                                "tensor's values, known only at run time",
                                frames=self.output.user_frames(),
                                details="Formatting a tensor into a string is fine while "
                                "nothing reads the string (an error message for a check that "
                                "holds); reading it is a decision on tensor data.",
                                hint="Format sizes or constants only, or keep the value as a "
                                "tensor.")
            real = self._text(self._real_value)  # "find them all" mode: go on with it
            if real is None or not self.output.recover(error):
                raise error
            self.text = real
            return real
        with self.output.leaf_errors():
            self.text = self._text(_value)
        return self.text

    def _text(self, value_of):
        """The text, each part's value given by ``value_of`` (None: a value is unknown)."""
        pieces = []
        for part in self.parts:
            value = part if isinstance(part, str) else value_of(part[0])
            if value is None and not isinstance(part, str):
                return None
            pieces.append(value if isinstance(part, str) else _format(value, *part[1:]))
        return "".join(pieces)

    def _real_value(self, value):
        """A part's value as the example inputs make it ("find them all" mode), or None."""
        if isinstance(value, FormattedTextVariable):
            return value.as_constant() if not value.unknown() else \
                value._text(value._real_value)
        leaves, spec = pytree.tree_flatten(value)
        real = [self.output.real_value(leaf) if isinstance(leaf, torch.Tensor) else leaf
                for leaf in leaves]
        if any(r is None and isinstance(leaf, torch.Tensor) for r, leaf in zip(real, leaves)):
            return None
        return pytree.tree_map(_concrete, pytree.tree_unflatten(real, spec))

    def unwrap(self, tx):
        return self.as_constant()

    def truth(self, tx) -> bool:
        return bool(self.as_constant())

    def items(self, tx) -> list:
        return tx.wrap(self.as_constant()).items(tx)

    def length(self, tx):
        return len(self.as_constant())

    def getattr(self, tx, name: str) -> VariableTracker:
        return tx.wrap(self.as_constant()).getattr(tx, name)


def _unknown(value) -> bool:
    if isinstance(value, FormattedTextVariable):
        return value.unknown()
    return any(isinstance(leaf, torch.Tensor) for leaf in _leaves(value))


def _pending(raw) -> bool:
    """True when ``raw`` holds a tensor or a symbolic size (its text is not known yet)."""
    return any(isinstance(leaf, (torch.Tensor, *(s for s, _ in _SYMBOLS))) for leaf in _leaves(raw))


def _value(value):
    """The Python value of a part: its symbolic sizes made concrete, nested text computed."""
    if isinstance(value, FormattedTextVariable):
        return value.as_constant()
    return pytree.tree_map(_concrete, value)


def _format(raw, convert, spec: str) -> str:
    return format(convert(raw) if convert else raw, spec)


class Tensor:
    """Stands for a tensor of more than zero dims when formatting is checked at build time:
    ``Tensor.__format__`` is ``object.__format__`` then (a format spec raises eager's
    TypeError, "unsupported format string passed to Tensor.__format__")."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "tensor(...)"


def _stand_in(value):
    """A value that formats as ``value`` would, or raises what it would raise, whatever the
    data: a 0-d tensor formats as its item (a Python number of its dtype's kind), a tensor of
    more dims as :class:`Tensor`, a symbolic size as a number, text as a str."""
    def leaf(v):
        if isinstance(v, torch.Tensor):
            if v.dim() != 0:
                return Tensor()
            dtype = v.dtype
            return 0j if dtype.is_complex else 0.0 if dtype.is_floating_point else \
                False if dtype is torch.bool else 0
        if isinstance(v, torch.Size):
            return torch.Size([e if isinstance(e, int) else 0 for e in v])
        return next((py(0) for sym, py in _SYMBOLS if isinstance(v, sym)), v)

    if isinstance(value, FormattedTextVariable):
        return ""
    return pytree.tree_map(leaf, value)


def _checked(tx, render, value) -> None:
    """Raise now what eager raises when it formats (a spec the value's type rejects, a
    missing field), whatever the data: ``render`` applied to stand-ins."""
    try:
        render(_stand_in(value))
    except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
        raise tx.user_exception(exc) from None


def _where(tx):
    frames = tx.user_frames()
    return frames[-1] if frames else None


def format_text(tx, value: VariableTracker, convert, spec: str) -> VariableTracker:
    """``format(convert(value), spec)`` (an f-string's ``{value!r:spec}``, ``str(value)``...):
    a constant when the value is one; otherwise text computed when used (module docstring).
    What eager's formatting raises whatever the data is raised now."""
    if isinstance(value, FormattedTextVariable):
        _checked(tx, lambda v: _format(v, convert, spec), value)
        return FormattedTextVariable(((value, convert, spec),), tx.output, _where(tx))
    if value.is_constant():
        return tx.wrap(_format(value.as_constant(), convert, spec))
    with tx.output.leaf_errors():
        raw = value.unwrap(tx)
    if not _pending(raw):
        return tx.wrap(_format(raw, convert, spec))
    _checked(tx, lambda v: _format(v, convert, spec), raw)
    return FormattedTextVariable(((raw, convert, spec),), tx.output, _where(tx))


def join_text(tx, parts: list) -> VariableTracker:
    """``"".join(parts)`` of an f-string's pieces (``BUILD_STRING``): text computed when used
    if a piece is."""
    if not any(isinstance(p, FormattedTextVariable) for p in parts):
        return tx.wrap("".join(p.as_constant() for p in parts))
    pieces = []
    for part in parts:
        pieces.extend(part.parts if isinstance(part, FormattedTextVariable)
                      else (part.as_constant(),))
    return FormattedTextVariable(tuple(pieces), tx.output, _where(tx))


@dataclass(frozen=True, slots=True)
class _Template:
    """``template.format(*args, **kwargs)`` (``format_map``: ``template.format_map(args[0])``)
    as a part's conversion: applied to ``(args, kwargs)``."""

    template: str
    mapping: bool

    def __call__(self, raw) -> str:
        args, kwargs = raw
        if self.mapping:
            return self.template.format_map(*args)
        return self.template.format(*args, **kwargs)


def is_str_format(fn) -> bool:
    """True for ``str.format``/``str.format_map``, bound to a str or not."""
    receiver = getattr(fn, "__self__", None)
    name = getattr(fn, "__name__", None)
    return name in ("format", "format_map") and (
        isinstance(receiver, str) or fn in (str.format, str.format_map))


def format_call(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """``template.format(...)`` / ``format_map`` (``fn``: the bound or unbound method): text
    computed when used if an argument holds a tensor or a symbolic size."""
    if not isinstance(getattr(fn, "__self__", None), str):
        if not args or not args[0].is_constant():
            raise graph_break("UB117", "str.format called on a value that is not a str",
                              frames=tx.user_frames())
        fn, args = getattr(args[0].as_constant(), fn.__name__), args[1:]
    render = _Template(fn.__self__, fn.__name__ == "format_map")
    with tx.output.leaf_errors():
        raw = ([a.unwrap(tx) for a in args], {k: v.unwrap(tx) for k, v in kwargs.items()})
    if not _pending(raw):
        try:
            return tx.wrap(render(raw))
        except (TypeError, ValueError, KeyError, IndexError, AttributeError) as exc:
            raise tx.user_exception(exc) from None
    if any(field and ("." in field or "[" in field)
           for _, field, _, _ in string.Formatter().parse(render.template)):
        raise graph_break("UB117", f"`{render.template!r}.format(...)` reads an attribute or "
                          "an item of a tensor or a symbolic size inside the template",
                          frames=tx.user_frames(),
                          details="Read it before formatting: `'{}'.format(x.shape)`.")
    _checked(tx, render, raw)
    return FormattedTextVariable(((raw, render, ""),), tx.output, _where(tx))
