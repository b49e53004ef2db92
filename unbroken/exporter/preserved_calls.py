"""``preserve_module_call_signature``: the recorded call boundaries become signatures.

:func:`checked_paths` checks the argument (submodule paths of the exported module).
While tracing, the frontend records each call of a named submodule
(``frontend.variables.nn_module.PreservedCall``: the graph nodes of the call's tensors, its
constants, the pytree specs). After the graph is functionalized and cleaned,
:func:`preserved_signatures` turns them into :class:`unbroken.ir.parts.ModuleCall` (node
names, torch's argument classes), which become the submodules' entries of the program's
``module_call_graph``, as torch.export records them.

A call can be kept only when it is a real boundary in the final graph: its values are still
there (not removed as unused), and nothing computed inside the call is read outside it
except its outputs and its in-place writes to its inputs, parameters and buffers, which
``passes.preserved_writes`` puts in the form ``torch.export.unflatten`` rebuilds (the
unflattened submodule writes them in place, as eager's). Anything else is refused
(UnsupportedError) rather than given a signature unflatten would rebuild wrongly.
"""
from __future__ import annotations

import dataclasses

import torch
import torch.fx as fx
from torch.export.graph_signature import ConstantArgument, TensorArgument

from ..ir.parts import ModuleCall
from ..passes.preserved_writes import close_preserved_writes
from ..symbolic.diagnostics import ExportUsageError, UnsupportedError

__all__ = ["checked_paths", "preserved_signatures"]


def checked_paths(mod, paths) -> frozenset:
    """The submodule paths of ``preserve_module_call_signature``, checked to exist."""
    if isinstance(paths, str) or not isinstance(paths, (tuple, list, set, frozenset)):
        raise ExportUsageError(
            f"preserve_module_call_signature must be a tuple of submodule paths, got "
            f"{type(paths).__name__}", hint='Pass e.g. preserve_module_call_signature=("sub",).')
    for path in paths:
        try:
            found = isinstance(path, str) and path and \
                isinstance(mod.get_submodule(path), torch.nn.Module)
        except (AttributeError, TypeError):
            found = False
        if not found:
            raise ExportUsageError(
                f"preserve_module_call_signature names {path!r}, which is not a submodule of "
                f"the exported module", hint="Use paths from model.named_modules().")
    return frozenset(paths)


def preserved_signatures(graph_module: fx.GraphModule, signature, calls,
                         replaced=None) -> tuple:
    """``(signature, module calls)``: the :class:`ModuleCall` of each recorded call
    (``PreservedCall``), checked against the final ``graph_module``, whose writes to tensors
    the caller sees are put in the form unflatten rebuilds (``passes.preserved_writes``: the
    graph and its ``signature`` may change); UnsupportedError naming the submodule when one
    is not a boundary. ``replaced``: in-place node -> its functional node (a call may take
    a tensor an earlier call wrote)."""
    if replaced:
        calls = [_functional(call, replaced) for call in calls]
    present = set(graph_module.graph.nodes)
    for call in calls:
        for value in (*call.inputs, *call.outputs):
            if isinstance(value, fx.Node) and value not in present:
                raise _refusal(call, f"the value `{value.name}` it takes or returns is not "
                                     "kept in the program (changed in place, or never used)")
    signature, calls = close_preserved_writes(graph_module.graph, signature, calls, _refusal)
    graph_module.recompile()
    return signature, tuple(ModuleCall(call.fqn, tuple(map(_argument, call.inputs)),
                                       call.in_spec, tuple(map(_argument, call.outputs)),
                                       call.out_spec) for call in calls)


def _functional(call, replaced: dict):
    def value(v):
        return replaced.get(v, v) if isinstance(v, fx.Node) else v
    return dataclasses.replace(call, inputs=tuple(map(value, call.inputs)),
                               outputs=tuple(map(value, call.outputs)))


def _argument(value):
    if isinstance(value, fx.Node):
        return TensorArgument(value.name)
    return ConstantArgument("", value)


def _refusal(call, what: str) -> UnsupportedError:
    return UnsupportedError(
        f"preserve_module_call_signature: the call of `{call.fqn}` cannot be kept as one "
        f"module call: {what}", frames=call.frames,
        hint=f"Leave `{call.fqn}` out of preserve_module_call_signature, or make its outputs "
             "and its in-place writes to its inputs, parameters and buffers the only values "
             "it passes on (return what it computes).")
