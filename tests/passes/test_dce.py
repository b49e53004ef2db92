"""Tests for unbroken.passes.dce: unused pure nodes go; effects, inputs and outputs stay."""
import torch

from tests.graph_builder import Builder, aten, meta
from unbroken.ir import verify
from unbroken.passes.dce import dead_code_elimination, is_removable


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
