"""``nn.Module`` values: attribute access, iteration of containers, and calls.

User modules are *inlined*: their hooks and ``forward`` run through the interpreter.
PyTorch's own modules whose whole subtree is PyTorch's (``nn.Linear``, ``nn.LSTM``,
``nn.TransformerEncoderLayer``) are *leaf calls*: their ``forward`` runs natively on meta
tensors while the recorder records the ATen ops. Containers (``Sequential``, ``ModuleList``,
``ModuleDict``) are always inlined so user modules inside them are traced.
"""
from __future__ import annotations

import types
from dataclasses import dataclass

import torch
import torch.nn as nn
from torch.utils import _pytree as pytree

from ...symbolic.diagnostics import UnsupportedError
from ...symbolic.diagnostics.catalogue import GraphBreakError, graph_break
from ...symbolic.torch_compat import (
    GLOBAL_MODULE_HOOKS,
    NN_FAST_PATH_FORWARDS,
    global_module_hooks,
    parse_to_arguments,
)
from ..overlay import refuse_in_branch
from ..protocol import BoundMethodVariable, call_python, class_attribute, getattr_fallback, lookup
from ..sources import AttrSource, ModuleSource
from ..trace_site import stack_key
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import DictVariable, TupleVariable
from .functions import TorchFunctionVariable, UserFunctionVariable, is_pytorch_module_name
from .module_hooks import (
    REGISTER_METHODS,
    RegisterHookVariable,
    call_hook,
    module_hooks,
    refuse_hook_read,
)
from .objects import STATE_CONTAINERS, state_copy
from .tensor import TensorVariable

__all__ = ["NNModuleVariable", "PreservedCall", "assign_module_attribute", "is_leaf_module",
           "write_back_buffers"]

_CONTAINERS = (nn.Sequential, nn.ModuleList, nn.ModuleDict, nn.ParameterList, nn.ParameterDict)
# nn.Module methods that only read the module tree; safe to call natively.
_SAFE_BASE_METHODS = {"parameters", "named_parameters", "buffers", "named_buffers", "children",
                      "named_children", "modules", "named_modules", "get_submodule",
                      "get_parameter", "get_buffer", "extra_repr", "_get_name", "__len__",
                      "__getitem__", "__iter__", "__contains__", "keys", "values", "items",
                      "__dir__", "_check_input_dim", "_check_forward_args"}


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
        written = tx.output.overlay.read(module, name)
        if written is not None:
            return written
        refuse_hook_read(tx, self, name)
        if name in module.__dict__.get("_parameters", {}):
            self._refuse_outside_parameters(tx)
        tx.output.overlay.note_read(module, name)
        found = lookup(tx, self, name, instance=module, source=self.source)
        if found is not None:
            return self._check_method(tx, _state_copy(tx, module, name, found), name)
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

    def _check_method(self, tx, found, name):
        if _own_torch_method(self.module, found, name):  # `self._sa_block` of a
            # TransformerDecoderLayer: interpreted, so that the attention it calls decides
            return BoundMethodVariable(found.receiver, UserFunctionVariable(found.function.fn))
        if (isinstance(found, BoundMethodVariable)
                and isinstance(found.function, TorchFunctionVariable)
                and getattr(nn.Module, name, None) is found.function.fn
                and name not in _SAFE_BASE_METHODS):
            if name == "to":
                return _ModuleToVariable(self)
            if name in REGISTER_METHODS:
                return RegisterHookVariable(self, REGISTER_METHODS[name],
                                            _native_owner(tx, self))
            raise graph_break("UB108", f"`nn.Module.{name}` called inside forward()",
                              details="A module method that changes the module (backward "
                              "hooks, device, dtype, mode) changes the caller's model: call "
                              "it before export.")
        return found

    def setattr(self, tx, name, value) -> None:
        """``module.name = value`` in forward: see ``assign_module_attribute``."""
        assign_module_attribute(tx, self, name, value)

    # ----------------------------------------------------------------- containers
    def items(self, tx) -> list:
        module = self.module
        if isinstance(module, nn.ModuleDict | nn.ParameterDict):
            return [ConstantVariable(k) for k in module.keys()]
        if isinstance(module, (nn.Sequential, nn.ModuleList)):
            # an entry may be None (`nn.ModuleList([None, attn])`): iterating yields None
            return [ConstantVariable(None) if m is None else self._child(tx, k, m)
                    for k, m in module._modules.items()]
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
        self._refuse_outside_parameters(tx)
        return call_module(tx, self, args, kwargs)

    def _refuse_outside_parameters(self, tx) -> None:
        """UB123 when this module is not the exported model's (a global, a closure variable,
        an attribute of a plain object) and has parameters: they would be baked into the
        program as constants, losing requires_grad and gradients."""
        if tx.output.owns_module(self.module) or tx.output.owns_parameters(self.module):
            return
        name = self.fqn or type(self.module).__name__  # where forward() found it
        attribute = _attribute_name(name)
        raise graph_break(
            "UB123", f"`{name}` ({type(self.module).__name__}) has parameters but is not a "
                     "submodule of the exported model", frames=tx.user_frames(),
            hint=f"Register it in __init__ (`self.{attribute} = {name}`) and call "
                 f"`self.{attribute}(...)` in forward(): its parameters then are the model's, "
                 "lifted as parameters with their gradients.")


def _attribute_name(source_name: str) -> str:
    """A Python identifier for an attribute holding what ``source_name`` names."""
    name = "".join(c if c.isalnum() else "_" for c in source_name.rsplit(".", 1)[-1]).strip("_")
    return name.lower() if name and not name[0].isdigit() else f"module_{name}"


def _native_owner(tx, var: NNModuleVariable) -> str | None:
    """The path of a module above ``var``'s that is one of PyTorch's own and runs natively
    (its forward calls ``var``'s module outside the trace), or None."""
    root = tx.output.root
    if root is None or not var.fqn:
        return None
    parts = var.fqn.split(".")
    for end in range(len(parts)):
        path = ".".join(parts[:end])
        try:
            owner = root.get_submodule(path)
        except AttributeError:
            return None
        if is_leaf_module(owner) and "forward" not in owner.__dict__:
            return path or type(owner).__name__
    return None


class _ModuleToVariable(VariableTracker):
    """``module.to`` bound to a module: see ``_unchanged_by_to``. module_var: the module."""

    __slots__ = ("module_var",)

    def __init__(self, module_var: NNModuleVariable):
        super().__init__(None)
        self.module_var = module_var

    def describe(self) -> str:
        return f"`{self.module_var.source.name()}.to`"

    def call(self, tx, args, kwargs):
        return _unchanged_by_to(tx, self.module_var, args, kwargs)


def _unchanged_by_to(tx, var: NNModuleVariable, args, kwargs) -> NNModuleVariable:
    """``module.to(...)`` when it changes nothing (every floating-point tensor already has the
    dtype, every tensor the device): eager returns the module itself. Otherwise refused
    (UB108): converting the model changes the caller's model."""
    device, dtype, _, _ = parse_to_arguments(*[a.as_constant() for a in args],
                                             **{k: v.as_constant() for k, v in kwargs.items()})
    recorder = tx.output.recorder
    for tensor in [*var.module.parameters(), *var.module.buffers()]:
        wrong_dtype = dtype is not None and (tensor.is_floating_point() or tensor.is_complex()) \
            and tensor.dtype != dtype
        wrong_device = device is not None and recorder.device_of(tensor) != torch.device(device)
        if wrong_dtype or wrong_device:
            raise graph_break("UB108", f"`{var.source.name()}.to(...)` converts the module inside "
                              "forward()", frames=tx.user_frames(),
                              details="Converting the model changes the caller's model: convert "
                              "it before export.")
    return var


def assign_module_attribute(tx, var: NNModuleVariable, name: str, value) -> None:
    """``module.name = value`` in forward, as eager's ``nn.Module.__setattr__`` would do it,
    on the trace's overlay (the caller's model is never changed):

    - a plain attribute (a flag, a counter, a list, a tensor that is not a buffer): kept in the
      overlay, so the rest of forward reads it (``torch.export`` does the same);
    - a buffer given a tensor: a buffer mutation (the program writes the buffer, see
      ``write_back_buffers``); given anything else, eager's own TypeError;
    - a parameter or a submodule replaced, a class with its own ``__setattr__``, or an
      attribute of one of PyTorch's own modules (its native forward reads the real one):
      refused (UB107), the program's parameters and modules are fixed at export.
    """
    module = var.module
    where = f"`{var.source.name()}.{name}`"
    refuse_in_branch(tx, f"assignment to {where}")
    if is_leaf_module(module) and type(module).forward is not nn.Module.forward:
        # its forward runs natively: it would read the real attribute, not the trace's
        raise graph_break("UB107", f"assignment to {where} inside forward(): "
                          f"{type(module).__name__} is PyTorch's own module, whose native "
                          "forward would not see the new value", frames=tx.user_frames(),
                          details="Pass the value as an argument, or set it before export.")
    static = class_attribute(type(module), name)
    if isinstance(static, property) and static.fset is not None:
        call_python(tx, static.fset, [var, value])
        return
    if class_attribute(type(module), "__setattr__") is not nn.Module.__setattr__:
        raise graph_break("UB107", f"assignment to {where} inside forward(): "
                          f"{type(module).__name__} has its own __setattr__",
                          frames=tx.user_frames())
    if isinstance(value, NNModuleVariable) and module.__dict__.get("_modules", {}).get(name) \
            is value.module:
        return  # `self.sub = self.sub.to(dtype)` that changed nothing: the same module back
    replaced = next((kind for kind, table in (("parameter", "_parameters"),
                                              ("submodule", "_modules"))
                     if name in module.__dict__.get(table, {})), None)
    if replaced is None and (isinstance(value, NNModuleVariable) or
                             getattr(value, "is_parameter", False)):
        replaced = "submodule" if isinstance(value, NNModuleVariable) else "parameter"
    if replaced is not None:
        raise graph_break("UB107", f"assignment to {where} inside forward() sets a {replaced}",
                          frames=tx.user_frames(),
                          details=f"An exported program's {replaced}s are fixed at export: "
                          "assign it in __init__, or keep the value in a local variable.")
    if name in module.__dict__.get("_buffers", {}) and not isinstance(value, TensorVariable):
        if value.is_constant() and value.as_constant() is None:
            raise graph_break("UB107", f"assignment of None to the buffer {where} inside "
                              "forward()", frames=tx.user_frames(),
                              details="An exported program's buffers are fixed at export.")
        raise tx.user_exception(TypeError(
            f"cannot assign '{value.python_type().__name__}' as buffer '{name}' "
            "(torch.nn.Buffer, torch.Tensor or None expected)"))
    # only a buffer's original is kept (written back at the end; the overlay tells buffers by
    # it); reading another one would lift values the program never uses
    original = var.getattr(tx, name) if name_is_buffer(module, name) else None
    tx.output.overlay.write(module, name, value, original, tx.user_frames(), kept=True)


def _state_copy(tx, module, name: str, found):
    """A list, dict or set held by a module of the model: the trace's own copy (see
    ``objects.state_copy``); a leaf module's own are read by its native forward, as they are."""
    if not isinstance(found, STATE_CONTAINERS):
        return found  # asked first: is_leaf_module walks every module below ``module``
    return found if is_leaf_module(module) else \
        state_copy(tx, module, name, found, instance_only=False)


def write_back_buffers(tx) -> None:
    """At the end of the trace, each buffer that forward() assigned a tensor to is written
    with that tensor's final value (a later in-place change of it reaches the buffer, as the
    buffer *is* that tensor in eager). The program keeps each buffer's shape, dtype and device:
    an assignment that changes them is refused (UB107)."""
    for entry in tx.output.overlay.entries.values():
        if not (isinstance(entry.obj, nn.Module) and isinstance(entry.current, TensorVariable)
                and name_is_buffer(entry.obj, entry.name)):
            continue
        buffer, value = entry.original, entry.current
        if value.meta is buffer.meta:
            continue
        _check_same_kind(tx, entry, buffer, value)
        tx.call_leaf(torch.Tensor.copy_, [buffer, value], {})


def _check_same_kind(tx, entry, buffer, value) -> None:
    """Refuse (UB107) a tensor for ``buffer`` with another shape, dtype or device."""
    device_of = tx.output.recorder.device_of

    def kind(meta):
        return f"{tuple(meta.shape)}, {meta.dtype} on {device_of(meta)}"

    if buffer.meta.dtype != value.meta.dtype or buffer.meta.dim() != value.meta.dim() or \
            device_of(buffer.meta) != device_of(value.meta) or \
            any(a != b for a, b in zip(buffer.meta.shape, value.meta.shape)):
        raise graph_break("UB107", f"forward() assigns the buffer `{buffer.source.name()}` a "
                          f"tensor of shape {kind(value.meta)} (the buffer: "
                          f"{kind(buffer.meta)})", frames=entry.frames,
                          details="An exported program's buffers keep their shape, dtype and "
                          "device: register the buffer with its final shape, or keep the value "
                          "in a plain attribute.")


def name_is_buffer(module: nn.Module, name: str) -> bool:
    return name in module.__dict__.get("_buffers", {})


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
    for name in GLOBAL_MODULE_HOOKS:
        if global_module_hooks(name):
            raise graph_break("UB109", "global module hooks are registered "
                              f"(torch.nn.modules.module.{name})", frames=tx.user_frames())
    if module._backward_hooks or getattr(module, "_backward_pre_hooks", None):
        raise graph_break("UB109", f"backward hooks on {var.describe()}", frames=tx.user_frames())


@dataclass(frozen=True, slots=True)
class PreservedCall:
    """The boundary of one call of a submodule named in ``preserve_module_call_signature``.

    fqn:     the call's name in the module call graph: the submodule's path, ``path@n`` for
             its n-th call (n >= 1); path: the submodule's path; key: the call's
             ``nn_module_stack`` key (on every node recorded inside it);
             frames: the user's stack at the call.
    inputs:  the flattened leaves of the call's ``(args, kwargs)``: the graph node of each
             tensor, or the constant itself; in_spec: their pytree spec.
    outputs, out_spec: the same for the value the call returned.
    """

    fqn: str
    path: str
    key: str
    frames: tuple
    inputs: tuple
    in_spec: object
    outputs: tuple
    out_spec: object


def _boundary(tx, var: NNModuleVariable, value: VariableTracker, what: str):
    """``(leaves, spec)`` of a preserved call's ``value``: tensors as their graph nodes."""
    try:
        leaves, spec = pytree.tree_flatten(value.unwrap(tx))
    except GraphBreakError:
        leaves, spec = None, None
    if leaves is None or any(isinstance(leaf, (torch.SymInt, torch.SymFloat, torch.SymBool))
                             or not isinstance(leaf, (torch.Tensor, int, float, bool, str,
                                                      type(None)))
                             for leaf in leaves):
        raise UnsupportedError(
            f"preserve_module_call_signature: the {what} of `{var.fqn}` hold a value that is "
            "neither a tensor nor a constant (a symbolic size, or an object), which a module "
            "call signature cannot state", frames=tx.user_frames(),
            hint=f"Pass `{var.fqn}` tensors and constants only, or leave it out of "
                 "preserve_module_call_signature.")
    builder = tx.output.recorder.builder
    return tuple(builder.node_of(leaf) if isinstance(leaf, torch.Tensor) else leaf
                 for leaf in leaves), spec


def _preserved_call(tx, var: NNModuleVariable, args, kwargs) -> VariableTracker:
    """The module call, its boundary recorded in ``tx.output.preserved_calls``: the n-th call
    (n >= 1) is ``fqn@n``, as torch.export names it."""
    if tx.output.branch_starts:
        raise UnsupportedError(
            f"preserve_module_call_signature: `{var.fqn}` is called inside a torch.cond "
            "branch, where its call cannot be kept as one module call", frames=tx.user_frames(),
            hint=f"Call `{var.fqn}` outside the branch, or leave it out of "
                 "preserve_module_call_signature.")
    count = sum(call.path == var.fqn for call in tx.output.preserved_calls)
    suffix = f"@{count}" if count else ""
    frames = tuple(tx.user_frames())
    inputs, in_spec = _boundary(tx, var, TupleVariable([TupleVariable(list(args)),
                                                        _kw(kwargs)]), "inputs")
    out = _call_module(tx, var, args, kwargs, suffix)
    outputs, out_spec = _boundary(tx, var, out, "outputs")
    tx.output.preserved_calls.append(PreservedCall(
        var.fqn + suffix, var.fqn, stack_key(var.fqn, suffix), frames, inputs,
        in_spec, outputs, out_spec))
    return out


def call_module(tx, var: NNModuleVariable, args, kwargs) -> VariableTracker:
    """``module(*args, **kwargs)``: forward pre-hooks, forward, forward hooks (all inlined
    except a leaf module's forward), inside the module's ``nn_module_stack`` scope. The
    boundary of a call of a module named in ``preserve_module_call_signature`` is recorded
    (:class:`PreservedCall`)."""
    _check_hooks(tx, var)
    if var.fqn and var.fqn in tx.output.preserved_paths:
        return _preserved_call(tx, var, args, kwargs)
    return _call_module(tx, var, args, kwargs)


def _call_module(tx, var: NNModuleVariable, args, kwargs, suffix: str = "") -> VariableTracker:
    """Eager's ``Module._call_impl``: a module without forward hooks or pre-hooks when the call
    begins runs forward only (so a hook that its own forward registers runs from the next call
    on); otherwise the pre-hooks as they were at the call, forward, then the forward hooks as
    they are after it."""
    module = var.module
    with tx.output.module_scope(var, suffix):
        pre_hooks = module_hooks(tx, module, "forward_pre")
        if not pre_hooks and not module_hooks(tx, module, "forward"):
            return run_forward(tx, var, args, kwargs)
        for hook in pre_hooks:
            args, kwargs = _run_pre_hook(tx, var, hook, args, kwargs)
        out = run_forward(tx, var, args, kwargs)
        for hook in module_hooks(tx, module, "forward"):
            hook_args = [var, TupleVariable(args)]
            if hook.with_kwargs:
                hook_args.append(_kw(kwargs))
            result = call_hook(tx, hook, [*hook_args, out])
            if not (result.is_constant() and result.as_constant() is None):
                out = result
    return out


def _run_pre_hook(tx, var, hook, args, kwargs):
    """``(args, kwargs)`` after one forward pre-hook (None keeps them)."""
    if hook.with_kwargs:
        result = call_hook(tx, hook, [var, TupleVariable(args), _kw(kwargs)])
        if not (result.is_constant() and result.as_constant() is None):
            args_var, kwargs_var = result.items(tx)
            args, kwargs = args_var.items(tx), dict(kwargs_var.entries)
        return args, kwargs
    result = call_hook(tx, hook, [var, TupleVariable(args)])
    if not (result.is_constant() and result.as_constant() is None):
        args = result.items(tx) if isinstance(result, TupleVariable) else [result]
    return args, kwargs


def _kw(kwargs):
    return DictVariable(dict(kwargs))


def run_forward(tx, var: NNModuleVariable, args, kwargs) -> VariableTracker:
    """Run ``forward`` only: natively for a leaf module, inlined otherwise. ``module.forward``
    is found as CPython finds it: an instance attribute is called as it is (a bound method
    keeps its receiver); a class attribute binds to the module only when it is a descriptor
    (a function does; a ``functools.partial``, a builtin or a callable object does not)."""
    module = var.module
    if is_leaf_module(module) and "forward" not in module.__dict__:
        if _holds_fast_path(module):  # torch.nn's fast paths, decided as eager decides them
            return UserFunctionVariable(type(module).forward).call(tx, [var, *args], kwargs)
        return tx.call_leaf(type(module).forward, [var, *args], kwargs)
    if "forward" in module.__dict__:
        return tx.wrap(module.__dict__["forward"]).call(tx, list(args), kwargs)
    forward = class_attribute(type(module), "forward")
    if type(forward) is not types.FunctionType:  # bound (or not) by the descriptor protocol
        found = lookup(tx, var, "forward", instance=module, source=var.source)
        return found.call(tx, list(args), kwargs)
    return tx.wrap(forward).call(tx, [var, *args], kwargs) if not _is_torch_class(type(module)) \
        else _inline_torch_container(tx, var, forward, args, kwargs)


def _own_torch_method(module: nn.Module, found, name: str) -> bool:
    """True for a method of a torch.nn class (not ``nn.Module``'s) bound to a module whose
    forward is interpreted for a fast path (``_holds_fast_path``)."""
    return isinstance(found, BoundMethodVariable) and \
        isinstance(found.function, TorchFunctionVariable) and \
        isinstance(found.function.fn, types.FunctionType) and \
        getattr(nn.Module, name, None) is None and _holds_fast_path(module)


def _holds_fast_path(module: nn.Module) -> bool:
    """True when ``module`` or a module below it has one of torch.nn's fast-path forwards
    (``variables.nn_fast_paths``) and is in eval mode (in training mode none takes its fast
    path): its forward is interpreted, down to the module deciding, so that the trace answers
    that module's predicates (natively they see the recorder)."""
    return any(type(m).forward in NN_FAST_PATH_FORWARDS and not m.training
               for m in module.modules())


def _inline_torch_container(tx, var, forward, args, kwargs):
    # Container forwards (Sequential) are PyTorch code but must be interpreted, so that the
    # user modules they call are traced rather than run natively.
    return UserFunctionVariable(forward).call(tx, [var, *args], kwargs)

