"""Reformer's LSH attention adds a bucket for padding tokens when the mask has any padding.

Source: transformers/models/reformer/modeling_reformer.py, LSHSelfAttention._hash_vectors
(transformers 5.23.0, line 750): `if attention_mask is not None and
(attention_mask.sum().item() < batch_size * attention_mask.shape[-1]): num_buckets =
num_buckets + 1; ... buckets = torch.where(buckets_mask, buckets, num_buckets - 1)`.
An int leaves the branch: torch.cond carries tensors only.
"""
import torch

import unbroken


class PaddingBucket(torch.nn.Module):
    def forward(self, buckets, attention_mask):
        batch_size = attention_mask.shape[0]
        num_buckets = 4
        if attention_mask.sum().item() < batch_size * attention_mask.shape[-1]:
            num_buckets = num_buckets + 1
            buckets = torch.where(attention_mask.bool(), buckets,
                                  torch.tensor(num_buckets - 1, dtype=torch.long))
        return buckets * num_buckets


unbroken.case(PaddingBucket(), (torch.tensor([[0, 1, 2, 3], [3, 2, 1, 0]]),
                                torch.tensor([[1, 1, 1, 0], [1, 1, 1, 1]])))
