"""FSMT returns no padding mask at all when no token is padding: None or a tensor.

Source: transformers/models/fsmt/modeling_fsmt.py, make_padding_mask (transformers 5.23.0,
line 266): `padding_mask = input_ids.eq(padding_idx); if not padding_mask.any():
padding_mask = None`. The two sides return different types: no torch.cond can hold both.
"""
import torch

import unbroken


class FSMTPaddingMask(torch.nn.Module):
    def forward(self, input_ids, scores):
        padding_mask = input_ids.eq(1)
        if not padding_mask.any():
            padding_mask = None
        if padding_mask is not None:
            scores = scores.masked_fill(padding_mask, float("-inf"))
        return scores


unbroken.case(FSMTPaddingMask(), (torch.tensor([[5, 6, 1], [7, 1, 1]]), torch.randn(2, 3)))
