"""torch.nn's fast paths (``unbroken.frontend.variables.nn_fast_paths``): in eval mode with no
gradient recorded, ``MultiheadAttention``, ``TransformerEncoderLayer`` and ``TransformerEncoder``
take fused kernels in eager. The program records the path eager takes under the export's grad
mode (bit-exact with eager in that mode), ``module()`` refuses a call in which eager would take
the other path, and the nested tensor ``TransformerEncoder`` converts its input to is held
densely: eager's zeros and its run-time alignment check reproduced, the values within the
nested kernels' rounding. Static and ``Dim.AUTO``, the real torch.nn modules in small
programs."""
from __future__ import annotations

import contextlib

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from torch import nn
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.symbolic.diagnostics import InputMismatchError
from unbroken.symbolic.diagnostics.catalogue import GraphBreakError
from unbroken.symbolic.torch_compat import NESTED_FROM_MASK_LEFT_ALIGNED

pytestmark = [pytest.mark.filterwarnings("ignore::UserWarning"), pytest.mark.matrix]

E, HEADS = 8, 2
FUSED = {torch.ops.aten._native_multi_head_attention.default,
         torch.ops.aten._transformer_encoder_layer_fwd.default}


def _padding(batch, seq):
    """A right-padded key padding mask (True = padded): the last row has 2 padded keys."""
    mask = torch.zeros(batch, seq, dtype=torch.bool)
    mask[-1, seq - 2:] = True
    return mask


class SelfAttention(nn.Module):
    """Self-attention without weights and a boolean padding mask: the fused MHA kernel."""

    def __init__(self, need_weights=False):
        super().__init__()
        self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True)
        self.need_weights = need_weights

    def forward(self, x, padding):
        out, weights = self.attn(x, x, x, key_padding_mask=padding,
                                 need_weights=self.need_weights)
        return out if weights is None else (out, weights)


class CrossAttention(nn.Module):
    """Query and key differ: MultiheadAttention's differentiable path in every mode."""

    def __init__(self):
        super().__init__()
        self.attn = nn.MultiheadAttention(E, HEADS, batch_first=True)

    def forward(self, x, padding):
        return self.attn(x * 2, x, x, key_padding_mask=padding, need_weights=False)[0]


class EncoderLayer(nn.Module):
    """One TransformerEncoderLayer with a padding mask: ``_transformer_encoder_layer_fwd``."""

    def __init__(self, activation="relu"):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(E, HEADS, 16, dropout=0.0, batch_first=True,
                                                activation=activation)

    def forward(self, x, padding):
        return self.layer(x, src_key_padding_mask=padding) + 1


class DenseEncoder(nn.Module):
    """TransformerEncoder built with ``enable_nested_tensor=False``: no conversion, the layers'
    fused kernel with the mask."""

    def __init__(self):
        super().__init__()
        layer = nn.TransformerEncoderLayer(E, HEADS, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, enable_nested_tensor=False)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


class NestedEncoder(nn.Module):
    """TransformerEncoder with its default ``enable_nested_tensor=True`` and a padding mask:
    under no_grad eager converts to a nested tensor and returns zeros at padded positions."""

    def __init__(self, mask_check=True, norm=False):
        super().__init__()
        layer = nn.TransformerEncoderLayer(E, HEADS, 16, dropout=0.0, batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, 2, norm=nn.LayerNorm(E) if norm else None,
                                             mask_check=mask_check)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


class UnmaskedEncoder(NestedEncoder):
    """No padding mask: no conversion, the layers' fused kernel."""

    def forward(self, x, padding):
        return self.encoder(x)


class DecoderLayer(nn.Module):
    """TransformerDecoderLayer (a torch.nn module holding MultiheadAttention): its
    self-attention with a boolean padding mask takes the fused kernel, the cross-attention
    not."""

    def __init__(self):
        super().__init__()
        self.layer = nn.TransformerDecoderLayer(E, HEADS, 16, dropout=0.0, batch_first=True)

    def forward(self, x, padding):
        return self.layer(x, x.flip(1), tgt_key_padding_mask=padding)


class PlainTransformer(nn.Module):
    """nn.Transformer without padding masks: no nested tensor, the encoder layers' and the
    decoder self-attention's fused kernels."""

    def __init__(self):
        super().__init__()
        self.model = nn.Transformer(E, HEADS, 2, 1, 16, dropout=0.0, batch_first=True)

    def forward(self, x, padding):
        return self.model(x, x[:, :3] * 2)


class MaskedTransformer(nn.Module):
    """nn.Transformer with source padding masks: its encoder converts to a nested tensor under
    no_grad."""

    def __init__(self):
        super().__init__()
        self.model = nn.Transformer(E, HEADS, 1, 1, 16, dropout=0.0, batch_first=True)

    def forward(self, x, padding):
        return self.model(x, x[:, :3] * 2, src_key_padding_mask=padding,
                          memory_key_padding_mask=padding)


def _build(model_class, **kwargs):
    torch.manual_seed(0)
    return model_class(**kwargs).eval()


def _args(batch=2, seq=6):
    torch.manual_seed(1)
    return torch.randn(batch, seq, E), _padding(batch, seq)


_AUTO = {"x": {0: Dim.AUTO, 1: Dim.AUTO}, "padding": {0: Dim.AUTO, 1: Dim.AUTO}}


def _grad(enabled):
    return contextlib.nullcontext() if enabled else torch.no_grad()


def _export(model, args, grad, dynamic):
    with _grad(grad):
        return unbroken.export(model, args, dynamic_shapes=_AUTO if dynamic else None)


def _fused(program) -> set:
    """The fused kernels the program calls (in grad-mode regions' submodules too)."""
    return {n.target for m in program.graph_module.modules() if hasattr(m, "graph")
            for n in m.graph.nodes if n.target in FUSED}


def _eager(model, args, grad):
    with _grad(grad):
        return model(*args)


def _run(program, args, grad):
    with _grad(grad):
        return program.module()(*args)


FAST = [(SelfAttention, {}), (SelfAttention, {"need_weights": True}), (EncoderLayer, {}),
        (EncoderLayer, {"activation": "gelu"}), (DenseEncoder, {}), (UnmaskedEncoder, {}),
        (DecoderLayer, {}), (PlainTransformer, {})]


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "auto"])
@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize(("model_class", "kwargs"), FAST,
                         ids=[f"{c.__name__}{''.join(f'-{v}' for v in k.values())}"
                              for c, k in FAST])
def test_the_program_takes_eager_path_under_the_export_grad_mode(model_class, kwargs, grad,
                                                                  dynamic):
    model = _build(model_class, **kwargs)
    args = _args()
    program = _export(model, args, grad, dynamic)
    # eager's fused kernel under no_grad, its differentiable path with grad on
    assert bool(_fused(program)) is not grad
    assert_bit_exact(_run(program, args, grad), _eager(model, args, grad))
    if dynamic:  # another batch and length the constraints admit
        other = _args(3, 9)
        assert_bit_exact(_run(program, other, grad), _eager(model, other, grad))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
@pytest.mark.parametrize(("model_class", "kwargs"), FAST[:1] + FAST[2:3] + FAST[4:5],
                         ids=["SelfAttention", "EncoderLayer", "DenseEncoder"])
def test_a_call_in_the_other_grad_mode_is_refused(model_class, kwargs, grad):
    model = _build(model_class, **kwargs)
    args = _args()
    program = _export(model, args, grad, dynamic=False)
    with pytest.raises(InputMismatchError) as info, _grad(not grad):
        program.module()(*args)
    message = str(info.value)
    assert "test_nn_fast_paths.py" in message and "export it in the mode you run it in" \
        in message
    assert ("fused fast path" in message) and ("differentiable path" in message)
    # eager really differs there: the check is not stricter than needed for these models
    assert not torch.equal(_eager(model, args, not grad), _eager(model, args, grad))


def test_frozen_parameters_take_the_fused_path_in_both_modes():
    """Nothing requires grad: eager takes the fused kernel with grad on too, and so does the
    program, which then runs in either mode."""
    model = _build(SelfAttention).requires_grad_(False)
    args = _args()
    program = _export(model, args, grad=True, dynamic=False)
    assert _fused(program)
    for grad in (True, False):
        assert_bit_exact(_run(program, args, grad), _eager(model, args, grad))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_cross_attention_keeps_the_differentiable_path(grad):
    model = _build(CrossAttention)
    args = _args()
    program = _export(model, args, grad, dynamic=False)
    assert not _fused(program)
    for run_grad in (True, False):  # no decision read the grad mode: any mode runs
        assert_bit_exact(_run(program, args, run_grad), _eager(model, args, run_grad))


NESTED = ("eager's TransformerEncoder under no_grad runs its layers on a nested tensor "
          "(_transformer_encoder_layer_fwd on the packed rows): the program runs the same kernel "
          "on the padded rows with a key-padding mask, the same sums blocked differently")
NESTED_CASES = [(NestedEncoder, {}), (NestedEncoder, {"mask_check": False}),
                (NestedEncoder, {"norm": True}), (MaskedTransformer, {})]


def _converted(model, padding) -> bool:
    """Whether eager converts to a nested tensor for ``padding`` (no_grad, eval): always
    without ``mask_check``, else when torch's own check finds the mask padding on the right."""
    return not model.encoder.mask_check or bool(NESTED_FROM_MASK_LEFT_ALIGNED(
        torch.zeros(*padding.shape, E), padding.logical_not()))


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "auto"])
@pytest.mark.parametrize(("model_class", "kwargs"), NESTED_CASES,
                         ids=["mask_check", "no_mask_check", "norm", "transformer"])
def test_the_nested_tensor_conversion_is_held_densely(model_class, kwargs, dynamic):
    model = _build(model_class, **kwargs)
    args = _args()
    program = _export(model, args, grad=False, dynamic=dynamic)
    assert torch.ops.aten._transformer_encoder_layer_fwd.default in _fused(program)
    got, want = _run(program, args, False), _eager(model, args, False)
    assert_bit_exact(got, want, atol=1e-5, reason=NESTED)
    if model_class is NestedEncoder and not kwargs.get("norm"):
        # eager's zeros at the padded positions, exactly (the dense values there are not)
        assert torch.equal(want[-1, -2:], torch.zeros_like(want[-1, -2:]))
        assert torch.equal(got[-1, -2:], want[-1, -2:])
        assert not torch.equal(_eager(model, args, True)[-1, -2:], want[-1, -2:])
    if dynamic:  # another batch and length, a batch of 1, a sequence of 1 (the encoder's)
        sizes = ((3, 9), (1, 5), (2, 1)) if model_class is NestedEncoder else ((3, 9), (1, 5))
        for batch, seq in sizes:
            other = _args(batch, seq) if seq > 2 else (_args(batch, seq)[0],
                                                        torch.zeros(batch, seq, dtype=bool))
            assert_bit_exact(_run(program, other, False), _eager(model, other, False),
                             atol=1e-5, reason=NESTED)


def _masks(batch, seq):
    """Padding masks (True = padded) of every kind: right-padded rows of drawn lengths (0 and
    ``seq`` included), left-padded rows, and arbitrary patterns."""
    right = st.integers(0, seq).map(lambda n: [i >= n for i in range(seq)])
    left = st.integers(0, seq).map(lambda n: [i < n for i in range(seq)])
    row = st.one_of(right, right, left, st.lists(st.booleans(), min_size=seq, max_size=seq))
    return st.lists(row, min_size=batch, max_size=batch).map(
        lambda rows: torch.tensor(rows, dtype=torch.bool))


@pytest.fixture(scope="module")
def auto_programs():
    """One ``Dim.AUTO`` program per ``mask_check`` setting (exported once)."""
    programs = {}
    for mask_check in (True, False):
        model = _build(NestedEncoder, mask_check=mask_check)
        programs[mask_check] = model, _export(model, _args(), grad=False, dynamic=True)
    return programs


@settings(max_examples=40, deadline=None, derandomize=True, database=None)
@given(data=st.data(), mask_check=st.booleans(), batch=st.integers(1, 4),
       seq=st.integers(1, 7))
def test_every_mask_computes_what_eager_computes(auto_programs, data, mask_check, batch, seq):
    """Drawn masks against eager: where eager keeps the dense path (``mask_check`` and a mask
    that does not pad on the right: an empty row, left padding, holes), the program is bit
    for bit eager's, NaNs of fully padded rows included; where eager converts, its zeros are
    exact and the values within the nested kernels' rounding."""
    model, program = auto_programs[mask_check]
    padding = data.draw(_masks(batch, seq), label="padding")
    torch.manual_seed(batch * 10 + seq)
    args = (torch.randn(batch, seq, E), padding)
    if _converted(model, padding) and padding.all():
        with pytest.raises(RuntimeError) as eager_error:  # an empty nested tensor
            _eager(model, args, False)
        with pytest.raises(RuntimeError, match="every row of the padding mask is padded"):
            _run(program, args, False)
        assert "non-zero numel" in str(eager_error.value)
        return
    got, want = _run(program, args, False), _eager(model, args, False)
    if not _converted(model, padding):
        assert_bit_exact(got, want)
        return
    assert_bit_exact(got, want, atol=1e-5, reason=NESTED)
    lengths = padding.logical_not().sum(1)
    held = torch.arange(seq)[None, :] < lengths[:, None]  # the nested tensor's positions
    assert torch.equal(got[~held], torch.zeros_like(got[~held]))
    assert torch.equal(want[~held], got[~held])


class HookedEncoder(NestedEncoder):
    """A forward hook on the second layer: eager runs that layer's Python path on the nested
    tensor (``MultiheadAttention`` on it), which the program does not follow."""

    def __init__(self):
        super().__init__()
        self.encoder.layers[1].register_forward_hook(lambda module, args, out: None)


def test_a_use_of_the_nested_tensor_the_trace_does_not_follow_is_refused():
    model = _build(HookedEncoder)
    args = _args()
    _eager(model, args, grad=False)  # eager runs it
    with pytest.raises(GraphBreakError) as info:
        _export(model, args, grad=False, dynamic=False)
    error = info.value
    assert error.code == "UB108"
    assert "test_nn_fast_paths.py" in str(error) and "nested tensor" in str(error)
    assert "enable_nested_tensor=False" in str(error)


def test_a_program_exported_under_no_grad_refuses_a_call_with_grad_on():
    """With grad on eager keeps the dense path (no zeros): the program refuses that call."""
    model = _build(NestedEncoder)
    args = _args()
    program = _export(model, args, grad=False, dynamic=False)
    with pytest.raises(InputMismatchError, match="export it in the mode you run it in"):
        _run(program, args, True)


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "auto"])
@pytest.mark.parametrize("model_class", [NestedEncoder, MaskedTransformer])
def test_the_nested_tensor_encoder_exported_with_grad(model_class, dynamic):
    """With grad on eager keeps the dense path: the program is bit-exact there, and refuses a
    no_grad call (eager would return zeros at the padded positions)."""
    model = _build(model_class)
    args = _args()
    program = _export(model, args, grad=True, dynamic=dynamic)
    assert_bit_exact(_run(program, args, True), _eager(model, args, True))
    with pytest.raises(InputMismatchError, match="nested-tensor path returns zeros"):
        _run(program, args, False)


def test_torch_export_has_the_same_difference():
    """torch.export's program, exported with grad on, computes values at the padded positions
    that eager under no_grad sets to zero (unbroken's refuses that call instead)."""
    model = _build(NestedEncoder)
    args = _args()
    peer = torch.export.export(model, args)
    assert_bit_exact(_run(peer, args, True), _eager(model, args, True))
    assert not torch.equal(_run(peer, args, False), _eager(model, args, False))


class AttentionUnderNoGrad(SelfAttention):
    """forward() itself enters no_grad around the attention: eager takes the fused kernel
    whatever the caller's mode, and so does the program, in every mode."""

    def forward(self, x, padding):
        with torch.no_grad():
            return super().forward(x, padding) + 1


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_a_grad_mode_region_of_forward_decides_for_every_caller(grad):
    model = _build(AttentionUnderNoGrad)
    args = _args()
    program = _export(model, args, grad, dynamic=False)
    assert _fused(program)
    for run_grad in (True, False):
        assert_bit_exact(_run(program, args, run_grad), _eager(model, args, run_grad))


@pytest.mark.parametrize("grad", [False, True], ids=["no_grad", "grad"])
def test_training_mode_keeps_the_differentiable_path(grad):
    """In training mode no fast path is taken (the modules run natively, dropout 0)."""
    model = _build(DenseEncoder).train()
    args = _args()
    program = _export(model, args, grad, dynamic=False)
    assert not _fused(program)
    for run_grad in (True, False):
        assert_bit_exact(_run(program, args, run_grad), _eager(model, args, run_grad))


def test_the_model_is_left_unchanged():
    model = _build(DenseEncoder)
    before = {k: v.clone() for k, v in model.state_dict().items()}
    _export(model, _args(), grad=False, dynamic=True)
    assert all(torch.equal(before[k], v) for k, v in model.state_dict().items())
    assert all(p.requires_grad for p in model.parameters())
    assert not model.training
