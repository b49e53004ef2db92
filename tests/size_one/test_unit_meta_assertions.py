"""A leaf call re-run at size 1 that torch's own checks reject with ``AssertionError``
(``torch._check_with(AssertionError, ...)`` in ``F.multi_head_attention_forward``, whose key
padding mask has its own batch symbol): the call is not the same at 1 (its answers count),
not an internal error (UB999 before). Compared bit for bit with eager."""
from __future__ import annotations

import torch
from torch.export import Dim

import unbroken


class _Attention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = torch.nn.MultiheadAttention(16, 4, batch_first=True)

    def forward(self, x, mask):
        return self.mha(x, x, x, key_padding_mask=~mask, need_weights=False)[0]


def _inputs(batch, seq):
    mask = torch.ones(batch, seq, dtype=torch.bool)
    mask[-1, -2:] = False
    return torch.randn(batch, seq, 16), mask


def test_multi_head_attention_with_a_key_padding_mask_under_dim_auto():
    torch.manual_seed(0)
    model = _Attention().eval()
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    ep = unbroken.export(model, _inputs(2, 12), dynamic_shapes={"x": auto, "mask": auto})
    for batch, seq in ((2, 12), (3, 9)):
        x, mask = _inputs(batch, seq)  # grad mode on, as exported (no_grad takes the fused
        assert torch.equal(ep.module()(x, mask), model(x, mask))  # path, 1e-7 apart)
