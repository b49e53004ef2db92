"""Tests for unbroken.ir.verifier: a valid graph passes; each kind of bad graph is named."""
import operator

import pytest
import torch
import torch.utils._pytree as pytree

from tests.graph_builder import Builder, aten, meta
from unbroken.ir import (
    ConstantArgument,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
    verify,
)
from unbroken.ir.parts import ProgramParts
from unbroken.program import ExportedProgram
from unbroken.symbolic.diagnostics import InternalError


def good():
    b = Builder()
    w = b.param("lin.weight", meta(3, 4))
    buf = b.buffer("count", meta(1))
    x = b.input("x", meta(2, 4))
    mm = b.call(aten.mm.default, x, b.call(aten.t.default, w))
    new_count = b.call(aten.add.Tensor, buf, 1)
    b.output(new_count, mm)
    b.output_specs[0] = OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(new_count.name),
                                   "count")
    return b


def check(b):
    verify(b.graph_module(), b.signature())


def test_valid_graph_passes():
    check(good())


def test_valid_program_passes_and_checks_state():
    b = good()
    in_spec = pytree.tree_flatten(((torch.ones(2, 4),), {}))[1]
    out_spec = pytree.tree_flatten(torch.ones(1))[1]
    state = {"lin.weight": torch.ones(3, 4), "count": torch.zeros(1)}
    ep = ExportedProgram.from_parts(
        ProgramParts(b.graph_module(), b.signature(), state, {}, {}, in_spec, out_spec))
    verify(ep)
    del state["count"]
    with pytest.raises(InternalError, match="buffer 'count' .* missing from the program's "
                       "state_dict"):
        ExportedProgram.from_parts(
        ProgramParts(b.graph_module(), b.signature(), state, {}, {}, in_spec, out_spec))


def test_signature_required_for_graph_module():
    with pytest.raises(InternalError, match="needs the graph signature"):
        verify(good().graph_module())


def test_call_module_rejected():
    b = good()
    out = next(n for n in b.graph.nodes if n.op == "output")
    with b.graph.inserting_before(out):
        node = b.graph.call_module("sub", (next(iter(b.graph.nodes)),))
    node.meta["val"] = meta(1)
    root = torch.nn.Module()
    root.sub = torch.nn.ReLU()
    with pytest.raises(InternalError, match="call_module nodes are not allowed"):
        verify(torch.fx.GraphModule(root, b.graph), b.signature())


def test_get_attr_of_tensor_rejected():
    b = good()
    gm = b.graph_module()
    gm.register_buffer("stray", torch.ones(1))
    out = next(n for n in gm.graph.nodes if n.op == "output")
    with gm.graph.inserting_before(out):
        gm.graph.get_attr("stray")
    with pytest.raises(InternalError, match="get_attr 'stray' does not name a subgraph"):
        verify(gm, b.signature())


def test_placeholder_after_compute_rejected():
    b = good()
    b.input("late", meta(1))
    with pytest.raises(InternalError, match="placeholders must come before"):
        check(b)


def test_placeholder_count_and_names():
    b = good()
    b.input_specs.pop()
    with pytest.raises(InternalError, match="3 placeholders but the signature has 2"):
        check(b)
    b = good()
    b.input_specs[2] = InputSpec(InputKind.USER_INPUT, TensorArgument("y"), None)
    with pytest.raises(InternalError, match="placeholder 'x' does not match input spec y: "
                       "USER_INPUT"):
        check(b)


def test_user_input_before_state_rejected():
    b = Builder()
    x = b.input("x", meta(2))
    w = b.param("w", meta(2))
    b.output(b.call(aten.add.Tensor, x, w))
    with pytest.raises(InternalError, match="must come before user inputs"):
        check(b)


def test_placeholder_value_kind_checked():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.neg.default, x))
    b.input_specs[0] = InputSpec(InputKind.USER_INPUT, SymIntArgument("x"), None)
    with pytest.raises(InternalError, match="is a SymIntArgument but its val is a"):
        check(b)


@pytest.mark.parametrize("target, match", [
    (torch.relu, "is not an op overload"),
    (aten.relu, "is not an op overload"),
])
def test_non_overload_targets_rejected(target, match):
    b = Builder()
    x = b.input("x", meta(2))
    node = b.graph.call_function(target, (x,))
    node.meta["val"] = meta(2)
    b.output(node)
    with pytest.raises(InternalError, match=match):
        check(b)


def test_getitem_only_on_multi_output():
    b = Builder()
    x = b.input("x", meta(4))
    parts = b.call(aten.split.Tensor, x, 2)
    first = b.graph.call_function(operator.getitem, (parts, 0))
    first.meta["val"] = meta(2)
    b.output(first)
    check(b)
    bad = b.graph.call_function(operator.getitem, (x, 0))
    bad.meta["val"] = meta(2)
    with pytest.raises(InternalError, match="getitem is only allowed on a multi-output node"):
        check(b)


def test_symint_builtins_allowed():
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    env = ShapeEnv()
    s0 = env.create_symintnode(env.create_symbol(4, ConstantSource("d0")), hint=4)
    b = Builder()
    x = b.input("x", torch.empty_strided((s0,), (1,), device="meta"))
    size = b.call(aten.sym_size.int, x, 0)
    double = b.graph.call_function(operator.mul, (size, 2))
    double.meta["val"] = size.meta["val"] * 2
    b.output(double)
    check(b)


def test_mutable_op_rejected_with_user_frames():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.relu_.default, x, line=42))
    with pytest.raises(InternalError, match="mutates its inputs") as info:
        check(b)
    assert info.value.location.lineno == 42
    assert 'File "model.py", line 42' in str(info.value)


def test_missing_val_rejected():
    b = good()
    next(n for n in b.graph.nodes if n.name == "mm").meta.pop("val")
    with pytest.raises(InternalError, match="node 'mm' has no meta\\['val'\\]"):
        check(b)


def test_use_before_definition_rejected():
    b = Builder()
    x = b.input("x", meta(2))
    neg = b.call(aten.neg.default, x)
    b.output(neg)
    with b.graph.inserting_before(neg):
        early = b.graph.call_function(aten.relu.default, (neg,))
    early.meta["val"] = meta(2)
    with pytest.raises(InternalError, match="graph lint failed"):
        check(b)


def test_output_mismatches():
    b = good()
    b.output_specs.pop()
    with pytest.raises(InternalError, match="returns 2 values but the signature has 1"):
        check(b)
    b = good()
    b.output_specs[1] = OutputSpec(OutputKind.USER_OUTPUT, TensorArgument("t"), None)
    with pytest.raises(InternalError, match="does not match output spec t: USER_OUTPUT"):
        check(b)
    b = good()
    b.output_specs.reverse()
    b.graph.find_nodes(op="output")[0].args = (tuple(reversed(b.graph.find_nodes(
        op="output")[0].args[0])),)
    with pytest.raises(InternalError, match="mutation outputs must come before user outputs"):
        check(b)


def test_mutation_target_must_exist():
    b = good()
    b.output_specs[0] = OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument("add"), "nope")
    with pytest.raises(InternalError, match="unknown or repeated target"):
        check(b)
    b = good()
    b.output_specs[0] = OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument("add"), "x")
    check(b)


def test_constant_output_checked():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.neg.default, x), 3)
    check(b)
    b.output_specs[1] = OutputSpec(OutputKind.USER_OUTPUT, ConstantArgument("", 4), None)
    with pytest.raises(InternalError, match="does not match constant output spec"):
        check(b)


def test_higher_order_op_with_subgraphs_allowed():
    def branch(fn):
        sub = torch.fx.Graph()
        arg = sub.placeholder("x")
        arg.meta["val"] = meta(2)
        res = sub.call_function(fn, (arg,))
        res.meta["val"] = meta(2)
        sub.output((res,))
        return torch.fx.GraphModule(torch.nn.Module(), sub)

    b = Builder()
    pred = b.input("pred", meta(dtype=torch.bool))
    x = b.input("x", meta(2))
    root = torch.nn.Module()
    root.true_graph_0 = branch(aten.sin.default)
    root.false_graph_0 = branch(aten.cos.default)
    true_gm, false_gm = b.graph.get_attr("true_graph_0"), b.graph.get_attr("false_graph_0")
    cond = b.graph.call_function(torch.ops.higher_order.cond, (pred, true_gm, false_gm, (x,)))
    cond.meta["val"] = (meta(2),)
    first = b.graph.call_function(operator.getitem, (cond, 0))
    first.meta["val"] = meta(2)
    b.output(first)
    verify(torch.fx.GraphModule(root, b.graph), b.signature())
    root.false_graph_0 = branch(aten.relu_.default)
    with pytest.raises(InternalError, match="mutates"):
        verify(torch.fx.GraphModule(root, b.graph), b.signature())
