"""Mixtral-style sparse MoE: loop over the experts hit, found with nonzero().

Source: transformers/models/mixtral/modeling_mixtral.py, MixtralExperts.forward (the same loop
as Switch Transformers' and Qwen-MoE's in transformers 5.x): `expert_hit =
torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero(); for expert_idx in expert_hit:`.
"""
import torch

import unbroken


class TopKExperts(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.gate = torch.nn.Linear(8, 4)
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(4))

    def forward(self, hidden_states):
        routing_weights, selected = torch.topk(self.gate(hidden_states).softmax(-1), 2, dim=-1)
        expert_mask = torch.nn.functional.one_hot(selected, 4).permute(2, 1, 0)
        final = torch.zeros_like(hidden_states)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            out = self.experts[expert_idx](hidden_states[top_x]) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, out)
        return final


unbroken.case(TopKExperts(), (torch.randn(5, 8),))
