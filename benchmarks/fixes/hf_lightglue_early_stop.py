"""LightGlue stops the transformer early for image pairs whose confidence is high enough.

Source: transformers/models/lightglue/modeling_lightglue.py, LightGlueForKeypointMatching
(transformers 5.23.0, line 780): `if torch.any(early_stopped_pairs): early_stops =
early_stopped_pairs.repeat_interleave(2); early_stopped_image_indices =
image_indices[early_stops]; ...` (boolean-mask selection: data-dependent sizes).
"""
import torch

import unbroken


class EarlyStop(torch.nn.Module):
    def forward(self, descriptors, confidences):
        early_stopped_pairs = confidences > 0.9
        if torch.any(early_stopped_pairs):
            early_stops = early_stopped_pairs.repeat_interleave(2)
            kept = descriptors[~early_stops]
            return kept.sum(0)
        return descriptors.sum(0)


unbroken.case(EarlyStop(), (torch.randn(4, 8), torch.tensor([0.95, 0.1])))
