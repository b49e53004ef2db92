"""VisualBERT avoids a division by zero by rewriting zero alignment counts to 1.

Source: transformers/models/visual_bert/modeling_visual_bert.py, VisualBertEmbeddings.forward
(transformers 5.23.0, line 132): `if (image_text_alignment_mask == 0).sum() != 0:
image_text_alignment_mask[image_text_alignment_mask == 0] = 1`.
"""
import torch

import unbroken


class AlignmentAverage(torch.nn.Module):
    def forward(self, visual_position_embeddings, image_text_alignment_mask):
        image_text_alignment_mask = image_text_alignment_mask.float().sum(2)
        if (image_text_alignment_mask == 0).sum() != 0:
            image_text_alignment_mask[image_text_alignment_mask == 0] = 1
        return visual_position_embeddings / image_text_alignment_mask.unsqueeze(-1)


unbroken.case(AlignmentAverage(), (torch.randn(2, 3, 8), torch.tensor(
    [[[1, 1], [0, 0], [1, 0]], [[1, 1], [1, 1], [0, 1]]])))
