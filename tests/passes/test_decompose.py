"""run_decompositions (passes.decompose): the seed tutorial's IR/Decompositions section, and
lowering to the core ATen set on the zoo, with the program still matching eager."""
import operator

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.ir.test_saved_tensors import _backward
from tests.models.zoo import ZOO


class DecompExample(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.conv = torch.nn.Conv2d(1, 3, 1, 1)
        self.bn = torch.nn.BatchNorm2d(3)

    def forward(self, x):
        x = self.conv(x)
        x = self.bn(x)
        return (x,)


def _targets(ep):
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


def _is_core(target) -> bool:
    if target is operator.getitem:
        return True
    return isinstance(target, torch._ops.OpOverload) and torch.Tag.core in target.tags


def test_empty_table_keeps_the_graph():
    ep = unbroken.export(DecompExample(), (torch.randn(1, 1, 3, 3),))
    assert _targets(ep.run_decompositions(decomp_table={})) == _targets(ep)


def test_default_lowers_to_core_aten():
    ep = unbroken.export(DecompExample(), (torch.randn(1, 1, 3, 3),))
    core = ep.run_decompositions()
    assert torch.ops.aten.conv2d.default not in _targets(core)
    assert torch.ops.aten.convolution.default in _targets(core)
    x = torch.randn(1, 1, 3, 3)
    torch.testing.assert_close(core.module()(x), ep.module()(x))


def test_custom_decomposition_as_in_the_seed():
    ep = unbroken.export(DecompExample(), (torch.randn(1, 1, 3, 3),))
    table = torch.export.default_decompositions()

    def doubled_conv2d(x, weight, bias, stride=(1, 1), padding=(0, 0), dilation=(1, 1),
                       groups=1):
        return 2 * torch.ops.aten.convolution(x, weight, bias, stride, padding, dilation,
                                              False, [0, 0], groups)

    table[torch.ops.aten.conv2d.default] = doubled_conv2d
    mine = ep.run_decompositions(table)
    targets = _targets(mine)
    assert torch.ops.aten.convolution.default in targets and torch.ops.aten.mul.Tensor in targets


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer_block", "embedding_posenc"])
def test_zoo_lowers_to_core_and_still_matches(name):
    model, args = ZOO[name].make()
    core = unbroken.export(model, args).run_decompositions()
    assert all(_is_core(t) for t in _targets(core)), [t for t in _targets(core) if not _is_core(t)]
    fresh = ZOO[name].fresh_args(3)
    torch.testing.assert_close(core.module()(*fresh), model(*fresh))


def test_dynamic_program_decomposes_and_stays_dynamic():
    model, args = ZOO["mlp"].make()
    ep = unbroken.export(model, args, dynamic_shapes=({0: Dim("batch", max=64)},))
    core = ep.run_decompositions()
    assert core.range_constraints == ep.range_constraints
    x = torch.randn(13, args[0].shape[1])
    torch.testing.assert_close(core.module()(x), model(x))


class ReadsValues(torch.nn.Module):
    """`.item()` and `nonzero()`: values only tensor data decides (unbacked symbols)."""

    def forward(self, x, counts):
        n = counts.sum().item()
        torch._check(n >= 0)
        torch._check(n <= x.shape[0])
        return x[:n] * 2, x.nonzero()


def test_data_dependent_program_decomposes_and_matches_eager():
    """Issue 11 item 1: exporting worked, run_decompositions failed with UB105/UB114 blaming
    the user's line (the decomposing recorder had no shape environment)."""
    model = ReadsValues()
    x, counts = torch.tensor([[1.0, 0.0], [0.0, 2.0], [3.0, 4.0]]), torch.tensor([1, 1])
    ep = unbroken.export(model, (x, counts))
    core = ep.run_decompositions()
    assert torch.ops.aten.item.default in _targets(core)
    assert torch.ops.aten.nonzero.default in _targets(core)
    for sample in (counts, torch.tensor([0, 3])):
        expected = model(x, sample)
        for program in (ep, core):
            for got, want in zip(program.module()(x, sample), expected):
                torch.testing.assert_close(got, want)
    with pytest.raises(RuntimeError, match=r"Runtime assertion failed .* <= 3"):
        core.module()(x, torch.tensor([5, 5]))  # the program's torch._check facts survive


def test_data_dependent_program_decomposes_with_a_table():
    ep = unbroken.export(ReadsValues(), (torch.randn(3, 2), torch.tensor([1, 1])))
    kept = ep.run_decompositions({})
    assert _targets(kept).count(torch.ops.aten.nonzero.default) == 1


class IndexesWithIntegers(torch.nn.Module):
    def forward(self, x):
        return x[torch.tensor([1, 3])], x[[0, 2]]


def test_integer_index_tensor_decomposes():
    """x[tensor([1, 3])] (aten.index with integer indices, a static output size) crashed
    run_decompositions with AttributeError: it was re-recorded as a data-dependent op."""
    x = torch.randn(4, 3)
    core = unbroken.export(IndexesWithIntegers(), (x,)).run_decompositions()
    for got, want in zip(core.module()(x), IndexesWithIntegers()(x)):
        torch.testing.assert_close(got, want)


class _SavesThenWrites(torch.nn.Module):
    """``(y * w).sin()`` / ``linear(y)`` save ``y`` when ``w`` requires grad; the write into
    ``y`` then makes eager's backward raise."""

    def __init__(self, linear: bool):
        super().__init__()
        self.linear = linear
        self.w = torch.nn.Parameter(torch.randn(4, 4) if linear else torch.randn(4))

    def forward(self, x):
        y = x * 2
        z = torch.nn.functional.linear(y, self.w) if self.linear else (y * self.w).sin()
        y.add_(1)
        return z + y


def _backward_raises(module, x) -> bool:
    return _backward(module, x.clone().requires_grad_())


@pytest.mark.parametrize("linear", [False, True], ids=["kept_whole", "decomposed"])
@pytest.mark.parametrize("frozen", [False, True])
def test_saved_then_written_marks_survive_decomposition(linear, frozen):
    """The decomposed program's backward raises wherever eager's does; an op kept whole keeps
    the arguments that decide (a frozen parameter: backward runs, as eager's); one decomposed
    into several refuses backward whenever a gradient is recorded (never a gradient where
    eager raises)."""
    model, x = _SavesThenWrites(linear), torch.randn(3, 4)
    decomposed = unbroken.export(model, (x,)).run_decompositions().module()
    for module in (model, decomposed):
        module.w.requires_grad_(not frozen)
    eager_raises = _backward_raises(model, x)
    assert eager_raises == (not frozen)
    if eager_raises or not linear:
        assert _backward_raises(decomposed, x) == eager_raises
    else:
        assert _backward_raises(decomposed, x)  # conservative: the mark's arguments were lost
