"""Grad-mode regions in two spellings: unbroken's flat calls and torch's higher-order op.

unbroken records ``with torch.no_grad():`` (and ``enable_grad``, ``set_grad_enabled``,
``inference_mode``) as three calls around the region's nodes (``GraphBuilder.record_grad_mode``)::

    previous = torch.is_grad_enabled()
    set_grad_enabled(False)
    ...                                    # the region
    set_grad_enabled(previous)   # the caller's mode, whatever it was

torch's programs say the same with ``torch.ops.higher_order.wrap_with_set_grad_enabled(False,
submodule, *inputs)``: the region's nodes in a submodule, run under ``set_grad_enabled`` and the
caller's mode given back however the region ends. torch's verifier refuses a call of
``torch.is_grad_enabled``, and torch's tools (``torch.export.save``, unflatten, AOTInductor,
ONNX) know the higher-order op, so :func:`to_torch_regions` rewrites unbroken's spelling into
torch's at the boundary, and :func:`to_flat_regions` reads it back for unbroken's own passes
(``run_decompositions``, ``unbroken.save``).

Regions nest (``no_grad`` inside ``enable_grad``): the inner one becomes a higher-order node
inside the outer one's submodule.
"""
from __future__ import annotations

import operator

import torch
import torch.fx as fx

from unbroken.ir.signature import with_output_names
from unbroken.symbolic.diagnostics import InternalError
from unbroken.symbolic.torch_compat import set_grad_enabled, wrap_with_set_grad_enabled

__all__ = ["to_torch_regions", "to_flat_regions", "has_torch_regions"]

#: Metadata the higher-order node takes from the region's ``with`` statement.
_LOCATION_KEYS = ("nn_module_stack", "stack_trace", "source_fn_stack", "from_node", "torch_fn")


def to_torch_regions(graph_module: fx.GraphModule, signature):
    """Rewrite every flat region of ``graph_module`` (in place) into a
    ``wrap_with_set_grad_enabled`` node over a submodule (``grad_region_<n>``). Returns the
    signature with its output specs naming the new output nodes, and ``{old name: new name}``
    of the values now read from a region's results."""
    _subgraphs_to_torch_regions(graph_module)
    regions = _flat_regions(graph_module.graph)
    if not regions:
        return signature, {}
    renames: dict = {}
    for index, (previous, setter, restore) in enumerate(regions):
        _wrap(graph_module, previous, setter, restore, f"grad_region_{index}", renames)
    graph_module.graph.lint()
    graph_module.recompile()
    resolved = {}
    for old, new in renames.items():  # a nested region's result, read from the outer one's
        while new in renames:
            new = renames[new]
        resolved[old] = new
    return with_output_names(signature, graph_module.graph), resolved


def _subgraphs_to_torch_regions(graph_module: fx.GraphModule) -> None:
    """The regions inside the subgraphs the graph calls (a ``torch.cond`` branch, a
    ``while_loop`` body, a ``map`` body, at any depth) rewritten in place too: a subgraph's
    outputs are its output node's, renamed with it."""
    for child in _subgraphs(graph_module):
        _subgraphs_to_torch_regions(child)
        regions = _flat_regions(child.graph)
        for index, (previous, setter, restore) in enumerate(regions):
            _wrap(child, previous, setter, restore, f"grad_region_{index}", {})
        if regions:
            child.graph.lint()
            child.recompile()


def _subgraphs(graph_module: fx.GraphModule) -> list:
    """The graph modules ``graph_module``'s ``get_attr`` nodes read (once each)."""
    found = {}
    for node in graph_module.graph.nodes:
        if node.op != "get_attr":
            continue
        value = graph_module
        for atom in node.target.split("."):
            value = getattr(value, atom, None)
        if isinstance(value, fx.GraphModule):
            found[id(value)] = value
    return list(found.values())


def has_torch_regions(graph_module: fx.GraphModule) -> bool:
    """True when the graph, or a subgraph it calls, has a ``wrap_with_set_grad_enabled``
    node."""
    return any(n.op == "call_function" and n.target is wrap_with_set_grad_enabled
               for n in graph_module.graph.nodes) or \
        any(has_torch_regions(child) for child in _subgraphs(graph_module))


def to_flat_regions(graph_module: fx.GraphModule, signature):
    """A new graph module (``graph_module`` untouched) with every ``wrap_with_set_grad_enabled``
    node inlined as unbroken's three calls around the submodule's nodes, the signature naming
    its output nodes, and ``{old name: new name}`` of the values that were read from a
    region's results; the inputs as they are (and no renames) when there is no such node."""
    if not has_torch_regions(graph_module):
        return graph_module, signature, {}
    graph = fx.Graph()
    attributes: dict = {}
    env: dict = {}
    output = _copy_inlined(graph_module, graph_module.graph, graph, env, attributes)
    graph.output(output).meta.update(graph_module.graph.output_node().meta)
    result = fx.GraphModule(attributes, graph)
    result.meta.update(graph_module.meta)
    renames = {node.name: env[node].name for node in graph_module.graph.nodes
               if node.op == "call_function" and node.target is operator.getitem
               and _is_region(node.args[0])}
    return result, with_output_names(signature, graph), renames


# -- flat -> torch ---------------------------------------------------------------------------------
def _flat_regions(graph: fx.Graph) -> list:
    """``(previous, setter, restore)`` of each region, innermost first (in closing order).

    A ``torch.set_grad_enabled(False)`` called as a function (no ``with``) is recorded as a
    region that nothing closes: its mode read is unused (erased here) and its setter stays a
    plain ``torch._C._set_grad_enabled(False)`` call, which torch's programs have too."""
    open_regions: list = []
    found = []
    for node in list(graph.nodes):
        if node.op != "call_function":
            continue
        if node.target is torch.is_grad_enabled:
            if node.users:
                open_regions.append([node, None])
            else:
                graph.erase_node(node)
        elif node.target is set_grad_enabled:
            flag = node.args[0] if node.args else None
            if isinstance(flag, fx.Node):
                if not open_regions or open_regions[-1][0] is not flag or \
                        open_regions[-1][1] is None:
                    raise InternalError(f"grad-mode node {node.name} restores a mode no open "
                                        "region read")
                previous, setter = open_regions.pop()
                found.append((previous, setter, node))
            elif open_regions and open_regions[-1][1] is None:
                open_regions[-1][1] = node
    if open_regions:
        raise InternalError(f"grad-mode region opened at {open_regions[-1][0].name} is never "
                            "closed")
    return found


def _wrap(graph_module, previous, setter, restore, name: str, renames: dict) -> None:
    """Replace one region by ``wrap_with_set_grad_enabled(flag, <name>, *inputs)``; the
    region's results read outside it are renamed (``renames``: old name -> new name)."""
    graph = graph_module.graph
    if set(previous.users) != {restore}:
        raise InternalError(f"the mode read by {previous.name} is used outside its region")
    body = []
    node = setter.next
    while node is not restore:
        if node.op in ("placeholder", "output"):
            raise InternalError(f"grad-mode region of {previous.name} holds {node.op} "
                                f"{node.name}")
        body.append(node)
        node = node.next
    if body:
        inside = set(body)
        inputs = list(dict.fromkeys(a for n in body for a in n.all_input_nodes
                                    if a not in inside))
        outputs = [n for n in body if any(u not in inside for u in n.users)]
        submodule = _submodule(graph_module, body, inputs, outputs)
        graph_module.add_submodule(name, submodule)
        with graph.inserting_before(restore):
            attr = graph.get_attr(name)
            call = graph.call_function(wrap_with_set_grad_enabled,
                                       (setter.args[0], attr, *inputs))
            call.meta["val"] = tuple(n.meta.get("val") for n in outputs)
            for index, value in enumerate(outputs):
                item = graph.call_function(operator.getitem, (call, index))
                item.meta = {**value.meta}
                value.replace_all_uses_with(item)
                renames[value.name] = item.name
        for new in (attr, call):
            new.meta.update({k: previous.meta[k] for k in _LOCATION_KEYS if k in previous.meta})
        for node in reversed(body):
            graph.erase_node(node)
    for node in (restore, setter, previous):
        graph.erase_node(node)


def _submodule(graph_module, body, inputs, outputs) -> fx.GraphModule:
    """A graph module taking ``inputs`` and returning the tuple of ``outputs``, with copies of
    the ``body`` nodes (the get_attr targets it reads are shared with ``graph_module``)."""
    graph = fx.Graph()
    env = {}
    for value in inputs:
        env[value] = graph.placeholder(value.name)
        env[value].meta = {k: v for k, v in value.meta.items() if k == "val"}
    for node in body:
        env[node] = graph.node_copy(node, lambda n: env[n])
    graph.output(tuple(env[n] for n in outputs))
    return fx.GraphModule(graph_module, graph)


# -- torch -> flat ---------------------------------------------------------------------------------
def _copy_inlined(owner: fx.GraphModule, source: fx.Graph, target: fx.Graph, env: dict,
                  attributes: dict):
    """Copy ``source``'s nodes (a graph of ``owner``) into ``target``, regions inlined.
    ``env``: source node -> target node (given for the placeholders when inlining);
    ``attributes``: the objects the target's ``get_attr`` nodes name, filled in. Returns the
    copied output value."""
    for node in source.nodes:
        if node.op == "output":
            return fx.graph.map_arg(node.args[0], lambda n: env[n])
        if node.op == "get_attr" and node.users and all(_is_region(u) for u in node.users):
            continue  # a region's submodule: inlined where it is called
        if _is_region(node):
            env[node] = _inline(owner, node, target, env, attributes)
        elif node.op == "call_function" and node.target is operator.getitem and \
                _is_region(node.args[0]):
            env[node] = env[node.args[0]][node.args[1]]
        elif node.op == "get_attr":
            env[node] = _copy_attribute(owner, node, target, attributes)
        elif node.op == "placeholder" and node in env:
            continue
        else:
            env[node] = target.node_copy(node, lambda n: env[n])
    return None


def _copy_attribute(owner, node: fx.Node, target: fx.Graph, attributes: dict) -> fx.Node:
    """A ``get_attr`` of ``owner`` copied into ``target`` under a name free there."""
    value = owner
    for atom in node.target.split("."):
        value = getattr(value, atom)
    if isinstance(value, fx.GraphModule) and has_torch_regions(value):
        value = _flat_subgraph(value)  # a branch's or a body's regions inlined too
    name, suffix = node.target.replace(".", "_"), 0
    while attributes.get(name, value) is not value:
        suffix += 1
        name = f"{node.target.replace('.', '_')}_{suffix}"
    attributes[name] = value
    copy = target.get_attr(name)
    copy.meta = {**node.meta}
    return copy


def _flat_subgraph(graph_module: fx.GraphModule) -> fx.GraphModule:
    """A copy of a subgraph (a branch, a loop body) with its regions inlined, as
    :func:`to_flat_regions` makes the program's graph."""
    graph = fx.Graph()
    attributes: dict = {}
    output = _copy_inlined(graph_module, graph_module.graph, graph, {}, attributes)
    graph.output(output).meta.update(graph_module.graph.output_node().meta)
    result = fx.GraphModule(attributes, graph)
    result.meta.update(graph_module.meta)
    return result


def _is_region(node) -> bool:
    return isinstance(node, fx.Node) and node.op == "call_function" and \
        node.target is wrap_with_set_grad_enabled


def _inline(owner, node: fx.Node, target: fx.Graph, env: dict, attributes: dict) -> tuple:
    """Copy one region node's submodule into ``target`` between the three grad-mode calls;
    returns the copied outputs."""
    flag, attr, *inputs = node.args
    submodule = getattr(owner, attr.target)
    previous = target.call_function(torch.is_grad_enabled, ())
    previous.meta = {**node.meta, "val": True}
    setter = target.call_function(set_grad_enabled, (flag,))
    setter.meta = {**node.meta, "val": None}
    placeholders = [n for n in submodule.graph.nodes if n.op == "placeholder"]
    inner = {p: env[a] if isinstance(a, fx.Node) else a for p, a in zip(placeholders, inputs)}
    outputs = _copy_inlined(submodule, submodule.graph, target, inner, attributes)
    restore = target.call_function(set_grad_enabled, (previous,))
    restore.meta = {**node.meta, "val": None}
    return tuple(outputs) if isinstance(outputs, (tuple, list)) else (outputs,)


