"""Render a :class:`unbroken.symbolic.fixes.Fix` as a ``dynamic_shapes`` spec: both the
object (torch's ``Dim``s, to export again with) and the Python code to paste; and render the
``ConstraintViolationError`` that shows the violated guards with that fix.

The spec covers every top-level argument of ``forward`` by name: tensors get
``{dim: Dim or derived Dim}`` (static dims are left out), other arguments ``None``; containers
of tensors (lists, tuples, dicts, registered pytree nodes) get the same structure, a list of
child specs for containers other than dicts and tuples. A fix that involves ``*args``, or a
dim of several symbols (a ``Dim`` is derived from one root), is not rendered (returns None).
"""
from __future__ import annotations

import keyword
import re
from dataclasses import dataclass

import sympy
import torch.utils._pytree as pytree
from torch.export import Dim

from ..symbolic.diagnostics import ConstraintViolationError, ViolatedGuard

__all__ = ["TensorDims", "constraint_error", "render_fix"]


@dataclass(frozen=True, slots=True)
class TensorDims:
    """The dims of one tensor inside a container argument (ints and sympy expressions); the
    trace puts one in place of each tensor of a nested ``top_dims`` entry."""

    dims: tuple


class _Unrenderable(Exception):
    """A dim under the fix is an expression of several symbols: no ``Dim`` states it."""


def render_fix(fix, top_dims: dict, env):
    """``(spec, code)`` for ``fix`` over the arguments ``top_dims`` (see
    ``exporter.trace.Trace``), or None when it cannot be written as a ``dynamic_shapes``
    dict."""
    names = _Names(fix, env)
    spec, entries = {}, {}
    for arg, dims in top_dims.items():
        try:
            spec[arg], entries[arg] = _value(dims, fix, names)
        except _Unrenderable:
            return None
    if not all(a.isidentifier() for a in spec):
        return None  # *args positions have no parameter name to key a dict by
    return spec, _code(names, entries)


def _value(dims, fix, names):
    """(spec, code) for one argument: a dims tuple, None, or a container holding
    :class:`TensorDims`; ``(None, "None")`` when nothing in it is dynamic."""
    if dims is None:
        return None, "None"
    if isinstance(dims, TensorDims):
        dims = dims.dims
    elif not (isinstance(dims, tuple) and all(isinstance(d, (int, sympy.Basic)) for d in dims)):
        return _container(dims, fix, names)
    per_dim, text = {}, {}
    for index, expr in enumerate(dims):
        if isinstance(expr, int):
            continue
        expr = sympy.expand(fix.apply(expr))
        if len(expr.free_symbols) > 1:
            raise _Unrenderable(expr)
        rendered = _dim(expr, names)
        if rendered is not None:
            per_dim[index], text[index] = rendered
    if not per_dim:
        return None, "None"
    return per_dim, "{" + ", ".join(f"{i}: {t}" for i, t in text.items()) + "}"


def _container(value, fix, names):
    if isinstance(value, dict):
        parts = {k: _value(v, fix, names) for k, v in value.items()}
        if all(p[0] is None for p in parts.values()):
            return None, "None"
        return ({k: p[0] for k, p in parts.items()},
                "{" + ", ".join(f"{k!r}: {p[1]}" for k, p in parts.items()) + "}")
    children = value if type(value) in (list, tuple) else pytree.tree_flatten(
        value, is_leaf=lambda x: isinstance(x, TensorDims))[0] if _is_node(value) else None
    if children is None:
        return None, "None"  # a constant leaf (int, str, ...)
    parts = [_value(c, fix, names) for c in children]
    if all(p[0] is None for p in parts):
        return None, "None"
    if type(value) is tuple:
        return (tuple(p[0] for p in parts),
                "(" + ", ".join(p[1] for p in parts) + ("," if len(parts) == 1 else "") + ")")
    return [p[0] for p in parts], "[" + ", ".join(p[1] for p in parts) + "]"


def _is_node(value) -> bool:
    return not pytree.tree_is_leaf(value) and not isinstance(value, TensorDims)


def _dim(expr, names):
    """(Dim object, code) for a dim expression (of at most one symbol) under the fix; None
    when static."""
    if expr.is_Integer:
        return None
    (root,) = expr.free_symbols
    lower, upper = names.fix.ranges.get(root, (2, None))
    if lower == upper:  # one value left: the dim is static (a Dim cannot have min == max)
        return None
    k, m = int(expr.coeff(root, 1)), int(sympy.expand(expr - expr.coeff(root, 1) * root))
    dim, name = names.dim(root)
    value, text = dim, name
    if k != 1:
        value, text = k * value, f"{k} * {text}"
    if m:
        value, text = value + m, f"{text} {'+' if m > 0 else '-'} {abs(m)}"
    return value, text


class _Names:
    """One ``Dim`` per remaining root symbol, named after the user's Dim or the dim's source."""

    def __init__(self, fix, env):
        self.fix, self.env = fix, env
        self.dims: dict = {}
        self.used: set[str] = set()

    def dim(self, symbol):
        if symbol not in self.dims:
            name = self._name(symbol)
            lower, upper = self.fix.ranges.get(symbol, (2, None))
            kwargs = {"min": lower} | ({"max": upper} if upper is not None else {})
            self.dims[symbol] = (Dim(name, **kwargs), name, lower, upper)
        dim, name, _, _ = self.dims[symbol]
        return dim, name

    def _name(self, symbol) -> str:
        base = self._base(symbol)
        name, i = base, 2
        while name in self.used or keyword.iskeyword(name):
            name, i = f"{base}_{i}", i + 1
        self.used.add(name)
        return name

    def _base(self, symbol) -> str:
        info = self.env.symbols.get(symbol)
        if info is not None:
            return info.name or _identifier(self.env.source_of(symbol))
        dependent = next((d for d, e in self.fix.derived.items() if symbol in e.free_symbols),
                         None)  # a new root: named after the dim it divides
        return "_" + (self._base(dependent) if dependent is not None else "d")

    def definitions(self) -> list[str]:
        lines = []
        for _, name, lower, upper in self.dims.values():
            bounds = f", min={lower}" + (f", max={upper}" if upper is not None else "")
            lines.append(f'{name} = Dim("{name}"{bounds})')
        return lines


def _identifier(source: str) -> str:
    text = re.sub(r"\.shape\[(\d+)\]", r"_dim\1", source)
    text = re.sub(r"[^0-9a-zA-Z_]", "_", text).strip("_") or "dim"
    return text if not text[0].isdigit() else f"d_{text}"


def _code(names, entries) -> str:
    body = [f'    "{arg}": {text},' for arg, text in entries.items()]
    return "\n".join(["from torch.export import Dim", "", *names.definitions(),
                      "dynamic_shapes = {", *body, "}"])


def constraint_error(env, violations, suggestion=None) -> ConstraintViolationError:
    """The error for guards the spec does not imply: each violated guard once, in the user's
    terms (``x.shape[0] == 4``), with a counterexample and the line that made it, then the
    suggested fix (``suggestion``: (notes, code, spec) from :func:`render_fix`, verified) or a
    generic hint. The violations and the verified spec are also carried as data
    (``err.violations``, ``err.suggested_dynamic_shapes``) for tools."""
    lines, seen = [], set()
    for violation in violations:
        guard = violation.guard
        if guard.as_fact() in seen:
            continue
        seen.add(guard.as_fact())
        last = guard.frames[-1] if guard.frames else None
        where = f"  at {last.short()}: {last.source}" if last else ""
        example = ""
        if violation.counterexample:
            values = ", ".join(f"{env.source_of(s)} = {v}"
                               for s, v in violation.counterexample.items())
            example = f"  (fails for {values})"
        lines.append(f"- {guard.describe(env.source_of)}{example}{where}")
    first = violations[0].guard
    details = "Guards not implied by the spec:\n" + "\n".join(lines)
    if suggestion is not None:
        notes, code, spec = suggestion
        details += ("\n\nSuggested fix (proven for every admitted size, and verified by "
                    "exporting again with it):\n" + "\n".join(f"- {n}" for n in notes)
                    + "\n\n" + code)
        hint = "Use the suggested dynamic_shapes above."
    else:
        hint = ("Narrow the Dim ranges (min/max), declare the related dims equal or derived, "
                "or mark the dim static, so that every guard above holds for all admitted "
                "sizes.")
    return ConstraintViolationError(
        "the model's code constrains dimensions that dynamic_shapes declares dynamic",
        frames=first.frames, details=details, hint=hint,
        violations=_violated_guards(env, violations),
        suggested_dynamic_shapes=spec if suggestion else None,
        suggested_code=code if suggestion else "")


def _violated_guards(env, violations) -> list[ViolatedGuard]:
    """The violations as data (``ConstraintViolationError.violations``), one per guard."""
    guards, seen = [], set()
    for v in violations:
        if v.guard.as_fact() not in seen:
            seen.add(v.guard.as_fact())
            example = {env.source_of(s): int(n) for s, n in (v.counterexample or {}).items()}
            guards.append(ViolatedGuard(v.guard.describe(env.source_of), example,
                                        tuple(v.guard.frames)))
    return guards
