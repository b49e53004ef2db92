"""Qwen3-VL groups consecutive token types with itertools.groupby over .tolist().

Source: transformers/models/qwen3_vl/modeling_qwen3_vl.py, get_rope_index (transformers
5.23.0, line 973): `for key, group in itertools.groupby(enumerate(input_token_type.tolist()),
lambda x: x[1]):`; the same function is the subject of pytorch/pytorch#173915.
"""
import itertools

import torch

import unbroken


class TokenGroups(torch.nn.Module):
    def forward(self, input_token_type, positions):
        lengths = []
        for _key, group in itertools.groupby(enumerate(input_token_type.tolist()), lambda x: x[1]):
            lengths.append(len(list(group)))
        return positions * len(lengths)


unbroken.case(TokenGroups(), (torch.tensor([0, 0, 1, 1, 1, 0]), torch.randn(6)))
