"""Tests for unbroken.passes.dce: unused pure nodes go; effects, inputs and outputs stay."""
import torch
import torch.utils._pytree as pytree
from torch.utils._pytree import tree_map_only

from unbroken.ir import (
    ConstantArgument,
    ExportedProgram,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
    verify,
)
from unbroken.passes.dce import dead_code_elimination, is_removable
from unbroken.symbolic.diagnostics import UserFrame


# -- a hand-written recorder (copied in each test file of tests/ir and tests/passes) ----------
def meta(*shape, dtype=torch.float32):
    return torch.empty(shape, dtype=dtype, device="meta")


class Builder:
    """Builds graphs in the recorder's convention: placeholders with meta vals, aten nodes with
    stack traces and user frames, one output tuple; collects the matching signature."""

    def __init__(self):
        self.graph = torch.fx.Graph()
        self.input_specs, self.output_specs = [], []

    def _annotate(self, node, val, line):
        frame = UserFrame("model.py", line, "forward", f"line_{line}()")
        trace = f'  File "model.py", line {line}, in forward\n    line_{line}()'
        node.meta.update(val=val, nn_module_stack={}, user_frames=(frame,), stack_trace=trace)
        return node

    def input(self, name, val, kind=InputKind.USER_INPUT, target=None, persistent=None):
        if isinstance(val, torch.Tensor):
            arg = TensorArgument(name)
        elif isinstance(val, torch.SymInt):
            arg = SymIntArgument(name)
        else:
            arg = ConstantArgument(name, val)
        self.input_specs.append(InputSpec(kind, arg, target, persistent))
        return self._annotate(self.graph.placeholder(name), val, 1)

    def param(self, fqn, val):
        return self.input("p_" + fqn.replace(".", "_"), val, InputKind.PARAMETER, fqn)

    def buffer(self, fqn, val, persistent=True):
        return self.input("b_" + fqn.replace(".", "_"), val, InputKind.BUFFER, fqn, persistent)

    def const(self, name, val):
        return self.input("c_" + name, val, InputKind.CONSTANT_TENSOR, name)

    def call(self, target, *args, line=2, **kwargs):
        vals = tree_map_only(torch.fx.Node, lambda n: n.meta["val"], (args, kwargs))
        vals = tree_map_only(torch.Tensor, lambda t: t.clone(), vals)
        val = tree_map_only(torch.Tensor, lambda t: t.to("meta"), target(*vals[0], **vals[1]))
        name = target._schema.name.split("::")[-1] if hasattr(target, "_schema") else None
        node = self.graph.create_node("call_function", target, args, kwargs, name=name)
        return self._annotate(node, val, line)

    def output(self, *values):
        self.graph.output(tuple(values))
        for v in values:
            arg = (ConstantArgument("", v) if not isinstance(v, torch.fx.Node)
                   else SymIntArgument(v.name) if isinstance(v.meta["val"], torch.SymInt)
                   else TensorArgument(v.name))
            self.output_specs.append(OutputSpec(OutputKind.USER_OUTPUT, arg))

    def graph_module(self):
        return torch.fx.GraphModule(torch.nn.Module(), self.graph)

    def signature(self):
        return ExportGraphSignature(self.input_specs, self.output_specs)

    def program(self, state_dict, constants, args, kwargs=None, outputs=None,
                range_constraints=None):
        in_spec = pytree.tree_flatten((tuple(args), kwargs or {}))[1]
        out_spec = pytree.tree_flatten(outputs)[1]
        return ExportedProgram(self.graph_module(), self.signature(), state_dict, constants,
                               range_constraints or {}, in_spec, out_spec,
                               example_inputs=(tuple(args), kwargs or {}))


aten = torch.ops.aten
# ---------------------------------------------------------------------------------------------


def targets(gm):
    return [n.target for n in gm.graph.nodes if n.op == "call_function"]


def test_removes_dead_chain_and_keeps_live_nodes():
    b = Builder()
    x = b.input("x", meta(3))
    unused = b.input("unused", meta(3))
    dead = b.call(aten.sin.default, b.call(aten.cos.default, x))
    b.call(aten.mul.Tensor, dead, unused)
    b.output(b.call(aten.neg.default, x))
    gm = dead_code_elimination(b.graph_module())
    assert targets(gm) == [aten.neg.default]
    assert [n.name for n in gm.graph.nodes if n.op == "placeholder"] == ["x", "unused"]
    verify(gm, b.signature())
    torch.testing.assert_close(gm(torch.ones(3), torch.ones(3))[0], -torch.ones(3))
    assert "sin" not in gm.code


def test_keeps_outputs_even_if_only_returned():
    b = Builder()
    x = b.input("x", meta(3))
    b.output(b.call(aten.relu.default, x), x)
    gm = dead_code_elimination(b.graph_module())
    assert targets(gm) == [aten.relu.default]


def test_keeps_side_effects_and_mutations():
    b = Builder()
    x = b.input("x", meta(3))
    flag = b.call(aten.gt.Scalar, b.call(aten.sum.default, x), 0)
    b.call(aten._assert_async.msg, flag, "sum must be positive")
    b.call(aten.add_.Tensor, b.call(aten.clone.default, x), 1)
    b.output(x)
    gm = dead_code_elimination(b.graph_module())
    assert aten._assert_async.msg in targets(gm)
    assert aten.add_.Tensor in targets(gm)
    assert targets(gm) == [aten.sum.default, aten.gt.Scalar, aten._assert_async.msg,
                           aten.clone.default, aten.add_.Tensor]


def test_removes_unused_random_ops():
    b = Builder()
    x = b.input("x", meta(3))
    b.call(aten.rand.default, [3], device=torch.device("cpu"))
    b.call(aten.bernoulli.p, x, 0.5)
    b.output(x)
    gm = dead_code_elimination(b.graph_module())
    assert targets(gm) == []


def test_no_change_keeps_code():
    b = Builder()
    x = b.input("x", meta(3))
    b.output(b.call(aten.neg.default, x))
    gm = b.graph_module()
    code = gm.code
    assert dead_code_elimination(gm) is gm
    assert gm.code == code


def test_is_removable_never_for_placeholders_or_output():
    b = Builder()
    x = b.input("x", meta(3))
    b.output(x)
    assert not any(is_removable(n) for n in b.graph.nodes)
