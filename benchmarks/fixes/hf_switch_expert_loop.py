"""Switch Transformers' sparse MLP: a loop over the experts that some token was routed to.

Source: transformers/models/switch_transformers/modeling_switch_transformers.py,
SwitchTransformersExperts.forward (transformers 5.23.0, lines 171-177):
`expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()` then
`for expert_idx in expert_hit: idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))`.
The trip count is tensor data: no equivalent rewrite exists (the report must say so).
"""
import torch

import unbroken


class SwitchExperts(torch.nn.Module):
    def __init__(self, num_experts=4):
        super().__init__()
        self.experts = torch.nn.ModuleList(torch.nn.Linear(8, 8) for _ in range(num_experts))

    def forward(self, hidden_states, selected_experts, routing_weights):
        final = torch.zeros_like(hidden_states)
        expert_mask = torch.nn.functional.one_hot(selected_experts, len(self.experts))
        expert_mask = expert_mask.permute(2, 1, 0)
        expert_hit = torch.greater(expert_mask.sum(dim=(-1, -2)), 0).nonzero()
        for expert_idx in expert_hit:
            idx, top_x = torch.where(expert_mask[expert_idx].squeeze(0))
            current = hidden_states[top_x]
            out = self.experts[expert_idx[0]](current) * routing_weights[top_x, idx, None]
            final.index_add_(0, top_x, out)
        return final


unbroken.case(SwitchExperts(), (torch.randn(6, 8), torch.tensor([[0], [1], [1], [3], [0], [3]]),
                                torch.rand(6, 1)))
