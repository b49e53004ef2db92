"""The dialect check for exported graphs. Run it after every pass (tests do).

An exported graph module holds, and :func:`verify` checks:

1. one graph: no ``call_module``/``call_method`` nodes; ``get_attr`` only names a
   ``GraphModule`` (the body of a higher-order op such as ``cond``), never a tensor (state is
   lifted to inputs);
2. every value is defined before use (``Graph.lint``);
3. placeholders come first and match the signature's input specs one to one, in order, by name
   and by value kind; user inputs come after all lifted state;
4. every ``call_function`` target is an ``OpOverload`` or a ``HigherOrderOperator``, or
   ``operator.getitem`` on a multi-output node, or a symbolic-int builtin (``operator.add``,
   ``torch.sym_max`` ...), or a grad-mode call (``torch._C._set_grad_enabled``);
5. no op mutates (``op_schema(op).is_mutable``): the graph is functional;
6. every node except ``output``/``get_attr`` has ``meta["val"]``;
7. the single output node returns a tuple matching the output specs one to one; mutation outputs
   come before user outputs, name an existing parameter / buffer / user input, each at most
   once;
8. when given an ``ExportedProgram``: every lifted input's target is in ``state_dict`` or
   ``constants`` as its kind says, with its placeholder's dtype and (static) shape, and no two
   inputs read the same entry.

A violation raises :class:`DialectViolation`, an :class:`InternalError` naming the node and the
user location recorded on it: in a program unbroken built it is our bug; ``ir.serialize``
catches exactly this type to blame a loaded file's content instead (any other InternalError
met while loading stays ours).
"""
from __future__ import annotations

import math
import operator

import torch

from unbroken.ir.meta_keys import USER_FRAMES
from unbroken.ir.signature import (
    ConstantArgument,
    InputKind,
    OutputKind,
    SymIntArgument,
    TensorArgument,
    mutation_specs,
)
from unbroken.symbolic.diagnostics import InternalError
from unbroken.symbolic.torch_compat import (
    HigherOrderOperator,
    OpOverload,
    op_schema,
    set_grad_enabled,
)

__all__ = ["verify", "ALLOWED_BUILTINS", "GRAD_MODE_BUILTINS", "DialectViolation"]

#: Python callables allowed as ``call_function`` targets: arithmetic on symbolic ints.
ALLOWED_BUILTINS = frozenset({
    operator.add, operator.mul, operator.sub, operator.truediv, operator.floordiv,
    operator.mod, operator.pow, operator.neg, operator.abs, operator.ge, operator.le,
    operator.gt, operator.lt, operator.eq, operator.ne, operator.and_, operator.or_,
    operator.not_, operator.lshift, operator.rshift, math.ceil, math.floor, math.trunc, round,
    torch.sym_int, torch.sym_float, torch.sym_ite, torch.sym_max, torch.sym_min, torch.sym_not,
    torch.sym_sqrt, torch.sym_sum,
})

#: Grad-mode regions (``with torch.no_grad():``): read the caller's mode, set one, set it back.
GRAD_MODE_BUILTINS = frozenset({torch.is_grad_enabled, set_grad_enabled})

_MUTATION_KINDS = (OutputKind.PARAMETER_MUTATION, OutputKind.BUFFER_MUTATION,
                   OutputKind.USER_INPUT_MUTATION)


class DialectViolation(InternalError):
    """The graph breaks a rule of the exported dialect (see the module docstring)."""


def _fail(message: str, node: torch.fx.Node | None = None, cause=None) -> DialectViolation:
    frames = node.meta.get(USER_FRAMES, ()) if node is not None else ()
    where = f" (node {node.format_node()})" if node is not None else ""
    return DialectViolation(f"exported graph is invalid: {message}{where}", frames=frames,
                            cause=cause)


def verify(ep_or_graph_module, signature=None) -> None:
    """Check the exported-graph dialect; raise InternalError at the first violation.

    Args:
        ep_or_graph_module: an ``ExportedProgram`` (its graph, signature, state_dict and constants
            are checked) or a ``torch.fx.GraphModule`` (then ``signature`` is required).
        signature: the ``ExportGraphSignature`` for a bare graph module; ignored for a program.
    """
    program = None
    if isinstance(ep_or_graph_module, torch.fx.GraphModule):
        graph_module = ep_or_graph_module
        if signature is None:
            raise InternalError("verify(graph_module) needs the graph signature")
    else:
        program = ep_or_graph_module
        graph_module, signature = program.graph_module, program.graph_signature
    _check_structure(graph_module)
    _check_placeholders(graph_module.graph, signature)
    _check_output(graph_module.graph, signature)
    if program is not None:
        _check_state(program)


# -- 1, 2, 4, 5, 6: structure and ops ---------------------------------------------------------
def _check_structure(graph_module: torch.fx.GraphModule) -> None:
    try:
        graph_module.graph.lint()
    except Exception as error:  # fx raises RuntimeError with the node in the text
        raise _fail(f"graph lint failed: {error}", cause=error) from error
    for node in graph_module.graph.nodes:
        _check_node(graph_module, node)


def _check_node(graph_module, node: torch.fx.Node) -> None:
    if node.op in ("call_module", "call_method"):
        raise _fail(f"{node.op} nodes are not allowed; calls must be inlined to ops", node)
    if node.op == "get_attr":
        _check_get_attr(graph_module, node)
        return
    if node.op != "output" and "val" not in node.meta:
        raise _fail(f"node {node.name!r} has no meta['val']", node)
    if node.op == "call_function":
        _check_target(node)


def _check_get_attr(graph_module, node: torch.fx.Node) -> None:
    try:
        value = graph_module.get_submodule(node.target)
    except AttributeError:
        value = None
    if not isinstance(value, torch.fx.GraphModule):
        raise _fail(f"get_attr {node.target!r} does not name a subgraph; tensors must be lifted "
                    f"to inputs", node)
    _check_structure(value)


def _check_target(node: torch.fx.Node) -> None:
    target = node.target
    if isinstance(target, OpOverload):
        if op_schema(target).is_mutable:
            raise _fail(f"op {target} mutates its inputs; the graph must be functional", node)
    elif isinstance(target, HigherOrderOperator):
        return
    elif target is operator.getitem:
        source = node.args[0]
        if not isinstance(source, torch.fx.Node) or not isinstance(
                source.meta.get("val"), (tuple, list)):
            raise _fail("operator.getitem is only allowed on a multi-output node", node)
    elif target not in ALLOWED_BUILTINS and target not in GRAD_MODE_BUILTINS:
        raise _fail(f"call_function target {target!r} is not an op overload, a higher-order op "
                    f"or an allowed builtin", node)


# -- 3: placeholders ---------------------------------------------------------------------------
_ARG_VALUE_TYPES = {
    TensorArgument: (torch.Tensor,),
    SymIntArgument: (torch.SymInt, int),
}


def _check_placeholders(graph: torch.fx.Graph, signature) -> None:
    nodes = list(graph.nodes)
    placeholders = [n for n in nodes if n.op == "placeholder"]
    if nodes[:len(placeholders)] != placeholders:
        first = next(n for n in nodes if n.op != "placeholder")
        raise _fail("placeholders must come before every other node", first)
    specs = signature.input_specs
    if len(placeholders) != len(specs):
        raise _fail(f"graph has {len(placeholders)} placeholders but the signature has "
                    f"{len(specs)} input specs")
    for node, spec in zip(placeholders, specs):
        _check_placeholder(node, spec)
    kinds = [s.kind for s in specs]
    if InputKind.USER_INPUT in kinds:
        first_user = kinds.index(InputKind.USER_INPUT)
        if any(k != InputKind.USER_INPUT for k in kinds[first_user:]):
            raise _fail("lifted parameters/buffers/constants must come before user inputs")


def _check_placeholder(node: torch.fx.Node, spec) -> None:
    if node.name != spec.arg.name:
        raise _fail(f"placeholder {node.name!r} does not match input spec {spec}", node)
    if spec.kind != InputKind.USER_INPUT and spec.target is None:
        raise _fail(f"lifted input {node.name!r} has no target", node)
    if spec.kind != InputKind.USER_INPUT and not isinstance(spec.arg, TensorArgument):
        raise _fail(f"lifted input {node.name!r} must be a tensor argument", node)
    expected = _ARG_VALUE_TYPES.get(type(spec.arg))
    value = node.meta.get("val")
    if expected is not None and not isinstance(value, expected):
        raise _fail(f"placeholder {node.name!r} is a {type(spec.arg).__name__} but its val is "
                    f"a {type(value).__name__}", node)
    if isinstance(spec.arg, ConstantArgument) and isinstance(value, torch.Tensor):
        raise _fail(f"placeholder {node.name!r} is a specialized constant but its val is a "
                    f"tensor", node)


# -- 7: output ---------------------------------------------------------------------------------
def _output_node(graph: torch.fx.Graph) -> torch.fx.Node:
    outputs = [n for n in graph.nodes if n.op == "output"]
    if len(outputs) != 1:
        raise _fail(f"graph must have exactly one output node, has {len(outputs)}")
    node = outputs[0]
    if len(node.args) != 1 or not isinstance(node.args[0], (tuple, list)):
        raise _fail("the output node must return one tuple of values", node)
    return node


def _check_output(graph: torch.fx.Graph, signature) -> None:
    node = _output_node(graph)
    values, specs = node.args[0], signature.output_specs
    if len(values) != len(specs):
        raise _fail(f"graph returns {len(values)} values but the signature has {len(specs)} "
                    f"output specs", node)
    for value, spec in zip(values, specs):
        _check_output_value(node, value, spec)
    _check_mutation_specs(node, signature)


def _check_output_value(node: torch.fx.Node, value, spec) -> None:
    if isinstance(spec.arg, ConstantArgument):
        if isinstance(value, torch.fx.Node) or value != spec.arg.value:
            raise _fail(f"output {value!r} does not match constant output spec {spec}", node)
        return
    if not isinstance(value, torch.fx.Node) or value.name != spec.arg.name:
        raise _fail(f"output {value!r} does not match output spec {spec}", node)


def _check_mutation_specs(node: torch.fx.Node, signature) -> None:
    kinds = [s.kind for s in signature.output_specs]
    mutations = [k in _MUTATION_KINDS for k in kinds]
    if mutations != sorted(mutations, reverse=True):
        raise _fail("mutation outputs must come before user outputs", node)
    user_inputs = {s.arg.name for s in signature.input_specs if s.kind == InputKind.USER_INPUT}
    valid = {OutputKind.BUFFER_MUTATION: set(signature.buffers),
             OutputKind.PARAMETER_MUTATION: set(signature.parameters),
             OutputKind.USER_INPUT_MUTATION: user_inputs}
    seen = set()
    for spec in mutation_specs(signature):
        if spec.target not in valid[spec.kind] or spec.target in seen:
            raise _fail(f"mutation output {spec} names an unknown or repeated target", node)
        seen.add(spec.target)


# -- 8: state ----------------------------------------------------------------------------------
def _state_store(program, spec):
    if spec.kind == InputKind.PARAMETER:
        return program.state_dict, "state_dict"
    if spec.kind == InputKind.BUFFER:
        if spec.persistent is False:
            return program.constants, "constants"
        return program.state_dict, "state_dict"
    if spec.kind == InputKind.CONSTANT_TENSOR:
        return program.constants, "constants"
    return None, ""


def _check_state(program) -> None:
    placeholders = {n.name: n for n in program.graph.find_nodes(op="placeholder")}
    seen: dict[tuple[str, str], str] = {}
    for spec in program.graph_signature.input_specs:
        store, store_name = _state_store(program, spec)
        if store is None:
            continue
        tensor = store.get(spec.target)
        if not isinstance(tensor, torch.Tensor):
            raise _fail(f"{spec.kind.name.lower()} {spec.target!r} (input {spec.arg.name!r}) is "
                        f"missing from the program's {store_name}")
        other = seen.setdefault((store_name, spec.target), spec.arg.name)
        if other != spec.arg.name:
            raise _fail(f"inputs {other!r} and {spec.arg.name!r} both read {store_name} entry "
                        f"{spec.target!r}: one of them would get the other's value")
        _check_state_tensor(placeholders.get(spec.arg.name), tensor, spec.target)


def _check_state_tensor(node, tensor: torch.Tensor, target: str) -> None:
    """The stored tensor is what the placeholder's metadata says (dtype and static shape)."""
    value = node.meta.get("val") if node is not None else None
    if not isinstance(value, torch.Tensor):
        return
    if value.dtype != tensor.dtype:
        raise _fail(f"{target!r} holds {tensor.dtype} but input {node.name!r} is "
                    f"{value.dtype}", node)
    static = all(isinstance(d, int) for d in value.shape)
    if static and tuple(value.shape) != tuple(tensor.shape):
        raise _fail(f"{target!r} has shape {list(tensor.shape)} but input {node.name!r} has "
                    f"{list(value.shape)}", node)
