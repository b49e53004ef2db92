"""Tests for unbroken.passes.functionalize: in-place ops become functional, mutations of
buffers and user inputs become outputs, unsupported patterns are refused at the user's line."""
import pytest
import torch
import torch.utils._pytree as pytree

from tests.graph_builder import Builder, aten, meta
from unbroken.ir import OutputKind, ProgramParts, verify
from unbroken.passes.functionalize import functional_variant, functionalize
from unbroken.program import ExportedProgram
from unbroken.symbolic.diagnostics import UnsupportedError


def run(b, state=None, constants=None, args=(), outputs=None):
    """Functionalize ``b``'s graph, verify it, and return (program, signature)."""
    gm, sig = functionalize(b.graph_module(), b.signature())
    verify(gm, sig)
    in_spec = pytree.tree_flatten((tuple(args), {}))[1]
    out_spec = pytree.tree_flatten(outputs if outputs is not None else torch.empty(0))[1]
    ep = ExportedProgram.from_parts(
        ProgramParts(gm, sig, state or {}, constants or {}, {}, in_spec, out_spec))
    return ep, sig


def kinds(sig):
    return [(s.kind, s.target) for s in sig.output_specs]


@pytest.mark.parametrize("inplace, functional", [
    (aten.relu_.default, aten.relu.default),
    (aten.add_.Tensor, aten.add.Tensor),
    (aten.add_.Scalar, aten.add.Scalar),
    (aten.copy_.default, aten.copy.default),
    (aten.fill_.Scalar, aten.fill.Scalar),
    (aten.index_put_.default, aten.index_put.default),
    (aten.normal_.default, aten.normal_functional.default),
    (aten.bernoulli_.float, aten.bernoulli.p),
    (aten.masked_fill_.Scalar, aten.masked_fill.Scalar),
    (aten.uniform_.default, aten.uniform.default),
])
def test_functional_variant_found_by_schema(inplace, functional):
    assert functional_variant(inplace) is functional


def test_functional_variant_covers_aten_inplace_ops():
    """Nearly every self-writing aten op has a functional twin found by schema."""
    from unbroken.passes.functionalize import inplace_written_index
    missing, total = [], 0
    for name in dir(aten):
        if not name.endswith("_") or name.startswith("_"):
            continue
        packet = getattr(aten, name)
        for overload in packet.overloads():
            op = getattr(packet, overload)
            if inplace_written_index(op) == 0 and op._schema.arguments[0].type.kind() == \
                    "TensorType":
                total += 1
                if functional_variant(op) is None:
                    missing.append(str(op))
    assert total > 200
    assert len(missing) < 0.1 * total, missing


def test_inplace_on_intermediate():
    """a = x + 1; a.relu_(); return a * 2"""
    b = Builder()
    x = b.input("x", meta(4))
    a = b.call(aten.add.Tensor, x, 1)
    r = b.call(aten.relu_.default, a)
    b.output(b.call(aten.mul.Tensor, r, 2))
    ep, sig = run(b, args=(torch.ones(4),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets == [aten.add.Tensor, aten.relu.default, aten.mul.Tensor]
    assert "relu" in [n.name for n in ep.graph.nodes]
    assert kinds(sig) == [(OutputKind.USER_OUTPUT, None)]
    x_real = torch.randn(4)
    torch.testing.assert_close(ep.module()(x_real), torch.relu(x_real + 1) * 2)


def test_user_input_mutation_becomes_output():
    """x.add_(1); return x * 2"""
    b = Builder()
    x = b.input("x", meta(3))
    added = b.call(aten.add_.Tensor, x, 1)
    b.output(b.call(aten.mul.Tensor, added, 2))
    ep, sig = run(b, args=(torch.ones(3),))
    assert kinds(sig) == [(OutputKind.USER_INPUT_MUTATION, "x"), (OutputKind.USER_OUTPUT, None)]
    assert dict(sig.user_inputs_to_mutate) == {"add": "x"}
    x_real, x_eager = torch.randn(3), None
    x_eager = x_real.clone()
    out = ep.module()(x_real)
    expected = x_eager.add_(1) * 2
    torch.testing.assert_close(out, expected)
    torch.testing.assert_close(x_real, x_eager)


def test_buffer_mutation_chain_uses_final_value():
    """self.buf.add_(1); self.buf.mul_(2); return x + self.buf"""
    b = Builder()
    buf = b.buffer("stats.buf", meta(3))
    x = b.input("x", meta(3))
    first = b.call(aten.add_.Tensor, buf, 1)
    second = b.call(aten.mul_.Tensor, first, 2)
    b.output(b.call(aten.add.Tensor, x, second))
    state = {"stats.buf": torch.zeros(3)}
    ep, sig = run(b, state, args=(torch.ones(3),))
    assert kinds(sig) == [(OutputKind.BUFFER_MUTATION, "stats.buf"),
                          (OutputKind.USER_OUTPUT, None)]
    assert dict(sig.buffers_to_mutate) == {"mul": "stats.buf"}
    m = ep.module()
    torch.testing.assert_close(m(torch.ones(3)), torch.full((3,), 3.0))
    torch.testing.assert_close(m.stats.buf, torch.full((3,), 2.0))
    torch.testing.assert_close(m(torch.ones(3)), torch.full((3,), 7.0))


def test_mutations_ordered_by_input_and_returned_value_is_inplace_node():
    """x.copy_(y) ; self.b.fill_(3); return x  (buffer listed before the user input)."""
    b = Builder()
    buf = b.buffer("b", meta(2))
    x, y = b.input("x", meta(2)), b.input("y", meta(2))
    copied = b.call(aten.copy_.default, x, y)
    b.call(aten.fill_.Scalar, buf, 3.0)
    b.output(copied)
    ep, sig = run(b, {"b": torch.zeros(2)}, args=(torch.ones(2), torch.ones(2)))
    assert kinds(sig) == [(OutputKind.BUFFER_MUTATION, "b"), (OutputKind.USER_INPUT_MUTATION, "x"),
                          (OutputKind.USER_OUTPUT, None)]
    assert sig.user_outputs == ("slice_scatter",)  # copy_ is written as a differentiable scatter
    x_real, y_real = torch.zeros(2), torch.tensor([5.0, 6.0])
    m = ep.module()
    out = m(x_real, y_real)
    torch.testing.assert_close(x_real, y_real)
    torch.testing.assert_close(out, y_real)
    torch.testing.assert_close(m.b, torch.full((2,), 3.0))


def test_index_put_on_intermediate():
    b = Builder()
    x = b.input("x", meta(5))
    idx = b.input("idx", meta(2, dtype=torch.int64))
    clone = b.call(aten.clone.default, x)
    nines = b.call(aten.full.default, [2], 9.0, device=torch.device("cpu"))
    put = b.call(aten.index_put_.default, clone, [idx], nines)
    b.output(put)
    ep, _ = run(b, args=(torch.ones(5), torch.zeros(2, dtype=torch.int64)))
    x_real, idx_real = torch.arange(5.0), torch.tensor([0, 3])
    expected = x_real.clone()
    expected[idx_real] = 9.0
    torch.testing.assert_close(ep.module()(x_real, idx_real), expected)
    torch.testing.assert_close(x_real, torch.arange(5.0))


def test_no_inplace_ops_is_identity():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.neg.default, x))
    gm, sig = b.graph_module(), b.signature()
    assert functionalize(gm, sig) == (gm, sig)


def test_view_created_after_mutation_is_fine():
    """x.add_(1); return x.view(-1)  -- the view is of the new value."""
    b = Builder()
    x = b.input("x", meta(2, 2))
    added = b.call(aten.add_.Tensor, x, 1)
    b.output(b.call(aten.view.default, added, [-1]))
    ep, _ = run(b, args=(torch.ones(2, 2),))
    x_real = torch.zeros(2, 2)
    torch.testing.assert_close(ep.module()(x_real), torch.ones(4))
    torch.testing.assert_close(x_real, torch.ones(2, 2))


def test_dead_view_before_mutation_is_fine():
    b = Builder()
    x = b.input("x", meta(4))
    view = b.call(aten.view.default, x, [2, 2])
    s = b.call(aten.sum.default, view)
    added = b.call(aten.add_.Tensor, x, 1)
    b.output(s, added)
    run(b, args=(torch.ones(4),), outputs=(torch.empty(0), torch.empty(0)))


# -- refusals ----------------------------------------------------------------------------------
def refused(b, match):
    gm, sig = b.graph_module(), b.signature()
    before = str(gm.graph)
    with pytest.raises(UnsupportedError, match=match) as info:
        functionalize(gm, sig)
    assert str(gm.graph) == before, "graph must be left untouched"
    assert info.value.location.lineno == 9
    text = str(info.value)
    assert 'File "model.py", line 9' in text and "Fix:" in text
    return info.value


def test_refuse_mutation_of_view():
    """x[0].add_(1)"""
    b = Builder()
    x = b.input("x", meta(2, 3))
    row = b.call(aten.select.int, x, 0, 0)
    b.output(b.call(aten.add_.Tensor, row, 1, line=9))
    refused(b, r"writes into a view of another tensor \(made by `aten.select.int`\)")


def test_refuse_mutation_of_split_piece():
    b = Builder()
    x = b.input("x", meta(4))
    import operator
    parts = b.call(aten.split.Tensor, x, 2)
    piece = b.graph.call_function(operator.getitem, (parts, 0))
    piece.meta.update(val=meta(2), user_frames=())
    b.output(b.call(aten.mul_.Scalar, piece, 2, line=9))
    refused(b, "writes into a view")


def test_refuse_mutation_with_live_view():
    """v = x.view(-1); x.add_(1); return v"""
    b = Builder()
    x = b.input("x", meta(2, 2))
    v = b.call(aten.view.default, x, [-1])
    added = b.call(aten.add_.Tensor, x, 1, line=9)
    b.output(v, added)
    error = refused(b, r"has a view \(made by `aten.view.default`\) which is used afterwards")
    assert "clone()" in error.hint


def test_parameter_mutation_is_a_parameter_mutation_output():
    """with no_grad(): w.mul_(0.5); return w: the program returns the new value and writes it
    back into the parameter (a PARAMETER_MUTATION output), as eager leaves it and as
    torch.export's ep.module() does."""
    b = Builder()
    w = b.param("lin.weight", meta(2))
    b.output(b.call(aten.mul_.Scalar, w, 0.5, line=9))
    weight = torch.tensor([2.0, 4.0])
    ep, sig = run(b, state={"lin.weight": weight})
    assert [(spec.kind, spec.target) for spec in sig.output_specs] == [
        (OutputKind.PARAMETER_MUTATION, "lin.weight"), (OutputKind.USER_OUTPUT, None)]
    assert not any(n.target is aten.mul_.Scalar for n in ep.graph_module.graph.nodes)
    module = ep.module()
    got = module()
    assert torch.equal(got, torch.tensor([1.0, 2.0]))
    assert torch.equal(module.lin.weight, torch.tensor([1.0, 2.0]))


def test_refuse_constant_mutation():
    b = Builder()
    c = b.const("lifted_tensor_0", meta(2))
    b.output(b.call(aten.zero_.default, c, line=9))
    refused(b, "modifies the constant tensor 'lifted_tensor_0'")


def test_refuse_out_variant():
    b = Builder()
    x = b.input("x", meta(2))
    buf = b.call(aten.empty.memory_format, [2], device=torch.device("cpu"))
    b.output(b.call(aten.add.out, x, x, out=buf, line=9))
    refused(b, r"out= variant `aten.add.out`")


RESTRIDES = [
    (aten.t_.default, (), aten.t.default),
    (aten.unsqueeze_.default, (0,), aten.unsqueeze.default),
    (aten.transpose_.default, (0, 1), aten.transpose.int),
    (aten.as_strided_.default, ([2, 2], [1, 2]), aten.as_strided.default),
]


@pytest.mark.parametrize("op, args, view", RESTRIDES)
def test_metadata_inplace_on_intermediate_becomes_its_view(op, args, view):
    """c = x.clone(); c.t_(); return c * 2 -- the kernels of adaptive_avg_pool1d do this"""
    b = Builder()
    x = b.input("x", meta(2, 2))
    clone = b.call(aten.clone.default, x)
    changed = b.call(op, clone, *args, line=9)
    b.output(b.call(aten.mul.Tensor, changed, 2))
    ep, _ = run(b, args=(torch.ones(2, 2),))
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert targets == [aten.clone.default, view, aten.mul.Tensor]
    x_real = torch.randn(2, 2)
    expected = op(x_real.clone(), *args) * 2
    torch.testing.assert_close(ep.module()(x_real), expected, rtol=0, atol=0)


@pytest.mark.parametrize("op, args, view", RESTRIDES)
def test_refuse_metadata_inplace_on_input(op, args, view):
    b = Builder()
    x = b.input("x", meta(2, 2))
    b.output(b.call(op, x, *args, line=9))
    error = refused(b, "changes the shape or strides of an input of forward")
    name = op._schema.name.split("::")[1][:-1]
    assert f"x = x.{name}(...)" in error.hint


def test_refuse_storage_changing_inplace():
    b = Builder()
    x = b.input("x", meta(2, 2))
    clone = b.call(aten.clone.default, x)
    b.output(b.call(aten.resize_.default, clone, [4, 4], line=9))
    error = refused(b, "changes a tensor's shape or strides in place")
    assert "x = x.resize(...)" in error.hint


def test_refuse_multi_argument_writes():
    """batch norm in training mode writes its running stats"""
    b = Builder()
    mean, var = b.buffer("bn.running_mean", meta(3)), b.buffer("bn.running_var", meta(3))
    x = b.input("x", meta(2, 3))
    node = b.call(aten._native_batch_norm_legit.default, x, None, None, mean, var, True, 0.1,
                  1e-5, line=9)
    b.output(node)
    refused(b, "mutates its argument\\(s\\) running_mean, running_var")


def test_signature_matches_torch_export():
    """The peer: torch.export orders and labels mutation outputs the same way."""
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("buf", torch.zeros(3))

        def forward(self, x):
            x.add_(1)
            self.buf.mul_(2)
            return x * 2

    theirs = torch.export.export(M(), (torch.ones(3),)).run_decompositions({}).graph_signature
    b = Builder()
    buf = b.buffer("buf", meta(3))
    x = b.input("x", meta(3))
    added = b.call(aten.add_.Tensor, x, 1)
    b.call(aten.mul_.Tensor, buf, 2)
    b.output(b.call(aten.mul.Tensor, added, 2))
    _, ours = run(b, {"buf": torch.zeros(3)}, args=(torch.ones(3),))
    assert [(s.kind.name, s.target) for s in ours.output_specs] == \
        [(s.kind.name, s.target) for s in theirs.output_specs]
