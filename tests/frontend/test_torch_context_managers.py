"""Context managers of torch's inside forward().

torch's ``@contextmanager`` functions (``torch.nn.attention.sdpa_kernel``,
``torch.autograd.graph.disable_saved_tensors_hooks``) are interpreted as the program's own
are: what they set is process state their own exit restores (and forward() must leave as it
found, ``check_settings_restored``). torch's own torch-function modes are entered natively
(``TransformGetItemToIndex``: see test_functorch_transforms.py); the profiler's ranges are
dropped, as torch's strict export drops them. A mode of the program's own is refused: it was
silently ignored (its ``__enter__`` ran as a leaf call, whose push did not outlive the call),
an exported program computing other values than eager's. Side by side with eager, bit for bit.
"""
from __future__ import annotations

import contextlib
import contextvars

import pytest
import torch
from torch.export import Dim
from torch.nn.attention import SDPBackend, sdpa_kernel
from torch.overrides import TorchFunctionMode
from torch.utils._python_dispatch import TorchDispatchMode

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.exporter.process_state import ProcessState

pytestmark = pytest.mark.matrix


def _ops(program) -> list[str]:
    return [str(n.target) for n in program.graph.nodes if n.op == "call_function"]


@pytest.mark.parametrize("manager", [
    lambda: torch.nn.attention.sdpa_kernel(torch.nn.attention.SDPBackend.MATH),
    lambda: torch.autograd.graph.disable_saved_tensors_hooks("not inside"),
    lambda: torch.profiler.record_function("block"),
    lambda: torch.autograd.profiler.record_function("block"),
    lambda: torch.autograd.detect_anomaly(),
    lambda: contextlib.nullcontext(),
])
def test_context_managers_of_torch_inside_forward(manager):
    """torch's ``@contextmanager`` functions are interpreted as the program's own are (what
    they set is process state, restored by their own exit); the profiler's ranges report and
    are dropped, as torch's strict export drops them."""
    class Block(torch.nn.Module):
        def forward(self, q):
            with manager():
                out = torch.nn.functional.scaled_dot_product_attention(q, q, q)
            return out + 1

    q = torch.randn(2, 3, 5, 4)
    program = unbroken.export(Block(), (q,))
    assert_bit_exact(program.module()(q), Block()(q))
    assert not any("profiler" in t for t in _ops(program))


@pytest.mark.parametrize("backends", [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION,
                                      [SDPBackend.MATH, SDPBackend.FLASH_ATTENTION]])
def test_attention_under_sdpa_kernel_computes_what_eager_computed(backends):
    """With flash attention off and math on, eager ran the math kernel: the program records its
    ops (kept whole, the program's call would choose flash at run time: 4.8e-7 off). Where
    flash stays on, the call is kept whole and chooses as eager did."""
    class Attend(torch.nn.Module):
        def forward(self, q):
            with sdpa_kernel(backends):
                inner = torch.nn.functional.scaled_dot_product_attention(q, q, q, is_causal=True)
            return inner + torch.nn.functional.scaled_dot_product_attention(q, q, q)

    model, q = Attend(), torch.randn(2, 3, 5, 4)
    program = unbroken.export(model, (q,), dynamic_shapes=({0: Dim.AUTO, 2: Dim.AUTO},))
    for inputs in (q, torch.randn(3, 3, 7, 4)):
        assert_bit_exact(program.module()(inputs), model(inputs))
    kept = _ops(program).count("aten.scaled_dot_product_attention.default")
    assert kept == (1 if backends is SDPBackend.MATH else 2)


class _Doubler(TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        result = func(*args, **(kwargs or {}))
        return result * 2 if func is torch.add else result


class _Logger(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


@pytest.mark.parametrize("enter", [
    lambda: _Doubler(),
    lambda: _Logger(),
    lambda: contextlib.nullcontext(_Doubler().__enter__()),
])
def test_a_mode_of_the_programs_own_is_refused(enter):
    class WithMode(torch.nn.Module):
        def forward(self, x):
            with enter():
                y = torch.add(x, 1)
            return y + 1

    before = ProcessState.capture()
    with pytest.raises(unbroken.GraphBreakError, match="of the program's own") as refused:
        unbroken.export(WithMode(), (torch.randn(3),))
    assert refused.value.code == "UB110" and __file__ in str(refused.value)
    assert ProcessState.capture() == before


_FLAG = contextvars.ContextVar("test_flag", default=False)


def test_a_context_variable_left_set_is_refused_and_reset():
    """torch 2.15's ``sdpa_kernel`` keeps a ``ContextVar``: set and reset natively, as eager;
    forward() returning with one still set is refused, and the trace leaves it as it was."""
    class LeavesSet(torch.nn.Module):
        def forward(self, x):
            _FLAG.set(True)
            return x + 1

    class Balanced(torch.nn.Module):
        def forward(self, x):
            token = _FLAG.set(True)
            y = x * 2 if _FLAG.get() else x
            _FLAG.reset(token)
            return y

    x = torch.randn(3)
    with pytest.raises(unbroken.GraphBreakError, match="test_flag") as refused:
        unbroken.export(LeavesSet(), (x,))
    assert refused.value.code == "UB107"
    assert _FLAG.get() is False
    program = unbroken.export(Balanced(), (x,))
    assert_bit_exact(program.module()(x), Balanced()(x))
    assert _FLAG.get() is False


@pytest.mark.slow  # ~7 s: its padded blocks' modular guards under Dim.AUTO
def test_granite_speech_encoder_attention_under_sdpa_kernel():
    """transformers' Granite Speech encoder runs its attention under
    ``sdpa_kernel(SDPBackend.MATH)`` (refused before, UB110): exported bit for bit with eager,
    static and with ``Dim.AUTO`` (torch non-strict keeps the call whole: 4.8e-7 off)."""
    from transformers import GraniteSpeechEncoderConfig
    from transformers.models.granite_speech.modeling_granite_speech import (
        GraniteSpeechCTCEncoder,
    )

    config = GraniteSpeechEncoderConfig(input_dim=16, num_layers=2, hidden_dim=32,
                                        feedforward_mult=2, num_heads=2, dim_head=16,
                                        output_dim=12, context_size=8, max_pos_emb=16)
    torch.manual_seed(0)
    model = GraniteSpeechCTCEncoder(config).eval()
    x = torch.randn(2, 21, 16)
    program = unbroken.export(model, (x,), dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    with torch.no_grad():
        for inputs in (x, torch.randn(3, 13, 16)):
            assert_bit_exact(program.module()(inputs)[0], model(inputs)[0])


_GRAD_MODES = {
    "no_grad": torch.no_grad, "enable_grad": torch.enable_grad,
    "set_grad_enabled_false": lambda: torch.set_grad_enabled(False),
}


class _ThroughExitStack(torch.nn.Module):
    """Grad modes entered through ``contextlib.ExitStack`` (which calls
    ``type(cm).__enter__(cm)``) and as methods, nested; the program reads requires_grad."""

    def __init__(self, outer, inner):
        super().__init__()
        self.outer, self.inner = outer, inner
        self.weight = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        with contextlib.ExitStack() as stack:
            stack.enter_context(_GRAD_MODES[self.outer]())
            a = x * self.weight
            inner = _GRAD_MODES[self.inner]()
            inner.__enter__()
            b = a * self.weight
            inner.__exit__(None, None, None)
            c = b + self.weight
        d = c * self.weight
        return a, b, c, d, a.requires_grad + 2 * c.requires_grad


@pytest.mark.parametrize("outer", list(_GRAD_MODES))
@pytest.mark.parametrize("inner", ["enable_grad", "no_grad"])
def test_grad_modes_entered_through_an_exit_stack_and_as_methods(outer, inner):
    model = _ThroughExitStack(outer, inner)
    x = torch.randn(3, requires_grad=True)
    ep = unbroken.export(model, (x,))
    got, want = ep.module()(x), model(x)
    assert [t.requires_grad for t in got[:4]] == [t.requires_grad for t in want[:4]]
    for g, w in zip(got, want):
        torch.testing.assert_close(g, w, rtol=0, atol=0)
    assert torch.is_grad_enabled()


class _Annotated(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        with torch.fx.traceback.annotate({"stage": "a"}):
            z = y + 1
            with torch.fx.traceback.annotate({"inner": 1}):
                w = z.sin()
        return w - 1


def _custom(program) -> list:
    return [(n.name, n.meta.get("custom")) for n in program.graph.nodes]


def test_fx_annotate_puts_its_annotations_on_the_nodes_inside_as_torch_strict_does():
    # it computes nothing: node.meta["custom"] holds the annotations in force (inner over
    # outer), and the process state is left as it was (torch.fx.traceback.current_meta)
    x = torch.randn(4)
    program = unbroken.export(_Annotated(), (x,))
    assert _custom(program) == [("x", None), ("mul", None), ("add", {"stage": "a"}),
                                ("sin", {"stage": "a", "inner": 1}), ("sub", None),
                                ("output", None)]
    assert _custom(program) == _custom(torch.export.export(_Annotated(), (x,), strict=True))
    assert "custom" not in torch.fx.traceback.current_meta
    assert_bit_exact(program.module()(x), _Annotated()(x))


def test_fx_annotate_with_a_tensor_value_is_refused_at_its_line():
    class TensorAnnotation(torch.nn.Module):
        def forward(self, x):
            with torch.fx.traceback.annotate({"k": x}):
                return x + 1

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(TensorAnnotation(), (torch.randn(2),))
    assert info.value.code == "UB108"
    assert "torch.fx.traceback.annotate" in info.value.render()
    assert info.value.frames[-1].source.startswith("with torch.fx.traceback.annotate")
