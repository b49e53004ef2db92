"""Every "am I compiling / exporting" predicate answers inside the trace as it does inside
torch.export(strict=True): in forward() (interpreted) and in torch's own code run natively
(a leaf module's forward, which reads torch's flags). Side by side with torch.export."""
from __future__ import annotations

import sys

import pytest
import torch
import torch._dynamo.external_utils  # noqa: F401  (puts every predicate's module in sys.modules)
import torch.fx._symbolic_trace  # noqa: F401
from torch import nn

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.symbolic.torch_compat import EXPORT_PREDICATES, export_predicate

# the deprecated predicates (torch._utils.is_compiling...) warn when called
pytestmark = pytest.mark.filterwarnings("ignore::FutureWarning", "ignore::UserWarning")


def _predicates():
    return [(f"{module}.{name}", getattr(sys.modules[module], name), answer)
            for module, name, answer in EXPORT_PREDICATES if hasattr(sys.modules[module], name)]


class AskAll(nn.Module):
    """One output per predicate: x + 1 where it answers True, x where not."""

    def __init__(self, predicates):
        super().__init__()
        self.predicates = predicates

    def forward(self, x):
        return tuple(x + 1 if bool(fn()) else x for fn in self.predicates)


def _answers(program, x):
    return [bool(t.item()) for t in program.module()(x)]


def test_every_predicate_answers_as_torch_export_strict():
    names, functions, expected = zip(*_predicates())
    x = torch.zeros(1)
    ours = _answers(unbroken.export(AskAll(functions), (x,)), x)
    peer = _answers(torch.export.export(AskAll(functions), (x,), strict=True), x)
    assert dict(zip(names, ours)) == dict(zip(names, peer))
    assert ours == [bool(a) for a in expected]  # the table states torch's answers


def test_predicates_are_found_by_identity():
    for name, fn, answer in _predicates():
        assert export_predicate(fn) == (True, answer), name
    assert export_predicate(torch.is_grad_enabled) == (False, None)


def test_transformers_helpers_answer_as_under_torch_export():
    import_utils = pytest.importorskip("transformers.utils.import_utils")
    helpers = [import_utils.is_torchdynamo_compiling, import_utils.is_torchdynamo_exporting,
               import_utils.is_tracing]
    x = torch.zeros(1)
    ours = _answers(unbroken.export(AskAll(helpers), (x,)), x)
    peer = _answers(torch.export.export(AskAll(helpers), (x,), strict=True), x)
    assert ours == peer == [True, True, True]


def test_flags_are_restored_after_export():
    before = (torch.compiler.is_compiling(), torch.compiler.is_exporting())
    unbroken.export(AskAll([torch.compiler.is_compiling]), (torch.zeros(1),))
    assert (torch.compiler.is_compiling(), torch.compiler.is_exporting()) == before == \
        (False, False)


class Encoder(nn.Module):
    """nn.TransformerEncoder with a padding mask: torch.nn's code checks
    ``torch.compiler.is_compiling()`` to avoid its nested-tensor fast path, natively."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        layer = nn.TransformerEncoderLayer(d_model=8, nhead=2, dim_feedforward=16,
                                           batch_first=True)
        self.encoder = nn.TransformerEncoder(layer, num_layers=2)

    def forward(self, x, padding):
        return self.encoder(x, src_key_padding_mask=padding)


class FullTransformer(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.transformer = nn.Transformer(d_model=8, nhead=2, num_encoder_layers=1,
                                          num_decoder_layers=1, dim_feedforward=16,
                                          batch_first=True)

    def forward(self, src, tgt, padding):
        return self.transformer(src, tgt, src_key_padding_mask=padding,
                                memory_key_padding_mask=padding)


def _padding():
    return torch.tensor([[False] * 5, [False] * 3 + [True] * 2])


@pytest.mark.parametrize("model_class", [Encoder, FullTransformer])
def test_transformer_with_a_padding_mask_exports_as_torch(model_class):
    model = model_class().eval()
    torch.manual_seed(1)
    args = (torch.randn(2, 5, 8),) + ((torch.randn(2, 4, 8),) if model_class is
                                       FullTransformer else ()) + (_padding(),)
    ours = unbroken.export(model, args)
    peer = torch.export.export(model, args)
    # eager with autograd on: the differentiable path both programs record (under no_grad,
    # eager's fused fast path returns zeros at padded positions)
    want = model(*args)
    assert_bit_exact(ours.module()(*args), want)
    assert_bit_exact(peer.module()(*args), want)
