"""Guards: the decisions tracing made about symbolic sizes, with their provenance.

A guard is born when a meta kernel, a decomposition or the user's code asks a question about
a symbolic value (``x.shape[0] == 100 ?``) that value ranges cannot settle. The answer is
taken from the example inputs (the *hints*) and recorded here; the solver later checks that
the answer holds for every input the ``dynamic_shapes`` spec admits.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Literal

import sympy
from sympy.printing.precedence import PRECEDENCE
from sympy.printing.str import StrPrinter

from .diagnostics import UserFrame

__all__ = ["Guard", "GuardKind", "render_expr"]

GuardKind = Literal["guard", "expect_true", "size_oblivious"]


@dataclass(frozen=True, slots=True)
class Guard:
    """One recorded decision.

    expr:   the sympy boolean that was asked, e.g. ``Eq(s0, 100)`` (never pre-negated).
    value:  the answer at the example inputs (``True``/``False``); the graph is only valid
            where ``expr`` keeps this value.
    frames: the user's stack when the question was asked (innermost last; may be empty).
    op:     the ATen op being traced when the question was asked (e.g. ``aten.view.default``),
            or None outside any op (user code comparing sizes directly).
    kind:   ``"guard"`` (an ordinary decision), ``"expect_true"`` (a ``torch._check`` in user
            or library code: an assumption turned into a runtime assert, usable as a fact),
            or ``"size_oblivious"`` (a decision made treating unbacked sizes as >= 2).
    """

    expr: sympy.Basic
    value: bool
    frames: tuple[UserFrame, ...] = ()
    op: str | None = None
    kind: GuardKind = "guard"

    def as_fact(self) -> sympy.Basic:
        """The boolean that must hold for the graph to be valid: ``expr`` or ``Not(expr)``."""
        return self.expr if self.value else _negate(self.expr)

    def describe(self, sources: Mapping[sympy.Symbol, str] | Callable | None = None) -> str:
        """Readable text of the fact, e.g. ``x.shape[0] == 100``.

        ``sources`` maps symbols to descriptions (or is a function symbol -> description);
        without it symbol names are printed.
        """
        return render_expr(self.as_fact(), sources)

    @property
    def location(self) -> UserFrame | None:
        """The innermost user frame, or None."""
        return self.frames[-1] if self.frames else None


_REL_TEXT = {
    sympy.Eq: "==",
    sympy.Ne: "!=",
    sympy.Lt: "<",
    sympy.Le: "<=",
    sympy.Gt: ">",
    sympy.Ge: ">=",
}
_NEGATED = {sympy.Eq: sympy.Ne, sympy.Ne: sympy.Eq, sympy.Lt: sympy.Ge, sympy.Le: sympy.Gt,
            sympy.Gt: sympy.Le, sympy.Ge: sympy.Lt}


def _negate(expr):
    """``Not(expr)`` written as the opposite relation when expr is a relation."""
    cls = _NEGATED.get(type(expr))
    if cls is not None:
        return cls(*expr.args, evaluate=False)
    return sympy.Not(expr)


def render_expr(expr, sources=None) -> str:
    """Python-like text of a sympy expression with symbols replaced by their sources."""
    if isinstance(expr, sympy.Not):
        return f"not ({render_expr(expr.args[0], sources)})"
    if isinstance(expr, (sympy.And, sympy.Or)):
        joiner = " and " if isinstance(expr, sympy.And) else " or "
        return joiner.join(f"({render_expr(a, sources)})" for a in expr.args)
    op = _REL_TEXT.get(type(expr))
    if op is not None:
        lhs, rhs = expr.args
        return f"{_render_term(lhs, sources)} {op} {_render_term(rhs, sources)}"
    return _render_term(expr, sources)


class _SourcePrinter(StrPrinter):
    """Prints ``%`` for modulo and each symbol as its source (``x.shape[0]``) when known."""

    def __init__(self, lookup):
        super().__init__()
        self._lookup = lookup

    def _print_Symbol(self, expr):
        described = self._lookup(expr) if self._lookup else None
        return described or expr.name

    def _print_PythonMod(self, expr):
        a, b = (self.parenthesize(x, PRECEDENCE["Atom"] - 0.5) for x in expr.args)
        return f"({a} % {b})"

    _print_Mod = _print_PythonMod


def _render_term(expr, sources) -> str:
    lookup = None
    if sources:
        lookup = sources if callable(sources) else sources.get
    return _SourcePrinter(lookup).doprint(expr)
