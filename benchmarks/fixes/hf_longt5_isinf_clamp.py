"""LongT5's block clamps inf values of fp16 hidden states.

Source: transformers/models/longt5/modeling_longt5.py, LongT5Block.forward (transformers
5.23.0, line 1118): `if hidden_states.dtype == torch.float16 and
torch.isinf(hidden_states).any(): clamp_value = ...; hidden_states = torch.clamp(...)`.
Also in Pix2Struct, T5, UMT5.
"""
import torch

import unbroken


class LongT5Clamp(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.wo = torch.nn.Linear(8, 8)

    def forward(self, hidden_states):
        hidden_states = self.wo(hidden_states.float()).half()
        if hidden_states.dtype == torch.float16 and torch.isinf(hidden_states).any():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states


unbroken.case(LongT5Clamp(), (torch.randn(2, 3, 8).half(),))
