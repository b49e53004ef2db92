"""ir.layouts: traced outputs laid out as eager's CPU kernels lay them out where torch's meta
kernels do not (elementwise compositions, batch norm, FFTs and the probed kernels), checked
differentially against eager on models whose forward() reads the layout; and the refusal
(UB124) where eager's layout cannot be learnt. The OpInfo-wide differential is
``test_recorder_layouts``."""
import pytest
import torch
import torch.nn.functional as F

import unbroken
from unbroken.ir import layouts
from unbroken.ir.recorder import Recorder
from unbroken.symbolic.diagnostics import UnbrokenError, UserFrame

FRAME = UserFrame("/m.py", 7, "forward", "y = torch.ops.unbroken_test.gappy(x)")


class ReadsLayouts(torch.nn.Module):
    """One op of each class, each output's layout read into the result."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm1d(5)

    def forward(self, x, w, pooled, indices):
        outs = [torch.fft.fft(x, dim=1),                         # probed: pocketfft's order
                torch.fft.rfft2(x.transpose(0, 2)),
                torch.copysign(x.transpose(1, 2), w),            # elementwise composition
                torch.floor_divide(x.transpose(1, 2), w),
                self.norm(x.transpose(1, 2)),                    # batch norm in training
                F.max_unpool2d(pooled, indices, 2),              # probed: keeps channels_last
                F.max_pool1d(x.transpose(1, 2), 2)]              # eager's own kernel
        return [float(o.is_contiguous()) + 10.0 * o.stride(-1) + 100.0 * o.stride(1)
                + o.abs().sum() * 0 for o in outs]


def _layout_inputs():
    x, w = torch.randn(3, 4, 5), torch.randn(3, 5, 4)
    pooled, indices = F.max_pool2d(torch.randn(2, 3, 4, 4), 2, return_indices=True)
    channels_last = torch.channels_last
    return (x, w, pooled.contiguous(memory_format=channels_last),
            indices.contiguous(memory_format=channels_last))


def _values(outs):
    return [float(t) for t in outs]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic_batch"])
def test_program_reading_layouts_matches_eager(dynamic):
    """Before: 5 of the 7 layouts read differed from eager's (the trace's were contiguous)."""
    model, inputs = ReadsLayouts(), _layout_inputs()
    batch = torch.export.Dim("batch")
    shapes = {"x": {0: batch}, "w": {0: batch}, "pooled": None, "indices": None} \
        if dynamic else None
    program = unbroken.export(model, inputs, dynamic_shapes=shapes)
    with torch.no_grad():
        assert _values(program.module()(*inputs)) == _values(model(*inputs))


class FftOfDataDependentRows(torch.nn.Module):
    def forward(self, x):
        rows = x[x > 0].reshape(-1, 2)          # a size only the data decides
        y = torch.fft.fft(rows.t(), dim=1)
        return y.abs() * 0 + float(y.is_contiguous()) + y.stride(0)


def test_probe_of_a_data_dependent_size_matches_eager():
    x = torch.tensor([1., 2., 3., 4., 5., 6., -1., -2.]).repeat(3)
    program = unbroken.export(FftOfDataDependentRows(), (x,))
    assert torch.equal(program.module()(x), FftOfDataDependentRows()(x))


def test_batch_norm_in_eval_saves_no_statistics():
    """Eager's CPU kernel returns empty saved statistics in evaluation mode."""
    recorder = Recorder()
    x = torch.empty(4, 3, 5, device="meta")
    c = torch.empty(3, device="meta")
    for index, tensor in enumerate((x, c)):
        recorder.builder.add_placeholder(f"x{index}", tensor, user_input=True)
    with recorder.recording():
        out, mean, invstd = torch.ops.aten.native_batch_norm(x, c, c, c, c, False, 0.1, 1e-5)
    eager = torch.ops.aten.native_batch_norm(*(torch.ones(4, 3, 5),) + (torch.ones(3),) * 4,
                                             False, 0.1, 1e-5)
    assert [tuple(t.shape) for t in (out, mean, invstd)] == [tuple(t.shape) for t in eager]


@pytest.fixture
def gappy_op():
    """An op (in the probed class for the test) whose CPU kernel returns every other column
    of a fresh tensor: no dense layout describes it."""
    library = torch.library.Library("unbroken_test", "FRAGMENT")
    library.define("gappy(Tensor x) -> Tensor")
    library.impl("gappy", lambda x: torch.zeros(x.shape[0], 2 * x.shape[1])[:, ::2], "CPU")
    library.impl("gappy", lambda x: torch.empty(x.shape, device="meta"), "Meta")
    op = torch.ops.unbroken_test.gappy.default
    layouts.kernel_layout(op)  # the table is built
    layouts._TABLE[op] = layouts._probe
    try:
        yield op
    finally:
        del layouts._TABLE[op]
        library._destroy()


def test_probe_refuses_a_layout_that_is_not_dense(gappy_op):
    recorder = Recorder(frames_provider=lambda: (FRAME,))
    x = torch.empty(3, 4, device="meta")
    recorder.builder.add_placeholder("x0", x, user_input=True)
    with pytest.raises(UnbrokenError) as info, recorder.recording():
        gappy_op(x)
    error = info.value
    assert error.code == "UB124" and error.frames == (FRAME,)
    assert "gappy" in error.message and "not a dense layout" in error.message
    assert "x.contiguous()" in error.hint


def test_probe_runs_only_for_the_ops_listed():
    assert layouts.kernel_layout(torch.ops.aten.add.Tensor) is None
    assert layouts.kernel_layout(torch.ops.aten.div.Tensor) is None  # true division: a prim
    assert layouts.kernel_layout(torch.ops.aten.div.Tensor_mode) is not None
    assert layouts.kernel_layout(torch.ops.aten.fft_rfft.default) is layouts._probe


class CallsGappy(torch.nn.Module):
    def forward(self, x):
        y = torch.ops.unbroken_test.gappy(x)
        return y.stride(1) * x


def test_refusal_names_the_users_line(gappy_op):
    with pytest.raises(UnbrokenError) as info:
        unbroken.export(CallsGappy(), (torch.randn(3, 4),))
    error = info.value
    assert error.code == "UB124"
    assert error.frames and error.frames[-1].filename == __file__
    assert "torch.ops.unbroken_test.gappy(x)" in str(error)


def test_oracle_counts_the_refusal_as_a_layout_refusal(gappy_op):
    """The OpInfo differential (``layout_oracle``) reports UB124 with its code, which
    ``test_recorder_layouts`` checks against its list of accepted layout refusals."""
    from tests.ir.layout_oracle import compare
    from tests.ir.test_recorder_layouts import _layout_refusal

    outcome = compare(lambda x: gappy_op(x), torch.randn(3, 4), (), {})
    assert outcome.kind == "refused" and _layout_refusal(outcome), outcome


class _ConvReadsStride(torch.nn.Module):
    def __init__(self, conv):
        super().__init__()
        self.conv = conv

    def forward(self, x):
        y = self.conv(x)
        return y * y.stride()[1]


@pytest.mark.parametrize("mkldnn", [True, False], ids=["mkldnn", "no_mkldnn"])
@pytest.mark.parametrize("conv, shape, memory_format", [
    (torch.nn.Conv3d(3, 4, 3), (2, 3, 6, 6, 6), torch.channels_last_3d),
    (torch.nn.Conv2d(3, 4, 3), (2, 3, 6, 6), torch.channels_last),
    (torch.nn.Conv1d(3, 4, 3), (2, 3, 6), torch.contiguous_format),
], ids=["conv3d_channels_last", "conv2d_channels_last", "conv1d"])
def test_a_convolution_laid_out_otherwise_at_batch_1_is_refused_there(conv, shape,
                                                                      memory_format, mkldnn):
    """The backend ATen selects lays a convolution out by its sizes: MKLDNN gives a
    channels-last batch of 1 a contiguous conv3d output, of 2 a channels-last one. A batch
    admitted at 1 read the layout of the example's (stride 1 where eager's is 64: a wrong
    value); the batch now admits 1 only where eager's layout there is the program's, and
    every admitted batch gives eager's values."""
    model = _ConvReadsStride(conv)
    example = torch.randn(shape).to(memory_format=memory_format)
    with torch.backends.mkldnn.flags(enabled=mkldnn):
        program = unbroken.export(model, (example,),
                                  dynamic_shapes=({0: torch.export.Dim.AUTO},))
        admitted = program.range_constraints[next(iter(program.range_constraints))]
        for batch in (1, 2, 3):
            x = torch.randn((batch, *shape[1:])).to(memory_format=memory_format)
            if batch < admitted.lower:
                with pytest.raises(UnbrokenError, match="size 1 is refused"):
                    program.module()(x)
                continue
            torch.testing.assert_close(program.module()(x), model(x), rtol=0, atol=0)
        refused = mkldnn and memory_format == torch.channels_last_3d
        assert admitted.lower == (2 if refused else 1)


def test_the_batch_1_check_follows_the_mkldnn_setting_between_exports():
    """Exported again in the same process with MKLDNN off, then on: each export's check at
    batch 1 follows the setting in effect (no outcome, no meta output of the export before
    is taken: the layouts differ, and what read the backend setting is never shared)."""
    model = _ConvReadsStride(torch.nn.Conv3d(3, 4, 3))
    example = torch.randn(2, 3, 6, 6, 6).to(memory_format=torch.channels_last_3d)
    lowers = []
    for enabled in (True, False, True):
        with torch.backends.mkldnn.flags(enabled=enabled):
            program = unbroken.export(model, (example,),
                                      dynamic_shapes=({0: torch.export.Dim.AUTO},))
            lowers.append(next(iter(program.range_constraints.values())).lower)
    assert lowers == [2, 1, 2]
