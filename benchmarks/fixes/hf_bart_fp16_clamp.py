"""BART's encoder layer clamps fp16 hidden states that overflowed.

Source: transformers/models/bart/modeling_bart.py, BartEncoderLayer.forward (transformers
5.23.0, line 304): `if hidden_states.dtype == torch.float16 and not
torch.isfinite(hidden_states).all(): clamp_value = torch.finfo(hidden_states.dtype).max - 1000;
hidden_states = torch.clamp(...)`. Also in Marian, mBART, PLBart, Blenderbot, NLLB-MoE, LED.
"""
import torch

import unbroken


class BartFp16Clamp(torch.nn.Module):
    def forward(self, residual, hidden_states):
        hidden_states = residual + hidden_states
        if hidden_states.dtype == torch.float16 and not torch.isfinite(hidden_states).all():
            clamp_value = torch.finfo(hidden_states.dtype).max - 1000
            hidden_states = torch.clamp(hidden_states, min=-clamp_value, max=clamp_value)
        return hidden_states


unbroken.case(BartFp16Clamp(), (torch.randn(2, 4, 8).half(), torch.randn(2, 4, 8).half()))
