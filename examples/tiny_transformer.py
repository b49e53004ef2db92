"""A tiny causal language model written plainly: embeddings, one attention block, a head.

    unbroken check examples/tiny_transformer.py
    python examples/tiny_transformer.py
"""
import math

import torch
import torch.nn.functional as F
from torch import nn

import unbroken


class Block(nn.Module):
    def __init__(self, d_model, heads, max_len):
        super().__init__()
        self.heads = heads
        self.ln1, self.ln2 = nn.LayerNorm(d_model), nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.mlp = nn.Sequential(nn.Linear(d_model, 4 * d_model), nn.GELU(),
                                 nn.Linear(4 * d_model, d_model))
        self.register_buffer("mask", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def attend(self, x):
        batch, time, channels = x.shape
        q, k, v = self.qkv(x).split(channels, dim=-1)
        q = q.view(batch, time, self.heads, -1).transpose(1, 2)
        k = k.view(batch, time, self.heads, -1).transpose(1, 2)
        v = v.view(batch, time, self.heads, -1).transpose(1, 2)
        scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))
        scores = scores.masked_fill(~self.mask[:time, :time], float("-inf"))
        out = torch.softmax(scores, dim=-1) @ v
        return self.proj(out.transpose(1, 2).reshape(batch, time, channels))

    def forward(self, x):
        x = x + self.attend(self.ln1(x))
        return x + self.mlp(self.ln2(x))


class TinyLM(nn.Module):
    def __init__(self, vocab=256, d_model=64, heads=4, max_len=32):
        super().__init__()
        self.tokens = nn.Embedding(vocab, d_model)
        self.positions = nn.Embedding(max_len, d_model)
        self.block = Block(d_model, heads, max_len)
        self.head = nn.Linear(d_model, vocab)

    def forward(self, ids):
        positions = torch.arange(ids.shape[1])
        x = self.tokens(ids) + self.positions(positions)
        return F.log_softmax(self.head(self.block(x)), dim=-1)


torch.manual_seed(0)
model = TinyLM().eval()
example = (torch.randint(0, 256, (2, 16)),)

unbroken.case(model, example)

if __name__ == "__main__":
    program = unbroken.export(model, example)
    print(program)
    torch.testing.assert_close(program.module()(*example), model(*example))
    print("module() matches eager")
