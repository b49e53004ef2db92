"""wav2vec2's contrastive loss masks negatives equal to the positive, if any.

Source: transformers/models/wav2vec2/modeling_wav2vec2.py, Wav2Vec2ForPreTraining.forward
(transformers 5.23.0, line 1492): `neg_is_pos = (quantized_features ==
negative_quantized_features).all(-1); if neg_is_pos.any(): logits[1:][neg_is_pos] =
float("-inf")`.
"""
import torch

import unbroken


class NegIsPos(torch.nn.Module):
    def forward(self, logits, quantized, negatives):
        logits = logits.clone()
        neg_is_pos = (quantized == negatives).all(-1)
        if neg_is_pos.any():
            logits[1:][neg_is_pos] = float("-inf")
        return logits


q = torch.randn(2, 3, 4)
unbroken.case(NegIsPos(), (torch.randn(3, 2, 3), q, torch.stack([q, torch.randn(2, 3, 4)])))
