"""``preserve_module_call_signature``: the recorded call boundaries become signatures.

:func:`checked_paths` checks the argument (submodule paths of the exported module).
While tracing, the frontend records each call of a named submodule
(``frontend.variables.nn_module.PreservedCall``: the graph nodes of the call's tensors, its
constants, the pytree specs). After the graph is functionalized and cleaned,
:func:`preserved_signatures` turns them into :class:`unbroken.ir.parts.ModuleCall` (node
names, torch's argument classes), which become the submodules' entries of the program's
``module_call_graph``, as torch.export records them.

A call can be kept only when it is a real boundary in the final graph: its values are still
there (not rewritten by an in-place op, not removed as unused), and nothing computed inside
the call is read outside it except its outputs (a parameter, buffer or input the call writes
is read after it, through the mutation outputs). Anything else is refused (UnsupportedError) rather
than given a signature ``torch.export.unflatten`` would rebuild wrongly.
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch.export.graph_signature import ConstantArgument, InputKind, TensorArgument

from ..ir.parts import ModuleCall
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


def preserved_signatures(graph_module: fx.GraphModule, signature, calls) -> tuple:
    """The :class:`ModuleCall` of each recorded call (``PreservedCall``), checked against the
    final ``graph_module`` and its ``signature``; UnsupportedError naming the submodule when
    one is not a boundary."""
    present = set(graph_module.graph.nodes)
    users = {s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT}
    return tuple(_signature(call, present, graph_module.graph, users) for call in calls)


def _signature(call, present: set, graph: fx.Graph, user_inputs: set) -> ModuleCall:
    for value in (*call.inputs, *call.outputs):
        if isinstance(value, fx.Node) and value not in present:
            raise _refusal(call, f"the value `{value.name}` it takes or returns is not kept in "
                                 "the program (changed in place, or never used)")
    _check_closed(call, graph, user_inputs)
    return ModuleCall(call.fqn, tuple(map(_argument, call.inputs)), call.in_spec,
                      tuple(map(_argument, call.outputs)), call.out_spec)


def _argument(value):
    if isinstance(value, fx.Node):
        return TensorArgument(value.name)
    return ConstantArgument("", value)


def _check_closed(call, graph: fx.Graph, user_inputs: set) -> None:
    """Nothing computed inside the call is read outside it, except its outputs, and it reads
    no tensor from outside but its inputs (and the parameters, buffers and sizes)."""
    outputs = {v for v in call.outputs if isinstance(v, fx.Node)}
    inputs = {v for v in call.inputs if isinstance(v, fx.Node)}
    inside = {n for n in graph.nodes
              if n.op != "placeholder" and call.key in n.meta.get("nn_module_stack", {})}
    for node in inside:
        for arg in node.all_input_nodes:
            if arg in inside or arg in inputs or arg.op == "get_attr" or \
                    not isinstance(arg.meta.get("val"), torch.Tensor) or \
                    (arg.op == "placeholder" and arg.name not in user_inputs):
                continue
            raise _refusal(call, f"`{node.name}` inside it reads `{arg.name}`, a tensor "
                                 "computed outside the call that is not one of its inputs")
    for node in inside - outputs:
        for user in node.users:
            if user not in inside:
                raise _refusal(call, f"the value `{node.name}` computed inside it is read "
                                     f"after the call by `{user.name}` (a parameter, buffer "
                                     "or input it writes, or a value it leaves behind)")


def _refusal(call, what: str) -> UnsupportedError:
    return UnsupportedError(
        f"preserve_module_call_signature: the call of `{call.fqn}` cannot be kept as one "
        f"module call: {what}", frames=call.frames,
        hint=f"Leave `{call.fqn}` out of preserve_module_call_signature, or make its outputs "
             "the only values it passes on (return what it computes; no in-place writes to "
             "its inputs or buffers).")
