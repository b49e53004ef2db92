"""SAM3-video keeps a detection's match only when a mask entry read with .item() is set.

Source: transformers/models/sam3_video/modeling_sam3_video.py (transformers 5.23.0, line 790):
`if high_conf_and_iou_mask[det_idx].item(): trk_idx = det_to_max_iou_trk_idx[det_idx].item()
...`. Reduced: the score of the detection is kept or zeroed.
"""
import torch

import unbroken


class HighConfidenceMatch(torch.nn.Module):
    def forward(self, scores, high_conf_and_iou_mask):
        out = scores * 0
        if high_conf_and_iou_mask[0].item():
            out = scores * 2
        return out


unbroken.case(HighConfidenceMatch(), (torch.rand(4), torch.tensor([True, False])))
