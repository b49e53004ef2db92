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
