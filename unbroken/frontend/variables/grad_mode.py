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

import torch

from ...symbolic.diagnostics.catalogue import graph_break
from ..protocol import CallbackVariable
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable

__all__ = ["GradModeVariable", "GRAD_MODE_CLASSES"]

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

    __slots__ = ("cls", "enabled", "token")

    def __init__(self, cls, enabled: bool, token=None, source=None):
        super().__init__(source)
        self.cls, self.enabled, self.token = cls, enabled, token

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
        raise AttributeMissing(name)

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
