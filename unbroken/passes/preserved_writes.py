"""The writes a preserved module call makes to tensors its caller sees, in the form
``torch.export.unflatten`` rebuilds.

Input: a functional graph without dead code (``passes.functionalize``: each node standing
for an in-place write carries ``NEW_VALUE_OF_FIRST``), its signature, and the boundaries of
the calls of the submodules named in ``preserve_module_call_signature``: objects with ``fqn``,
``key`` (the ``nn_module_stack`` key on every node recorded inside the call), ``inputs`` and
``outputs`` (the graph nodes, or constants, of the call's flattened arguments and result).

How unflatten rebuilds a call: it cuts the call's nodes out into a submodule that takes the
signature's inputs and returns its outputs; eager's submodule can be swapped in. A value
computed inside the call and read outside it (not an output) is taken as the new value of
the tensor it writes: for such a node ``v``, torch inserts ``v.args[0].copy_(v)`` after ``v``
inside the submodule and the reader reads ``v.args[0]`` (``torch.export.unflatten._IVals``);
the final value ``v`` of a mutated input or buffer ``P`` becomes ``P.copy_(v)`` where ``v``
is computed (``_inplace_buffer_and_input_mutations``). That is right only when ``v.args[0]``
is the tensor written, as the caller knows it: a chain of writes (``x.mul_(2).add_(3)``:
``add(mul(x, 2), 3)``) would be copied into the intermediate ``mul``, not into ``x``.

Output invariants (:func:`close_preserved_writes`), for each call:

- every value computed inside the call and read outside it, other than the call's outputs,
  is the last write ``w`` inside the call of a tensor ``T`` the caller sees, ``w.args[0] is
  T``: ``T`` is one of the call's inputs or a parameter / buffer. A chain of writes ends in
  ``w = slice_scatter(T, new, 0)`` (``fill(T, new)`` for a 0-d ``T``), added inside the call
  after ``new``: exactly ``new``'s values, differentiable in ``new`` as eager's write; every
  reader outside the call (later nodes, other calls' signatures, the mutation outputs) reads
  ``w``;
- a final value of a user input that the call writes through one of its inputs other than the
  input itself (the caller wrote it before the call) is returned through ``slice_scatter(P, w,
  0)`` recorded after the call in the caller's scope, so unflatten's ``P.copy_`` runs where
  ``P`` is known;
- a call that takes a value another call of the same submodule leaves behind takes an
  ``alias`` of it, made in the caller's scope just before the call (unflatten places its
  copies by node name in every call of one submodule, and the node unpacking an input bears
  the input's name);
- a tensor read inside the call that is computed outside it and is not one of its inputs is a
  write of a parameter or buffer ``P`` by another preserved call (``w.args[0] is P``): torch
  copies it into ``P``, which the submodule reads as its own attribute.

A value leaving a call from inside a grad-mode region of it (``with torch.no_grad():``) is
refused: torch makes the region one higher-order op, whose results are not writes.
Anything else is refused through ``refuse(call, what)`` (the exporter's refusal), before the
graph changes for that call. :func:`close_module_calls` does the same for a program's
``ModuleCall`` s after a stage that rebuilt the graph (``run_decompositions``).
"""
from __future__ import annotations

import copy
import dataclasses

import torch
import torch.fx as fx

from unbroken.ir.meta_keys import NEW_VALUE_OF_FIRST
from unbroken.ir.parts import ModuleCall
from unbroken.ir.signature import InputKind, OutputKind, OutputSpec, TensorArgument
from unbroken.symbolic.torch_compat import set_grad_enabled

__all__ = ["call_key", "close_module_calls", "close_preserved_writes", "inside_call"]

aten = torch.ops.aten

_STATE = (InputKind.PARAMETER, InputKind.BUFFER)


def inside_call(graph: fx.Graph, key: str) -> list:
    """The nodes recorded inside the call whose ``nn_module_stack`` key is ``key``, in order."""
    return [n for n in graph.nodes
            if n.op not in ("placeholder", "output") and key in n.meta.get("nn_module_stack", {})]


def close_preserved_writes(graph: fx.Graph, signature, calls, refuse):
    """``(signature, calls)`` with the graph rewritten in place to the invariants of the module
    docstring; ``calls`` come back with the nodes they name replaced by the values readers
    outside now read. ``refuse(call, what)`` returns the exception raised for a call that
    cannot be kept."""
    placeholders = _placeholders(graph, signature)
    state = {n for n, s in placeholders if s.kind in _STATE}
    users = {n for n, s in placeholders if s.kind == InputKind.USER_INPUT}
    calls = list(calls)
    for index in range(len(calls)):
        call = calls[index]
        redirected = _close_writes(graph, signature, call, state, refuse)
        if redirected:
            calls = [other if other is call else _renamed(other, redirected) for other in calls]
            signature = _renamed_outputs(graph, signature)
    calls = [_separate_input(graph, call, calls) for call in calls]
    signature = _returned_from_caller(graph, signature, calls)
    for call in calls:
        _check_reads(graph, call, calls, state, users, refuse)
    return signature, tuple(calls)


@dataclasses.dataclass(frozen=True, slots=True)
class _Boundary:
    """A :class:`ModuleCall` with the graph's nodes for its tensor arguments."""

    fqn: str
    key: str
    inputs: tuple
    outputs: tuple


def call_key(fqn: str) -> str:
    """The ``nn_module_stack`` key of the call ``fqn`` (``path`` or ``path@n``) on the nodes
    recorded inside it: the frontend's (``frontend.trace_site.stack_key``), as torch.export
    names the calls."""
    path, _, count = fqn.partition("@")
    return "L__self___" + path.replace(".", "_") + (f"@{count}" if count else "")


def close_module_calls(graph: fx.Graph, signature, module_calls, refuse):
    """:func:`close_preserved_writes` for a program's :class:`ModuleCall` s (a stage that
    rebuilt the graph: ``run_decompositions``); ``refuse(fqn, what)``."""
    nodes = {n.name: n for n in graph.nodes}

    def node(arg):
        return nodes[arg.name] if isinstance(arg, TensorArgument) else arg

    def argument(value):
        return TensorArgument(value.name) if isinstance(value, fx.Node) else value

    boundaries = [_Boundary(c.fqn, call_key(c.fqn), tuple(map(node, c.inputs)),
                            tuple(map(node, c.outputs))) for c in module_calls]
    signature, boundaries = close_preserved_writes(
        graph, signature, boundaries, lambda call, what: refuse(call.fqn, what))
    return signature, tuple(
        ModuleCall(c.fqn, tuple(map(argument, b.inputs)), c.in_spec,
                   tuple(map(argument, b.outputs)), c.out_spec)
        for c, b in zip(module_calls, boundaries))


def _placeholders(graph: fx.Graph, signature) -> list:
    return list(zip([n for n in graph.nodes if n.op == "placeholder"], signature.input_specs))


def _inputs(call) -> set:
    return {v for v in call.inputs if isinstance(v, fx.Node)}


def _is_write(node: fx.Node) -> bool:
    return node.op == "call_function" and bool(node.meta.get(NEW_VALUE_OF_FIRST)) \
        and bool(node.args) and isinstance(node.args[0], fx.Node)


# -- values leaving a call --------------------------------------------------------------------
def _close_writes(graph: fx.Graph, signature, call, state: set, refuse) -> dict:
    """Redirect every value leaving ``call`` (not an output) to a write of the tensor it is
    the new value of; old node -> new node for those that changed."""
    inside = inside_call(graph, call.key)
    members = set(inside)
    outputs = {v for v in call.outputs if isinstance(v, fx.Node)}
    inputs = _inputs(call)
    regions = _in_grad_regions(graph)
    plan = []
    for node in inside:
        readers = [user for user in node.users if user not in members]
        if not readers or node in outputs:
            continue
        target = _written_tensor(node, members, inputs, state)
        if target is None:
            raise refuse(call, f"the value `{node.name}` computed inside it is read after the "
                               f"call by `{readers[0].name}`, and it is not the new value of a "
                               "tensor the call takes or of a parameter or buffer (a value it "
                               "leaves behind, or a write through a view)")
        if node in regions:
            raise refuse(call, f"the value `{node.name}` read after the call is written "
                               "inside a grad-mode region of the call (`with "
                               "torch.no_grad()`...), which unflatten cannot carry out of it")
        if any(user in members and _is_write(user) and user.args[0] is node
               for user in node.users):
            raise refuse(call, f"the value `{node.name}` read after the call is not the last "
                               "one the call writes")
        plan.append((node, target, readers))
    redirected = {}
    for node, target, readers in plan:
        if node.args[0] is target:
            continue  # one write: torch copies it into its first argument already
        with graph.inserting_after(node):
            write = _write_of(graph, target, node, node.meta)
        for reader in readers:
            reader.replace_input_with(node, write)
        redirected[node] = write
    return redirected


def _in_grad_regions(graph: fx.Graph) -> set:
    """The nodes between a ``_set_grad_enabled(mode)`` the graph records and the one that
    restores the mode (torch makes each such region a higher-order op whose results are
    ``getitem`` s: no longer writes of their first argument)."""
    inside, depth = set(), 0
    for node in graph.nodes:
        if node.op == "call_function" and node.target is set_grad_enabled:
            depth = depth + 1 if isinstance(node.args[0], bool) else max(depth - 1, 0)
        elif depth:
            inside.add(node)
    return inside


def _written_tensor(node: fx.Node, members: set, inputs: set, state: set):
    """The tensor, outside the call, whose new value ``node`` is (through a chain of writes
    inside the call): one of the call's inputs, or a parameter / buffer (which writes before
    the call may have changed already); else None."""
    current = node
    while current in members:
        if not _is_write(current):
            return None
        current = current.args[0]
    if current in inputs:
        return current
    while _is_write(current):  # a parameter or buffer another call wrote before this one
        current = current.args[0]
    return current if current in state else None


def _write_of(graph: fx.Graph, target: fx.Node, new: fx.Node, meta: dict) -> fx.Node:
    """``target`` with all of ``new``'s values, as a node whose first argument is ``target``
    (``slice_scatter`` over dim 0; ``fill`` for a 0-d tensor)."""
    target_value = target.meta["val"]
    if target_value.dim() == 0:
        op, args = aten.fill.Tensor, (target, new)
    else:
        op, args = aten.slice_scatter.default, (target, new, 0)
    node = graph.call_function(op, args)
    node.meta = copy.copy(meta)
    node.meta["val"] = op(*(a.meta["val"] if isinstance(a, fx.Node) else a for a in args))
    node.meta[NEW_VALUE_OF_FIRST] = True
    return node


def _separate_input(graph: fx.Graph, call, calls):
    """``call`` taking, instead of each value another call of the same submodule leaves
    behind (not one of its outputs), an alias of it made in the caller's scope just before
    the call.

    unflatten gives the calls of one submodule one name, and inserts the copy of a value
    leaving one call (see the module docstring) after every node of that name in each of
    their submodules; in the next call, the node unpacking its input bears the input's name:
    the copy would land there too. The alias is the same tensor under another name."""
    path = call.fqn.partition("@")[0]
    inside = inside_call(graph, call.key)
    if not inside:
        return call
    aliases = {}
    for value in call.inputs:
        other = _innermost_call(value, calls) if isinstance(value, fx.Node) else None
        if other is None or other is call or other.fqn.partition("@")[0] != path \
                or value in aliases or value in other.outputs:
            continue
        stack = {}
        for key, entry in inside[0].meta.get("nn_module_stack", {}).items():
            if key == call.key:
                break
            stack[key] = entry
        with graph.inserting_before(inside[0]):
            alias = graph.call_function(aten.alias.default, (value,))
        alias.meta = {k: v for k, v in value.meta.items() if k != NEW_VALUE_OF_FIRST}
        alias.meta["nn_module_stack"] = stack
        alias.meta["val"] = aten.alias.default(value.meta["val"])
        for node in inside:
            node.replace_input_with(value, alias)
        aliases[value] = alias
    return _renamed(call, aliases) if aliases else call


def _renamed(call, redirected: dict):
    def rename(value):
        return redirected.get(value, value) if isinstance(value, fx.Node) else value
    return dataclasses.replace(call, inputs=tuple(map(rename, call.inputs)),
                               outputs=tuple(map(rename, call.outputs)))


def _output_node(graph: fx.Graph) -> fx.Node:
    return next(n for n in reversed(graph.nodes) if n.op == "output")


def _renamed_outputs(graph: fx.Graph, signature):
    """The output specs naming the graph's output values (some were redirected)."""
    values = _output_node(graph).args[0]
    specs = [OutputSpec(s.kind, TensorArgument(v.name), s.target)
             if isinstance(v, fx.Node) and isinstance(s.arg, TensorArgument) else s
             for s, v in zip(signature.output_specs, values)]
    return signature.replace(output_specs=specs)


def _returned_from_caller(graph: fx.Graph, signature, calls):
    """A user input's final value computed inside a call that does not take that input is
    returned through a copy in the caller's scope (see the module docstring)."""
    output = _output_node(graph)
    values = list(output.args[0])
    by_name = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    changed = False
    for position, spec in enumerate(signature.output_specs):
        if spec.kind != OutputKind.USER_INPUT_MUTATION:
            continue
        value, placeholder = values[position], by_name[spec.target]
        call = _innermost_call(value, calls)
        if call is None or placeholder in _inputs(call):
            continue
        with graph.inserting_before(output):
            meta = {k: v for k, v in value.meta.items() if k != "nn_module_stack"}
            values[position] = _write_of(graph, placeholder, value, meta)
        changed = True
    if not changed:
        return signature
    output.args = (tuple(values),)
    return _renamed_outputs(graph, signature)


def _innermost_call(node: fx.Node, calls):
    """The innermost preserved call ``node`` was recorded in, or None."""
    stack = list(node.meta.get("nn_module_stack", {})) if node.op == "call_function" else []
    keys = {call.key: call for call in calls}
    return next((keys[key] for key in reversed(stack) if key in keys), None)


# -- values entering a call -------------------------------------------------------------------
def _check_reads(graph: fx.Graph, call, calls, state: set, users: set, refuse) -> None:
    """Every tensor read inside ``call`` comes in through its inputs, or is a parameter,
    buffer or constant, or a write of a parameter / buffer by another preserved call."""
    members = set(inside_call(graph, call.key))
    inputs = _inputs(call)
    for node in members:
        for arg in node.all_input_nodes:
            if arg in members or arg in inputs or arg.op == "get_attr" or \
                    not isinstance(arg.meta.get("val"), torch.Tensor) or \
                    (arg.op == "placeholder" and arg not in users):
                continue
            if _is_write(arg) and arg.args[0] in state and \
                    _innermost_call(arg, calls) not in (None, call):
                continue
            raise refuse(call, f"`{node.name}` inside it reads `{arg.name}`, a tensor computed "
                               "outside the call that is not one of its inputs")
