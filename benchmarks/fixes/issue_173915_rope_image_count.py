"""Qwen3-VL's get_rope_index counts images with .item() and loops that many times.

Source: https://github.com/pytorch/pytorch/issues/173915 ("data-dependent control flow in
get_rope_index (Qwen3-VL, Alpamayo)"): `image_nums = (vision_tokens ==
image_token_id).sum()` then `for _ in range(image_nums + video_nums):` over values read
from the tensor. Reduced to the loop.
"""
import torch

import unbroken


class RopeImageCount(torch.nn.Module):
    def forward(self, input_ids, positions):
        image_nums = (input_ids == 5).sum().item()
        for _ in range(image_nums):
            positions = positions + 1
        return positions


unbroken.case(RopeImageCount(), (torch.tensor([1, 5, 2, 5]), torch.arange(4)))
