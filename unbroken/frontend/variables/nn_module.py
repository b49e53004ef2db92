"""``nn.Module`` values: attribute access, iteration of containers, and calls.

User modules are *inlined*: their hooks and ``forward`` run through the interpreter.
PyTorch's own modules whose whole subtree is PyTorch's (``nn.Linear``, ``nn.LSTM``,
``nn.TransformerEncoderLayer``) are *leaf calls*: their ``forward`` runs natively on meta
tensors while the recorder records the ATen ops. Containers (``Sequential``, ``ModuleList``,
``ModuleDict``) are always inlined so user modules inside them are traced.
"""
from __future__ import annotations

import torch.nn as nn
from torch.nn.modules import module as module_globals

from ..graph_breaks import graph_break
from ..protocol import BoundMethodVariable, call_python, getattr_fallback, lookup
from ..sources import AttrSource, ModuleSource
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import DictVariable, TupleVariable
from .functions import TorchFunctionVariable, UserFunctionVariable, is_pytorch_module_name

__all__ = ["NNModuleVariable", "is_leaf_module"]

_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList, nn.ParameterDict)
# nn.Module methods that only read the module tree; safe to call natively.
_SAFE_BASE_METHODS = {"parameters", "named_parameters", "buffers", "named_buffers", "children",
                      "named_children", "modules", "named_modules", "get_submodule",
                      "get_parameter", "get_buffer", "extra_repr", "_get_name", "__len__",
                      "__getitem__", "__iter__", "__contains__", "keys", "values", "items",
                      "__dir__", "_check_input_dim", "_check_forward_args"}
_GLOBAL_HOOKS = ("_global_forward_pre_hooks", "_global_forward_hooks",
                 "_global_backward_hooks", "_global_backward_pre_hooks")


def _is_torch_class(cls) -> bool:
    return is_pytorch_module_name(cls.__module__)


def is_leaf_module(module: nn.Module) -> bool:
    """True when ``module`` and all its descendants are PyTorch's own, non-container modules."""
    return not isinstance(module, _CONTAINERS) and all(
        _is_torch_class(type(m)) for m in module.modules())


class NNModuleVariable(VariableTracker):
    """A module. ``module``: the module object (its parameters and buffers are swapped for
    tracked meta tensors during export); ``fqn``: its qualified name in the exported model."""

    __slots__ = ("module", "fqn")

    def __init__(self, module: nn.Module, fqn: str):
        super().__init__(ModuleSource(fqn))
        self.module = module
        self.fqn = fqn

    def python_type(self) -> type:
        return type(self.module)

    def describe(self) -> str:
        return f"the module `{self.source.name()}` ({type(self.module).__name__})"

    def unwrap(self, tx):
        return self.module

    def truth(self, tx) -> bool:
        if isinstance(self.module, _CONTAINERS):
            return len(self.module) > 0
        return True

    def _child(self, tx, name: str, module: nn.Module) -> NNModuleVariable:
        return NNModuleVariable(module, tx.output.module_path(module, None) or
                                (f"{self.fqn}.{name}" if self.fqn else name))

    # ----------------------------------------------------------------- attributes
    def getattr(self, tx, name: str) -> VariableTracker:
        module = self.module
        if name in ("forward", "__call__", "_call_impl", "_wrapped_call_impl"):
            return _ModuleCallVariable(self, name)
        found = lookup(tx, self, name, instance=module, source=self.source)
        if found is not None:
            return self._check_method(found, name)
        for table in ("_parameters", "_buffers"):
            if name in module.__dict__.get(table, {}):
                value = module.__dict__[table][name]
                if value is None:
                    return ConstantVariable(None)
                return tx.wrap(value, AttrSource(self.source, name))
        submodules = module.__dict__.get("_modules", {})
        if name in submodules:
            child = submodules[name]
            return ConstantVariable(None) if child is None else self._child(tx, name, child)
        return getattr_fallback(tx, self, type(module), name, nn.Module.__getattr__)

    def _check_method(self, found, name):
        if (isinstance(found, BoundMethodVariable)
                and isinstance(found.function, TorchFunctionVariable)
                and getattr(nn.Module, name, None) is found.function.fn
                and name not in _SAFE_BASE_METHODS):
            raise graph_break("UB108", f"`nn.Module.{name}` called inside forward()")
        return found

    def setattr(self, tx, name, value) -> None:
        raise graph_break("UB107", f"assignment to `{self.source.name()}.{name}` inside forward()",
                          frames=tx.user_frames())

    # ----------------------------------------------------------------- containers
    def items(self, tx) -> list:
        module = self.module
        if isinstance(module, nn.ModuleDict | nn.ParameterDict):
            return [ConstantVariable(k) for k in module.keys()]
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            return [self._child(tx, k, m) for k, m in module._modules.items()]
        if isinstance(module, nn.ParameterList):
            return [tx.wrap(p) for p in module]
        raise graph_break("UB117", f"iteration over {self.describe()}", frames=tx.user_frames())

    def length(self, tx):
        return len(self.module)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if not index.is_constant():
            return super().getitem(tx, index)
        key = index.as_constant()
        try:
            value = self.module[key]
        except (IndexError, KeyError, TypeError) as exc:
            raise tx.user_exception(exc) from None
        if isinstance(value, nn.Module):
            path = tx.output.module_path(value, None) or f"{self.fqn}[{key}]"
            return NNModuleVariable(value, path)
        return tx.wrap(value)

    # ----------------------------------------------------------------- calls
    def call(self, tx, args, kwargs) -> VariableTracker:
        return call_module(tx, self, args, kwargs)


class _ModuleCallVariable(VariableTracker):
    """``module.forward`` / ``module.__call__`` as a value (calling it calls the module;
    ``forward`` skips the hooks, like eager)."""

    __slots__ = ("module_var", "name")

    def __init__(self, module_var: NNModuleVariable, name: str):
        super().__init__(None)
        self.module_var = module_var
        self.name = name

    def describe(self) -> str:
        return f"`{self.module_var.source.name()}.{self.name}`"

    def call(self, tx, args, kwargs):
        if self.name == "forward":
            with tx.output.module_scope(self.module_var):
                return run_forward(tx, self.module_var, args, kwargs)
        return call_module(tx, self.module_var, args, kwargs)


def _check_hooks(tx, var: NNModuleVariable) -> None:
    module = var.module
    for name in _GLOBAL_HOOKS:
        if getattr(module_globals, name, None):
            raise graph_break("UB109", "global module hooks are registered "
                              f"(torch.nn.modules.module.{name})", frames=tx.user_frames())
    if module._backward_hooks or getattr(module, "_backward_pre_hooks", None):
        raise graph_break("UB109", f"backward hooks on {var.describe()}", frames=tx.user_frames())


def call_module(tx, var: NNModuleVariable, args, kwargs) -> VariableTracker:
    """``module(*args, **kwargs)``: forward pre-hooks, forward, forward hooks (all inlined
    except a leaf module's forward), inside the module's ``nn_module_stack`` scope."""
    _check_hooks(tx, var)
    module = var.module
    with tx.output.module_scope(var):
        for hook_id, hook in list(module._forward_pre_hooks.items()):
            if hook_id in module._forward_pre_hooks_with_kwargs:
                result = call_python(tx, hook, [var, TupleVariable(args), _kw(kwargs)])
                if not (result.is_constant() and result.as_constant() is None):
                    args_var, kwargs_var = result.items(tx)
                    args, kwargs = args_var.items(tx), dict(kwargs_var.entries)
            else:
                result = call_python(tx, hook, [var, TupleVariable(args)])
                if not (result.is_constant() and result.as_constant() is None):
                    args = result.items(tx) if isinstance(result, TupleVariable) else [result]
        out = run_forward(tx, var, args, kwargs)
        for hook_id, hook in list(module._forward_hooks.items()):
            hook_args = [var, TupleVariable(args)]
            if hook_id in module._forward_hooks_with_kwargs:
                hook_args.append(_kw(kwargs))
            result = call_python(tx, hook, [*hook_args, out])
            if not (result.is_constant() and result.as_constant() is None):
                out = result
    return out


def _kw(kwargs):
    return DictVariable(dict(kwargs))


def run_forward(tx, var: NNModuleVariable, args, kwargs) -> VariableTracker:
    """Run ``forward`` only: natively for a leaf module, inlined otherwise."""
    module = var.module
    forward = module.__dict__.get("forward") or type(module).forward
    if is_leaf_module(module) and "forward" not in module.__dict__:
        return tx.call_leaf(type(module).forward, [var, *args], kwargs)
    if getattr(forward, "__func__", None) is not None:
        forward = forward.__func__
    if "forward" in module.__dict__:
        return tx.wrap(forward).call(tx, list(args), kwargs)
    return tx.wrap(forward).call(tx, [var, *args], kwargs) if not _is_torch_class(type(module)) \
        else _inline_torch_container(tx, var, forward, args, kwargs)


def _inline_torch_container(tx, var, forward, args, kwargs):
    # Container forwards (Sequential) are PyTorch code but must be interpreted, so that the
    # user modules they call are traced rather than run natively.
    return UserFunctionVariable(forward).call(tx, [var, *args], kwargs)

