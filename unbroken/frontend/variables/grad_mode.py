"""Grad-mode context managers inside ``forward``: ``torch.no_grad``, ``torch.enable_grad``,
``torch.set_grad_enabled`` and ``torch.inference_mode``.

They are never entered natively (a native ``inference_mode`` guard left open by a failing
trace would break every later eager op of the process). The trace keeps its own grad mode
(``TraceContext.grad_enabled``) and records each region in the graph (see
``GraphBuilder.record_grad_mode``), so that ``ep.module()`` computes ``requires_grad`` and
gradients as eager does. ``inference_mode`` regions are recorded as ``no_grad`` regions: the
program computes the same values, and its outputs are ordinary tensors.
"""
from __future__ import annotations

import inspect
import types

import torch

from ...symbolic.diagnostics.catalogue import graph_break
from ..protocol import CallbackVariable
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable

__all__ = ["GRAD_MODE_CLASSES", "GRAD_MODE_SPECIALS", "GradModeSpecialVariable",
           "GradModeVariable"]

GRAD_MODE_CLASSES = (torch.no_grad, torch.enable_grad, torch.set_grad_enabled,
                     torch.inference_mode)


def _mode_inside(cls, args) -> bool:
    """The grad mode inside a region of ``cls`` built with ``args`` (constants)."""
    if cls is torch.no_grad:
        return False
    if cls is torch.enable_grad:
        return True
    if cls is torch.set_grad_enabled:
        return bool(args[0])
    return not (args[0] if args else True)  # inference_mode(mode=True) disables grad


class GradModeVariable(VariableTracker):
    """One grad-mode context manager.

    cls: its class (one of ``GRAD_MODE_CLASSES``); enabled: the grad mode inside the region;
    token: the open region (``TraceContext.set_grad_mode``'s result) while it is entered, or
    from construction on for ``set_grad_enabled``, which applies its mode when called.
    """

    __slots__ = ("cls", "enabled", "token", "exits")

    def __init__(self, cls, enabled: bool, token=None, source=None):
        super().__init__(source)
        self.cls, self.enabled, self.token = cls, enabled, token
        self.exits: list = []  # regions opened by its ``__enter__`` called as a method

    @classmethod
    def construct(cls, tx, klass, args, kwargs) -> GradModeVariable:
        """``torch.no_grad()`` & co. called in ``forward``."""
        values = [a.as_constant() for a in args] + [v.as_constant() for v in kwargs.values()]
        enabled = _mode_inside(klass, values)
        token = tx.output.set_grad_mode(enabled) if klass is torch.set_grad_enabled else None
        return cls(klass, enabled, token)

    @classmethod
    def from_instance(cls, value, source=None) -> GradModeVariable:
        """An instance made outside the trace (``@torch.no_grad()`` keeps one to clone)."""
        if isinstance(value, torch.set_grad_enabled):
            return cls(torch.set_grad_enabled, bool(value.mode), None, source)
        if isinstance(value, torch.inference_mode):
            return cls(torch.inference_mode, not value.mode, None, source)
        return cls(type(value), isinstance(value, torch.enable_grad), None, source)

    def python_type(self) -> type:
        return self.cls

    def describe(self) -> str:
        return f"the context manager `{self.cls.__name__}`"

    def enter(self, tx):
        """Open the region; returns (the exit callable to push, the value ``as`` binds)."""
        if self.token is None:
            inference = self.cls is torch.inference_mode and not self.enabled
            self.token = tx.output.set_grad_mode(self.enabled, inference=inference)
        token, self.token = self.token, None

        def exit_(tx, args):
            tx.output.restore_grad_mode(token)
            return ConstantVariable(False)

        return CallbackVariable(exit_, f"`{self.cls.__name__}.__exit__`"), ConstantVariable(None)

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "clone":  # what torch's @no_grad() decorator calls before each `with`
            return CallbackVariable(
                lambda tx, args: GradModeVariable(self.cls, self.enabled), "clone")
        if name in ("__enter__", "__exit__"):
            return CallbackVariable(lambda tx, args: self.special(tx, name, args),
                                    f"`{self.cls.__name__}.{name}`")
        raise AttributeMissing(name)

    def special(self, tx, name: str, args: list) -> VariableTracker:
        """``__enter__``/``__exit__`` called as methods (``contextlib.ExitStack.enter_context``
        reads ``type(cm).__enter__`` and calls it): open the region, or close the last one
        opened so."""
        if name == "__enter__":
            if args:
                raise tx.user_exception(TypeError(
                    f"__enter__() takes 1 positional argument but {len(args) + 1} were given"))
            exit_, value = self.enter(tx)
            self.exits.append(exit_)
            return value
        if not self.exits:  # torch's own reads the mode its __enter__ saved: none here
            raise tx.user_exception(AttributeError(
                f"'{self.cls.__name__}' object has no attribute 'prev'"))
        return self.exits.pop().call(tx, list(args), {})

    def call(self, tx, args, kwargs):
        """``@torch.no_grad()`` (``enable_grad``, ``inference_mode``) on a function defined
        inside forward(): each call runs in a region of this mode, as torch's decorator runs
        it. ``set_grad_enabled`` (whose construction already switched the mode) and generator
        functions (torch re-enters the mode at each ``next``) are refused."""
        function = args[0] if len(args) == 1 and not kwargs else None
        code = getattr(function, "code", None) or getattr(getattr(function, "fn", None),
                                                          "__code__", None)
        if function is None or self.cls is torch.set_grad_enabled or code is None or \
                code.co_flags & inspect.CO_GENERATOR:
            raise graph_break("UB110", f"{self.describe()} used as a decorator inside "
                              "forward()", frames=tx.user_frames(),
                              details="Decorate the function where it is defined, or use "
                              "`with`.")
        return _InGradMode(self.cls, self.enabled, function)


class _InGradMode(VariableTracker):
    """A function decorated with a grad-mode class inside forward(): ``cls``/``enabled`` as
    in ``GradModeVariable``; ``function``: the tracker of the function it wraps."""

    __slots__ = ("cls", "enabled", "function")

    def __init__(self, cls, enabled: bool, function):
        super().__init__(None)
        self.cls, self.enabled, self.function = cls, enabled, function

    def describe(self) -> str:
        return f"{self.function.describe()} decorated with `{self.cls.__name__}`"

    def call(self, tx, args, kwargs):
        exit_, _ = GradModeVariable(self.cls, self.enabled).enter(tx)
        try:
            return self.function.call(tx, args, kwargs)
        finally:
            exit_.call(tx, [], {})


# The Python ``__enter__``/``__exit__`` of the grad-mode classes (function -> name): read
# from the class and called with a grad mode (``type(cm).__enter__(cm)``, as
# ``contextlib.ExitStack.enter_context`` does) they open and close the tracker's region
# instead of running torch's code, which would switch the process's mode.
GRAD_MODE_SPECIALS = {getattr(cls, name): name for cls in GRAD_MODE_CLASSES
                      for name in ("__enter__", "__exit__")
                      if isinstance(getattr(cls, name), types.FunctionType)}


class GradModeSpecialVariable(VariableTracker):
    """One of :data:`GRAD_MODE_SPECIALS` met as a value."""

    __slots__ = ("fn",)

    def __init__(self, fn, source=None):
        super().__init__(source)
        self.fn = fn

    def python_type(self) -> type:
        return types.FunctionType

    def describe(self) -> str:
        return f"`{self.fn.__qualname__}`"

    def call(self, tx, args, kwargs):
        receiver = args[0] if args else None
        if not isinstance(receiver, GradModeVariable) or kwargs:
            raise graph_break("UB108", f"{self.describe()} called on "
                              f"{receiver.describe() if receiver else 'nothing'}: only a "
                              "grad mode's own region is modelled", frames=tx.user_frames())
        return receiver.special(tx, GRAD_MODE_SPECIALS[self.fn], list(args[1:]))
