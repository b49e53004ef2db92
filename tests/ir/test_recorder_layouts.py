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

# The slice: the ops the issue found wrong (conv, conv_transpose, group_norm, reflect and
# replicate padding), the layout-preserving families (elementwise, reductions, norms, pools,
# views, conversions) and the aliasing ones (dropout, contiguous, to).
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
)

# (op, variant, layout) -> why its traced strides still differ from eager's CPU kernel.
KNOWN_MISMATCHES = {
    **{(op, "", layout): "FFT: eager's pocketfft returns the transformed dim innermost; "
                         "torch's meta kernels return contiguous"
       for op in ("fft.fft", "fft.fft2", "fft.fftn", "fft.hfft", "fft.hfft2", "fft.hfftn",
                  "fft.ifft", "fft.ifft2", "fft.ifftn", "fft.ihfft", "fft.ihfft2",
                  "fft.ihfftn", "fft.irfft", "fft.irfft2", "fft.irfftn", "fft.rfft",
                  "fft.rfft2", "fft.rfftn")
       for layout in ("contiguous", "expanded", "transposed")},
    ("stft", "", "transposed"): "FFT family (see fft.*)",
    **{(op, variant, "transposed"): "Python reference decomposition: contiguous output where "
                                    "eager's TensorIterator follows the input's layout"
       for op, variant in (("copysign", ""), ("div", "floor_rounding"), ("floor_divide", ""),
                           ("xlogy", ""), ("special.xlog1py", ""),
                           ("nn.functional.binary_cross_entropy", ""),
                           ("native_dropout_backward", ""))},
    **{(op, "", layout): "batch norm in training: the decomposition's layout for a transposed "
                         "input, and empty saved statistics in eager's CPU kernel"
       for op in ("native_batch_norm", "_native_batch_norm_legit", "_batch_norm_with_update",
                  "nn.functional.batch_norm")
       for layout in ("contiguous", "channels_last", "expanded", "size_one", "transposed")},
    ("nn.functional.max_pool1d", "", "transposed"): "max_pool1d's decomposition",
    ("nn.functional.channel_shuffle", "", "channels_last"): "channel_shuffle's decomposition",
    ("nn.functional.max_unpool2d", "", "channels_last"): "max_unpool2d's meta kernel",
    ("nn.functional.max_unpool2d", "grad", "channels_last"): "max_unpool2d's meta kernel",
    ("nn.functional.dropout", "", "expanded"): "training dropout of an expanded input: eager "
                                               "keeps the stride-0 layout",
    ("as_strided_scatter", "", "expanded"): "eager clones the expanded input densely",
    **{("nn.functional.nll_loss", "", layout): "OpInfo's wrapper only (its trace has shape "
                                               "()): F.nll_loss(reduction='none') itself "
                                               "exports with eager's shape"
       for layout in ("contiguous", "expanded", "transposed")},
}


def _slice_op(name: str):
    found = [op for op in _op_db() if op.name == name and not op.variant_test_name]
    if not found:
        pytest.skip(f"torch's OpInfo database has no {name!r} in this release")
    return found[0]


@pytest.mark.parametrize("name", SLICE)
def test_traced_layouts_match_eager_on_the_slice(name):
    op = _slice_op(name)
    outcomes = list(sweep([op], samples_per_op=3))
    compared = [o for *_, o in outcomes if o.kind == "ok" or o.kind == "mismatch"]
    assert compared, f"no sample of {op.name} was compared"
    wrong = [(layout, o.detail) for name, variant, layout, o in outcomes
             if o.kind == "mismatch" and (name, variant, layout) not in KNOWN_MISMATCHES]
    assert not wrong, wrong


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
    counts, ops, found = collections.Counter(), set(), {}
    for name, variant, layout, outcome in sweep(_op_db(), samples_per_op=8):
        counts[outcome.kind] += 1
        ops.add((name, variant))
        if outcome.kind == "mismatch":
            found.setdefault((name, variant, layout), outcome.detail)
    with capsys.disabled():
        print(f"\nOpInfo layout sweep: {len(ops)} ops, {sum(counts.values())} samples x layouts: "
              f"{dict(counts)}; mismatches in {len(found)} (op, layout) pairs")
    new = {key: detail for key, detail in found.items() if key not in KNOWN_MISMATCHES}
    assert not new, new
