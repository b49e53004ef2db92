"""ERNIE-4.5-VL-MoE routes multimodal tokens through a second expert group only if any exist.

Source: transformers/models/ernie4_5_vl_moe/modeling_ernie4_5_vl_moe.py, the sparse MoE block
(transformers 5.23.0, line 446): `if moe_mm_token_type_ids is not None and
moe_mm_token_type_ids.any(): final_hidden_states = ...` (else the text experts only).
Reduced: each side computes the block's output from the same inputs.
"""
import torch

import unbroken


class ErnieMoeSplit(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.text_experts = torch.nn.Linear(8, 8)
        self.vision_experts = torch.nn.Linear(8, 8)

    def forward(self, hidden_states, moe_mm_token_type_ids):
        if moe_mm_token_type_ids is not None and moe_mm_token_type_ids.any():
            is_mm = moe_mm_token_type_ids.bool().unsqueeze(-1)
            final_hidden_states = torch.where(is_mm, self.vision_experts(hidden_states),
                                              self.text_experts(hidden_states))
        else:
            final_hidden_states = self.text_experts(hidden_states)
        return final_hidden_states


unbroken.case(ErnieMoeSplit(), (torch.randn(2, 4, 8), torch.tensor([[0, 1, 1, 0], [0, 0, 0, 0]])))
