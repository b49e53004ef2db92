"""RAG's loss masks the pad positions in place, only when there are any.

Source: transformers/models/rag/modeling_rag.py, RagTokenForGeneration.get_nll._mask_pads
(transformers 5.23.0, line 1044): `pad_mask = target.eq(pad_token_id); if pad_mask.any():
ll.masked_fill_(pad_mask, 0.0); smooth_obj.masked_fill_(pad_mask, 0.0)`.
"""
import torch

import unbroken


class MaskPads(torch.nn.Module):
    def forward(self, ll, smooth_obj, target):
        ll, smooth_obj = ll.clone(), smooth_obj.clone()
        pad_mask = target.eq(0)
        if pad_mask.any():
            ll.masked_fill_(pad_mask, 0.0)
            smooth_obj.masked_fill_(pad_mask, 0.0)
        return ll.squeeze(-1), smooth_obj.squeeze(-1)


unbroken.case(MaskPads(), (torch.randn(2, 5, 1), torch.randn(2, 5, 1),
                           torch.tensor([[[3], [4], [0], [0], [1]], [[2], [2], [2], [2], [0]]])))
