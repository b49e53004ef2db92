"""Real values beside the meta ones, for "find them all" mode.

When a trace should report every graph break instead of stopping at the first, the frontend
needs to know which way the example inputs go at each break (which branch ``if x.sum() > 0``
takes, what ``.tolist()`` returns). The shadow keeps, for every tensor the recorder tracks, the
real tensor the example inputs produce: each recorded op is also run on real tensors (clones of
the inputs and of the model's state, so nothing the user owns is changed). Data-dependent
symbols (``.item()``, ``nonzero()`` counts) get their real values the same way.

The shadow only answers questions; it never changes what is recorded.
"""
from __future__ import annotations

import sympy
import torch
from torch.utils import _pytree as pytree

__all__ = ["Shadow"]


class Shadow:
    """real: id(meta tensor) -> real tensor; symbols: unbacked symbol -> real value;
    broken: set when a real computation failed (answers are then unavailable)."""

    def __init__(self):
        self.real: dict[int, torch.Tensor] = {}
        self.symbols: dict[sympy.Symbol, object] = {}
        self.broken = False
        self._alive: list = []

    def set(self, meta: torch.Tensor, real: torch.Tensor) -> None:
        self.real[id(meta)] = real
        self._alive.append(meta)

    def value_of(self, meta: torch.Tensor) -> torch.Tensor | None:
        return None if self.broken else self.real.get(id(meta))

    def concrete(self, value):
        """A SymInt/SymFloat/SymBool's real value (None when unknown)."""
        expr = value.node.expr
        values = {s: self.symbols[s] for s in expr.free_symbols if s in self.symbols}
        hint = getattr(value.node, "hint", None)
        if len(values) < len(expr.free_symbols):
            return hint
        result = expr.xreplace({s: sympy.sympify(v) for s, v in values.items()})
        return bool(result) if result in (sympy.true, sympy.false) else (
            int(result) if result.is_Integer else float(result))

    def run(self, func, args, kwargs, out) -> None:
        """Run ``func`` on the real values of its arguments; pair its outputs with ``out``."""
        if self.broken:
            return
        try:
            real_args, real_kwargs = pytree.tree_map(self._to_real, (tuple(args), dict(kwargs)))
            real_out = func(*real_args, **real_kwargs)
        except Exception:  # the answers after this point would be guesses: stop answering
            self.broken = True
            return
        self.pair(out, real_out)

    def pair(self, out, real_out) -> None:
        metas, _ = pytree.tree_flatten(out)
        reals, _ = pytree.tree_flatten(real_out)
        for meta, real in zip(metas, reals):
            if isinstance(meta, torch.Tensor) and isinstance(real, torch.Tensor):
                self.set(meta, real)
                self._learn_sizes(meta, real)
            elif isinstance(meta, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                self._learn(meta, real)

    def _learn_sizes(self, meta, real) -> None:
        for size, real_size in zip(meta.shape, real.shape):
            if isinstance(size, torch.SymInt):
                self._learn(size, real_size)

    def _learn(self, value, real) -> None:
        expr = value.node.expr
        if isinstance(expr, sympy.Symbol) and expr not in self.symbols:
            self.symbols[expr] = real.item() if isinstance(real, torch.Tensor) else real

    def _to_real(self, value):
        if isinstance(value, torch.Tensor):
            if value.device.type != "meta":
                return value  # a lifted constant is its own real value
            real = self.real.get(id(value))
            if real is None:
                raise LookupError("no real value")
            return real
        if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
            concrete = self.concrete(value)
            if concrete is None:
                raise LookupError("no real value")
            return concrete
        if isinstance(value, torch.device) and value.type == "meta":
            return torch.device("cpu")
        return value
