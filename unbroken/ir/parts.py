"""The parts of an exported program, and how they become torch's ``ExportedProgram``.

unbroken's stages (the pipeline, ``run_decompositions``, loading a saved file) produce a
:class:`ProgramParts`: the functional graph with unbroken's values (meta tensors whose sizes are
unbroken's symbols), the signature, the state, the ranges and the pytree specs.
:func:`torch_program_args` turns those parts into the arguments of torch's public constructor
``torch.export.ExportedProgram(...)``, crossing the boundary to torch's conventions:

- every ``node.meta["val"]`` becomes a fake tensor on the real device, with sizes from a torch
  ``ShapeEnv`` built from unbroken's symbols (:mod:`unbroken.ir.fake`);
- ``range_constraints`` holds torch's ``ValueRanges`` (``int_oo`` for unbounded);
- ``module_call_graph`` has the root entry (pytree specs, ``forward`` argument names) and one
  entry per submodule, so ``torch.export.unflatten`` rebuilds the hierarchy;
- nodes carry the metadata torch's passes read: ``nn_module_stack`` in torch's form (the root
  module first), ``source_fn_stack``, ``torch_fn``, ``from_node``, ``stack_trace``;
- the verifier is torch's for the dialect: ``TRAINING`` for ``export()``'s output (as
  ``torch.export.export`` says), ``ATEN`` after ``run_decompositions()``.

The product class built from them is :class:`unbroken.program.ExportedProgram` (a package-root
module: it also runs passes).
"""
from __future__ import annotations

import sys
from collections.abc import Mapping
from dataclasses import dataclass, field

import torch
import torch.fx as fx
from torch.export import ModuleCallEntry, ModuleCallSignature

from unbroken.ir import fake, grad_regions
from unbroken.ir.meta_keys import LAYOUT_READ
from unbroken.ir.signature import ExportGraphSignature, InputKind, TensorArgument
from unbroken.symbolic.diagnostics import UnsupportedError
from unbroken.symbolic.torch_compat import (
    NodeSource,
    NodeSourceAction,
    TrainingIRVerifier,
    Verifier,
)

__all__ = ["ProgramParts", "ModuleCall", "torch_program_args", "torch_graph",
           "as_graph_module", "DIALECT_VERIFIERS"]

#: torch's verifier for each dialect unbroken produces.
DIALECT_VERIFIERS = {"TRAINING": TrainingIRVerifier, "ATEN": Verifier}


@dataclass(frozen=True, slots=True)
class ModuleCall:
    """The signature of one call of a submodule named in ``preserve_module_call_signature``
    (what torch's ``ModuleCallSignature`` says, without the ``forward`` argument names).

    fqn:     the submodule's path; ``path@n`` for its n-th call (n >= 1), as torch names it.
    inputs:  one torch ``TensorArgument`` (a graph node's name) or ``ConstantArgument`` per
             flattened leaf of the call's ``(args, kwargs)``; in_spec: their pytree spec.
    outputs, out_spec: the same for the value the call returned.
    """

    fqn: str
    inputs: tuple
    in_spec: object
    outputs: tuple
    out_spec: object

    def renamed(self, names: Mapping) -> ModuleCall:
        """This call with the nodes named in ``names`` (old name -> new) renamed."""
        def rename(arg):
            if isinstance(arg, TensorArgument) and arg.name in names:
                return TensorArgument(names[arg.name])
            return arg
        return ModuleCall(self.fqn, tuple(map(rename, self.inputs)), self.in_spec,
                          tuple(map(rename, self.outputs)), self.out_spec)

    def node_names(self) -> set:
        return {a.name for a in (*self.inputs, *self.outputs) if isinstance(a, TensorArgument)}


@dataclass(frozen=True, slots=True)
class ProgramParts:
    """A captured program in unbroken's terms, before it becomes torch's ``ExportedProgram``.

    graph_module:      the functional graph; placeholders ``[*state, *user inputs]``, output
                       ``(*mutations, *user outputs)``; ``meta["val"]`` on every value.
    graph_signature:   what each placeholder and output is.
    state_dict:        parameters and persistent buffers by FQN.
    constants:         lifted tensor constants and non-persistent buffers by name.
    range_constraints: symbol -> range (``lower``/``upper``) of every symbolic size.
    in_spec, out_spec: pytree specs of the user's ``(args, kwargs)`` and of the outputs.
    example_inputs:    the ``(args, kwargs)`` given to export, or None.
    hints:             symbol -> example value of each input-size symbol.
    forward_arg_names: names of ``forward``'s parameters, as called (None: unknown).
    module_types:      submodule FQN (``""`` for the root) -> its class, when known.
    dialect:           ``"TRAINING"`` (export's output) or ``"ATEN"`` (decomposed).
    env:               the unbroken ``ShapeEnvironment`` of the symbols (their ranges and the
                       facts learnt about data-dependent ones), when the stage has it; passes
                       that re-record (``run_decompositions``) keep using it.
    specializations:   the ``Dim.AUTO`` dims export made static because the code pins them
                       (``symbolic.auto.Specialization``: dim, value, reason, user frames).
    module_calls:      the :class:`ModuleCall` of each submodule whose call signature export
                       preserves (``preserve_module_call_signature``).
    strict_layout:     the program holds for the example inputs' strides only (the trace read
                       a layout fact, or the program writes an input after an op that copies
                       or aliases by layout): ``module()`` checks every input's strides.
    """

    graph_module: fx.GraphModule
    graph_signature: ExportGraphSignature
    state_dict: dict
    constants: dict
    range_constraints: dict
    in_spec: object
    out_spec: object
    example_inputs: object = None
    hints: Mapping = field(default_factory=dict)
    forward_arg_names: tuple | None = None
    module_types: Mapping = field(default_factory=dict)
    dialect: str = "TRAINING"
    env: object = None
    specializations: tuple = ()
    strict_layout: bool = False
    module_calls: tuple = ()


def as_graph_module(graph_module) -> fx.GraphModule:
    """A GraphModule for a bare ``fx.Graph`` (over an empty module); a GraphModule as is."""
    if isinstance(graph_module, fx.Graph):
        return fx.GraphModule(torch.nn.Module(), graph_module)
    return graph_module


def torch_program_args(parts: ProgramParts) -> dict:
    """Keyword arguments of ``torch.export.ExportedProgram(...)`` for ``parts`` (see the module
    docstring). The parts' graph is converted in place."""
    graph_module = as_graph_module(parts.graph_module)
    fake.to_fake_graph(graph_module, parts.range_constraints, parts.hints,
                       _placeholder_devices(parts))
    signature, calls = _torch_graph(graph_module, parts)
    return dict(
        root=graph_module, graph=graph_module.graph, graph_signature=signature,
        state_dict=_state_dict(parts),
        range_constraints={s: fake.torch_range(r) for s, r in parts.range_constraints.items()},
        module_call_graph=module_call_graph(parts, graph_module, calls),
        example_inputs=parts.example_inputs, constants=dict(parts.constants),
        verifiers=[DIALECT_VERIFIERS[parts.dialect]])


def torch_graph(parts: ProgramParts) -> fx.GraphModule:
    """The parts' graph in torch's form, as :func:`torch_program_args` makes it (size reads
    hoisted, torch's node metadata, grad-mode regions as torch's higher-order op), but with
    unbroken's values left in ``meta["val"]``: for comparing programs node by node (the
    traces at size 1 of ``unbroken.size_one``), where fake values would only cost the
    conversion (most of building a program with symbolic sizes). Converted in place."""
    graph_module = as_graph_module(parts.graph_module)
    _torch_graph(graph_module, parts)
    return graph_module


def _torch_graph(graph_module: fx.GraphModule, parts: ProgramParts) -> tuple:
    """torch's graph conventions applied in place; ``(signature, module calls)`` renamed to
    the nodes they now name."""
    _hoist_size_reads(graph_module)
    _annotate_nodes(graph_module, parts.module_types)
    graph_module.meta[LAYOUT_READ] = bool(parts.strict_layout)
    signature, renames = grad_regions.to_torch_regions(graph_module, parts.graph_signature)
    calls = tuple(call.renamed(renames) for call in parts.module_calls)
    _check_module_calls(calls, graph_module)
    return signature, calls


def _state_dict(parts: ProgramParts) -> dict:
    """The state with every parameter an ``nn.Parameter`` (torch's verifier requires it; the
    storage is shared, ``requires_grad`` kept)."""
    parameters = {s.target for s in parts.graph_signature.input_specs
                  if s.kind == InputKind.PARAMETER}
    return {name: torch.nn.Parameter(value, requires_grad=value.requires_grad)
            if name in parameters and not isinstance(value, torch.nn.Parameter) else value
            for name, value in parts.state_dict.items()}


def _placeholder_devices(parts: ProgramParts) -> dict:
    """Placeholder name -> device of the real tensor behind it (state, constant or input)."""
    devices = {}
    user_leaves = []
    if parts.example_inputs is not None:
        user_leaves = torch.utils._pytree.tree_leaves(parts.example_inputs)
    users = iter(user_leaves)
    for spec in parts.graph_signature.input_specs:
        if spec.kind == InputKind.USER_INPUT:
            value = next(users, None)
        else:
            value = parts.state_dict.get(spec.target, parts.constants.get(spec.target))
        if isinstance(value, torch.Tensor) and value.device.type != "meta":
            devices[spec.arg.name] = value.device
    return devices


# -- module call graph ---------------------------------------------------------------------------
def module_call_graph(parts: ProgramParts, graph_module: fx.GraphModule, calls=()) -> list:
    """The root entry (specs and argument names) then one entry per submodule FQN, with the
    signature of ``calls`` (:class:`ModuleCall`) for the preserved ones."""
    root = ModuleCallEntry("", ModuleCallSignature(
        inputs=[], outputs=[], in_spec=parts.in_spec, out_spec=parts.out_spec,
        forward_arg_names=list(parts.forward_arg_names)
        if parts.forward_arg_names is not None else None))
    preserved = {call.fqn: ModuleCallSignature(
        inputs=list(call.inputs), outputs=list(call.outputs), in_spec=call.in_spec,
        out_spec=call.out_spec, forward_arg_names=None) for call in calls}
    fqns = dict.fromkeys([*_submodule_fqns(parts, graph_module), *preserved])
    return [root, *(ModuleCallEntry(fqn, preserved.get(fqn)) for fqn in fqns)]


def module_calls_of(entries) -> tuple:
    """The :class:`ModuleCall` of each submodule entry of torch's ``module_call_graph`` that
    has a signature (the preserved ones)."""
    return tuple(ModuleCall(e.fqn, tuple(e.signature.inputs), e.signature.in_spec,
                            tuple(e.signature.outputs), e.signature.out_spec)
                 for e in entries if e.fqn and e.signature is not None)


def _check_module_calls(calls, graph_module: fx.GraphModule) -> None:
    """Every node a preserved signature names is a value of the top-level graph (a call
    inside a grad-mode region is not: torch's unflatten could not cut it out)."""
    names = {n.name for n in graph_module.graph.nodes}
    for call in calls:
        missing = sorted(call.node_names() - names)
        if missing:
            raise UnsupportedError(
                f"preserve_module_call_signature: the call of `{call.fqn}` passes or returns "
                f"{', '.join(missing)}, computed inside a grad-mode region (`with "
                "torch.no_grad()`...) that the call does not enclose",
                hint=f"Move the region inside `{call.fqn}` or around the whole call, or leave "
                     f"`{call.fqn}` out of preserve_module_call_signature.")


def _submodule_fqns(parts: ProgramParts, graph_module) -> list:
    """Every submodule FQN: the known module types, the owners of state, and the module paths
    the nodes were recorded in (``block.0``, ``block.0.attn``...), parents before children."""
    found = dict.fromkeys(fqn for fqn in parts.module_types if fqn)
    owners = [fqn.rpartition(".")[0] for fqn in (*parts.state_dict, *parts.constants)]
    paths = [path for node in graph_module.graph.nodes
             for path, _ in node.meta.get("nn_module_stack", {}).values()]
    for fqn in dict.fromkeys((*owners, *paths)):  # (each node repeats its block's paths)
        fqn = ".".join(atom.partition("@")[0] for atom in fqn.split(".")) if fqn else ""
        atoms = fqn.split(".") if fqn else []
        for end in range(1, len(atoms) + 1):
            found.setdefault(".".join(atoms[:end]))
    return list(found)


# -- node metadata -------------------------------------------------------------------------------
_ROOT_KEY = "L__self__"


def _type_name(cls) -> str:
    return f"{cls.__module__}.{cls.__qualname__}"


def _resolve_type(name: str):
    """The class a ``module.Qualified`` name denotes, looked up among imported modules only."""
    module_name, _, qualname = name.rpartition(".")
    while module_name and module_name not in sys.modules:
        module_name, _, head = module_name.rpartition(".")
        qualname = f"{head}.{qualname}"
    value = sys.modules.get(module_name)
    for atom in qualname.split("."):
        value = getattr(value, atom, None)
    return value if isinstance(value, type) else None


def _hoist_size_reads(graph_module: fx.GraphModule) -> None:
    """Move the size reads of the inputs (``sym_size`` and the integer arithmetic on them,
    recorded outside any submodule) to just after the placeholders.

    unbroken records an input's size read in the root scope where a submodule first asks for
    it, which cuts that submodule's run of nodes in two; ``torch.export.unflatten`` would take
    the two halves for two calls. The moved nodes are pure and depend only on placeholders and
    on each other, so the order stays topological."""
    graph = graph_module.graph
    anchor = next((n for n in graph.nodes if n.op != "placeholder"), None)
    moved: set = set()
    for node in list(graph.nodes):
        if node.op != "call_function" or anchor is None or node is anchor:
            continue
        scoped = any(path for path, _ in node.meta.get("nn_module_stack", {}).values())
        inputs_ready = all(n.op == "placeholder" or n in moved for n in node.all_input_nodes)
        if not scoped and inputs_ready and isinstance(node.meta.get("val"), torch.SymInt):
            anchor.prepend(node)
            moved.add(node)
    graph_module.recompile()


def _annotate_nodes(graph_module: fx.GraphModule, module_types: Mapping) -> None:
    """torch's node metadata (see the module docstring), derived from what the recorder kept."""
    # the root's class may be unknown (a loaded program): torch's unflatten needs the entry
    root_entry = {_ROOT_KEY: ("", _type_name(module_types.get("", torch.nn.Module)))}
    created = [NodeSource(None, "unbroken.export", NodeSourceAction.CREATE)]
    types: dict = {}
    for node in graph_module.graph.nodes:
        if node.op in ("placeholder", "output"):
            if not node.meta.get("nn_module_stack", True):  # as torch: no stack, not an empty one
                del node.meta["nn_module_stack"]
            continue
        stack = node.meta.get("nn_module_stack", {})
        if _ROOT_KEY not in stack:
            stack = node.meta["nn_module_stack"] = {**root_entry, **stack}
        node.meta.setdefault("from_node", created)
        if node.op != "call_function":
            continue
        target = node.target
        node.meta.setdefault("torch_fn", (node.name, f"{type(target).__name__}."
                                          f"{getattr(target, '__name__', str(target))}"))
        node.meta.setdefault("source_fn_stack", _source_fns(stack, types))


def _source_fns(stack: Mapping, types: dict) -> list:
    """``[(name, module class)]`` for the modules a node was recorded in (root excluded),
    outermost first, as torch's ``source_fn_stack``."""
    result = []
    for key, (path, type_name) in stack.items():
        if not path:
            continue
        if type_name not in types:
            types[type_name] = _resolve_type(type_name)
        if types[type_name] is not None:
            result.append((key, types[type_name]))
    return result
