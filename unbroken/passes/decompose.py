"""Decompositions: lower an exported program's operators through a decomposition table.

Input: a verified ``ExportedProgram`` (functional graph). Output: a new ``ExportedProgram``
with the same signature (inputs, mutations, outputs in the same order; output names updated)
whose graph is re-recorded node by node:

- an ``OpOverload`` in the table is replaced by whatever its decomposition function records;
  the ops it calls go through the recorder, where the table applies again (composites inside
  decompose through PyTorch's dispatcher as usual);
- with no table given (``run_decompositions()``), the core ATen table of ``torch._decomp`` is
  used and every other composite (CompositeImplicitAutograd) op decomposes too, which lowers
  the graph to the core ATen set;
- with a table given, an op absent from it is kept whole (as ``torch.export`` does: remove an
  entry from ``default_decompositions()`` to preserve that op);
- size arithmetic and ``getitem`` are recomputed from the new values.

The user's stack and module path of each original node are kept on the nodes it becomes. The
result is functionalized and verified like an export. Programs containing ``torch.cond``
subgraphs are refused for now.
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch._decomp import core_aten_decompositions
from torch._dispatch.python import enable_python_dispatcher
from torch._ops import OpOverload
from torch.utils import _pytree as pytree

from ..ir.data_dependent import DATA_DEPENDENT_SIZES, SCALAR_OPS
from ..ir.program import ExportedProgram, register_decomposer
from ..ir.recorder import Recorder
from ..ir.signature import ExportGraphSignature, OutputSpec
from ..ir.verifier import GRAD_MODE_BUILTINS
from ..symbolic.diagnostics import UnsupportedError
from .dce import dead_code_elimination
from .functionalize import functionalize

__all__ = ["decompose"]


# How the user wrote the higher-order ops whose subgraphs block decomposition.
_SUBGRAPH_OPS = {"cond": "torch.cond", "while_loop": "torch.while_loop",
                 "autograd_function_apply": "a custom autograd.Function (under grad mode)"}


def decompose(program: ExportedProgram, decomp_table=None) -> ExportedProgram:
    """The program with its ops lowered through ``decomp_table`` (see the module docstring)."""
    operators = sorted({_SUBGRAPH_OPS.get(user.target.__name__, user.target.__name__)
                        for node in program.graph.nodes if node.op == "get_attr"
                        for user in node.users})
    if operators:
        raise UnsupportedError(f"run_decompositions() on a program with "
                               f"{' and '.join(operators)} is not supported yet", code="UB117",
                               hint="Decompose before adding control flow, or keep the program "
                                    "as exported.")
    table, keep_others = _table(decomp_table)
    recorder, current = _new_recorder(program, table, keep_others)
    values: dict[fx.Node, object] = {}
    with enable_python_dispatcher():
        for node in program.graph.nodes:
            current[0] = node
            values[node] = _rerecord(recorder, node, values, table, keep_others)
    graph_module = recorder.builder.graph_module()
    signature = _renamed(program.graph_signature, recorder.builder.graph)
    graph_module, signature = functionalize(graph_module, signature)
    dead_code_elimination(graph_module)
    return ExportedProgram(graph_module, signature, program.state_dict, program.constants,
                           program.range_constraints, program.in_spec, program.out_spec,
                           example_inputs=program.example_inputs)


def _table(decomp_table):
    """(op -> decomposition, whether ops absent from the table are kept whole)."""
    if decomp_table is None:
        return dict(core_aten_decompositions()), False
    return dict(decomp_table.items()), True


def _new_recorder(program, table, keep_others):
    """A recorder over the program's shape environment (its symbols, ranges and facts), with
    the table applied to the ops decompositions call too; ``current[0]`` is the original node
    being re-recorded, whose location the new nodes take."""
    current = [None]
    recorder = Recorder(
        env=_shape_env(program),
        frames_provider=lambda: current[0].meta.get("user_frames", ()) if current[0] else (),
        module_stack_provider=lambda: current[0].meta.get("nn_module_stack", {})
        if current[0] else {},
        allow_meta_constants=True, decompositions=table,
        decompose_composites="aliasing" if keep_others else True)
    return recorder, current


def _shape_env(program):
    """The ``ShapeEnvironment`` the program's symbolic values belong to, or None."""
    for node in program.graph.nodes:
        val = node.meta.get("val")
        for value in (val, *getattr(val, "shape", ())):
            if isinstance(value, (torch.SymInt, torch.SymFloat, torch.SymBool)):
                return value.node.shape_env
    return None


def _rerecord(recorder, node, values, table, keep_others):
    if node.op == "placeholder":
        return _placeholder(recorder, node)
    if node.op == "output":
        recorder.builder.set_output([_value(v, values) for v in node.args[0]])
        return None
    args = pytree.tree_map(lambda v: _value(v, values), node.args)
    kwargs = pytree.tree_map(lambda v: _value(v, values), node.kwargs)
    target = node.target
    if target in GRAD_MODE_BUILTINS:  # copied, never run: they would set this process's mode
        return recorder.builder.record_grad_mode_call(target, args, node.meta.get("val"))
    if not isinstance(target, OpOverload):
        return target(*args, **kwargs)  # getitem on recorded outputs, size arithmetic
    if target in SCALAR_OPS or target in DATA_DEPENDENT_SIZES:
        # the value only tensor data decides: keep the program's symbol (and its facts)
        return recorder.record_data_dependent(target, args, kwargs, node.meta["val"])
    with recorder.recording():
        if target in table:
            return table[target](*args, **kwargs)
        if keep_others:
            return recorder.record_opaque(target, args, kwargs)
        return target(*args, **kwargs)


def _placeholder(recorder, node):
    val = node.meta.get("val")
    new = recorder.builder.add_placeholder(node.name, val, user_input=True)
    if isinstance(val, torch.Tensor):
        for dim, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt):
                recorder.builder.bind_symbol(size.node.expr, new, dim)
    return val


def _value(value, values):
    return values[value] if isinstance(value, fx.Node) else value


def _renamed(signature: ExportGraphSignature, graph: fx.Graph) -> ExportGraphSignature:
    """The signature with the output specs naming the new output nodes (same order)."""
    output = next(n for n in graph.nodes if n.op == "output")
    specs = []
    for spec, value in zip(signature.output_specs, output.args[0]):
        if isinstance(value, fx.Node) and hasattr(spec.arg, "name") and \
                type(spec.arg).__name__ != "ConstantArgument":
            spec = OutputSpec(spec.kind, type(spec.arg)(value.name), spec.target)
        specs.append(spec)
    return signature.replace(output_specs=specs)


register_decomposer(decompose)
