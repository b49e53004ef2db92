"""Nemotron ASR's RNN-T decoder skips the decoder when every batch element predicts blank.

Source: transformers/models/nemotron3_5_asr/modeling_nemotron3_5_asr.py (transformers 5.23.0,
line 163): `blank_mask = input_ids[:, -1] == self.blank_token_id; if cache.is_initialized and
blank_mask.all(): return cache.cache`. Reduced with the cache as a tensor argument.
"""
import torch

import unbroken


class BlankFastPath(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(10, 8)
        self.rnn_proj = torch.nn.Linear(8, 8)

    def forward(self, input_ids, cached):
        blank_mask = input_ids[:, -1] == 0
        if blank_mask.all():
            return cached
        return self.rnn_proj(self.embedding(input_ids)).mean(1)


unbroken.case(BlankFastPath(), (torch.tensor([[3, 0], [4, 5]]), torch.randn(2, 8)))
