"""Native callables: Python-level callables implemented in C or outside the traced code,
passed through unchanged to leaf calls (``math.sqrt``, ``str.upper`` bound to a constant,
``torch.add``...). The families that give them a meaning live above (``functions``,
``builtins``); this module holds what constants and sizes need to expose their methods."""
from __future__ import annotations

import collections
import contextvars
import dataclasses
import importlib.util
import sys
import typing

import torch

from ...symbolic.diagnostics.catalogue import graph_break
from ...symbolic.functions import SYMBOLIC_MATH
from .base import AttributeMissing, VariableTracker
from .text import format_call, is_str_format

__all__ = ["CLASS_FACTORIES", "ClassFactoryVariable", "ImportModuleVariable",
           "NativeCallableVariable", "PureCallableVariable", "RefusedCallableVariable"]

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


class RefusedCallableVariable(NativeCallableVariable):
    """A native callable the trace cannot run (a C function or method it has no model of),
    met as a value. Read from a table, stored, compared or tested for truth it is what it
    is (``copy.copy`` looks the type up in a dict that maps ``bytearray`` to
    ``bytearray.copy``, wrapped with every other entry); called, or handed to native code,
    it is refused (``code``, ``reason``) at that line."""

    __slots__ = ("code", "reason")

    def __init__(self, fn, source, code: str, reason: str):
        super().__init__(fn, source)
        self.code, self.reason = code, reason

    def refusal(self, tx):
        return graph_break(self.code, self.reason, frames=tx.user_frames())

    def call(self, tx, args, kwargs) -> VariableTracker:
        raise self.refusal(tx)

    def unwrap(self, tx):
        raise self.refusal(tx)

    def truth(self, tx) -> bool:
        return True


class PureCallableVariable(NativeCallableVariable):
    """A side-effect-free native callable (a ``math`` function, a method of a str or int):
    called natively on the unwrapped arguments."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        fn = self.fn
        if is_str_format(fn):  # the text of a tensor is not the meta tensor's
            return format_call(tx, fn, args, kwargs)
        if fn in SYMBOLIC_MATH and any(isinstance(a.unwrap(tx), _SYMBOLIC_TYPES) for a in args):
            fn = SYMBOLIC_MATH[fn]  # keep the size symbolic instead of guarding on its value
        return tx.call_leaf(fn, args, kwargs)


class ClassFactoryVariable(NativeCallableVariable):
    """A function of the standard library that builds a class from a description
    (``collections.namedtuple``, ``typing.NamedTuple``, ``dataclasses.make_dataclass``): run
    natively when the description is constants, as eager runs it on each call; the class is
    a value of the trace (its instances are built as the program's own). Anything traced in
    the description (a tensor as a field default) is refused: the class would keep it."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        described = [*args, *kwargs.values()]
        if not all(a.is_constant() for a in described):
            traced = next(a for a in described if not a.is_constant())
            raise graph_break("UB108", f"{self.describe()} with {traced.describe()} in the "
                              "class it builds: only constants can be kept in a class made "
                              "during export", frames=tx.user_frames(),
                              hint="Build the class once, outside forward(), or give it "
                                   "constants only.")
        try:
            made = self.fn(*(a.as_constant() for a in args),
                           **{k: v.as_constant() for k, v in kwargs.items()})
        except (TypeError, ValueError) as error:  # the program's own mistake, at its line
            raise tx.user_exception(error) from None
        return tx.wrap(made)


CLASS_FACTORIES = frozenset([collections.namedtuple, typing.NamedTuple,
                             dataclasses.make_dataclass])


def _is_missing(name: str) -> bool:
    """No module ``name`` exists, its parent package being imported (finding out imports
    nothing then)."""
    parent = name.rpartition(".")[0]
    if parent and parent not in sys.modules:
        return False
    try:
        return importlib.util.find_spec(name) is None
    except ModuleNotFoundError:  # the parent is a module, not a package
        return True
    except (ImportError, ValueError):
        return False


class ContextVarWriteVariable(NativeCallableVariable):
    """``var.set(value)`` / ``var.reset(token)`` of a ``contextvars.ContextVar`` from outside
    forward() (torch 2.15's ``sdpa_kernel`` keeps a flag in one): run natively, as eager does,
    and kept in ``TraceContext.context_var_tokens`` until reset. forward() may not return with
    one still set (``check_context_vars_restored``); a trace that stops leaves none set
    (``exit_native_contexts``). The value set is a constant: the code that reads it runs at
    export time."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        name = self.fn.__name__
        var = getattr(self.fn, "__self__", None)
        if type(var) is not contextvars.ContextVar:  # ContextVar.set, unbound: var first
            var, args = (args[0].unwrap(tx), args[1:]) if args else (None, args)
            if type(var) is not contextvars.ContextVar:
                raise tx.user_exception(TypeError(
                    f"descriptor '{name}' for 'ContextVar' objects needs an argument"))
        if kwargs or len(args) != 1:
            raise tx.user_exception(TypeError(f"{name}() takes exactly one argument"))
        value = args[0].unwrap(tx)
        tokens = tx.output.context_var_tokens
        if name == "set":
            if not args[0].is_constant():
                raise graph_break("UB107", f"`ContextVar.set` of `{var.name}` to "
                                  f"{args[0].describe()}: only a constant can be set inside "
                                  "forward()", frames=tx.user_frames())
            token = var.set(value)
            tokens.append((var, token))
            return tx.wrap(token)
        var.reset(value)  # a token of another variable, or used twice: its own error
        tokens[:] = [(v, t) for v, t in tokens if t is not value]
        return tx.wrap(None)


class ImportModuleVariable(NativeCallableVariable):
    """``importlib.import_module(name)``: a lookup in ``sys.modules`` when the module is
    already imported (library code resolving a class by its dotted path), eager's
    ModuleNotFoundError when there is no such module; importing a new one runs its code, a
    side effect on the process (refused, UB111)."""

    __slots__ = ()

    def call(self, tx, args, kwargs) -> VariableTracker:
        values = [a.as_constant() for a in args]
        package = kwargs["package"].as_constant() if "package" in kwargs else \
            (values[1] if len(values) > 1 else None)
        name = importlib.util.resolve_name(values[0], package) if values[0].startswith(".") \
            else values[0]
        if name not in sys.modules and _is_missing(name):  # eager raises it too, to be caught
            raise tx.user_exception(ModuleNotFoundError(f"No module named '{name}'", name=name))
        if name not in sys.modules:
            raise graph_break("UB111", f"`importlib.import_module({values[0]!r})` imports a module "
                              "that is not imported yet", frames=tx.user_frames(),
                              details="Import it at the top of your module.")
        return tx.wrap(sys.modules[name])
