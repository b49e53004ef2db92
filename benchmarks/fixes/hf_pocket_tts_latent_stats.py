"""Pocket-TTS freezes its latent statistics after a number of updates, read with .item().

Source: transformers/models/pocket_tts/modeling_pocket_tts.py (transformers 5.23.0, line
845): `if self.latent_stats_num_updates.item() >= self.config.latent_stats_ema_steps:
self._latent_stats_frozen = True; return`. The branch changes Python state and returns early.
"""
import torch

import unbroken


class LatentStats(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("num_updates", torch.tensor(3))
        self.register_buffer("latent_mean", torch.zeros(4))

    def forward(self, frames):
        if self.num_updates.item() >= 10:
            return self.latent_mean
        return self.latent_mean * 0.9 + frames.mean(0) * 0.1


unbroken.case(LatentStats(), (torch.randn(5, 4),))
