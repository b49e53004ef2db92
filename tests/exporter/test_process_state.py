"""export/find_graph_breaks leave the caller's process and model as they found them, whatever
happens inside: a program, a refusal, a bug in unbroken, a KeyboardInterrupt (issue 6, items 6
and 7)."""
from __future__ import annotations

import pytest
import torch
from torch._dispatch.python import enable_python_dispatcher
from torch.utils._python_dispatch import TorchDispatchMode

import unbroken
import unbroken.exporter.build
from tests.state_leak import ModelSnapshot
from unbroken.exporter.process_state import ProcessState, isolated
from unbroken.ir.recorder import Recorder
from unbroken.symbolic.torch_compat import GLOBAL_SETTINGS


class InferenceRegion(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        with torch.inference_mode():
            y = self.lin(x)
        return y + x.sum()


class InferenceDecorated(torch.nn.Module):
    @torch.inference_mode()
    def forward(self, x):
        return x.view(3) * 2


class BreakInsideInference(torch.nn.Module):
    def forward(self, x):
        with torch.inference_mode():
            if x.sum() > 0:
                return x + 1
            return x - 1


class BreakInsideAutocastOff(torch.nn.Module):
    def forward(self, x):
        with torch.autocast("cpu", enabled=False):
            if x.sum() > 0:
                return x + 1
            return x - 1


class SetsDefaultDtype(torch.nn.Module):
    def forward(self, x):
        torch.set_default_dtype(torch.float64)
        return x + 1


class LeavesGradOff(torch.nn.Module):
    def forward(self, x):
        torch.set_grad_enabled(False)
        return x * 2


class SharedTail(torch.nn.Module):
    """A submodule reachable by two paths: ``seq.1`` and ``tail.1``."""

    def __init__(self):
        super().__init__()
        self.seq = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
        self.tail = self.seq[1:]

    def forward(self, x):
        return self.tail(self.seq(x))


def _eager_works():
    assert torch.equal(torch.ones(2) + 1, torch.full((2,), 2.0))
    torch.nn.Linear(2, 2)(torch.randn(1, 2))


@pytest.mark.parametrize("cls", [InferenceRegion, InferenceDecorated])
def test_inference_mode_region_exports_like_no_grad(cls):
    model, x = cls(), torch.randn(3)
    before = ProcessState.capture()
    ep = unbroken.export(model, (x,))
    assert ProcessState.capture() == before
    _eager_works()
    torch.testing.assert_close(ep.module()(x), model(x), rtol=0, atol=0)
    assert not ep.module()(x).requires_grad or cls is InferenceRegion
    assert unbroken.find_graph_breaks(model, (x,)) == []
    assert ProcessState.capture() == before
    assert not torch.is_inference_mode_enabled()


@pytest.mark.parametrize("cls, code", [(BreakInsideInference, "UB101"),
                                       (BreakInsideAutocastOff, "UB101"),
                                       (SetsDefaultDtype, "UB107"),
                                       (LeavesGradOff, "UB107")])
def test_refusals_leave_the_process_unchanged(cls, code):
    before = ProcessState.capture()
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(cls(), (torch.randn(3),))
    assert info.value.code == code
    assert ProcessState.capture() == before
    breaks = unbroken.find_graph_breaks(cls(), (torch.randn(3),))
    assert [b.code for b in breaks][:1] == [code]
    assert ProcessState.capture() == before
    _eager_works()


def _explode(raised):
    def explode(*args, **kwargs):
        raise raised

    return explode


@pytest.mark.parametrize("owner, name, raised, expected", [
    (Recorder, "__torch_dispatch__", ValueError("boom"), unbroken.UnbrokenError),
    (Recorder, "__torch_dispatch__", KeyboardInterrupt(), KeyboardInterrupt),
    (unbroken.exporter.build, "functionalize", ValueError("boom"), unbroken.InternalError),
    (unbroken.exporter.build, "functionalize", KeyboardInterrupt(), KeyboardInterrupt),
])
def test_internal_error_and_interrupt_leave_the_process_unchanged(monkeypatch, owner, name,
                                                                  raised, expected):
    monkeypatch.setattr(owner, name, _explode(raised))
    before = ProcessState.capture()
    with pytest.raises(expected):
        unbroken.export(InferenceRegion(), (torch.randn(3),))
    assert ProcessState.capture() == before
    monkeypatch.undo()
    _eager_works()


def test_isolated_restores_everything_the_body_changed():
    before = ProcessState.capture()
    with pytest.raises(RuntimeError):
        with isolated():
            torch.set_default_dtype(torch.float64)
            torch._C._set_grad_enabled(False)
            enable_python_dispatcher().__enter__()
            TorchDispatchMode().__enter__()
            raise RuntimeError("the body fails")
    assert ProcessState.capture() == before
    _eager_works()


def test_shared_submodule_keeps_its_real_tensors():
    model, x = SharedTail(), torch.randn(2, 3)
    snapshot = ModelSnapshot.of(model)
    ep = unbroken.export(model, (x,))
    assert snapshot.diff(ModelSnapshot.of(model)) == []
    torch.testing.assert_close(ep.module()(x), model(x), rtol=0, atol=0)


def test_refused_export_keeps_the_model():
    class Refused(SharedTail):
        def forward(self, x):
            y = self.tail(self.seq(x))
            if y.sum() > 0:
                return y
            return -y

    model = Refused().train()
    model.register_forward_hook(lambda *a: None)
    snapshot = ModelSnapshot.of(model)
    with pytest.raises(unbroken.GraphBreakError):
        unbroken.export(model, (torch.randn(2, 3),))
    unbroken.find_graph_breaks(model, (torch.randn(2, 3),))
    assert snapshot.diff(ModelSnapshot.of(model)) == []


class StopsInsideRegions(torch.nn.Module):
    """Under Dim.AUTO, ``x + y`` makes the two inputs' dims one: the first trace stops right
    after it, inside grad-mode and autocast regions (``ExportOptions.adopt_early``)."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x, y):
        with torch.no_grad(), torch.autocast("cpu", enabled=False):
            z = self.lin(x + y)
            w = z * 2
        return w + x


def test_a_trace_stopped_for_an_adoption_leaves_the_process_and_model_unchanged(monkeypatch):
    from unbroken.exporter.trace import Trace

    stopped, real_run = [], Trace.run

    def run(trace):
        try:
            return real_run(trace)
        finally:
            stopped.append(trace.stopped_for is not None)

    monkeypatch.setattr(Trace, "run", run)
    model, args = StopsInsideRegions(), (torch.randn(3, 4), torch.randn(3, 4))
    snapshot, before = ModelSnapshot.of(model), ProcessState.capture()
    dims = {0: torch.export.Dim.AUTO, 1: torch.export.Dim.AUTO}
    ep = unbroken.export(model, args, dynamic_shapes=(dims, dims))
    assert stopped[0] and not stopped[-1]  # x + y, then self.lin pins the features
    assert ProcessState.capture() == before
    assert snapshot.diff(ModelSnapshot.of(model)) == []
    resized = (torch.randn(5, 4), torch.randn(5, 4))
    torch.testing.assert_close(ep.module()(*resized), model(*resized), rtol=0, atol=0)
    _eager_works()


def _other(value):
    """A value of a setting other than ``value``, of its kind."""
    if isinstance(value, bool):
        return not value
    if isinstance(value, tuple):
        return (not value[0], *value[1:])
    if isinstance(value, torch.dtype):
        return torch.float16 if value != torch.float16 else torch.bfloat16
    if value in ("highest", "high", "medium"):
        return "medium" if value != "medium" else "highest"
    return 1 if value != 1 else 2  # threads, the deterministic debug mode


@pytest.mark.parametrize("index", range(len(GLOBAL_SETTINGS)),
                         ids=[name for name, _, _ in GLOBAL_SETTINGS])
def test_a_setting_forward_leaves_changed_is_refused_and_put_back(index):
    """Every one of torch's process-wide settings (``torch_compat.GLOBAL_SETTINGS``): a forward
    that changes it is refused (by the call's name where unbroken knows the call, else when
    forward() returns, naming the setting) and the process keeps the caller's value."""
    name, get, put = GLOBAL_SETTINGS[index]
    new = _other(get())

    class Changes(torch.nn.Module):
        def forward(self, x):
            put(new)
            return x + 1

    before, value = ProcessState.capture(), get()
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Changes(), (torch.randn(3),))
    assert info.value.code in ("UB107", "UB110"), info.value
    assert get() == value and ProcessState.capture() == before


def test_a_setting_forward_changes_back_is_exported():
    class Restores(torch.nn.Module):
        def forward(self, x):
            torch.set_warn_always(not torch.is_warn_always_enabled())
            y = x * 2
            torch.set_warn_always(not torch.is_warn_always_enabled())
            return y

    x = torch.randn(3)
    assert torch.equal(unbroken.export(Restores(), (x,)).module()(x), x * 2)


def test_the_refusal_names_the_setting_and_forward():
    class Anomaly(torch.nn.Module):
        def forward(self, x):
            torch.set_anomaly_enabled(True)
            return x + 1

    with pytest.raises(unbroken.GraphBreakError, match="set_detect_anomaly") as info:
        unbroken.export(Anomaly(), (torch.randn(3),))
    assert info.value.location.function == "forward"
    assert not torch.is_anomaly_enabled()


def test_the_random_generator_is_put_back_after_running_the_model_eagerly():
    """find_graph_breaks runs the model on a copy beside the trace (to know the path the
    example takes), drawing from the default generator: the caller's draws stay the same."""
    class Noisy(torch.nn.Module):
        def forward(self, x):
            noise = torch.randn(3)
            if (x + noise).sum() > 0:
                return x + noise
            return x - noise

    x = torch.randn(3)
    state = torch.get_rng_state()
    breaks = unbroken.find_graph_breaks(Noisy(), (x,))
    assert [b.code for b in breaks] == ["UB101"]
    assert torch.equal(torch.get_rng_state(), state)
