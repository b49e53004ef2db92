"""Native callables: Python-level callables implemented in C or outside the traced code,
passed through unchanged to leaf calls (``math.sqrt``, ``str.upper`` bound to a constant,
``torch.add``...). The families that give them a meaning live above (``functions``,
``builtins``); this module holds what constants and sizes need to expose their methods."""
from __future__ import annotations

import math

import torch

from .base import AttributeMissing, VariableTracker

__all__ = ["NativeCallableVariable", "PureCallableVariable"]

# math functions with a symbolic counterpart that the recorder can put in a graph.
_SYMBOLIC_MATH = {math.sqrt: torch._sym_sqrt}
_SYMBOLIC_TYPES = (torch.SymInt, torch.SymFloat, torch.SymBool)


class NativeCallableVariable(VariableTracker):
    """Base of the trackers for native callables. ``fn``: the callable itself; it is passed
    through unchanged to leaf calls, and its attributes are read natively."""

    __slots__ = ("fn",)

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self) -> type:
        return type(self.fn)

    def describe(self) -> str:
        return f"`{getattr(self.fn, '__qualname__', self.fn)}`"

    def unwrap(self, tx):
        return self.fn

    def getattr(self, tx, name):
        try:
            return tx.wrap(getattr(self.fn, name))
        except AttributeError:
            raise AttributeMissing(name) from None


class PureCallableVariable(NativeCallableVariable):
    """A side-effect-free native callable (a ``math`` function, a method of a str or int):
    called natively on the unwrapped arguments."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        fn = self.fn
        if fn in _SYMBOLIC_MATH and any(isinstance(a.unwrap(tx), _SYMBOLIC_TYPES) for a in args):
            fn = _SYMBOLIC_MATH[fn]  # keep the size symbolic instead of guarding on its value
        return tx.call_leaf(fn, args, kwargs)
