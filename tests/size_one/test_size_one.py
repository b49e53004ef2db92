"""unbroken.size_one: a dim whose spec admits 1 admits 1 at run time when no decision of the
trace depends on it being >= 2, or a trace at size 1 gives the same program;
otherwise the program keeps [2, ...] and refuses 1 with an error naming the decision.

Oracle: eager at size 1 (and at other sizes)."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim
from torch.testing import assert_close

import unbroken
from unbroken import InputMismatchError
from unbroken.size_one import SizeOneWarning


class Mlp(nn.Module):
    def __init__(self):
        super().__init__()
        self.l = nn.Linear(8, 4)

    def forward(self, x, y):
        return torch.relu(self.l(x + y)).softmax(-1)


def test_batch_one_is_admitted_when_the_program_is_the_same():
    batch = Dim("batch", min=1, max=64)
    model = Mlp()
    ep = unbroken.export(model, (torch.randn(4, 8), torch.randn(4, 8)),
                         dynamic_shapes={"x": {0: batch}, "y": {0: batch}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 1
    for n in (1, 2, 7):
        x, y = torch.randn(n, 8), torch.randn(n, 8)
        assert_close(ep.module()(x, y), model(x, y))


class BranchOnOne(nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:  # a different program for batch 1
            return x * 2
        return x + 1


def test_batch_one_is_refused_when_size_one_takes_another_path():
    with pytest.warns(SizeOneWarning, match=r"declared min=1.*test_size_one.py:\d+ \(if x.shape"
                                            r"\[0\] == 1.*declare min=2"):
        ep = unbroken.export(BranchOnOne(), (torch.randn(4, 3),),
                             dynamic_shapes={"x": {0: Dim("batch", min=1)}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 2
    with pytest.raises(InputMismatchError, match=r"size 1 is refused for x.shape\[0\]: the "
                                                 r"program relies on x.shape\[0\] != 1 at .*"
                                                 r"test_size_one.py"):
        ep.module()(torch.randn(1, 3))
    assert_close(ep.module()(torch.randn(5, 3)).shape, torch.Size([5, 3]))


class Pairs(nn.Module):
    def forward(self, x, y):
        return x.view(-1, 2, 3).sum(1) + y


def test_derived_dim_with_a_root_of_min_1():
    d = Dim("d", min=1, max=16)
    ep = unbroken.export(Pairs(), (torch.randn(8, 3), torch.randn(4, 3)),
                         dynamic_shapes={"x": {0: 2 * d}, "y": {0: d}})
    for n in (1, 3):  # x of 2 rows (d = 1) and of 6
        x, y = torch.randn(2 * n, 3), torch.randn(n, 3)
        assert_close(ep.module()(x, y), Pairs()(x, y))


def test_auto_with_min_1():
    model = Mlp()
    auto = {0: Dim.AUTO(min=1)}
    ep = unbroken.export(model, (torch.randn(4, 8), torch.randn(4, 8)),
                         dynamic_shapes={"x": auto, "y": auto})
    x, y = torch.randn(1, 8), torch.randn(1, 8)
    assert_close(ep.module()(x, y), model(x, y))


class Scale(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        return (x * self.w).sum(-1).tanh()


@pytest.mark.parametrize("entry", [Dim.AUTO, Dim.DYNAMIC, Dim("n"), Dim("n", min=1)],
                         ids=["auto", "dynamic", "named", "min1"])
def test_no_decision_depends_on_the_dim_so_size_one_is_admitted_without_a_retrace(
        entry, monkeypatch):
    calls = []
    real = unbroken.size_one.admission._traces_the_same
    monkeypatch.setattr(unbroken.size_one.admission, "_traces_the_same",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    model = Scale()
    ep = unbroken.export(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: entry}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 1 and calls == []
    for n in (1, 2, 5):
        x = torch.randn(n, 3)
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


class SamePathsAtOne(nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:  # a decision on the dim, whose two paths compute the same
            return x.reshape(1, -1) * 2
        return x.reshape(x.shape[0], -1) * 2


def test_auto_dim_a_decision_depends_on_is_traced_at_one_and_admitted_when_the_same():
    """``Dim.AUTO`` as ``Dim.AUTO(min=1)``: a decision on the dim is checked by a trace at 1."""
    model = SamePathsAtOne()
    for entry in (Dim.AUTO, Dim.DYNAMIC, Dim.AUTO(min=1)):
        ep = unbroken.export(model, (torch.randn(4, 2, 3),), dynamic_shapes={"x": {0: entry}})
        assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
        for n in (1, 3):
            x = torch.randn(n, 2, 3)
            assert_close(ep.module()(x), model(x), rtol=0, atol=0)


class OtherPathAtOne(nn.Module):
    def forward(self, x):
        if x.shape[0] == 1:  # size 1 computes something else
            return x * 3
        return x * 2


def test_auto_dim_whose_code_differs_at_one_is_refused_naming_the_line():
    model = OtherPathAtOne()
    ep = unbroken.export(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {2}
    with pytest.raises(InputMismatchError, match=r"relies on .*x.shape\[0\].* at .*"
                                                 r"test_size_one.py:\d+ \(if x.shape\[0\] == 1.*"
                                                 r"a trace at size 1 gives a different program"):
        ep.module()(torch.randn(1, 3))
    x = torch.randn(3, 3)
    assert_close(ep.module()(x), model(x), rtol=0, atol=0)


def test_auto_dims_beyond_the_retrace_budget_keep_two_and_say_how(monkeypatch):
    monkeypatch.setattr(unbroken.size_one.admission, "MAX_SYMBOLS", 0)
    ep = unbroken.export(OtherPathAtOne(), (torch.randn(4, 3),),
                         dynamic_shapes={"x": {0: Dim.AUTO}})
    with pytest.raises(InputMismatchError, match=r"done for 0 dims per export.*"
                                                 r"declare this one Dim.AUTO\(min=1\)"):
        ep.module()(torch.randn(1, 3))


@pytest.mark.parametrize("body", [
    lambda x: x.reshape(x.shape[0], -1) * 2,  # reshape chooses a view or a copy: same at 1
    lambda x: x.transpose(1, 2).reshape(x.shape[0], -1),  # a copy at every size
    lambda x: x.flatten(0, 1) @ torch.ones(3, 2),
], ids=["reshape", "reshape_copy", "flatten"])
def test_a_leaf_call_that_runs_the_same_ops_at_one_does_not_count(body):
    class Body(nn.Module):
        def forward(self, x):
            return body(x)

    model = Body()
    ep = unbroken.export(model, (torch.randn(4, 2, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for n in (1, 3):
        x = torch.randn(n, 2, 3)
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


def test_a_node_whose_metadata_is_the_same_at_one_does_not_count():
    """``nn.Linear``'s bias add asks "is the batch 1?" inside the kept-whole ``linear``; its
    output metadata at 1 is the same, so ``Dim.AUTO`` admits 1 without a second trace."""
    model = Mlp()
    auto = {0: Dim.AUTO}
    ep = unbroken.export(model, (torch.randn(4, 8), torch.randn(4, 8)),
                         dynamic_shapes={"x": auto, "y": auto})
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    x, y = torch.randn(1, 8), torch.randn(1, 8)
    assert_close(ep.module()(x, y), model(x, y), rtol=0, atol=0)


def test_squeeze_of_the_dim_differs_at_one_and_is_refused():
    class Squeeze(nn.Module):
        def forward(self, x):
            return x.squeeze(0) * 2

    with pytest.warns(SizeOneWarning, match="aten.squeeze"):
        ep = unbroken.export(Squeeze(), (torch.randn(4, 3),),
                             dynamic_shapes={"x": {0: Dim.AUTO(min=1)}})
    with pytest.raises(InputMismatchError, match="size 1 is refused"):
        ep.module()(torch.randn(1, 3))


class GradRegionAndBuffer(nn.Module):
    """A no_grad region (a subgraph in the program) writing a buffer."""

    def __init__(self):
        super().__init__()
        self.l = nn.Linear(4, 4)
        self.register_buffer("seen", torch.zeros(4))

    def forward(self, x):
        with torch.no_grad():
            self.seen.add_(x.sum(0))
        return self.l(x).relu() * 2


def test_batch_one_with_a_grad_region_and_a_buffer_write():
    model = GradRegionAndBuffer()
    ep = unbroken.export(model, (torch.randn(3, 4, requires_grad=True),),
                         dynamic_shapes={"x": {0: Dim("b", min=1)}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 1
    twin = GradRegionAndBuffer()
    twin.load_state_dict(model.state_dict())
    module = ep.module()
    for n in (1, 3):
        x = torch.randn(n, 4, requires_grad=True)
        x_ref = x.detach().clone().requires_grad_()
        out, ref = module(x), twin(x_ref)
        assert_close(out, ref, rtol=0, atol=0)
        out.sum().backward()
        ref.sum().backward()
        assert_close(x.grad, x_ref.grad, rtol=0, atol=0)
        assert_close(module.seen, twin.seen, rtol=0, atol=0)


def test_same_program_skips_whole_dim_slices():
    """``t[:, None]`` records a whole-dim slice when the dim is symbolic, not at size 1."""
    class Index(nn.Module):
        def forward(self, x):
            rows = torch.arange(x.shape[0])
            return x + rows[:, None]

    model = Index()
    ep = unbroken.export(model, (torch.randn(4, 3),), dynamic_shapes={"x": {0: Dim("b", min=1)}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 1
    for n in (1, 4):
        x = torch.randn(n, 3)
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


def _write_source_after_transposed_reshape(x):
    source = x * 1
    y = source.t().reshape(-1)  # a copy at >= 2, a view of `source` at 1
    source.add_(1.0)  # at 1, eager's y sees this write
    return y * 2


def _write_through_view(x):
    y = x.reshape(-1)  # a view of a contiguous input: the write reaches x
    y.add_(1.0)
    return y * 2


def _write_through_transposed_reshape(x):
    y = x.t().reshape(-1)  # a copy at >= 2 (a view at 1 for one row)
    y.mul_(3.0)
    return y


_BODIES = {
    "squeeze": lambda x: x.squeeze(0) * 2,
    "unsqueeze": lambda x: x.unsqueeze(1) + 1,
    "broadcast": lambda x: x + torch.ones(1, 4),
    "sum": lambda x: x.sum(0),
    "softmax_batch": lambda x: x.softmax(0),
    "contiguous_t": lambda x: x.t().contiguous().view(-1),
    "first_last": lambda x: x[0] + x[-1],
    "cat_stack": lambda x: torch.stack([torch.cat([x, x], 0)] * 2, 1),
    "matmul": lambda x: x @ x.t(),
    "cumsum_sort": lambda x: x.cumsum(0).sort(0).values,
    "layer_batch_norm": lambda x: F.batch_norm(F.layer_norm(x, (4,)), torch.zeros(4),
                                               torch.ones(4)),
    "chunk": lambda x: x.chunk(2, 0)[-1],
    "split": lambda x: x.split(1, 0)[0] * 2,
    "expand_copy": lambda x: x[:, None].expand(-1, 3, -1).contiguous().view(-1, 4),
    "std": lambda x: x.std(0),
    "sdpa": lambda x: F.scaled_dot_product_attention(x[None], x[None], x[None]),
    "write_view": _write_through_view,
    "write_transposed": _write_through_transposed_reshape,
    "write_source_after_reshape": _write_source_after_transposed_reshape,
    "reshape_transposed": lambda x: x.t().reshape(-1) * 2,  # a copy at >= 2, a view at 1
    "reshape_transposed_returned": lambda x: x.t().reshape(-1),
    "flatten_transposed": lambda x: (x * 1).t().flatten() @ torch.ones(x.shape[0] * 4),
}


@pytest.mark.parametrize("name", sorted(_BODIES))
def test_every_admitted_size_computes_what_eager_computes(name):
    """Differential: whatever range the program admits, each admitted size (1 included)
    gives eager's outputs and input writes; each other size is refused."""
    body = _BODIES[name]

    class Body(nn.Module):
        def forward(self, x):
            return body(x)

    try:
        ep = unbroken.export(Body(), (torch.randn(5, 4),), dynamic_shapes={"x": {0: Dim.AUTO}})
    except unbroken.RefusalError:
        return  # refusing is sound
    module = ep.module()
    for n in (1, 2, 3, 6):
        x = torch.randn(n, 4)
        x_eager = x.clone()
        try:
            expected = Body()(x_eager)
        except RuntimeError:
            expected = None
        try:
            got = module(x)
        except InputMismatchError:
            continue  # outside the program's range: refused before running
        assert expected is not None, f"{name}: size {n} runs in the program, not in eager"
        assert_close(got, expected, rtol=0, atol=0, equal_nan=True)
        assert_close(x, x_eager, rtol=0, atol=0)


# --- patterns of real models whose batch 1 needs more than one dim (or a layout) at 1 -----

class Heads(nn.Module):
    """BLOOM/CodeGen/XGLM's attention heads: a fused projection split into heads and merged
    with the batch by ``reshape`` -- a copy at batch >= 2, a view at batch 1."""

    def __init__(self, after=None):
        super().__init__()
        self.proj = nn.Linear(8, 24)
        self.after = after or (lambda source, merged: merged.softmax(-1) * 2)

    def forward(self, x):
        b, s, _ = x.shape
        source = self.proj(x).view(b, s, 2, 3, 4)[..., 0, :].transpose(1, 2)  # (b, 2, s, 4)
        merged = source.reshape(b * 2, -1, 4)
        return self.after(source, merged)


def _write_merged(source, merged):
    merged.add_(1.0)  # at batch 1 eager's merged is a view: this write reaches `source`
    return source.sum((1, 2)) + merged.sum()


def _write_source(source, merged):
    source.mul_(2.0)  # at batch 1 eager's merged sees this write
    return merged * 1


def _read_layout(source, merged):
    return merged * (2 if merged.is_contiguous() else 3)


def _check_sizes(model, ep, sizes, make):
    """Each size either refused by ``module()`` before running or matching eager (outputs and
    the inputs after the call); sizes eager fails on must be refused. Returns the sizes that
    ran."""
    ran = []
    for size in sizes:
        inputs = make(*size)
        eager_inputs = [t.clone() for t in inputs]
        try:
            expected = model(*eager_inputs)
        except RuntimeError:
            with pytest.raises(InputMismatchError):
                ep.module()(*inputs)
            continue
        try:
            got = ep.module()(*inputs)
        except InputMismatchError:
            continue
        assert_close(got, expected, rtol=0, atol=0)
        for a, b in zip(inputs, eager_inputs):
            assert_close(a, b, rtol=0, atol=0)
        ran.append(size)
    return ran


def test_reshape_that_copies_at_two_and_views_at_one_admits_batch_one():
    model = Heads()
    ep = unbroken.export(model, (torch.randn(2, 5, 8),), dynamic_shapes=({0: Dim.AUTO},))
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 1
    assert _check_sizes(model, ep, [(1,), (3,)], lambda n: [torch.randn(n, 5, 8)]) == [
        (1,), (3,)]


@pytest.mark.parametrize("after, why", [
    (_write_merged, r"later writes into that memory in place \(test_size_one.py:\d+\)"),
    (_write_source, r"later writes into that memory in place \(test_size_one.py:\d+\)"),
    (lambda source, merged: merged, "returns that result"),
    (lambda source, merged: merged.transpose(0, 1), "returns that result"),
    (_read_layout, "reads a stride or contiguity fact"),
], ids=["write_result", "write_source", "returned", "returned_view", "layout_read"])
def test_reshape_whose_aliasing_is_observed_keeps_refusing_batch_one(after, why):
    model = Heads(after)
    with torch.no_grad():
        ep = unbroken.export(model, (torch.randn(2, 5, 8),), dynamic_shapes=({0: Dim.AUTO},))
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 2
    with pytest.raises(InputMismatchError, match=r"size 1 is refused for x.shape\[0\]: .*"
                                                 r"test_size_one.py:\d+ \(merged = source"
                                                 r".reshape.*view of its input.*" + why):
        ep.module()(torch.randn(1, 5, 8))
    with torch.no_grad():
        assert _check_sizes(model, ep, [(3,)], lambda n: [torch.randn(n, 5, 8)]) == [(3,)]


class MaskedEmbeddings(nn.Module):
    """DeBERTa/ESM: embeddings times a mask with a batch and a length of its own."""

    def forward(self, x, mask):
        return x * mask.unsqueeze(-1)


def test_mask_with_its_own_batch_admits_batch_one():
    """The mask's batch may be the input's or 1 (a run-time assertion): a mask of batch 1
    against an input of batch n is refused by that assertion, both at 1 is the same
    program."""
    model = MaskedEmbeddings()
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    ep = unbroken.export(model, (torch.randn(2, 5, 8), torch.ones(2, 5)),
                         dynamic_shapes=(auto, auto))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}

    def make(batch, mask_batch, length=5, mask_length=5):
        return [torch.randn(batch, length, 8), (torch.rand(mask_batch, mask_length) > .5).float()]

    sizes = [(1, 1), (3, 3), (1, 3), (3, 1), (1, 1, 1, 1), (3, 3, 1, 1), (2, 2, 4, 1)]
    ran = _check_sizes(model, ep, sizes, make)
    assert {(1, 1), (3, 3), (3, 1), (1, 1, 1, 1)} <= set(ran)


class CrossAttention(nn.Module):
    """BART's cross-attention: decoder queries, encoder keys and values, the encoder's
    padding mask expanded to the decoder's batch; the batches are separate inputs' dims."""

    def __init__(self):
        super().__init__()
        self.embed = nn.Embedding(16, 8)
        self.q, self.kv = nn.Linear(8, 8), nn.Linear(8, 16)

    def forward(self, ids, mask, decoder_ids):
        encoded, decoded = self.embed(ids), self.embed(decoder_ids)
        batch, length = decoded.shape[:2]
        q = self.q(decoded).view(batch, length, 2, 4).transpose(1, 2)
        kv = self.kv(encoded).view(encoded.shape[0], encoded.shape[1], 2, 8).transpose(1, 2)
        k, v = kv.chunk(2, -1)
        bias = mask[:, None, None, :].expand(batch, 1, length, mask.shape[1]).bool()
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=bias)
        return out.transpose(1, 2).reshape(batch, length, 8)


def test_encoder_decoder_attention_admits_batch_one():
    model = CrossAttention()
    auto = {0: Dim.AUTO, 1: Dim.AUTO}

    def make(batch, length=7, decoder_length=3, decoder_batch=None):
        ids = torch.randint(0, 16, (batch, length))
        mask = torch.ones(batch, length, dtype=torch.long)
        mask[-1, length // 2:] = 0
        return [ids, mask, torch.randint(0, 16, (decoder_batch or batch, decoder_length))]

    ep = unbroken.export(model, tuple(make(2, 6, 4)), dynamic_shapes=(auto, auto, auto))
    sizes = [(1,), (3,), (1, 5, 2), (1, 5, 1), (3, 9, 2), (3, 7, 3, 1)]
    assert {(1,), (3,), (1, 5, 2), (3, 9, 2)} <= set(_check_sizes(model, ep, sizes, make))


class MergedHeadsView(nn.Module):
    """BLOOM: scores of ``batch * heads`` viewed back with a ``-1`` (at batch 1 the view's
    size question divides polynomials exactly: ``(s**2)//s``)."""

    def forward(self, x):
        b, s, _ = x.shape
        q = x.view(b, s, 2, 4).transpose(1, 2).reshape(b * 2, s, 4)
        scores = torch.bmm(q, q.transpose(1, 2))
        return scores.view(b, 2, s, -1).softmax(-1)


def test_view_with_inferred_size_over_merged_heads_admits_batch_one():
    model = MergedHeadsView()
    ep = unbroken.export(model, (torch.randn(2, 5, 8),),
                         dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    sizes = [(1, 5), (3, 4), (1, 1), (2, 1)]
    assert _check_sizes(model, ep, sizes, lambda b, s: [torch.randn(b, s, 8)]) == sizes


class PositionBias(nn.Module):
    """T5: a position bias of batch 1 (heads permuted to the front) masked by the padding
    mask of the batch; the length must not be 1 (the code branches on it)."""

    def __init__(self):
        super().__init__()
        self.bias = nn.Embedding(8, 4)

    def forward(self, x, mask):
        b, s = x.shape[:2]
        positions = torch.arange(s)[:, None] - torch.arange(s)[None, :]
        bias = self.bias(positions.clamp(0, 7)).permute(2, 0, 1).unsqueeze(0)
        padding = mask[:, None, None, :].bool().expand(b, 1, s, mask.shape[1])
        scores = torch.where(padding, bias, torch.finfo(x.dtype).min)
        q = x.view(b, s, 4, 2).transpose(1, 2)
        out = F.scaled_dot_product_attention(q, q, q, attn_mask=scores)
        return out * (2 if s > 1 else 1)


def test_position_bias_masked_by_the_batch_admits_batch_one():
    model = PositionBias()
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    ep = unbroken.export(model, (torch.randn(2, 6, 8), torch.ones(2, 6)),
                         dynamic_shapes=(auto, auto))
    batch = [s for s, r in ep.range_constraints.items() if int(r.lower) == 1]
    assert batch  # the batch admits 1; the length keeps [2, ...]

    def make(b, s=6, mask_b=None):
        mask = torch.ones(mask_b or b, s)
        mask[-1, s // 2:] = 0
        return [torch.randn(b, s, 8), mask]

    sizes = [(1,), (3,), (1, 4), (3, 1), (3, 6, 1)]
    assert {(1,), (3,), (1, 4)} <= set(_check_sizes(model, ep, sizes, make))
    with pytest.raises(InputMismatchError, match="size 1 is refused for x.shape\\[1\\]"):
        ep.module()(*make(2, 1))


class OuterMask(nn.Module):
    """DeBERTa: the padding mask made a ``(batch, 1, len, len)`` attention mask of its own
    batch, filling the scores of the inputs' batch: a mask of batch 1 broadcasts against
    inputs of batch n (another program), mask and inputs of batch 1 together do not."""

    def forward(self, x, mask):
        b, s, _ = x.shape
        x = x * mask.unsqueeze(-1)  # the embeddings masked: the mask's batch may be 1
        square = mask[:, None, :, None] * mask[:, None, None, :]
        heads = x.view(b, s, 2, 4).transpose(1, 2)
        scores = (heads @ heads.transpose(-1, -2)).masked_fill(square == 0, -1e4)
        return scores.softmax(-1).sum(1)


def test_mask_of_its_own_batch_refuses_only_the_pattern_that_broadcasts():
    model = OuterMask()
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    ep = unbroken.export(model, (torch.randn(2, 6, 8), torch.ones(2, 6)),
                         dynamic_shapes=(auto, auto))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}

    def make(b, s=6, mask_b=None, mask_s=None):
        mask = torch.ones(mask_b or b, mask_s or s)
        mask[-1, s // 2:] = 0
        return [torch.randn(b, s, 8), mask]

    sizes = [(1,), (3,), (1, 1), (3, 5, 1), (3, 6, 3, 1)]
    assert {(1,), (3,), (1, 1)} <= set(_check_sizes(model, ep, sizes, make))
    with pytest.raises(InputMismatchError, match=r"with mask.shape\[0\] = 1, one of .*x.shape"
                                                 r"\[0\].* must be 1 too: otherwise the "
                                                 r"program relies on .*test_size_one.py:\d+"):
        ep.module()(*make(3, 6, 1))


_PAIR_BODIES = {
    "scale_by_mask": lambda x, m: x * m.unsqueeze(-1),
    "masked_scores": lambda x, m: (x @ x.transpose(-1, -2)).masked_fill(
        m[:, None, :] == 0, -1e4).softmax(-1),
    "where_mask": lambda x, m: torch.where(m[:, :, None] > 0, x, x.flip(-1)),
    "outer_mask": lambda x, m: (x * m.unsqueeze(-1)).transpose(1, 2) @ (
        m[:, :, None] * m[:, None, :]),
    "merged_heads": lambda x, m: (x * m.unsqueeze(-1)).view(
        x.shape[0], x.shape[1], 2, 2).transpose(1, 2).reshape(-1, x.shape[1], 2).sum(-1),
}


@pytest.mark.parametrize("name", sorted(_PAIR_BODIES))
def test_every_admitted_pair_of_sizes_computes_what_eager_computes(name):
    """Differential, two inputs with every dim ``Dim.AUTO`` (an input and a mask of batch and
    length of their own): each combination of sizes (1 included) either runs and gives
    eager's output, or is refused before running; batch 1 for both runs."""
    body = _PAIR_BODIES[name]

    class Body(nn.Module):
        def forward(self, x, m):
            return body(x, m)

    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    ep = unbroken.export(Body(), (torch.randn(2, 5, 4), torch.ones(2, 5)),
                         dynamic_shapes=(auto, auto))

    def make(b, s, mask_b, mask_s):
        mask = (torch.rand(mask_b, mask_s, generator=torch.Generator().manual_seed(b)) > .3)
        return [torch.randn(b, s, 4), mask.float()]

    sizes = [(b, s, mb, ms) for b in (1, 2, 3) for s in (1, 5) for mb in (1, b)
             for ms in (1, s)]
    ran = _check_sizes(Body(), ep, sizes, make)
    assert (1, 5, 1, 5) in ran and (3, 5, 3, 5) in ran
