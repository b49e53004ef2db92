"""unbroken.size_one.admission: sensitive dims (``Dim.AUTO`` too) traced again at 1 and
admitted when the program is the same, copies of layout-dependent calls (``contiguous``,
``reshape``) compared by values unless their aliasing is observed.

Oracle: eager at size 1 (values, and the aliasing of outputs with inputs)."""
from __future__ import annotations

import pytest
import sympy
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim
from torch.testing import assert_close

import unbroken
import unbroken.size_one.admission
import unbroken.size_one.unit_meta
from tests.exactness import assert_one_refused_and_the_rest_exact
from unbroken import InputMismatchError

AUTO2 = {0: Dim.AUTO, 1: Dim.AUTO}


class MhaWithMasks(nn.Module):
    """torch.nn's attention with a causal float mask and a key padding mask: its reshapes
    copy at ``[2, ...]`` and view at 1, its ``contiguous()`` is a no-op at 1."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x, mask):
        n = x.shape[1]
        attn_mask = torch.triu(torch.full((n, n), float("-inf")), diagonal=1)
        return self.mha(x, x, x, attn_mask=attn_mask, key_padding_mask=~mask)


def test_multihead_attention_with_masks_is_exact_wherever_it_admits_one():
    """MHA's reshapes copy at batch >= 2 and view at batch 1, and a ``bmm`` reads the result:
    a matmul may round differently on the copy than on eager's strided view, so batch 1 is
    refused (clean UB002) rather than admitted on a program that only computes the same
    values up to rounding; every size the program admits is bit-exact."""
    torch.manual_seed(0)
    model = MhaWithMasks().eval()
    x, mask = torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.bool)
    mask[1, 3:] = False
    ep = unbroken.export(model, (), {"x": x, "mask": mask},
                         dynamic_shapes={"x": AUTO2, "mask": AUTO2})
    for batch, seq in [(1, 5), (1, 1), (3, 1), (3, 7)]:
        xs, ms = torch.randn(batch, seq, 16), torch.ones(batch, seq, dtype=torch.bool)
        ms[-1, seq // 2 + 1:] = False
        try:
            got = ep.module()(x=xs, mask=ms)
        except InputMismatchError as error:
            assert batch == 1 or seq == 1, error
            assert "size 1 is refused" in str(error)
            continue
        for a, b in zip(got, model(x=xs, mask=ms)):
            assert_close(a, b, rtol=0, atol=0, equal_nan=True)


class Body(nn.Module):
    def __init__(self, body):
        super().__init__()
        self.body = body

    def forward(self, x):
        return self.body(x)


@pytest.mark.parametrize("body", [
    lambda x: x.t().contiguous(),  # at 1, eager returns a view of x (the program a copy)
    lambda x: x.t().contiguous().unsqueeze(0),
    lambda x: x.t().reshape(-1),
], ids=["contiguous", "contiguous_view", "reshape"])
def test_copy_whose_aliasing_is_returned_keeps_refusing_one(body):
    ep = unbroken.export(Body(body), (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {2}
    with pytest.raises(InputMismatchError, match="size 1 is refused"):
        ep.module()(torch.randn(1, 3))
    x = torch.randn(1, 3)
    assert body(x).data_ptr() == x.data_ptr()  # the oracle: eager aliases at 1


@pytest.mark.parametrize("body", [
    lambda x: x.t().contiguous() * 2,
    lambda x: (x.t().contiguous() * 3).relu() + 1,
    lambda x: x.t().reshape(-1) * 3 + x.t().reshape(x.shape[0] * 3) * 2,
], ids=["contiguous", "contiguous_chain", "reshape_twice"])
def test_copy_read_only_for_values_admits_one(body):
    model = Body(body)
    ep = unbroken.export(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for n in (1, 2, 5):
        x = torch.randn(n, 3)
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("body", [
    lambda x: x.transpose(1, 2).reshape(-1, 3) @ torch.ones(3, 2),
    lambda x: x.transpose(1, 2).reshape(-1, 3).sum(0),
    lambda x: x.transpose(1, 2).reshape(-1, 3) * 2,
], ids=["matmul", "sum", "pointwise"])
def test_a_copy_that_is_a_strided_view_at_one_is_exact_where_admitted(body):
    """``reshape`` of a transposed tensor copies at batch >= 2 and is a strided view at batch
    1: wherever the program admits batch 1 it computes eager's values bit for bit."""
    model = Body(body)
    ep = unbroken.export(model, (torch.randn(4, 3, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    for seed in range(5):
        torch.manual_seed(seed)
        for x in (torch.randn(1, 3, 4) * 10 ** seed, torch.randn(5, 3, 4)):
            try:
                got = ep.module()(x)
            except InputMismatchError as error:
                assert x.shape[0] == 1 and "size 1 is refused" in str(error)
                continue
            assert_close(got, model(x), rtol=0, atol=0)


_W = torch.linspace(-2, 2, 5 * 3).reshape(5, 3)


class _Decided(Body):
    """``body`` after a decision on the batch that changes no op: the batch is traced at 1."""

    def forward(self, x):
        if x.shape[0] > 1:
            pass
        return self.body(x)


@pytest.mark.parametrize("body", [
    lambda x: x.transpose(0, 1).contiguous().view(7, -1).sum(-1),
    lambda x: x.transpose(0, 1).contiguous().softmax(0).sum(0),
    lambda x: (x.transpose(0, 1).contiguous() * 2 + 1).cumsum(-1),
], ids=["view_sum", "softmax", "pointwise"])
def test_a_copy_of_what_is_contiguous_at_one_admits_one(body):
    """``contiguous()`` of a transpose over the batch copies at batch >= 2 and returns its
    input at 1 (contiguous there, as torch decides it): read by a reduction or a pointwise
    op, the program's copy and eager's view hold the same elements in the same order and the
    kernels iterate them alike (a size-1 dim's stride aside), so batch 1 is admitted, bit for
    bit, also when a decision on the batch (that changes no op) makes the admission trace at
    1 and compare the programs op by op."""
    model = _Decided(body)
    ep = unbroken.export(model, (torch.randn(4, 7, 5),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for seed in range(4):
        torch.manual_seed(seed)
        for n in (1, 2, 5):
            x = torch.randn(n, 7, 5) * 10 ** seed
            assert_close(ep.module()(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("body", [
    lambda x: x.transpose(0, 1).contiguous() @ _W,
    lambda x: torch.bmm(x.transpose(0, 1).contiguous(), x.transpose(0, 1).transpose(1, 2)),
    lambda x: torch.nn.functional.linear(x.transpose(0, 1).contiguous(), _W.t()),
], ids=["matmul", "bmm", "linear"])
def test_a_copy_read_by_a_blas_product_keeps_refusing_one(body):
    """A BLAS-backed product picks its path from its operands' strides, a size-1 dim's stride
    included: ``matmul`` of eager's (7, 1, 5) view (strides (5, 35, 1)) runs 7 small products
    where the program's contiguous copy folds into one GEMM, and on AVX-512 CPUs the two round
    differently (6 of 21 values, 1 ulp). The copy counts as a copy there: batch 1 is refused,
    naming the reason, and every other batch is eager's bit for bit."""
    assert_one_refused_and_the_rest_exact(_Decided(body), torch.randn(4, 7, 5),
                                          {"x": {0: Dim.AUTO}}, match="size 1 is refused")


def test_a_contiguous_copy_returned_keeps_refusing_one():
    """Where the copy's own identity can be seen (eager returns a view of the input at 1),
    batch 1 stays refused."""
    model = _Decided(lambda x: x.transpose(0, 1).contiguous().view(7, -1))
    ep = unbroken.export(model, (torch.randn(4, 7, 5),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {2}
    with pytest.raises(InputMismatchError, match="size 1 is refused"):
        ep.module()(torch.randn(1, 7, 5))
    x = torch.randn(1, 7, 5)
    assert model(x).data_ptr() == x.data_ptr()  # the oracle: eager aliases at 1


@settings(max_examples=60, deadline=None)
@given(sizes=st.lists(st.sampled_from([1, 1, 2, 3, 5]), min_size=1, max_size=5),
       data=st.data())
def test_contiguity_at_the_compared_sizes_is_torchs(sizes, data):
    """``contiguous_at`` with every size known answers as ``Tensor.is_contiguous`` on any
    permuted layout (the strides of dims of size 1 not read)."""
    order = data.draw(st.permutations(range(len(sizes))))
    tensor = torch.empty(sizes).permute(order)
    answer = unbroken.size_one.unit_meta.contiguous_at(tensor, sympy.sympify)
    assert answer == tensor.is_contiguous()


def _write_after_contiguous(x):
    y = x.t().contiguous()
    y.add_(1)  # at 1 eager writes into x too (y is x)
    return y * 2


def test_copy_written_in_place_keeps_eager_semantics():
    model = Body(_write_after_contiguous)
    ep = unbroken.export(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    for n in (1, 3):
        x = torch.randn(n, 3)
        x_eager = x.clone()
        try:
            got = ep.module()(x)
        except InputMismatchError:
            assert n == 1
            continue
        assert_close(got, model(x_eager), rtol=0, atol=0)
        assert_close(x, x_eager, rtol=0, atol=0)


class MaskThenAssert(nn.Module):
    """XLM's shape: a mask broadcast against the input (``n == b or b == 1``), then an
    ``assert`` that their batches are equal (answered by that fact with ``b >= 2``)."""

    def forward(self, x, mask):
        y = x * mask
        assert mask.shape[0] == x.shape[0]
        if x.shape[0] > 1:  # a decision on the batch whose two paths record the same ops
            return y.relu()
        return y.relu()


def test_batches_an_input_fact_ties_are_traced_at_one_together():
    model = MaskThenAssert()
    ep = unbroken.export(model, (torch.randn(3, 4), torch.randn(3, 4)),
                         dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for n in (1, 2, 5):
        x, mask = torch.randn(n, 4), torch.randn(n, 4)
        assert_close(ep.module()(x, mask), model(x, mask), rtol=0, atol=0)
    x, mask = torch.randn(3, 4), torch.randn(1, 4)
    with pytest.raises(AssertionError):
        model(x, mask)  # the oracle: eager refuses a mask of batch 1 against batch 3
    with pytest.raises(InputMismatchError):
        ep.module()(x, mask)


class ScoresPlusBias(nn.Module):
    """MPT's attention: scores of a transposed reshape plus a position bias of its own
    batch-less shape; at batch 1 the add's output strides differ (its metadata differs, so
    the audit refuses batch 1 at lengths >= 2 by an assertion), its values do not."""

    def __init__(self):
        super().__init__()
        self.qkv = nn.Linear(16, 48)
        self.register_buffer("bias", torch.randn(4, 1, 32))

    def forward(self, x):
        b, s, _ = x.shape
        q, k, _ = self.qkv(x).chunk(3, dim=2)
        q = q.reshape(b, s, 4, 4).transpose(1, 2)
        k = k.reshape(b, s, 4, 4).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * 0.5
        bias = self.bias[:, max(0, 1 - s):, max(0, 32 - s):]
        return (scores + bias).softmax(-1)


def test_a_pattern_the_audit_refused_is_lifted_when_a_trace_there_is_the_same(monkeypatch):
    torch.manual_seed(0)
    model = ScoresPlusBias()
    spec = ({0: Dim.AUTO, 1: Dim.AUTO},)
    with monkeypatch.context() as patched:  # without the trace at the pattern: refused
        patched.setattr(unbroken.size_one.admission, "_lift_refused_patterns",
                        lambda ep, *rest: ep)
        kept = unbroken.export(model, (torch.randn(2, 6, 16),), dynamic_shapes=spec)
        with pytest.raises(InputMismatchError, match="must be 1 too"):
            kept.module()(torch.randn(1, 6, 16))
    ep = unbroken.export(model, (torch.randn(2, 6, 16),), dynamic_shapes=spec)
    for batch, seq in [(1, 6), (1, 1), (3, 1), (1, 9), (3, 7)]:
        x = torch.randn(batch, seq, 16)
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("case", ["traced_at_one", "pattern_lifted", "mha"])
def test_a_program_rebuilt_by_the_admission_has_its_ranges_in_its_shape_env(case):
    """The admission rebuilds the program with wider ranges (and erased assertions) from
    its fake values, which keep their mode: that mode's ShapeEnv must say what
    ``range_constraints`` says (torch's tools read either), every value is still its own
    fake tensor of that mode, and the program still runs size 1 exactly."""
    from unbroken.symbolic.torch_compat import FakeTensor

    torch.manual_seed(0)
    if case == "traced_at_one":
        model, args = MaskThenAssert(), (torch.randn(3, 4), torch.randn(3, 4))
        spec, at_one = ({0: Dim.AUTO}, {0: Dim.AUTO}), (torch.randn(1, 4), torch.randn(1, 4))
    elif case == "pattern_lifted":
        model, args = ScoresPlusBias(), (torch.randn(2, 6, 16),)
        spec, at_one = (AUTO2,), (torch.randn(1, 6, 16),)
    else:
        model = MhaWithMasks().eval()
        args = (torch.randn(2, 5, 16), torch.ones(2, 5, dtype=torch.bool))
        spec, at_one = (AUTO2, AUTO2), (torch.randn(1, 5, 16), torch.ones(1, 5, dtype=torch.bool))
    ep = unbroken.export(model, args, dynamic_shapes=spec)
    assert any(int(r.lower) == 1 for r in ep.range_constraints.values())
    vals = [n.meta["val"] for n in ep.graph.nodes if isinstance(n.meta.get("val"), torch.Tensor)]
    assert all(isinstance(v, FakeTensor) for v in vals)
    assert len({id(v.fake_mode) for v in vals}) == 1 and len({id(v) for v in vals}) == len(vals)
    shape_env = vals[0].fake_mode.shape_env
    for symbol, value_range in ep.range_constraints.items():
        assert shape_env.var_to_range[symbol] == value_range, symbol
    with torch.no_grad():
        assert_close(ep.module()(*at_one), model(*at_one), rtol=0, atol=0)


class _CopyInNoGrad(nn.Module):
    def forward(self, x, y):
        with torch.no_grad():
            z = x.transpose(0, 1).contiguous()  # a copy at >= 2, a view of x at 1
        return torch.bmm(z, y.transpose(0, 1).transpose(1, 2))


def test_a_copy_made_in_no_grad_and_read_with_grad_keeps_refusing_one():
    """At batch 1 ``contiguous()`` returns a view of ``x``, which keeps ``x``'s
    ``requires_grad`` inside ``no_grad`` (a copy does not): read after the region, eager's
    result requires grad at 1 only. Batch 1 is refused, naming why; every admitted batch
    matches eager's values and ``requires_grad``."""
    model = _CopyInNoGrad()
    ep = unbroken.export(model, (torch.randn(4, 6, 5), torch.randn(4, 6, 5)),
                         dynamic_shapes=({0: Dim.AUTO}, {0: Dim.AUTO}))
    one = torch.randn(1, 6, 5, requires_grad=True)
    assert model(one, one.detach()).requires_grad  # the oracle: eager at 1
    with pytest.raises(InputMismatchError, match="read with grad on by `bmm`"):
        ep.module()(one, one.detach())
    for n in (2, 5):
        x = torch.randn(n, 6, 5, requires_grad=True)
        got, expected = ep.module()(x, x.detach()), model(x, x.detach())
        assert got.requires_grad == expected.requires_grad
        assert_close(got, expected, rtol=0, atol=0)
