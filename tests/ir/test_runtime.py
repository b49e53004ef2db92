"""Tests for unbroken.ir.runtime: ep.module() runs the graph and writes back (its input checks:
test_input_checks.py)."""
import copy

import pytest
import torch

from tests.graph_builder import Builder, aten, meta
from unbroken.ir import OutputKind, OutputSpec, TensorArgument
from unbroken.symbolic.diagnostics import InputMismatchError


def symints(*hints):
    """Test fixture only: SymInts from torch's ShapeEnv, like the ones our recorder makes."""
    from torch._dynamo.source import ConstantSource
    from torch.fx.experimental.symbolic_shapes import ShapeEnv
    env = ShapeEnv()
    return [env.create_symintnode(env.create_symbol(h, ConstantSource(f"d{i}")), hint=h)
            for i, h in enumerate(hints)]


def sym_meta(*shape):
    strides, acc = [], 1
    for d in reversed(shape):
        strides.insert(0, acc)
        acc = acc * d
    return torch.empty_strided(shape, strides, device="meta")


# -- module structure ----------------------------------------------------------------------------
def nested_program():
    """forward(x, ys=[y0, y1], *, mask) -> {"sum": x + y0 + y1, "masked": where(mask, x, 0)}."""
    b = Builder()
    w = b.param("block.lin.weight", meta(4))
    x, y0, y1 = b.input("x", meta(4)), b.input("ys_0", meta(4)), b.input("ys_1", meta(4))
    mask = b.input("mask", meta(4, dtype=torch.bool))
    total = b.call(aten.add.Tensor, b.call(aten.add.Tensor, x, y0), y1)
    scaled = b.call(aten.mul.Tensor, total, w)
    masked = b.call(aten.where.ScalarOther, mask, x, 0.0)
    b.output(scaled, masked)
    weight = torch.nn.Parameter(torch.arange(4.0))
    args = (torch.ones(4), [torch.ones(4), torch.ones(4)])
    kwargs = {"mask": torch.tensor([True, False, True, False])}
    ep = b.program({"block.lin.weight": weight}, {}, args, kwargs,
                   outputs={"sum": torch.empty(0), "masked": torch.empty(0)})
    return ep, weight


def test_module_has_original_fqns():
    ep, weight = nested_program()
    m = ep.module()
    assert isinstance(m, torch.nn.Module)
    assert list(m.state_dict()) == ["block.lin.weight"]
    assert m.block.lin.weight is weight
    assert [n for n, _ in m.named_modules()] == ["", "block", "block.lin"]


def test_pytree_inputs_and_outputs():
    ep, weight = nested_program()
    m = ep.module()
    x, y0, y1 = torch.randn(4), torch.randn(4), torch.randn(4)
    mask = torch.tensor([True, True, False, False])
    out = m(x, [y0, y1], mask=mask)
    assert set(out) == {"sum", "masked"}
    torch.testing.assert_close(out["sum"], (x + y0 + y1) * weight)
    torch.testing.assert_close(out["masked"], torch.where(mask, x, 0.0))


def test_load_state_dict_changes_results():
    ep, _ = nested_program()
    m = ep.module()
    m.load_state_dict({"block.lin.weight": torch.zeros(4)})
    out = m(torch.ones(4), [torch.ones(4), torch.ones(4)], mask=torch.ones(4, dtype=torch.bool))
    torch.testing.assert_close(out["sum"], torch.zeros(4))


# -- mutations and outputs -----------------------------------------------------------------------
def mutation_program():
    """forward(x): self.count += 1 (buffer); x.mul_(2) (user input); return x + count.

    Written as the functionalized graph: the new values are extra outputs before the user one.
    """
    b = Builder()
    count = b.buffer("stats.count", meta(1))
    x = b.input("x", meta(3))
    new_count = b.call(aten.add.Tensor, count, 1)
    new_x = b.call(aten.mul.Tensor, x, 2)
    out = b.call(aten.add.Tensor, new_x, new_count)
    b.output(new_count, new_x, out)
    b.output_specs[:2] = [
        OutputSpec(OutputKind.BUFFER_MUTATION, TensorArgument(new_count.name), "stats.count"),
        OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument(new_x.name), "x"),
    ]
    counter = torch.zeros(1)
    ep = b.program({"stats.count": counter}, {}, (torch.ones(3),), outputs=torch.empty(0))
    return ep, counter


def test_mutation_write_back():
    ep, counter = mutation_program()
    m = ep.module()
    x = torch.tensor([1.0, 2.0, 3.0])
    out = m(x)
    torch.testing.assert_close(x, torch.tensor([2.0, 4.0, 6.0]))
    torch.testing.assert_close(m.stats.count, torch.ones(1))
    torch.testing.assert_close(out, torch.tensor([3.0, 5.0, 7.0]))
    m(torch.ones(3))
    torch.testing.assert_close(m.stats.count, torch.full((1,), 2.0))
    assert m.stats.count is counter  # written in place: state is shared with the program


def test_mutation_matches_eager_module():
    class Eager(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.stats = torch.nn.Module()
            self.stats.register_buffer("count", torch.zeros(1))

        def forward(self, x):
            self.stats.count += 1
            x.mul_(2)
            return x + self.stats.count

    ep, _ = mutation_program()
    ours, eager = ep.module(), Eager()
    for _ in range(3):
        a, b = torch.randn(3), None
        b = a.clone()
        torch.testing.assert_close(ours(a), eager(b))
        torch.testing.assert_close(a, b)
    torch.testing.assert_close(ours.stats.count, eager.stats.count)


def test_write_backs_survive_dead_code_elimination():
    """The write-back calls return values nothing reads; fx's standard dead-code elimination
    must keep them (as it keeps the ``copy_`` torch's own unlifting appends), else the module
    stops updating its buffer and its input."""
    ep, _ = mutation_program()
    module = ep.module()
    eliminated = module.graph.eliminate_dead_code()
    module.recompile()
    assert not eliminated
    x = torch.tensor([1.0, 2.0, 3.0])
    outputs = [module(x.clone())[0].item() for _ in range(3)]
    assert outputs == [3.0, 4.0, 5.0]  # the count grows: 1, 2, 3
    module(x)
    torch.testing.assert_close(x, torch.tensor([2.0, 4.0, 6.0]))


def test_constant_and_none_outputs():
    b = Builder()
    x = b.input("x", meta(2))
    b.output(b.call(aten.neg.default, x), None, 7)
    outputs = (torch.empty(0), None, 7)
    m = b.program({}, {}, (torch.ones(2),), outputs=outputs).module()
    result = m(torch.ones(2))
    assert isinstance(result, tuple) and result[1] is None and result[2] == 7
    torch.testing.assert_close(result[0], -torch.ones(2))


def test_graph_and_code_are_exposed():
    ep, _ = nested_program()
    m = ep.module()
    assert isinstance(m, torch.fx.GraphModule)  # what torch's tools (AOTInductor) assert
    calls = [n.target for n in m.graph.nodes if n.op == "call_function"]
    assert calls == [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert "torch.ops.aten.add.Tensor" in m.code


def test_deepcopy_is_independent():
    import copy
    ep, counter = mutation_program()
    m = ep.module()
    clone = copy.deepcopy(m)
    clone(torch.ones(3))
    torch.testing.assert_close(clone.stats.count, torch.ones(1))
    torch.testing.assert_close(m.stats.count, torch.zeros(1))


class AssignsSlices(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        y = x * 1
        y[0] = self.lin(x)[0]
        z = torch.zeros(4, 3, dtype=torch.float64)
        z.copy_(y[1])  # broadcast and cast
        return y, z


def test_backward_through_functional_copies_matches_eager():
    """``y[0] = v`` was recorded as the functional ``aten.copy``, which PyTorch cannot
    differentiate: backward through ep.module() failed ("derivative for aten::copy is not
    implemented"), and through torch's own ``ExportedProgram.module()`` still does. The program
    holds a differentiable ``slice_scatter`` instead; both modules differentiate it as eager."""
    import unbroken

    model = AssignsSlices()
    x = torch.randn(4, 3, requires_grad=True)
    program = unbroken.export(model, (x,))
    assert torch.ops.aten.copy.default not in [n.target for n in program.graph.nodes]
    for module in (program.module(), torch.export.ExportedProgram.module(program)):
        for fn in (model, module):
            x.grad = None
            model.lin.weight.grad = None
            y, z = fn(x)
            (y.sum() + z.sum()).backward()
            if fn is model:
                want = (y, z, x.grad, model.lin.weight.grad)
        torch.testing.assert_close((y, z, x.grad, module.lin.weight.grad), want)
        with torch.no_grad():
            assert not module(x)[0].requires_grad


class WritesThroughDetach(torch.nn.Module):
    def forward(self, x):
        x.detach().add_(1)  # autograd does not see this write
        return x * 2


@pytest.mark.parametrize("leaf", [True, False])
def test_write_through_detach_is_invisible_to_autograd(leaf):
    """Eager: the write is invisible to autograd; x keeps its history (a leaf that requires
    grad stays one) and the gradient of x * 2 reaches x. The program used to fail: a leaf
    written back with autograd history ("a leaf Variable that requires grad is being used in
    an in-place operation"), or backward through the functional copy ("derivative for
    aten::copy is not implemented")."""
    import unbroken

    module = unbroken.export(WritesThroughDetach(), (torch.randn(3, requires_grad=True),)).module()
    start = torch.randn(3)
    results = []
    for call in (module, WritesThroughDetach()):
        source = start.clone().requires_grad_()
        x = source if leaf else source * 1
        out = call(x)
        out.sum().backward()
        results.append((out, x.detach().clone(), x.is_leaf, source.grad))
    (got, got_x, got_leaf, got_grad), (want, want_x, want_leaf, want_grad) = results
    assert torch.equal(got, want) and got.requires_grad
    assert torch.equal(got_x, want_x) and got_leaf == want_leaf
    assert torch.equal(got_grad, want_grad)


class ScalesInputWithoutGrad(torch.nn.Module):
    def forward(self, x):
        with torch.no_grad():
            x.mul_(2)
        return x * 3


def test_input_written_under_no_grad_stays_differentiable():
    """Eager writes x under no_grad and x stays the leaf x * 3 differentiates. The module's
    write-back into a leaf that requires grad raised, and x * 3 did not require grad."""
    import unbroken

    module = unbroken.export(ScalesInputWithoutGrad(), (torch.randn(3),)).module()
    start = torch.randn(3)
    ours, eager = start.clone().requires_grad_(), start.clone().requires_grad_()
    got, want = module(ours), ScalesInputWithoutGrad()(eager)
    got.sum().backward()
    want.sum().backward()
    assert ours.is_leaf and got.requires_grad
    torch.testing.assert_close((got, ours, ours.grad), (want, eager, eager.grad))


def test_sparse_input_to_a_dense_program_is_refused():
    """The program was traced for a dense tensor (is_sparse False, dense kernels)."""
    import unbroken

    class Doubles(torch.nn.Module):
        def forward(self, x):
            return x * 2

    module = unbroken.export(Doubles(), (torch.randn(3, 3),)).module()
    with pytest.raises(InputMismatchError, match="must be a dense"):
        module(torch.randn(3, 3).to_sparse())


class TrainsBatchNorm(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.bn = torch.nn.BatchNorm1d(3)

    def forward(self, x):
        return self.bn(x) * 2


def test_backward_through_training_batch_norm():
    """The running statistics are written back in place after the graph ran, but batch norm
    saved them for its backward: backward failed ("modified by an inplace operation")."""
    import unbroken

    torch.manual_seed(0)
    model, x = TrainsBatchNorm().train(), torch.randn(4, 3)
    module = unbroken.export(TrainsBatchNorm().train(), (x,)).module()
    ours, eager = x.clone().requires_grad_(), x.clone().requires_grad_()
    got, want = module(ours), model(eager)
    got.sum().backward()
    want.sum().backward()
    torch.testing.assert_close((got, ours.grad), (want, eager.grad))
    torch.testing.assert_close(module.bn.running_mean, model.bn.running_mean)
    torch.testing.assert_close(module.bn.num_batches_tracked, model.bn.num_batches_tracked)


# -- write-back of parameters, buffers and inputs: differential against eager ------------------
class NoGradParameterAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        with torch.no_grad():
            self.w.add_(1)
        return x * self.w


class NoGradParameterCopy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3))

    def forward(self, x):
        with torch.no_grad():
            self.w.copy_(x)
        return x * self.w


class FrozenParameterAdd(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x):
        self.w.add_(1)
        return x * self.w


class FrozenParameterTakesGradient(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x):
        self.w.add_(x)  # eager's w now has x's gradient history
        return self.w * 3


class BufferCopiedWithGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        self.b.copy_(x * 2)
        return self.b


class BufferAccumulatesWithGrad(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("b", torch.ones(3))

    def forward(self, x):
        self.b += x
        return self.b, x * 2


class IntermediateWrittenUnderNoGrad(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        with torch.no_grad():
            h.add_(1)
        return h * 3


class IntermediateWrittenThroughDetach(torch.nn.Module):
    def forward(self, x):
        h = x * 2
        h.detach()[0] = 5
        return h * 3


class InputSliceWrittenThroughDetach(torch.nn.Module):
    def forward(self, x):
        x[0:2].detach().mul_(3)
        return x * 3


class DetachedAliasReadBack(torch.nn.Module):
    def forward(self, x):
        d = x.detach()
        d.mul_(2)
        return x + d


class ViewReadAfterNoGradWriteOfItsBase(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        v = y[0:2]
        with torch.no_grad():
            y.add_(1)  # eager's v still differentiates y (its history is regenerated)
        return v * 3


class ViewReadAfterNoGradWriteOfAnotherView(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        v = y[0:2]
        with torch.no_grad():
            y[2:].mul_(2)
        return v * 3 + y.sum()


class InputViewReadAfterNoGradWrite(torch.nn.Module):
    def forward(self, x):
        v = x[0:2]
        with torch.no_grad():
            x.mul_(2)
        return v * 3


class InitializesInForward(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        torch.nn.init.zeros_(self.lin.bias)  # PyTorch's own no_grad, inside one leaf call
        return self.lin(x)


class CopiesIntoATensorThatRequiresGrad(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y.copy_(torch.ones(3))  # eager: y's old value gets a zero gradient
        return y * x


class AssignsAnElementOfATensorThatRequiresGrad(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        y[0] = 5.0
        return y * 3


WRITES = [CopiesIntoATensorThatRequiresGrad, AssignsAnElementOfATensorThatRequiresGrad,
          InitializesInForward, ViewReadAfterNoGradWriteOfItsBase,
          ViewReadAfterNoGradWriteOfAnotherView,
          InputViewReadAfterNoGradWrite, NoGradParameterAdd, NoGradParameterCopy,
          FrozenParameterAdd,
          FrozenParameterTakesGradient, BufferCopiedWithGrad, BufferAccumulatesWithGrad,
          IntermediateWrittenUnderNoGrad, IntermediateWrittenThroughDetach,
          InputSliceWrittenThroughDetach, DetachedAliasReadBack]


def _program_module(model, x, route: str, tmp_path):
    import unbroken

    ep = unbroken.export(model, (x,))
    if route == "decompositions":
        ep = ep.run_decompositions()
    elif route == "save_load":
        unbroken.save(ep, tmp_path / "program.ub")
        ep = unbroken.load(tmp_path / "program.ub")
    return ep.module()


def _state(module) -> dict:
    return {name: (t.detach().clone(), t.requires_grad, t.is_leaf)
            for name, t in [*module.named_parameters(), *module.named_buffers()]}


def _run_with_grad(call, start: torch.Tensor, module):
    x = start.clone().requires_grad_()
    out = call(x)
    outputs = out if isinstance(out, tuple) else (out,)
    sum(o.sum() for o in outputs if o.requires_grad).backward()
    grads = {name: p.grad for name, p in module.named_parameters()}
    return out, x.detach().clone(), x.grad, _state(module), grads


@pytest.mark.parametrize("route", ["module", "save_load", "decompositions"])
@pytest.mark.parametrize("model_class", WRITES, ids=lambda c: c.__name__)
def test_writes_match_eager(model_class, route, tmp_path):
    """Outputs (values and requires_grad), the input after the call, parameters and buffers
    after the call (values, requires_grad, leaf or not), and gradients of the input and the
    parameters equal eager's: parameters are written back (as eager and torch.export's
    module() leave them), a buffer written with a value that requires grad keeps its history,
    and a write autograd does not see (no_grad, a .detach() alias) keeps the written tensor's
    gradient identity."""
    from tests.exactness import assert_bit_exact

    torch.manual_seed(0)
    start, model = torch.randn(3), model_class()
    eager = copy.deepcopy(model)  # the program shares the model's state
    module = _program_module(model, start.clone().requires_grad_(), route, tmp_path)
    got = _run_with_grad(module, start, module)
    want = _run_with_grad(eager, start, eager)
    assert_bit_exact(got[0], want[0])
    assert torch.equal(got[1], want[1])  # the input after the call
    assert_bit_exact(got[2], want[2])  # its gradient
    assert got[3].keys() == want[3].keys()
    for name, (value, requires_grad, is_leaf) in want[3].items():
        assert torch.equal(got[3][name][0], value), name
        assert got[3][name][1:] == (requires_grad, is_leaf), name
    for name, grad in want[4].items():
        assert (grad is None) == (got[4][name] is None), name
        assert grad is None or torch.equal(got[4][name], grad), name


def test_state_written_with_grad_saves_as_a_leaf(tmp_path):
    """After a call that left a buffer with autograd history (as eager's copy_), the program
    saves and loads, and the loaded program runs with grad again (the buffer is saved as a
    leaf that requires no grad, as eager's state_dict())."""
    import unbroken

    x = torch.randn(3, requires_grad=True)
    ep = unbroken.export(BufferCopiedWithGrad(), (x,))
    module = ep.module()
    assert module(x).requires_grad and module.b.grad_fn is not None
    unbroken.save(ep, tmp_path / "program.ub")
    loaded = unbroken.load(tmp_path / "program.ub").module()
    assert not loaded.b.requires_grad
    out = loaded(x)
    out.sum().backward()
    assert torch.equal(out.detach(), (x * 2).detach())
    assert torch.equal(x.grad, torch.full((3,), 2.0))
