"""FastSpeech2-Conformer's length regulator avoids all-zero durations with a masked write.

Source: transformers/models/fastspeech2_conformer/modeling_fastspeech2_conformer.py,
length_regulator (transformers 5.23.0, line 108): `if duration_labels.sum() == 0:
duration_labels[duration_labels.sum(dim=1).eq(0)] = 1`. The branch only mutates a tensor.
"""
import torch

import unbroken


class LengthRegulatorGuard(torch.nn.Module):
    def forward(self, encoded_embeddings, duration_labels):
        duration_labels = duration_labels.clone()
        if duration_labels.sum() == 0:
            duration_labels[duration_labels.sum(dim=1).eq(0)] = 1
        return encoded_embeddings * duration_labels.unsqueeze(-1)


unbroken.case(LengthRegulatorGuard(), (torch.randn(2, 4, 8), torch.tensor([[1, 2, 0, 1],
                                                                           [0, 1, 1, 3]])))
