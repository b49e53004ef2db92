"""Switch Transformers (transformers 4.x): each expert runs on the tokens routed to it,
selected with a boolean mask: a data-dependent number of rows.

Source: transformers v4.40 models/switch_transformers/modeling_switch_transformers.py,
SwitchTransformersSparseMLP.forward: `for idx, expert in enumerate(self.experts.values()):
token_indices = router_mask[:, :, idx].bool(); next_states[token_indices] =
expert(hidden_states[token_indices]).to(next_states.dtype)`.
"""
import torch

import unbroken


class SwitchSparseMLP(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.experts = torch.nn.ModuleDict({f"expert_{i}": torch.nn.Linear(8, 8)
                                            for i in range(3)})

    def forward(self, hidden_states, router_mask):
        next_states = hidden_states.clone()
        for idx, expert in enumerate(self.experts.values()):
            token_indices = router_mask[:, :, idx].bool()
            next_states[token_indices] = expert(hidden_states[token_indices])
        return next_states


unbroken.case(SwitchSparseMLP(), (torch.randn(2, 4, 8), torch.nn.functional.one_hot(
    torch.tensor([[0, 1, 2, 0], [2, 2, 1, 0]]), 3)))
