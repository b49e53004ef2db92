"""Ovis2 writes the visual indicator embeddings only if the indicator token occurs.

Source: transformers/models/ovis2/modeling_ovis2.py, Ovis2Model.forward (transformers 5.23.0,
line 584): `if mask.any(): inputs_embeds[mask] = visual_indicator_features[i]`.
"""
import torch

import unbroken


class VisualIndicator(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.indicator = torch.nn.Parameter(torch.randn(8))

    def forward(self, input_ids, inputs_embeds):
        inputs_embeds = inputs_embeds.clone()
        mask = input_ids == 7
        if mask.any():
            inputs_embeds[mask] = self.indicator.to(inputs_embeds.dtype)
        return inputs_embeds


unbroken.case(VisualIndicator(), (torch.tensor([[1, 7, 3], [2, 2, 7]]), torch.randn(2, 3, 8)))
