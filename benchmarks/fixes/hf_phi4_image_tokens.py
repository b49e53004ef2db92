"""Phi-4-multimodal embeds images only when the prompt holds an image token.

Source: transformers/models/phi4_multimodal/modeling_phi4_multimodal.py (transformers 5.23.0,
line 1355): `if image_pixel_values is not None and (input_ids == self.image_token_id).any():
image_embeds = self.image_embed(...)`; later `inputs_embeds` gets the image features added.
"""
import torch

import unbroken


class Phi4ImageMerge(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.image_proj = torch.nn.Linear(6, 8)

    def forward(self, input_ids, inputs_embeds, image_pixel_values):
        if image_pixel_values is not None and (input_ids == 9).any():
            mask = (input_ids == 9).unsqueeze(-1)
            inputs_embeds = inputs_embeds + mask * self.image_proj(image_pixel_values).mean(1,
                                                                                        True)
        return inputs_embeds


unbroken.case(Phi4ImageMerge(), (torch.tensor([[1, 9, 2]]), torch.randn(1, 3, 8),
                                 torch.randn(1, 4, 6)))
