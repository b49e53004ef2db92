"""The model zoo: small, seeded CPU models that unbroken must export and run like eager.

Each :class:`ZooEntry` builds its model (in eval mode) and example inputs deterministically, and
draws fresh random inputs of the same shapes and dtypes for differential tests. The zoo is
shared by ``tests/models/test_zoo.py`` and ``benchmarks/export_time.py``.

| name                 | covers                                                                  |
|----------------------|-------------------------------------------------------------------------|
| mlp                  | nn.Sequential, Linear, ReLU                                             |
| cnn                  | Conv2d, BatchNorm2d (eval, non-trivial running stats), pooling, flatten |
| transformer_block    | a block written plainly: LayerNorm, attention with view/transpose/      |
|                      | reshape/matmul/softmax, a causal-mask buffer, residuals, GELU           |
| embedding_posenc     | Embedding + a sinusoidal positional table registered as a buffer        |
| encoder_layer        | nn.TransformerEncoderLayer (batch_first, eval)                          |
| lstm                 | nn.LSTM + a Linear head on the last time step                           |
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

__all__ = ["ZooEntry", "ZOO", "MLP", "CNN", "TransformerBlock", "EmbeddingPosEnc",
           "EncoderLayerModel", "LSTMHead"]

SEED = 0


@dataclass(frozen=True, slots=True)
class ZooEntry:
    """One zoo model.

    name:   registry key, also the pytest id and the benchmark row label.
    build:  constructs the model (weights drawn after ``torch.manual_seed(SEED)``).
    inputs: draws a tuple of example inputs from a ``torch.Generator``.
    slow:   heavier to export (library modules with long Python paths); tests mark it ``slow``.
    fast_path: eager in eval mode under no_grad takes the fused attention fast path; exported
            with grad on, the program records the differentiable path and refuses a no_grad
            call (``tests.exactness.FAST_PATH``).
    """

    name: str
    build: Callable[[], nn.Module]
    inputs: Callable[[torch.Generator], tuple]
    slow: bool = False
    fast_path: bool = False

    def make(self) -> tuple[nn.Module, tuple]:
        """The model in eval mode and its example inputs; the same on every call."""
        torch.manual_seed(SEED)
        model = self.build().eval()
        return model, self.inputs(torch.Generator().manual_seed(SEED))

    def fresh_args(self, seed: int) -> tuple:
        """New random inputs with the example inputs' shapes and dtypes (``seed`` >= 1)."""
        return self.inputs(torch.Generator().manual_seed(SEED + 1000 + seed))


def _randn(*shape: int) -> Callable[[torch.Generator], tuple]:
    return lambda g: (torch.randn(*shape, generator=g),)


# -- models --------------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self, d_in: int = 16, hidden: int = 32, d_out: int = 4):
        super().__init__()
        self.layers = nn.Sequential(
            nn.Linear(d_in, hidden), nn.ReLU(),
            nn.Linear(hidden, hidden), nn.ReLU(),
            nn.Linear(hidden, d_out),
        )

    def forward(self, x):
        return self.layers(x)


class CNN(nn.Module):
    def __init__(self, channels: int = 3, classes: int = 10):
        super().__init__()
        self.conv1 = nn.Conv2d(channels, 8, kernel_size=3, padding=1)
        self.bn1 = nn.BatchNorm2d(8)
        self.conv2 = nn.Conv2d(8, 16, kernel_size=3, padding=1)
        self.bn2 = nn.BatchNorm2d(16)
        self.pool = nn.MaxPool2d(2)
        self.head = nn.Linear(16 * 4 * 4, classes)
        for bn in (self.bn1, self.bn2):  # non-trivial running statistics, so eval BN matters
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)

    def forward(self, x):
        x = self.pool(F.relu(self.bn1(self.conv1(x))))
        x = F.avg_pool2d(F.relu(self.bn2(self.conv2(x))), 2)
        x = torch.flatten(x, 1)
        return self.head(x)


class TransformerBlock(nn.Module):
    """A pre-norm transformer block written out by hand (no nn.MultiheadAttention)."""

    def __init__(self, d_model: int = 32, heads: int = 4, max_len: int = 16):
        super().__init__()
        self.heads = heads
        self.ln1 = nn.LayerNorm(d_model)
        self.qkv = nn.Linear(d_model, 3 * d_model)
        self.proj = nn.Linear(d_model, d_model)
        self.ln2 = nn.LayerNorm(d_model)
        self.fc1 = nn.Linear(d_model, 4 * d_model)
        self.fc2 = nn.Linear(4 * d_model, d_model)
        self.register_buffer("causal", torch.tril(torch.ones(max_len, max_len, dtype=torch.bool)))

    def attention(self, x):
        batch, time, channels = x.shape
        head_dim = channels // self.heads
        q, k, v = self.qkv(x).split(channels, dim=2)
        q = q.view(batch, time, self.heads, head_dim).transpose(1, 2)
        k = k.view(batch, time, self.heads, head_dim).transpose(1, 2)
        v = v.view(batch, time, self.heads, head_dim).transpose(1, 2)
        scores = torch.matmul(q, k.transpose(-2, -1)) / math.sqrt(head_dim)
        scores = scores.masked_fill(~self.causal[:time, :time], float("-inf"))
        weights = torch.softmax(scores, dim=-1)
        out = (weights @ v).transpose(1, 2).reshape(batch, time, channels)
        return self.proj(out)

    def forward(self, x):
        x = x + self.attention(self.ln1(x))
        return x + self.fc2(F.gelu(self.fc1(self.ln2(x))))


class EmbeddingPosEnc(nn.Module):
    """Token embedding scaled by sqrt(d), plus a sinusoidal positional table (a buffer)."""

    def __init__(self, vocab: int = 100, d_model: int = 32, max_len: int = 64):
        super().__init__()
        self.d_model = d_model
        self.embed = nn.Embedding(vocab, d_model)
        position = torch.arange(max_len, dtype=torch.float32).unsqueeze(1)
        frequency = torch.exp(torch.arange(0, d_model, 2, dtype=torch.float32)
                              * (-math.log(10000.0) / d_model))
        table = torch.zeros(max_len, d_model)
        table[:, 0::2] = torch.sin(position * frequency)
        table[:, 1::2] = torch.cos(position * frequency)
        self.register_buffer("positional", table)
        self.out = nn.Linear(d_model, d_model)

    def forward(self, tokens):
        x = self.embed(tokens) * math.sqrt(self.d_model)
        x = x + self.positional[: tokens.size(1)]
        return self.out(x)


class EncoderLayerModel(nn.Module):
    def __init__(self, d_model: int = 32, heads: int = 4):
        super().__init__()
        self.layer = nn.TransformerEncoderLayer(d_model, heads, dim_feedforward=64, dropout=0.0,
                                                batch_first=True)

    def forward(self, x):
        return self.layer(x)


class LSTMHead(nn.Module):
    def __init__(self, d_in: int = 8, hidden: int = 16, d_out: int = 4):
        super().__init__()
        self.lstm = nn.LSTM(d_in, hidden, batch_first=True)
        self.head = nn.Linear(hidden, d_out)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return self.head(out[:, -1, :])


def _tokens(g: torch.Generator) -> tuple:
    return (torch.randint(0, 100, (2, 10), generator=g),)


ZOO: dict[str, ZooEntry] = {e.name: e for e in [
    ZooEntry("mlp", MLP, _randn(4, 16)),
    ZooEntry("cnn", CNN, _randn(2, 3, 16, 16)),
    ZooEntry("transformer_block", TransformerBlock, _randn(2, 8, 32)),
    ZooEntry("embedding_posenc", EmbeddingPosEnc, _tokens),
    ZooEntry("encoder_layer", EncoderLayerModel, _randn(2, 8, 32), slow=True, fast_path=True),
    ZooEntry("lstm", LSTMHead, _randn(2, 5, 8), slow=True),
]}
