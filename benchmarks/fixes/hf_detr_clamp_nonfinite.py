"""DETR's encoder layer clamps the hidden states when they are not all finite (training).

Source: transformers/models/detr/modeling_detr.py, DetrEncoderLayer.forward (transformers
5.23.0, line 643): `if not torch.isfinite(hidden_states).all(): clamp_value =
torch.finfo(hidden_states.dtype).max - 1000; hidden_states = torch.clamp(...)`. The same
block is in conditional/deformable DETR, RT-DETR, Mask2Former, OneFormer, Grounding DINO.
"""
import torch

import unbroken


class DetrEncoderTail(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.final_layer_norm = torch.nn.LayerNorm(16)

    def forward(self, hidden_states):
        hidden_states = self.final_layer_norm(hidden_states)
        if not torch.isfinite(hidden_states).all():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states


unbroken.case(DetrEncoderTail(), (torch.randn(2, 5, 16),))
