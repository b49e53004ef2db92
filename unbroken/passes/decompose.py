"""Decompositions: lower an exported program's operators through a decomposition table.

Input: the :class:`~unbroken.ir.parts.ProgramParts` of a verified program (functional
graph). Output: new parts (dialect ``ATEN``) with the same signature (inputs, mutations,
outputs in the same order; output names updated) whose graph is re-recorded node by node:

- an ``OpOverload`` in the table is replaced by whatever its decomposition function records;
  the ops it calls go through the recorder, where the table applies again (composites inside
  decompose through PyTorch's dispatcher as usual);
- with no table given (``run_decompositions()``), the core ATen table of ``torch._decomp`` is
  used (but for the program's own ``detach`` nodes, kept: lowered to ``alias`` as torch does,
  they would let gradients through where eager's stop; a ``detach`` a decomposition makes
  becomes ``alias``) and every other composite (CompositeImplicitAutograd) op decomposes too,
  which lowers the graph to the core ATen set;
- with a table given, an op absent from it is kept whole (as ``torch.export`` does: remove an
  entry from ``default_decompositions()`` to preserve that op);
- size arithmetic and ``getitem`` are recomputed from the new values;
- the placeholders' values (fake tensors in a program, see :mod:`unbroken.ir.fake`) are rebuilt
  as meta tensors of a fresh unbroken environment holding the program's symbols.

The user's stack and module path of each original node are kept on the nodes it becomes. The
result is functionalized and verified like an export. Programs containing ``torch.cond``
subgraphs are refused for now.
"""
from __future__ import annotations

from dataclasses import replace

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ..ir import fake
from ..ir.data_dependent import DATA_DEPENDENT_SIZES, SCALAR_OPS, integer_indexing
from ..ir.meta_keys import NEW_VALUE_OF_FIRST, SAVED_THEN_WRITTEN, USER_FRAMES
from ..ir.parts import ProgramParts
from ..ir.recorder import Recorder
from ..ir.signature import with_output_names
from ..ir.verifier import GRAD_MODE_BUILTINS
from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.torch_compat import (
    OpOverload,
    auto_functionalized,
    core_aten_decompositions,
    enable_python_dispatcher,
    op_schema,
    symbolic_shapes_config,
)
from .dce import dead_code_elimination
from .functionalize import functionalize
from .preserved_writes import close_module_calls

__all__ = ["decompose"]


# How the user wrote the higher-order ops whose subgraphs block decomposition.
_SUBGRAPH_OPS = {"cond": "torch.cond", "while_loop": "torch.while_loop",
                 "autograd_function_apply": "a custom autograd.Function (under grad mode)"}


def decompose(program: ProgramParts, decomp_table=None) -> ProgramParts:
    """The program with its ops lowered through ``decomp_table`` (see the module docstring)."""
    operators = sorted({_SUBGRAPH_OPS.get(user.target.__name__, user.target.__name__)
                        for node in program.graph_module.graph.nodes if node.op == "get_attr"
                        for user in node.users})
    if operators:
        raise UnsupportedError(f"run_decompositions() on a program with "
                               f"{' and '.join(operators)} is not supported yet", code="UB117",
                               hint="Decompose before adding control flow, or keep the program "
                                    "as exported.")
    table, keep_others = _table(decomp_table)
    recorder, current, symbols = _new_recorder(program, table, keep_others)
    values: dict[fx.Node, object] = {}
    # unbroken's environment decides every size question; torch's backed-size-oblivious mode
    # (which torch.onnx.export turns on around this call) would ask torch's own SymNode.
    with enable_python_dispatcher(), symbolic_shapes_config.patch(backed_size_oblivious=False):
        for node in program.graph_module.graph.nodes:
            current[0] = node
            values[node] = _rerecord(recorder, node, values, table, keep_others, symbols)
            _keep_write_mark(node, values, recorder.builder)
            _keep_saved_mark(node, values, recorder.builder)
    graph_module = recorder.builder.graph_module()
    signature = with_output_names(program.graph_signature, recorder.builder.graph)
    kept = _kept_nodes(program.module_calls, values, recorder.builder)
    graph_module, signature = functionalize(graph_module, signature)
    _drop_inner_aliases(graph_module, keep=set(kept.values()))
    dead_code_elimination(graph_module)
    mapping = symbols[1]
    module_calls = _renamed_calls(program.module_calls, kept, graph_module)
    if module_calls:
        signature, module_calls = close_module_calls(graph_module.graph, signature,
                                                     module_calls, _lost_call)
        graph_module.recompile()
    return replace(program, graph_module=graph_module, graph_signature=signature,
                   module_calls=module_calls,
                   range_constraints={mapping[s]: r for s, r in program.range_constraints.items()},
                   hints={mapping[s]: h for s, h in program.hints.items() if s in mapping},
                   dialect="ATEN")


def _kept_nodes(calls, values: dict, builder) -> dict:
    """Old node name -> new node, for the nodes the preserved module calls name."""
    wanted = set().union(*(call.node_names() for call in calls)) if calls else set()
    return {node.name: builder.node_of(value) for node, value in values.items()
            if node.name in wanted and isinstance(value, torch.Tensor)}


def _renamed_calls(calls, kept: dict, graph_module: fx.GraphModule) -> tuple:
    """The preserved module calls naming the new nodes; UnsupportedError when decomposition
    lost one of their values."""
    present = set(graph_module.graph.nodes)
    for call in calls:
        lost = sorted(n for n in call.node_names() if kept.get(n) not in present)
        if lost:
            raise UnsupportedError(
                f"run_decompositions() cannot keep the preserved call signature of "
                f"`{call.fqn}`: its values {', '.join(lost)} are not in the decomposed graph",
                code="UB117", hint="Keep the program as exported, or export without "
                                   "preserve_module_call_signature for this submodule.")
    return tuple(call.renamed({old: kept[old].name for old in call.node_names()})
                 for call in calls)


def _keep_write_mark(node: fx.Node, values: dict, builder) -> None:
    """The node now holding the value of a write (``NEW_VALUE_OF_FIRST``) is marked too when
    its first argument is still the written tensor's node (a decomposition may end
    elsewhere: then it is not, and a preserved call that passes the write on is refused)."""
    value = values.get(node)
    if not node.meta.get(NEW_VALUE_OF_FIRST) or not isinstance(value, torch.Tensor) or \
            not builder.is_tracked(value):
        return
    new, first = builder.node_of(value), node.args[0]
    written = values.get(first)
    if new.args and isinstance(written, torch.Tensor) and builder.is_tracked(written) and \
            new.args[0] is builder.node_of(written):
        new.meta[NEW_VALUE_OF_FIRST] = True


def _keep_saved_mark(node: fx.Node, values: dict, builder) -> None:
    """A node marked ``SAVED_THEN_WRITTEN`` (backward through it raises where eager's does)
    passes the mark to the node(s) now making its value: with the positions of the arguments
    whose ``requires_grad`` decides, where those are arguments of the new node (an op kept
    whole, a decomposition ending in an op reading them); else for every call recording a
    gradient (``((),)``): backward may then raise where eager's runs, never the reverse."""
    mark = node.meta.get(SAVED_THEN_WRITTEN)
    if mark is None:
        return
    message, positions, patterns = mark
    leaves = pytree.tree_leaves((node.args, node.kwargs))
    arguments = [values.get(leaves[i]) for i in positions]
    argument_nodes = [builder.node_of(a) if isinstance(a, torch.Tensor) and builder.is_tracked(a)
                      else None for a in arguments]
    for value in pytree.tree_leaves(values.get(node)):
        if not isinstance(value, torch.Tensor) or not builder.is_tracked(value):
            continue
        new = builder.node_of(value)
        new_leaves = pytree.tree_leaves((new.args, new.kwargs))
        found = [next((j for j, leaf in enumerate(new_leaves) if leaf is argument), None)
                 if argument is not None else None for argument in argument_nodes]
        new.meta[SAVED_THEN_WRITTEN] = (message, tuple(found), patterns) \
            if None not in found else (message, (), ((),))


def _lost_call(fqn: str, what: str) -> UnsupportedError:
    return UnsupportedError(
        f"run_decompositions() cannot keep the preserved call signature of `{fqn}`: {what}",
        code="UB117", hint="Keep the program as exported, or export without "
                           "preserve_module_call_signature for this submodule.")


def _drop_inner_aliases(graph_module: fx.GraphModule, keep=frozenset()) -> None:
    """Bypass the ``aten.alias`` nodes decompositions leave (torch's references express "the
    same tensor" as a view of it): in a functional graph a view is its base, except where the
    graph returns it (an output that is a view of an input stays one, as in eager) or a
    preserved call takes it (``keep``: see ``passes.preserved_writes``)."""
    output = next(n for n in reversed(graph_module.graph.nodes) if n.op == "output")
    returned = set(output.all_input_nodes) | set(keep)
    for node in list(graph_module.graph.nodes):
        if node.target is torch.ops.aten.alias.default and node not in returned:
            node.replace_all_uses_with(node.args[0])
    graph_module.recompile()


def _table(decomp_table):
    """(op -> decomposition, whether ops absent from the table are kept whole)."""
    if decomp_table is None:
        return core_aten_decompositions(), False
    return dict(decomp_table.items()), True


def _new_recorder(program: ProgramParts, table, keep_others):
    """A recorder over an unbroken environment holding the program's symbols (the program's own
    when it kept it: its ranges and facts; else one rebuilt from the ranges and hints), with
    the table applied to the ops decompositions call too; ``current[0]`` is the original node
    being re-recorded, whose location the new nodes take. Returns the recorder, ``current``
    and ``(env, old symbol -> new symbol)``."""
    if program.env is not None:
        env, mapping = program.env, {s: s for s in program.range_constraints}
    else:
        env, mapping = fake.unbroken_env(program.range_constraints, program.hints)
    current = [None]
    recorder = Recorder(
        env=env,
        frames_provider=lambda: current[0].meta.get(USER_FRAMES, ()) if current[0] else (),
        module_stack_provider=lambda: current[0].meta.get("nn_module_stack", {})
        if current[0] else {},
        allow_meta_constants=True, decompositions=table,
        decompose_composites="aliasing" if keep_others else True)
    return recorder, current, (env, mapping)


def _rerecord(recorder, node, values, table, keep_others, symbols):
    if node.op == "placeholder":
        return _placeholder(recorder, node, *symbols)
    if node.op == "output":
        recorder.builder.set_output([_value(v, values) for v in node.args[0]])
        return None
    args = pytree.tree_map(lambda v: _value(v, values), node.args)
    kwargs = pytree.tree_map(lambda v: _value(v, values), node.kwargs)
    target = node.target
    if target in GRAD_MODE_BUILTINS:  # copied, never run: they would set this process's mode
        return recorder.builder.record_grad_mode_call(target, args, node.meta.get("val"))
    if target is auto_functionalized():  # a custom op writing its arguments: kept whole
        with recorder.recording():
            return recorder.record_opaque(target, args, kwargs)
    if not isinstance(target, OpOverload):
        return target(*args, **kwargs)  # getitem on recorded outputs, size arithmetic
    if target in SCALAR_OPS or (target in DATA_DEPENDENT_SIZES
                                and not integer_indexing(target, args)):
        # the value only tensor data decides: keep the program's symbol (and its facts);
        # x[i] with integer index tensors has a shape the index decides, as in the recorder
        return recorder.record_data_dependent(target, args, kwargs,
                                              fake.to_meta(node.meta["val"], *symbols))
    with recorder.recording():
        if target is torch.ops.aten.detach.default and not keep_others and \
                _may_carry_gradient(node.args[0]):
            # the program's own detach (``x.detach()``, a read of a value written under
            # no_grad) stops gradients in eager: the default table's ``alias`` would not
            return recorder.record_opaque(target, args, kwargs)
        if target in table:
            return table[target](*args, **kwargs)
        if keep_others:
            return recorder.record_opaque(target, args, kwargs)
        return target(*args, **kwargs)


def _may_carry_gradient(node) -> bool:
    """Whether the value of ``node`` may require grad at run time: a floating-point or
    complex tensor not made by a factory (``full``, ``zeros_like``...: no tensor argument
    passes it a gradient)."""
    value = node.meta.get("val") if isinstance(node, fx.Node) else None
    if not (isinstance(value, torch.Tensor)
            and (value.dtype.is_floating_point or value.dtype.is_complex)):
        return False
    if node.op != "call_function" or not isinstance(node.target, OpOverload):
        return True
    name = op_schema(node.target).name
    return not (name.endswith("_like") or not any(
        isinstance(a.type, torch.TensorType) for a in op_schema(node.target).arguments))


def _placeholder(recorder, node, env, mapping):
    val = fake.to_meta(node.meta.get("val"), env, mapping)
    new = recorder.builder.add_placeholder(node.name, val, user_input=True)
    if isinstance(val, torch.Tensor):
        for dim, size in enumerate(val.shape):
            if isinstance(size, torch.SymInt):
                recorder.builder.bind_symbol(size.node.expr, new, dim)
    return val


def _value(value, values):
    return values[value] if isinstance(value, fx.Node) else value


