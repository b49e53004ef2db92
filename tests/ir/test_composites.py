"""Composite ops kept whole by ir.composites: one node each, and torch's state restored."""
import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

import unbroken
from unbroken.ir.composites import PRESERVED


def _targets(ep):
    return [n.target for n in ep.graph.nodes if n.op == "call_function"]


class Composites(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3)
        self.lin = nn.Linear(4, 8)
        self.norm = nn.LayerNorm(8)
        self.lstm = nn.LSTM(8, 8, batch_first=True)

    def forward(self, x):
        y = self.conv(x).mean((2, 3))                  # [2, 4]
        y = self.norm(self.lin(y)).unsqueeze(1)        # [2, 1, 8]
        q = y.expand(2, 3, 8)
        y = F.scaled_dot_product_attention(q, q, q)
        out, _ = self.lstm(y)
        return torch.softmax(out @ out.transpose(1, 2), dim=-1)


def test_composites_are_single_nodes_and_match_eager():
    model = Composites().eval()
    x = torch.randn(2, 3, 8, 8)
    ep = unbroken.export(model, (x,))
    targets = _targets(ep)
    aten = torch.ops.aten
    for op in (aten.conv2d.default, aten.linear.default, aten.layer_norm.default,
               aten.scaled_dot_product_attention.default, aten.lstm.input, aten.matmul.default,
               aten.softmax.int):
        assert targets.count(op) == 1, op
    assert aten.addmm.default not in targets and aten.native_layer_norm.default not in targets
    for seed in range(2):
        torch.manual_seed(seed)
        fresh = torch.randn(2, 3, 8, 8)
        torch.testing.assert_close(ep.module()(fresh), model(fresh))


def test_torch_kernels_are_restored_even_when_export_fails():
    before = {op: dict(op.py_kernels) for op in PRESERVED}

    def bad(x):
        y = F.linear(x, torch.ones(3, 3))
        if y.sum() > 0:
            return y
        return -y

    with pytest.raises(unbroken.GraphBreakError):
        unbroken.export(bad, (torch.randn(2, 3),))
    assert {op: dict(op.py_kernels) for op in PRESERVED} == before
    # outside export the composite still decomposes normally
    assert torch.ops.aten.linear.default(torch.ones(1, 3), torch.ones(2, 3)).shape == (1, 2)


def _kernels():
    return {op: dict(op.py_kernels) for op in PRESERVED}


def test_kernels_record_only_in_the_tracing_thread():
    """Another thread running a preserved op while a trace records gets torch's result, and
    nothing of its call lands in the trace's graph."""
    import threading

    from torch._dispatch.python import enable_python_dispatcher

    from unbroken.ir.composites import preserving
    from unbroken.ir.recorder import Recorder

    recorder = Recorder()
    x, w = torch.randn(2, 3), torch.randn(4, 3)
    result = {}

    def other_thread():
        with enable_python_dispatcher():
            result["out"] = torch.ops.aten.linear.default(x, w)

    with enable_python_dispatcher(), preserving(recorder), recorder.recording():
        assert recorder.is_recording()
        thread = threading.Thread(target=other_thread)
        thread.start()
        thread.join()
    torch.testing.assert_close(result["out"], x @ w.T)
    assert not any(n.op == "call_function" for n in recorder.builder.graph.nodes)


@pytest.mark.parametrize("interrupt", [KeyboardInterrupt, RuntimeError])
def test_kernels_restored_on_any_exit(interrupt):
    from unbroken.ir.composites import preserving
    from unbroken.ir.recorder import Recorder

    before = _kernels()
    with pytest.raises(interrupt):
        with preserving(Recorder()):
            assert _kernels() != before
            raise interrupt()
    assert _kernels() == before


def test_kernels_stay_while_another_thread_traces():
    """Concurrent traces share the installed kernels: the first to end leaves them for the
    other; the last one restores torch's."""
    import threading

    from unbroken.ir.composites import preserving
    from unbroken.ir.recorder import Recorder

    before = _kernels()
    entered, release = threading.Event(), threading.Event()

    def other_trace():
        with preserving(Recorder()):
            entered.set()
            release.wait(10)

    thread = threading.Thread(target=other_trace)
    thread.start()
    entered.wait(10)
    with preserving(Recorder()):
        pass
    assert _kernels() != before  # the other trace is still running
    release.set()
    thread.join()
    assert _kernels() == before


_FUSED = [
    ("nearest", lambda x: F.interpolate(x, scale_factor=2, mode="nearest"), 4),
    ("nearest_size", lambda x: F.interpolate(x, size=(7, 5), mode="nearest"), 4),
    ("nearest_exact", lambda x: F.interpolate(x, scale_factor=1.5, mode="nearest-exact"), 4),
    ("linear", lambda x: F.interpolate(x, scale_factor=2, mode="linear"), 3),
    ("bilinear", lambda x: F.interpolate(x, scale_factor=2, mode="bilinear"), 4),
    ("bilinear_corners", lambda x: F.interpolate(x, size=(9, 7), mode="bilinear",
                                                 align_corners=True), 4),
    ("bicubic", lambda x: F.interpolate(x, scale_factor=1.7, mode="bicubic"), 4),
    ("trilinear", lambda x: F.interpolate(x, scale_factor=2, mode="trilinear"), 5),
    ("upsample_module", nn.Upsample(scale_factor=2, mode="bilinear"), 4),
    ("hardshrink", lambda x: F.hardshrink(x, 0.3), 4),
    ("softshrink", lambda x: F.softshrink(x, 0.3), 4),
]


class _Apply(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.scale = nn.Parameter(torch.linspace(0.5, 1.5, 3))
        self.fn = fn

    def forward(self, x):
        shape = (1, 3) + (1,) * (x.dim() - 2)
        return self.fn(x * self.scale.view(shape)).tanh()


@pytest.mark.parametrize("name, fn, rank", _FUSED, ids=[c[0] for c in _FUSED])
def test_fused_kernels_run_as_in_eager_bit_for_bit(name, fn, rank):
    """Eager runs interpolation and the shrinks as one kernel; the Python decompositions the
    Python dispatcher would pick instead round differently. Values and the weight gradient
    must equal eager's exactly, on the example and on another batch size."""
    torch.manual_seed(0)
    model = _Apply(fn)
    x = torch.randn((2, 3) + (6, 5, 4)[:rank - 2])
    batch = torch.export.Dim("batch", min=1)
    ep = unbroken.export(model, (x,), dynamic_shapes=({0: batch},))
    for inputs in (x, torch.randn((3,) + x.shape[1:])):
        assert torch.equal(ep.module()(inputs), model(inputs))
        model.zero_grad()
        model(inputs).square().sum().backward()
        want = model.scale.grad.clone()
        module = ep.module()
        module.zero_grad()
        module(inputs).square().sum().backward()
        got = dict(module.named_parameters())["scale"].grad
        assert torch.equal(got, want), f"{name}: gradient differs from eager"


_EINSUMS = [
    ("b h i d, b h j d -> b h i j", [(2, 3, 5, 4), (2, 3, 6, 4)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("bi,bi->b", [(2, 7), (2, 7)]),
    ("bi,j->bij", [(2, 3), (4,)]),
    ("b...d,d->b...", [(2, 3, 4), (4,)]),
    ("bij,bjk,bkl->bil", [(2, 3, 4), (2, 4, 5), (2, 5, 3)]),
]


@pytest.mark.matrix  # einsum's composite kernel is torch's: every cell runs it
@pytest.mark.parametrize("equation, shapes", _EINSUMS, ids=[e for e, _ in _EINSUMS])
def test_einsum_is_kept_whole_and_runs_eagers_einsum_at_every_batch(equation, shapes):
    """Eager's einsum picks squeezes, permutes and bmm by the sizes (a dim of size 1 is
    squeezed): kept whole, the program runs eager's einsum at batch 1 too, as torch.export's
    graphs keep it, bit for bit."""
    class Einsum(nn.Module):
        def forward(self, *operands):
            return torch.einsum(equation.replace(" ", ""), *operands) * 2

    torch.manual_seed(0)
    operands = tuple(torch.randn(*s) for s in shapes)
    dims = tuple({0: torch.export.Dim.AUTO} if s[0] == 2 else None for s in shapes)
    ep = unbroken.export(Einsum(), operands, dynamic_shapes=(dims,))
    assert _targets(ep).count(torch.ops.aten.einsum.default) == 1
    assert torch.ops.aten.bmm.default not in _targets(ep)
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for batch in (1, 2, 5):
        resized = tuple(torch.randn(batch, *s[1:]) * 100 if s[0] == 2 else torch.randn(*s)
                        for s in shapes)
        torch.testing.assert_close(ep.module()(*resized), Einsum()(*resized), rtol=0, atol=0)


def test_einsum_of_one_operand_keeps_its_aliasing():
    """``einsum("ij->ji", x)`` returns a view of ``x`` in eager: it is not kept whole (the
    node would hide the aliasing), so a write into the result reaches the input, as in
    eager."""
    class Transposed(nn.Module):
        def forward(self, x):
            y = torch.einsum("ij->ji", x)
            y.mul_(2)
            return x + 1

    x = torch.randn(3, 4)
    ep = unbroken.export(Transposed(), (x.clone(),))
    assert torch.ops.aten.einsum.default not in _targets(ep)
    mine, theirs = x.clone(), x.clone()
    torch.testing.assert_close(ep.module()(mine), Transposed()(theirs), rtol=0, atol=0)
    torch.testing.assert_close(mine, theirs, rtol=0, atol=0)
