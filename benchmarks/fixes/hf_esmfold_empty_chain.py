"""ESMFold2's ipTM skips chains without residues: `continue` inside a loop.

Source: transformers/models/esmfold2/modeling_esmfold2.py (transformers 5.23.0, line 1568):
`for chain_i in range(num_chains): chain_c1 = (expanded_asym == chain_i).float() *
mask_float; if chain_c1.sum() == 0: continue; ...`.
"""
import torch

import unbroken


class ChainScores(torch.nn.Module):
    def forward(self, tm_expected, asym_id):
        best = torch.zeros(())
        for chain_i in range(3):
            chain_c1 = (asym_id == chain_i).float()
            if chain_c1.sum() == 0:
                continue
            avg = (tm_expected * chain_c1).sum() / chain_c1.sum()
            best = torch.maximum(best, avg)
        return best


unbroken.case(ChainScores(), (torch.rand(6), torch.tensor([0, 0, 1, 1, 1, 0])))
