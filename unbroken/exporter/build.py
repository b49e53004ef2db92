"""Stage 3 of an export: build the program (see ``docs/architecture.md``).

:func:`build_program` takes a settled :class:`~unbroken.exporter.trace.Trace` and its flat
outputs: lifts the constants the recorder met, settles which dims admit size 1
(``size_one.settle``), sets the graph's output, runs the passes (subgraph and root
functionalization, dead-code elimination), collects the preserved module calls and the
ranges, and makes the :class:`~unbroken.program.ExportedProgram` (which runs the verifiers).
"""
from __future__ import annotations

import dataclasses

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ..ir.meta_keys import GRAD_MODE_DECISIONS
from ..ir.parts import ProgramParts, torch_graph
from ..ir.signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from ..passes.dce import dead_code_elimination
from ..passes.functionalize import functionalize
from ..passes.subgraphs import functionalize_subgraphs
from ..program import ExportedProgram
from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.ranges import ValueRange
from ..symbolic.spec import INT_INPUT_MIN
from ..symbolic.torch_compat import enable_python_dispatcher
from .preserved_calls import preserved_signatures
from .trace import Trace

__all__ = ["build_program"]


def build_program(trace: Trace, flat_outputs: list, out_spec, specializations: tuple = (),
                  graph_only: bool = False) -> ExportedProgram | ProgramParts:
    """The program of ``trace`` (whose shapes are settled) returning ``flat_outputs``
    (structured by ``out_spec``); ``specializations``: the ``Dim.AUTO`` dims pinned.
    ``graph_only``: only the graph is needed (``ExportOptions.graph_only``): the parts, the
    graph in torch's form with unbroken's values (``torch_graph``), without the fake values
    and checks of an ``ExportedProgram``."""
    builder, env, output, call = trace.builder, trace.env, trace.output, trace.call
    constant_specs, constants = _lifted_constants(trace)
    _settle_size_one(trace, flat_outputs)
    builder.set_output(flat_outputs)
    constant_specs = _drop_unread_constants(builder.root_graph, constant_specs, constants)
    graph_module = functionalize_subgraphs(builder.graph_module())
    input_specs = _ordered_input_specs(builder.graph, [*trace.input_specs, *constant_specs])
    signature = ExportGraphSignature(input_specs, _output_specs(builder.graph))
    replaced: dict = {}
    graph_module, signature = functionalize(graph_module, signature, replaced)
    _refuse_written_overlapping_state(trace.state_dict, constants, signature)
    writes_inputs = any(s.kind == OutputKind.USER_INPUT_MUTATION
                        for s in signature.mutation_specs)
    strict_layout = output.layout_read or trace.recorder.wrote_layout_dependent or (
        writes_inputs and output.layout_aliasing)
    graph_module = dead_code_elimination(graph_module)
    signature, module_calls = preserved_signatures(graph_module, signature,
                                                   output.preserved_calls, replaced)
    _, in_spec = pytree.tree_flatten((call.args, call.kwargs))
    parts = ProgramParts(
        graph_module, signature, trace.state_dict, constants,
        _range_constraints(trace), in_spec, out_spec,
        example_inputs=(call.args, call.kwargs),
        hints={s: env.hint_of(s) for s, i in env.symbols.items() if i.hint is not None},
        forward_arg_names=tuple(trace.top_dims), module_types=_module_types(call.root),
        env=env, specializations=specializations,
        strict_layout=bool(strict_layout), module_calls=module_calls)
    if graph_only:
        return dataclasses.replace(parts, graph_module=torch_graph(parts))
    program = ExportedProgram.from_parts(parts)
    if output.grad_mode_decisions:  # torch.nn fast paths chosen by the grad mode
        program.graph_module.meta[GRAD_MODE_DECISIONS] = tuple(output.grad_mode_decisions)
    return program


def _lifted_constants(trace: Trace) -> tuple[list[InputSpec], dict]:
    """The input specs of the tensor constants the recorder lifted, and the program's
    constants (the non-persistent buffers, then those)."""
    recorder = trace.recorder
    specs, constants = [], dict(trace.constants)
    for name, tensor in recorder.constants.items():
        target = recorder.constant_targets[name]
        if isinstance(tensor, torch.nn.Parameter):
            # a parameter of a module outside the model: a constant like any tensor there
            # (as torch's non-strict export); an nn.Parameter would be registered as a
            # parameter by fx, where torch's unlifting looks constants up as buffers
            tensor = tensor.detach().requires_grad_(tensor.requires_grad)
        constants[target] = tensor
        specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name), target))
    return specs, constants


_LIFT_FRESH_COPY = torch.ops.aten.lift_fresh_copy.default


def _drop_unread_constants(graph: fx.Graph, specs: list[InputSpec], constants: dict) -> list:
    """The constant specs without those of tensors no node reads: an attribute read into a
    local that is never used, a ``torch.tensor(...)`` made and dropped (its only node the
    copy ``torch.tensor`` makes, ``lift_fresh_copy``, itself unused). torch.export lifts a
    constant only when an op of its graph takes it, before removing dead code; so does this
    (a constant read by an op that dead-code elimination removes later stays, as in torch).
    Their placeholders are erased and they leave ``constants``."""
    placeholders = {n.name: n for n in graph.nodes if n.op == "placeholder"}
    kept = []
    for spec in specs:
        node = placeholders[spec.arg.name]
        copies = [u for u in node.users if u.target is _LIFT_FRESH_COPY and not u.users]
        if len(copies) < len(node.users):
            kept.append(spec)
            continue
        for copy in copies:  # torch.tensor(data)'s own copy, unused: not a read
            graph.erase_node(copy)
        graph.erase_node(node)
        del constants[spec.target]
    return kept


def _settle_size_one(trace: Trace, flat_outputs) -> None:
    """Which dims admit 1 (``size_one.settle``), once the guards have given the input
    facts: a reshape that copies here and views at 1 counts if the program reads layout
    or returns its result; each set of sizes at 1 refused by pattern becomes an
    assertion at the inputs."""
    audit, env = trace.size_one, trace.env
    audit.layout_observed(trace.recorder, flat_outputs, trace.output.layout_read)
    with enable_python_dispatcher():  # the checks re-run meta kernels
        audit.settle(env)
    for refused in audit.refused_sets:
        trace.builder.assert_at_inputs(refused.fact, refused.describe(env.source_of),
                                       refused.guard.frames)


def _module_types(root) -> dict:
    """Submodule FQN -> class, for the program's module call graph and node metadata."""
    if root is None:
        return {}
    return {fqn: type(module) for fqn, module in root.named_modules()}


def _refuse_written_overlapping_state(state_dict: dict, constants: dict, signature) -> None:
    """A buffer written in place that shares memory with another buffer or parameter (a
    buffer registered as a view of another) would be read stale through the other name:
    the program treats state tensors as separate. Refused (UB121)."""
    state = {**state_dict, **constants}
    for spec in signature.mutation_specs:
        written = state.get(spec.target)
        if not isinstance(written, torch.Tensor):
            continue
        for fqn, other in state.items():
            if other is not written and isinstance(other, torch.Tensor) \
                    and _shares_memory(written, other):
                raise UnsupportedError(
                    f"forward() writes the buffer `{spec.target}` in place, and it shares "
                    f"memory with `{fqn}` (one is a view of the other)", code="UB121",
                    hint=f"Register `{fqn}` as its own tensor (e.g. a clone), or compute it "
                         f"from `{spec.target}` inside forward().")


def _ordered_input_specs(graph: fx.Graph, input_specs: list) -> list[InputSpec]:
    by_name = {spec.arg.name: spec for spec in input_specs}
    return [by_name[node.name] for node in graph.nodes if node.op == "placeholder"]


def _output_specs(graph: fx.Graph) -> list[OutputSpec]:
    specs = []
    for value in next(n for n in graph.nodes if n.op == "output").args[0]:
        if isinstance(value, fx.Node):
            is_sym = isinstance(value.meta.get("val"), torch.SymInt)
            arg = SymIntArgument(value.name) if is_sym else TensorArgument(value.name)
        else:
            arg = ConstantArgument("", value)
        specs.append(OutputSpec(OutputKind.USER_OUTPUT, arg, None))
    return specs


def _range_constraints(trace: Trace) -> dict:
    """Input sizes: the spec's ranges, from 1 for the dims no decision of the trace needs
    >= 2 (``unbroken.size_one``); data-dependent values: what torch._check proved."""
    env = trace.env
    ranges = {symbol: env.spec_ranges[symbol] if info.hint is not None
              else env.var_ranges[symbol] for symbol, info in env.symbols.items()}
    with enable_python_dispatcher():  # the size-1 checks re-run meta kernels
        free = trace.size_one.settle(env)
    for symbol in free:
        if ranges[symbol].lower == 2:
            ranges[symbol] = ValueRange(1, ranges[symbol].upper)
    for symbol, value_range in ranges.items():  # an int input unbounded below
        if value_range.lower == INT_INPUT_MIN:
            ranges[symbol] = ValueRange(None, value_range.upper)
    return ranges


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device.type == "meta" or b.device.type == "meta":
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() \
        and a.untyped_storage().nbytes() > 0
