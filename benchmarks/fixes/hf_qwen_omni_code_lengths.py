"""Qwen2.5-Omni splits talker codes by lengths read with .tolist().

Source: transformers/models/qwen2_5_omni/modeling_qwen2_5_omni.py (transformers 5.23.0, line
4052): `for index, code_length in enumerate(talker_code_lengths.tolist()): ...` (slices of a
data-dependent length).
"""
import torch

import unbroken


class CodeSplit(torch.nn.Module):
    def forward(self, codes, code_lengths):
        start, outs = 0, []
        for code_length in code_lengths.tolist():
            outs.append(codes[start:start + code_length].sum(0))
            start = start + code_length
        return torch.stack(outs)


unbroken.case(CodeSplit(), (torch.randn(6, 4), torch.tensor([2, 3, 1])))
