"""ir.custom_ops: a custom operator whose fake kernel asks ``torch.library.get_ctx()`` for a
data-dependent size is traced with that size an unbacked symbol (its bounds kept), read from
the op's node; the program matches eager on inputs with other counts, side by side with
torch.export. Ops whose fake kernel never asks are untouched."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import unbroken

pytestmark = pytest.mark.matrix  # torch internals a release may change


@torch.library.custom_op("unbroken_tests::positives", mutates_args=())
def positives(x: torch.Tensor) -> torch.Tensor:
    return x[x > 0]


@positives.register_fake
def _(x):
    return x.new_empty(torch.library.get_ctx().new_dynamic_size(max=x.numel()))


@torch.library.custom_op("unbroken_tests::pairs", mutates_args=())
def pairs(x: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    keep = x != 0
    return x[keep].reshape(-1, 1).repeat(1, 2), keep.nonzero()


@pairs.register_fake
def _(x):
    n = torch.library.get_ctx().new_dynamic_size()
    return x.new_empty(n, 2), x.new_empty((n, 1), dtype=torch.long)


@torch.library.custom_op("unbroken_tests::doubled", mutates_args=())
def doubled(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@doubled.register_fake
def _(x):
    return torch.empty_like(x)


class UsesThem(torch.nn.Module):
    def forward(self, x):
        p = positives(x)
        a, b = pairs(x)
        return p.sum() * p.shape[0] + a.sum() + b.float().sum() + doubled(x).sum()


def test_dynamic_sizes_of_custom_fake_kernels_are_unbacked_symbols():
    model = UsesThem()
    x = torch.tensor([0.0, -1.0, 2.0, 3.0])
    ep = unbroken.export(model, (x,))
    ranges = {str(s): r for s, r in ep.range_constraints.items()}
    assert len(ranges) == 2 and any(int(r.upper) == 4 for r in ranges.values()
                                    if str(r.upper) != "int_oo")
    for other in (x, torch.ones(4), torch.zeros(4), torch.tensor([5.0, 0.0, -2.0, 1.0])):
        assert torch.equal(ep.module()(other), model(other))
    peer = torch.export.export(model, (x,))
    assert torch.equal(peer.module()(x), model(x))


def test_a_fake_kernel_that_does_not_ask_is_traced_as_before():
    ep = unbroken.export(lambda x: doubled(x) + 1, (torch.randn(3),))
    assert not ep.range_constraints
    assert any(n.target is torch.ops.unbroken_tests.doubled.default for n in ep.graph.nodes)


@torch.library.custom_op("unbroken_tests::bump_", mutates_args={"x"})
def bump(x: torch.Tensor, by: float) -> None:
    x.add_(by)


@bump.register_fake
def _(x, by):
    return None


@torch.library.custom_op("unbroken_tests::accumulate", mutates_args={"total", "count"})
def accumulate(total: torch.Tensor, count: torch.Tensor, x: torch.Tensor) -> torch.Tensor:
    total.add_(x)
    count.add_(1)
    return total / count


@accumulate.register_fake
def _(total, count, x):
    return torch.empty_like(total)


class Mutates(torch.nn.Module):
    """Custom ops writing an intermediate, a user input, a view of it and two buffers."""

    def __init__(self):
        super().__init__()
        self.register_buffer("total", torch.zeros(3))
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        y = x * 2
        bump(y, 1.0)
        bump(x, 3.0)
        bump(x[:2], 10.0)
        mean = accumulate(self.total, self.count, y)
        return y + 1, mean


def test_custom_ops_writing_their_arguments_are_auto_functionalized():
    """As torch's functionalization records them: ``auto_functionalized`` then the new values
    written back; outputs, the written input and the buffers match eager over three calls,
    and after run_decompositions."""
    x = torch.randn(3)
    ep = unbroken.export(Mutates(), (x.clone(),))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "auto_functionalized" in targets
    assert not any("unbroken_tests.bump_" == t for t in targets)
    kinds = sorted(s.kind.name for s in ep.graph_signature.output_specs)
    assert kinds.count("BUFFER_MUTATION") == 2 and "USER_INPUT_MUTATION" in kinds
    fresh = unbroken.export(Mutates(), (x.clone(),))  # module() shares its program's buffers
    for program in (ep, fresh.run_decompositions()):
        module = program.module()
        model = Mutates()
        for _ in range(3):
            ours, theirs = x.clone(), x.clone()
            for a, b in zip(module(ours), model(theirs)):
                assert torch.equal(a, b)
            assert torch.equal(ours, theirs)
            assert torch.equal(module.total, model.total)
            assert torch.equal(module.count, model.count)


def test_a_written_argument_that_is_not_one_tensor_is_refused():
    @torch.library.custom_op("unbroken_tests::bump_all", mutates_args={"xs"})
    def bump_all(xs: list[torch.Tensor]) -> None:
        for t in xs:
            t.add_(1)

    @bump_all.register_fake
    def _(xs):
        return None

    def fn(x):
        bump_all([x, x * 2])
        return x

    with pytest.raises(unbroken.RefusalError, match="not one tensor") as info:
        unbroken.export(fn, (torch.randn(3),))
    assert info.value.code == "UB121"


@torch.library.custom_op("unbroken_tests::rowsums", mutates_args=())
def _rowsums(a: torch.Tensor) -> torch.Tensor:
    return a.sum(dim=1)


@_rowsums.register_fake
def _(a):
    return torch.empty(a.shape[0], dtype=a.dtype)  # a factory, no device: fake under torch


@torch.library.custom_op("unbroken_tests::scale_into_", mutates_args={"out"})
def _scale_into_(a: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    out.copy_(a * 2)
    return torch.zeros(a.shape[0]) + out.sum()


@_scale_into_.register_fake
def _(a, out):
    return torch.empty(a.shape[0])


@pytest.mark.parametrize("dynamic", [False, True])
def test_factories_inside_fake_kernels_make_meta_tensors(dynamic):
    """A fake kernel building its output with ``torch.empty(size)`` (no device, as under
    torch's fake tensor mode) works on symbolic sizes too, for functional and writing ops."""
    class Model(torch.nn.Module):
        def forward(self, a, out):
            return torch.ops.unbroken_tests.rowsums(a) + torch.ops.unbroken_tests.scale_into_(
                a, out).sum()

    spec = ({0: Dim("n")}, {0: Dim("n")}) if dynamic else None
    ep = unbroken.export(Model(), (torch.randn(5, 3), torch.zeros(5, 3)), dynamic_shapes=spec)
    for n in ((5, 7, 2) if dynamic else (5,)):
        a = torch.randn(n, 3)
        got_out, want_out = torch.zeros(n, 3), torch.zeros(n, 3)
        torch.testing.assert_close(ep.module()(a, got_out), Model()(a, want_out))
        torch.testing.assert_close(got_out, want_out)
