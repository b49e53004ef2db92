"""The recorder's traced values (shape, dtype, strides, aliasing of the input) against eager's
CPU kernels, on torch's own OpInfo sample inputs laid out contiguous, channels_last,
transposed, expanded and with odd strides on size-1 dims (``tests/ir/layout_oracle.py``).

A representative slice runs in ``make test``; the whole OpInfo database (~16 min on the
shared machine) is marked ``slow`` and ``heavy``, so ``make test`` stays in budget and
``make test-heavy`` runs it (``pytest -m heavy tests/ir/test_recorder_layouts.py -s`` prints
the counts). The mismatches
the full sweep still finds are listed in :data:`KNOWN_MISMATCHES` with why; any other fails.
"""
from __future__ import annotations

import collections

import pytest
import torch

from tests.ir.layout_oracle import LAYOUTS, compare, sweep

pytest.importorskip("expecttest")  # torch's OpInfo database imports it


def _op_db():
    """torch's OpInfo database, imported when a test here runs, not when pytest collects:
    importing torch.testing._internal changes process-wide state (TorchScript functions then
    reach unbroken's interpreter as their Python source), which must not leak into the tests
    collected beside these."""
    from torch.testing._internal.common_methods_invocations import op_db

    return op_db

# (op, variant, layout) -> why its traced strides still differ from eager's CPU kernel. None
# left: the sweep's former mismatches (FFTs, elementwise ops whose meta kernel is a Python
# composition, batch norm, max_pool1d, channel_shuffle, max_unpool2d, as_strided_scatter,
# nll_loss's misread reduction) are traced as eager lays them out (``unbroken.ir.layouts``,
# ``ir.recorder``'s misread composites), and none is refused.
KNOWN_MISMATCHES: dict = {}

# (op, variant, layout) -> why unbroken refuses the op on that layout (UB124: eager's output
# layout cannot be learnt, ``ir.layouts``). None: every layout the sweep meets is learnt; a
# refusal appearing fails the tests (a refusal must fire only where a layout is undecidable).
LAYOUT_REFUSALS: dict = {}

# (op, layout) pairs the slice must compare and find equal: the former mismatches it covers
# (a sample without that layout would let the slice pass without looking).
SLICE_PAIRS = (
    ("fft.fft", "transposed"), ("fft.fft", "contiguous"), ("fft.rfft2", "expanded"),
    ("copysign", "transposed"), ("floor_divide", "transposed"),
    ("native_batch_norm", "transposed"), ("native_batch_norm", "contiguous"),
    ("_batch_norm_with_update", "transposed"), ("nn.functional.batch_norm", "transposed"),
    ("nn.functional.max_unpool2d", "channels_last"),
    ("nn.functional.channel_shuffle", "channels_last"),
    ("nn.functional.max_pool1d", "transposed"), ("as_strided_scatter", "expanded"),
    ("nn.functional.nll_loss", "contiguous"),
)


# The slice: the ops the issue found wrong (conv, conv_transpose, group_norm, reflect and
# replicate padding), the layout-preserving families (elementwise, reductions, norms, pools,
# views, conversions), the aliasing ones (dropout, contiguous, to) and the ops of
# SLICE_PAIRS (FFTs, elementwise compositions, batch norms, probed kernels).
SLICE = (
    "nn.functional.conv2d", "nn.functional.conv_transpose2d", "nn.functional.conv1d",
    "nn.functional.conv3d", "nn.functional.group_norm", "nn.functional.pad",
    "nn.functional.layer_norm", "nn.functional.batch_norm", "nn.functional.instance_norm",
    "nn.functional.max_pool2d", "nn.functional.avg_pool2d", "nn.functional.adaptive_avg_pool2d",
    "nn.functional.interpolate", "nn.functional.pixel_shuffle", "nn.functional.relu",
    "nn.functional.gelu", "nn.functional.silu", "nn.functional.dropout", "nn.functional.linear",
    "nn.functional.softmax", "add", "mul", "where", "clone", "contiguous", "to", "type_as",
    "sum", "mean", "amax", "cumsum", "transpose", "permute", "reshape", "view", "flatten",
    "index_select", "gather", "flip", "roll", "matmul", "bmm", "abs", "exp",
    *sorted({name for name, _ in SLICE_PAIRS} - {"nn.functional.batch_norm"}),
)


def _layout_refusal(outcome) -> bool:
    """The trace refused the op because eager's output layout could not be learnt."""
    return outcome.kind == "refused" and "[UB124]" in outcome.detail


def _slice_op(name: str):
    found = [op for op in _op_db() if op.name == name and not op.variant_test_name]
    if not found:
        pytest.skip(f"torch's OpInfo database has no {name!r} in this release")
    return found[0]


@pytest.mark.parametrize("name", SLICE)
def test_traced_layouts_match_eager_on_the_slice(name):
    op = _slice_op(name)
    pairs = [layout for op_name, layout in SLICE_PAIRS if op_name == name]
    outcomes = list(sweep([op], samples_per_op=8 if pairs else 3))
    compared = [o for *_, o in outcomes if o.kind == "ok" or o.kind == "mismatch"]
    assert compared, f"no sample of {op.name} was compared"
    wrong = [(layout, o.detail) for name, variant, layout, o in outcomes
             if o.kind == "mismatch" and (name, variant, layout) not in KNOWN_MISMATCHES
             or _layout_refusal(o) and (name, variant, layout) not in LAYOUT_REFUSALS]
    assert not wrong, wrong
    for layout in pairs:
        seen = [o for _, _, got_layout, o in outcomes if got_layout == layout]
        assert seen and all(o.kind == "ok" for o in seen), (layout, seen)


class ChannelsLast(torch.nn.Module):
    """The issue's five ops on a channels_last input, each read by a layout query."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(4, 4, 3)
        self.up = torch.nn.ConvTranspose2d(4, 4, 3)
        self.norm = torch.nn.GroupNorm(2, 4)

    def forward(self, x):
        outs = [self.conv(x), self.up(x), self.norm(x),
                torch.nn.functional.pad(x, (1, 1, 1, 1), mode="reflect"),
                torch.nn.functional.pad(x, (1, 1, 1, 1), mode="replicate")]
        return [out.is_contiguous(memory_format=torch.channels_last) * 1.0 + out.sum() * 0
                for out in outs]


def test_channels_last_layout_queries_take_eager_branch():
    import unbroken

    x = torch.randn(2, 4, 6, 6).contiguous(memory_format=torch.channels_last)
    model = ChannelsLast()
    got = unbroken.export(model, (x,)).module()(x)
    assert [t.item() for t in got] == [t.item() for t in model(x)] == [1.0] * 5


def test_oracle_sees_a_wrong_layout():
    """The oracle itself: an op whose traced strides differ from eager's is a mismatch."""
    def transposed_copy(x):  # eager: a transposed result; the trace's is the same op's
        return x.t().contiguous().t() if x.device.type == "cpu" else x.clone()

    outcome = compare(transposed_copy, torch.randn(3, 4), (), {})
    assert outcome.kind == "mismatch" and "eager" in outcome.detail
    assert set(LAYOUTS) == {"contiguous", "channels_last", "channels_last_3d", "transposed",
                            "expanded", "size_one"}


@pytest.mark.slow
@pytest.mark.heavy
def test_traced_layouts_match_eager_on_every_opinfo(capsys):
    counts, ops, found, refused = collections.Counter(), set(), {}, {}
    for name, variant, layout, outcome in sweep(_op_db(), samples_per_op=8):
        counts[outcome.kind] += 1
        ops.add((name, variant))
        if outcome.kind == "mismatch":
            found.setdefault((name, variant, layout), outcome.detail)
        if _layout_refusal(outcome):
            refused.setdefault((name, variant, layout), outcome.detail)
    with capsys.disabled():
        print(f"\nOpInfo layout sweep: {len(ops)} ops, {sum(counts.values())} samples x layouts: "
              f"{dict(counts)}; mismatches in {len(found)} (op, layout) pairs, layout "
              f"refusals (UB124) in {len(refused)}")
    new = {key: detail for key, detail in found.items() if key not in KNOWN_MISMATCHES}
    new.update((key, detail) for key, detail in refused.items() if key not in LAYOUT_REFUSALS)
    assert not new, new
