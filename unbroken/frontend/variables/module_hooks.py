"""Forward hooks and pre-hooks registered on modules inside forward().

Eager's ``module.register_forward_hook(hook)`` adds ``hook`` to the module's hook dict, and
every later call of the module runs it, in the same forward() too (transformers installs its
output-capturing hooks this way during the model's first call). In the trace the registration
goes to the overlay (``frontend.overlay``): the trace's later calls of the module run the
hooks eager would run, in eager's order, and the caller's model is never changed. The handle
it returns removes the hook from the overlay.

Eager keeps the hook after the call; the exported program is eager's first call from the
model as exported, so each call of the program starts without the hooks forward() registers.
When the registration is guarded by a flag on the model (transformers'
``_output_capturing_hooks_installed``), eager's later calls skip it and run the hooks the first
call installed: they compute what the first call computed (the ``StateWriteWarning`` about the
flag says only that the program does not keep the flag's change). A forward() that registers
hooks unconditionally stacks one more in eager at every call: its later calls differ from the
first, and the program computes the first.

A hook left registered on a module that is not the model's (an object that outlives
forward()) is refused like any other change of an outside object (UB107); removed through its
handle before forward() returns, it is fine.

What cannot be made equal to eager is refused (UB109): a hook that must run even when forward
raises (``always_call=True``), a hook on a module that only runs inside one of PyTorch's own
modules (whose native forward calls the real module, without the trace's hooks), and reading
a module's hook dicts after forward() changed its hooks.
"""
from __future__ import annotations

import inspect

import torch.nn as nn
from torch.utils.hooks import RemovableHandle

from ...symbolic.diagnostics.catalogue import graph_break
from ..overlay import TracedHook, refuse_in_branch
from ..protocol import CallbackVariable
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable

__all__ = ["HOOK_TABLES", "HookHandleVariable", "RegisterHookVariable", "REGISTER_METHODS",
           "call_hook", "module_hooks", "refuse_hook_read"]

# kind -> (the module's hook dict, the dict of the ids of hooks called with kwargs)
_KINDS = {"forward_pre": ("_forward_pre_hooks", "_forward_pre_hooks_with_kwargs"),
          "forward": ("_forward_hooks", "_forward_hooks_with_kwargs")}
REGISTER_METHODS = {"register_forward_pre_hook": "forward_pre",
                    "register_forward_hook": "forward"}
# the attributes of a module that hold its forward hooks (read: refused once the trace
# changed them, since the real dicts do not show the change)
HOOK_TABLES = frozenset({*_KINDS["forward_pre"], *_KINDS["forward"],
                         "_forward_hooks_always_called"})


def module_hooks(tx, module: nn.Module, kind: str) -> list[TracedHook]:
    """The ``kind`` hooks (``"forward"`` or ``"forward_pre"``) that a call of ``module`` runs
    now, in eager's order: the module's own, as the trace changed them."""
    traced = tx.output.overlay.hooks_of(module, kind)
    if traced is not None:
        return traced
    table, with_kwargs = _KINDS[kind]
    return [TracedHook(hook_id, hook, hook_id in getattr(module, with_kwargs))
            for hook_id, hook in getattr(module, table).items()]


def call_hook(tx, hook: TracedHook, args: list) -> VariableTracker:
    """Call one hook on trackers (a Python function is inlined)."""
    fn = hook.hook
    return fn.call(tx, list(args), {}) if isinstance(fn, VariableTracker) else \
        tx.wrap(fn).call(tx, list(args), {})


def refuse_hook_read(tx, module_var, name: str) -> None:
    """Refuse (UB109) reading a hook dict of a module whose hooks forward() changed."""
    if name in HOOK_TABLES and any(tx.output.overlay.hooks_of(module_var.module, kind)
                                   is not None for kind in _KINDS):
        raise graph_break("UB109", f"`{module_var.source.name()}.{name}` read after forward() "
                          "registered or removed a hook of it", frames=tx.user_frames(),
                          details="The hooks forward() registers are kept by the trace, not "
                          "in the module's own dicts: keep the handles, or the hooks, in "
                          "variables of your own.")


class RegisterHookVariable(VariableTracker):
    """``module.register_forward_hook`` / ``register_forward_pre_hook`` bound to a module.

    module_var: the module's tracker; kind: ``"forward"`` or ``"forward_pre"``;
    native_owner: the path of one of PyTorch's own modules that calls this module from its
    native forward (a hook there would never run in the trace), or None."""

    __slots__ = ("module_var", "kind", "native_owner")

    def __init__(self, module_var, kind: str, native_owner: str | None):
        super().__init__(None)
        self.module_var, self.kind, self.native_owner = module_var, kind, native_owner

    def describe(self) -> str:
        return f"`{self.module_var.source.name()}.register_{self.kind}_hook`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        module = self.module_var.module
        method = getattr(nn.Module, f"register_{self.kind}_hook")
        try:
            bound = inspect.signature(method).bind(self.module_var, *args, **kwargs)
        except TypeError as exc:
            raise tx.user_exception(exc) from None
        options = {name: value.as_constant() for name, value in bound.arguments.items()
                   if name not in ("self", "hook")}
        refuse_in_branch(tx, f"{self.describe()}(...)")
        self._refuse(tx, options)
        current = module_hooks(tx, module, self.kind)
        hook_id = tx.output.overlay.add_hook(
            module, self.kind, current, bound.arguments["hook"],
            with_kwargs=bool(options.get("with_kwargs", False)),
            prepend=bool(options.get("prepend", False)),
            kept=tx.output.owns_module(module), frames=tx.user_frames())
        return HookHandleVariable(self.module_var, self.kind, hook_id)

    def _refuse(self, tx, options: dict) -> None:
        where = self.describe()
        if options.get("always_call"):
            raise graph_break("UB109", f"{where}(..., always_call=True) inside forward()",
                              frames=tx.user_frames(),
                              details="A hook that must run even when the module raises is "
                              "not supported: register it before export, or call its logic "
                              "from forward().")
        if self.native_owner is not None:
            raise graph_break("UB109", f"{where}(...) inside forward(): the module only runs "
                              f"inside `{self.native_owner}`, one of PyTorch's own modules, "
                              "whose native forward would not run the hook",
                              frames=tx.user_frames(),
                              details="Register the hook before export, or call its logic "
                              "from forward().")


class HookHandleVariable(VariableTracker):
    """The handle that a registration inside forward() returned: ``remove()`` takes the hook
    out of the trace's overlay. module_var, kind, hook_id: the hook it removes."""

    __slots__ = ("module_var", "kind", "hook_id")

    def __init__(self, module_var, kind: str, hook_id: int):
        super().__init__(None)
        self.module_var, self.kind, self.hook_id = module_var, kind, hook_id

    def python_type(self) -> type:
        return RemovableHandle

    def describe(self) -> str:
        return f"the handle of a {self.kind.replace('_', ' ')} hook of " \
            f"`{self.module_var.source.name()}`"

    def getattr(self, tx, name: str) -> VariableTracker:
        if name == "remove":
            return CallbackVariable(self._remove, f"{self.describe()}.remove")
        if name == "id":
            return ConstantVariable(self.hook_id)
        raise AttributeMissing(name)

    def _remove(self, tx, args) -> VariableTracker:
        if args:
            raise tx.user_exception(TypeError(
                f"RemovableHandle.remove() takes 1 positional argument but {len(args) + 1} "
                "were given"))
        refuse_in_branch(tx, f"{self.describe()}.remove()")
        tx.output.overlay.remove_hook(self.module_var.module, self.kind, self.hook_id)
        return ConstantVariable(None)
