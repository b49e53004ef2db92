"""Longformer's encoder reads whether any token has global attention, then branches on it.

Source: transformers/models/longformer/modeling_longformer.py, LongformerEncoder.forward
(transformers 5.23.0, line 1175): `is_global_attn = is_index_global_attn.flatten().any().item()`,
then the layers take the global-attention path only `if is_global_attn`. Reduced to the branch.
"""
import torch

import unbroken


class LongformerGlobalAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.query_global = torch.nn.Linear(16, 16)

    def forward(self, hidden_states, attention_mask):
        is_index_global_attn = attention_mask > 0
        is_global_attn = is_index_global_attn.flatten().any().item()
        if is_global_attn:
            hidden_states = hidden_states + self.query_global(hidden_states).tanh()
        return hidden_states


unbroken.case(LongformerGlobalAttention(), (torch.randn(2, 8, 16), torch.tensor(
    [[1, 0, 0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0, 0, 0]])))
