"""Functionalize the subgraphs of higher-order ops (``torch.cond`` branches, ``while_loop``
bodies and conditions, a custom autograd.Function's forward and backward), recursively.

Input: a recorded graph module whose ``get_attr`` nodes name subgraph ``GraphModule``s, each
following the recorder's conventions (placeholders first; in-place ops stand for the new value
of the tensor they write). A subgraph returns a tuple of tensors, except a ``while_loop``
condition, which returns one tensor, and ``autograd_function_apply``'s bodies, which return
nested tuples (forward: outputs and saved values; backward: gradients or None).

Output: every subgraph functional (no node with a mutable schema) and without dead nodes, in
place. A subgraph may update its own intermediates in place; writing one of its inputs has no
functional form inside a branch and is refused with ``UnsupportedError`` (UB121) at the user's
line, as is any in-place update inside a ``while_loop`` condition.
"""
from __future__ import annotations

import torch.fx as fx
from torch.utils import _pytree as pytree

from ..ir.meta_keys import USER_FRAMES
from ..ir.ops import is_mutating
from ..ir.signature import (
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from ..symbolic.diagnostics import UnsupportedError
from .dce import dead_code_elimination
from .functionalize import functionalize

__all__ = ["functionalize_subgraphs"]


def functionalize_subgraphs(graph_module: fx.GraphModule) -> fx.GraphModule:
    """Functionalize every subgraph ``graph_module`` calls (see the module docstring)."""
    for node in graph_module.graph.nodes:
        if node.op != "get_attr":
            continue
        subgraph = getattr(graph_module, node.target)
        if isinstance(subgraph, fx.GraphModule):
            functionalize_subgraphs(subgraph)
            _functionalize_one(subgraph)
            dead_code_elimination(subgraph)
    return graph_module


def _functionalize_one(subgraph: fx.GraphModule) -> None:
    returned = _output(subgraph).args[0]
    if isinstance(returned, fx.Node):  # while_loop's cond_fn returns one tensor
        _refuse_mutation_in(subgraph)
        return
    # autograd_function_apply's bodies return nested tuples, with None for no gradient:
    # functionalized over the flat values, then given their structure back
    flat, structure = pytree.tree_flatten(returned)
    values = [v for v in flat if v is not None]
    _output(subgraph).args = (tuple(values),)
    inputs = [InputSpec(InputKind.USER_INPUT, TensorArgument(n.name), None)
              for n in subgraph.graph.nodes if n.op == "placeholder"]
    outputs = [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument(v.name), None)
               for v in values]
    _, signature = functionalize(subgraph, ExportGraphSignature(inputs, outputs))
    mutated = signature.mutation_specs
    if not mutated:
        output = _output(subgraph)
        results = iter(output.args[0])
        output.args = (pytree.tree_unflatten([None if v is None else next(results)
                                              for v in flat], structure),)
        subgraph.recompile()
    if mutated:
        written = next(n for n in subgraph.graph.nodes if n.name == mutated[0].arg.name)
        raise UnsupportedError(
            "a torch.cond branch modifies one of its inputs in place", code="UB121",
            frames=written.meta.get(USER_FRAMES, ()),
            hint="Compute the new value out of place and return it from both branches.")


def _output(subgraph: fx.GraphModule) -> fx.Node:
    return next(n for n in subgraph.graph.nodes if n.op == "output")


def _refuse_mutation_in(condition: fx.GraphModule) -> None:
    for node in condition.graph.nodes:
        if node.op == "call_function" and is_mutating(node.target):
            raise UnsupportedError("a while_loop cond_fn updates a tensor in place",
                                   code="UB121", frames=node.meta.get(USER_FRAMES, ()),
                                   hint="Compute the condition out of place.")
