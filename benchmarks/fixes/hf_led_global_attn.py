"""LED (Longformer encoder-decoder) encoder: the same global-attention flag read with .item().

Source: transformers/models/led/modeling_led.py, LEDEncoder.forward (transformers 5.23.0,
line 1445): `is_global_attn = is_index_global_attn.flatten().any().item()`; the attention
layer then adds the global attention output only `if is_global_attn`.
"""
import torch

import unbroken


class LEDGlobalAttention(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.key_global = torch.nn.Linear(16, 16)

    def forward(self, attn_output, hidden_states, attention_mask):
        is_index_masked = attention_mask < 0
        is_index_global_attn = attention_mask > 0
        is_global_attn = is_index_global_attn.flatten().any().item()
        if is_global_attn:
            global_out = self.key_global(hidden_states).softmax(-1)
            attn_output = attn_output + global_out
        attn_output = attn_output.masked_fill(is_index_masked[..., None], 0.0)
        return attn_output


unbroken.case(LEDGlobalAttention(), (torch.randn(2, 8, 16), torch.randn(2, 8, 16),
                                     torch.tensor([[1, 0, 0, 0, 0, 0, 0, -1]] * 2)))
