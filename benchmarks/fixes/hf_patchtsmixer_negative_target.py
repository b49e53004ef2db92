"""PatchTSMixer refuses negative targets for the negative-binomial head.

Source: transformers/models/patchtsmixer/modeling_patchtsmixer.py,
PatchTSMixerForPrediction.forward (transformers 5.23.0, line 1977): `if
self.distribution_output == "negative_binomial" and torch.any(target_values < 0): raise
Exception("target_values cannot be negative for negative_binomial distribution.")`.
"""
import torch

import unbroken


class NegativeBinomialGuard(torch.nn.Module):
    def forward(self, y_hat, target_values):
        if torch.any(target_values < 0):
            raise ValueError("target_values cannot be negative for negative_binomial distribution.")
        return torch.nn.functional.softplus(y_hat) * target_values.log1p()


unbroken.case(NegativeBinomialGuard(), (torch.randn(2, 3), torch.rand(2, 3) * 5))
