"""size_one.unit_meta: a leaf call of PyTorch's own (run natively, as one call) whose
reshapes copy here and view at size 1 is compared op by op with its re-run at 1; those
reshapes are recorded whole, so that the program views or copies at run time as eager does."""
import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim
from torch.testing import assert_close

import unbroken
from unbroken import InputMismatchError

# torch.nn.functional's attention and the view-or-copy choices of its reshapes differ across
# releases: every Python x torch cell runs these
pytestmark = pytest.mark.matrix


def _torch_function(body):
    """``body`` as a function of PyTorch's own: the trace calls it natively, as one leaf
    call (as it calls ``F.multi_head_attention_forward``)."""
    body.__module__ = "torch._unbroken_tests"
    return body


@_torch_function
def _merge_then_sum(x):
    return x.transpose(1, 2).reshape(-1, x.shape[1]).sum(-1)


@_torch_function
def _merge_contiguous_then_sum(x):
    # at 1 the reshape is a strided view and contiguous() copies it; here the reverse
    return x.transpose(1, 2).reshape(-1, x.shape[1]).contiguous().sum(-1)


class _Calls(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x) * 2


def _ops(ep):
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


@settings(max_examples=8, deadline=None)
@given(length=st.integers(2, 60), scale=st.sampled_from([1e-3, 1.0, 1e4]),
       seed=st.integers(0, 2**16))
def test_a_reshape_inside_a_torch_function_is_recorded_whole(length, scale, seed):
    """The function copies at batch >= 2 and views at batch 1 inside one native call; its
    re-run at 1 dispatches the same ops but for that reshape, so batch 1 is admitted, the
    reshape recorded whole, and every batch computes eager's values bit for bit."""
    model = _Calls(_merge_then_sum)
    ep = unbroken.export(model, (torch.randn(3, 7, length),), dynamic_shapes=({0: Dim.AUTO},))
    assert torch.ops.aten.reshape.default in _ops(ep)
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    torch.manual_seed(seed)
    for batch in (1, 2, 3):
        x = torch.randn(batch, 7, length) * scale
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


def test_a_layout_choice_after_an_inner_reshape_counts():
    """Inside the call, ``contiguous()`` copies the strided view at 1 but not the trace's
    copy: the re-run dispatches another op there, so the answers count and batch 1 is
    refused (eager's sum would add in the order of its own copy)."""
    model = _Calls(_merge_contiguous_then_sum)
    ep = unbroken.export(model, (torch.randn(3, 7, 53),), dynamic_shapes=({0: Dim.AUTO},))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {2}
    with pytest.raises(InputMismatchError, match="size 1 is refused"):
        ep.module()(torch.randn(1, 7, 53))
    x = torch.randn(4, 7, 53) * 10
    assert_close(ep.module()(x), model(x), rtol=0, atol=0)


class _SelfAttention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x, mask):
        return self.mha(x, x, x, key_padding_mask=mask)[0]


@pytest.mark.parametrize("grad", [True, False], ids=["grad", "no_grad"])
def test_multihead_attention_admits_batch_one_bit_for_bit(grad):
    """``F.multi_head_attention_forward`` (one native call) merges the key padding mask
    with the heads by ``reshape`` (a copy at batch >= 2, a stride-0 view at batch 1) and
    packs its projection with a ``contiguous()`` that copies only at >= 2: batch 1 and a
    sequence of 1 are admitted, and match eager bit for bit."""
    torch.manual_seed(0)
    model = _SelfAttention().eval()
    dims = {"x": {0: Dim.AUTO, 1: Dim.AUTO}, "mask": {0: Dim.AUTO, 1: Dim.AUTO}}
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[1, 4:] = True
    with torch.set_grad_enabled(grad):
        ep = unbroken.export(model, (torch.randn(3, 6, 32), mask), dynamic_shapes=dims)
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for batch, seq in [(1, 6), (1, 1), (2, 1), (4, 9)]:
        x, m = torch.randn(batch, seq, 32) * 10, torch.zeros(batch, seq, dtype=torch.bool)
        m[-1, seq // 2 + 1:] = True
        with torch.set_grad_enabled(grad):
            assert_close(ep.module()(x, m), model(x, m), rtol=0, atol=0)


def test_a_native_calls_comparisons_at_one_rerun_each_set_once(monkeypatch):
    """The comparisons of one native call at 1 (same ops; same ops but reshapes that flip)
    re-run it at the same sets of dims at 1: each set runs once (MHA's forward, ~30 ms a
    re-run, ran twice at batch 1 and twice at sequence 1), with the same program."""
    import unbroken.size_one.unit_meta as unit_meta
    reruns = []
    real = unit_meta._rerun_at
    monkeypatch.setattr(unit_meta, "_rerun_at", lambda *a: reruns.append(
        (a[3], frozenset(a[-1].items()))) or real(*a))
    torch.manual_seed(0)
    model = nn.TransformerEncoderLayer(32, 4, 64, batch_first=True).eval()
    ep = unbroken.export(model, (torch.randn(3, 6, 32),),
                         dynamic_shapes=({0: Dim("batch"), 1: Dim("seq")},))
    calls = [fn for fn, _ in reruns if fn is torch.nn.functional.multi_head_attention_forward]
    assert calls and len(reruns) == len(set(reruns))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for batch, seq in [(1, 6), (1, 1), (2, 1), (4, 9)]:
        x = torch.randn(batch, seq, 32)
        assert_close(ep.module()(x), model(x), rtol=0, atol=0)


class _CrossAttention(nn.Module):
    """The same attention called on another tensor for its keys and values: metadata equal to
    the self-attention's, another packed projection (``query is key`` decides)."""

    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(32, 4, batch_first=True)

    def forward(self, x, memory):
        return self.mha(x, memory, memory)[0]


def _leaf_cases():
    mask = torch.zeros(3, 6, dtype=torch.bool)
    mask[1, 4:] = True
    both = {0: Dim.AUTO, 1: Dim.AUTO}
    return {
        "reshape_recorded_whole": (_Calls(_merge_then_sum), (torch.randn(3, 7, 5),),
                                   ({0: Dim.AUTO},)),
        "layout_choice_refused": (_Calls(_merge_contiguous_then_sum), (torch.randn(3, 7, 5),),
                                  ({0: Dim.AUTO},)),
        "self_attention": (_SelfAttention(), (torch.randn(3, 6, 32), mask), (both, both)),
        "cross_attention": (_CrossAttention(), (torch.randn(3, 6, 32), torch.randn(3, 6, 32)),
                            (both, both)),
        "encoder_layer": (nn.TransformerEncoderLayer(32, 4, 64, batch_first=True),
                          (torch.randn(3, 6, 32),), ({0: Dim("batch"), 1: Dim("seq")},)),
    }


def _counting_leaf_reruns(monkeypatch) -> list:
    import unbroken.size_one.unit_meta as unit_meta
    reruns = []
    real = unit_meta._rerun_at
    monkeypatch.setattr(unit_meta, "_rerun_at", lambda *a: reruns.append(a[3]) or real(*a))
    return reruns


@pytest.mark.parametrize("case", list(_leaf_cases()))
def test_a_second_export_takes_the_leaf_calls_outcomes_of_the_first(case, monkeypatch):
    """Exported again in the same process, a native call of torch's is not re-run at 1 (its
    comparisons' outcomes, and the reshapes they found flipping, are taken from the first
    export's: ~30 ms a re-run of ``F.multi_head_attention_forward``), and the program, its
    ranges and what it refuses at 1 are the first's, each right against eager."""
    torch.manual_seed(0)
    model, example, spec = _leaf_cases()[case]
    model.eval()
    reruns = _counting_leaf_reruns(monkeypatch)
    first = unbroken.export(model, example, dynamic_shapes=spec)
    ran = len(reruns)
    second = unbroken.export(model, example, dynamic_shapes=spec)
    assert ran > 0 and len(reruns) == ran
    assert first.graph_module.code == second.graph_module.code
    assert first.range_constraints == second.range_constraints
    for batch, seq in [(1, 1), (1, example[0].shape[1]), (2, 1), (4, 3)]:
        shapes = [[{0: batch, 1: seq}.get(d, n) if d in dims else n
                   for d, n in enumerate(t.shape)] for t, dims in zip(example, spec)]
        inputs = tuple(torch.randn(shape) if t.is_floating_point()
                       else torch.zeros(shape, dtype=t.dtype)
                       for t, shape in zip(example, shapes))
        outcomes = []
        for ep in (first, second):
            try:
                outcomes.append(ep.module()(*inputs))
            except InputMismatchError as error:
                outcomes.append(str(error))
        if isinstance(outcomes[0], str):  # refused by both, with the same message
            assert outcomes[0] == outcomes[1] and 1 in (batch, seq)
            continue
        want = model(*inputs)
        for got in outcomes:
            assert_close(got, want, rtol=0, atol=0)


def test_a_leaf_calls_shared_outcome_keeps_which_tensor_is_which(monkeypatch):
    """Self- and cross-attention on tensors of equal metadata dispatch other ops (the packed
    projection): neither takes the other's outcomes, and each program is eager's at 1."""
    torch.manual_seed(0)
    self_attention, cross = _SelfAttention().eval(), _CrossAttention().eval()
    cross.mha = self_attention.mha
    both = {0: Dim.AUTO, 1: Dim.AUTO}
    x, memory = torch.randn(3, 6, 32), torch.randn(3, 6, 32)
    reruns = _counting_leaf_reruns(monkeypatch)
    unbroken.export(self_attention, (x, torch.zeros(3, 6, dtype=torch.bool)),
                    dynamic_shapes=(both, both))
    ran = len(reruns)
    ep = unbroken.export(cross, (x, memory), dynamic_shapes=(both, both))
    assert len(reruns) > ran
    for batch, seq in [(1, 1), (1, 6), (2, 1)]:
        a, b = torch.randn(batch, seq, 32), torch.randn(batch, seq, 32)
        assert_close(ep.module()(a, b), cross(a, b), rtol=0, atol=0)


def test_only_torchs_own_functions_share_leaf_call_outcomes():
    from unbroken.size_one.unit_meta import _torch_own
    assert _torch_own(torch.nn.functional.multi_head_attention_forward)
    assert _torch_own(torch.Tensor.reshape) and _torch_own(torch.ops.aten.add.Tensor)
    assert not _torch_own(lambda x: x)
    lib = torch.library.Library("unbroken_leaf_test", "FRAGMENT")
    lib.define("twice(Tensor x) -> Tensor")
    assert not _torch_own(torch.ops.unbroken_leaf_test.twice.default)
