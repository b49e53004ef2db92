"""unbroken.ir.parts: program parts become a torch ExportedProgram; its printed form."""
import pytest
import sympy
import torch
import torch.utils._pytree as pytree
from torch._subclasses.fake_tensor import FakeTensor

from tests.graph_builder import Builder, Range, aten, meta
from unbroken.ir.parts import ProgramParts
from unbroken.program import ExportedProgram
from unbroken.symbolic.diagnostics import ExportUsageError


def linear_program():
    """lin = Linear(100, 10); buffer scale; forward(x, y) = relu(lin(x + y)) * scale."""
    lin = torch.nn.Linear(100, 10)
    scale = torch.full((10,), 2.0)
    b = Builder()
    w = b.param("lin.weight", meta(10, 100))
    bias = b.param("lin.bias", meta(10))
    s = b.buffer("scale", meta(10))
    x, y = b.input("x", meta(8, 100)), b.input("y", meta(8, 100))
    add = b.call(aten.add.Tensor, x, y)
    t = b.call(aten.t.default, w)
    addmm = b.call(aten.addmm.default, bias, add, t)
    relu = b.call(aten.relu.default, addmm)
    mul = b.call(aten.mul.Tensor, relu, s)
    b.output(mul)
    state = {"lin.weight": lin.weight, "lin.bias": lin.bias, "scale": scale}
    args = (torch.randn(8, 100), torch.randn(8, 100))
    ep = b.program(state, {}, args, outputs=torch.empty(0))
    return ep, lin, scale, args


def test_properties_and_state_views():
    ep, lin, scale, args = linear_program()
    assert ep.graph is ep.graph_module.graph
    assert [n for n, _ in ep.named_parameters()] == ["lin.weight", "lin.bias"]
    assert list(ep.parameters())[0] is lin.weight
    assert [n for n, _ in ep.named_buffers()] == ["scale"]
    assert list(ep.buffers())[0] is scale
    assert ep.call_spec.in_spec is ep.in_spec and ep.call_spec.out_spec is ep.out_spec
    assert ep.example_inputs[0] is args
    assert ep.constants == {}


def test_module_matches_eager():
    ep, lin, scale, args = linear_program()
    expected = torch.relu(lin(args[0] + args[1])) * scale
    torch.testing.assert_close(ep.module()(*args), expected)


def test_non_persistent_buffer_and_constant_come_from_constants():
    b = Builder()
    buf = b.buffer("stats.mean", meta(3), persistent=False)
    c = b.const("lifted_tensor_0", meta(3))
    x = b.input("x", meta(3))
    out = b.call(aten.add.Tensor, b.call(aten.mul.Tensor, x, buf), c)
    b.output(out)
    mean, lifted = torch.tensor([1.0, 2.0, 3.0]), torch.tensor([0.5, 0.5, 0.5])
    ep = b.program({}, {"stats.mean": mean, "lifted_tensor_0": lifted}, (torch.ones(3),),
                   outputs=torch.empty(0))
    assert dict(ep.named_buffers()) == {"stats.mean": mean}
    m = ep.module()
    assert "stats.mean" not in m.state_dict()
    assert dict(m.named_buffers())["stats.mean"] is mean
    torch.testing.assert_close(m(torch.ones(3)), mean + lifted)


def test_call_raises_usage_error():
    ep, *_ = linear_program()
    with pytest.raises(ExportUsageError, match=r"ep\.module\(\)\(\.\.\.\)"):
        ep(torch.ones(1))


def test_str_format():
    ep, *_ = linear_program()
    text = str(ep)
    assert text.startswith("ExportedProgram:\n    class GraphModule(torch.nn.Module):\n")
    assert 'p_lin_weight: "f32[10, 100]"' in text
    assert 'x: "f32[8, 100]"' in text
    assert 'addmm: "f32[8, 10]" = torch.ops.aten.addmm.default(' in text
    assert "Graph signature: \n    # inputs\n    p_lin_weight: PARAMETER target='lin.weight'" \
        in text
    assert "    mul: USER_OUTPUT" in text
    assert text.endswith("Range constraints: {}\n")


def _symint(hint, name="x_dim0"):
    # Test fixture only: torch's ShapeEnv makes SymInts like the ones our recorder produces.
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    env = ShapeEnv()
    return env.create_symintnode(env.create_symbol(hint, ConstantSource(name)), hint=hint)


def test_str_shows_symbolic_shapes_and_ranges():
    s0 = _symint(8)
    b = Builder()
    x = b.input("x", torch.empty_strided((s0, 4), (4, 1), device="meta"))
    b.output(b.call(aten.neg.default, x))
    symbol = s0.node.expr
    ep = b.program({}, {}, (torch.ones(8, 4),), outputs=torch.empty(0),
                   range_constraints={symbol: Range(2, 10)})
    text = str(ep)
    assert f'x: "f32[{symbol}, 4]"' in text
    assert f"Range constraints: {{{symbol}: VR[2, 10]}}" in text
    ep2 = b.program({}, {}, (torch.ones(8, 4),), outputs=torch.empty(0),
                    range_constraints={symbol: Range(2, sympy.oo)})
    assert f"{{{symbol}: VR[2, int_oo]}}" in str(ep2)


def test_ranges_from_symbolic_value_range():
    ranges = pytest.importorskip("unbroken.symbolic.ranges")
    from unbroken.ir.printer import format_range_constraints
    s = sympy.Symbol("s0", integer=True, positive=True)
    assert format_range_constraints({s: ranges.ValueRange(2, None)}) == "{s0: VR[2, int_oo]}"


def test_constructor_verifies():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.relu_.default, x))
    from unbroken.symbolic.diagnostics import InternalError
    with pytest.raises(InternalError, match="mutates"):
        b.program({}, {}, (torch.ones(2),), outputs=torch.empty(0))


def test_accepts_bare_graph():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.neg.default, x))
    ep = ExportedProgram.from_parts(ProgramParts(
        b.graph, b.signature(), {}, {}, {}, pytree.tree_flatten(((torch.ones(2),), {}))[1],
        pytree.tree_flatten(torch.ones(1))[1]))
    torch.testing.assert_close(ep.module()(torch.ones(2)), -torch.ones(2))


def test_is_torch_program_with_torch_parts():
    ep, *_ = linear_program()
    assert isinstance(ep, torch.export.ExportedProgram)
    assert ep.dialect == "TRAINING"
    assert [e.fqn for e in ep.module_call_graph] == ["", "lin"]
    assert all(isinstance(n.meta["val"], FakeTensor) for n in ep.graph.nodes if n.op != "output")


def test_range_constraints_sorted_naturally():
    from unbroken.ir.printer import format_range_constraints
    ranges = {sympy.Symbol("s10"): Range(2, sympy.oo), sympy.Symbol("s2"): Range(0, 5)}
    assert format_range_constraints(ranges) == "{s2: VR[0, 5], s10: VR[2, int_oo]}"
