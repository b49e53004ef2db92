"""The cases of the corpus benchmark (``benchmarks/corpus.py``): how to build each model and its
inputs, and which input dims are dynamic under ``--dynamic``.

Three families, each a set in the summary table:

- ``common``: Hugging Face ``transformers`` architectures as users load them (text encoders and
  decoders, encoder-decoders, vision, audio), built from tiny random configs in code (hidden
  64, 2 layers; no download, no tokenizer: inputs are tensors made directly);
- ``harder``: programs with constructs beyond the plain forward (a KV cache as output, mixture
  of experts, state-space scans, block-sparse attention, multimodal merging, detection);
- ``exportdb``: every example of ``torch._export.db.examples`` with its own inputs and
  ``dynamic_shapes``; ``seed``: the seed tutorial's examples.

Everything here is built inside the worker process (one fresh process per case and exporter);
the driver only reads the names and sets. Models and inputs are deterministic: the worker seeds
torch before ``build``, and inputs come from their own seeded generator.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import torch

BATCH, SEQ = 2, 12            # the example inputs
RESIZED = (3, 9)              # batch, seq of the resized inputs checked under --dynamic
BATCH_ONE = (1, 9)            # and the batch-1 call checked under --dynamic
VOCAB = 128
HIDDEN = 64
IMAGE = 32                    # vision inputs: (batch, 3, IMAGE, IMAGE)
AUDIO = 1600                  # audio inputs: (batch, AUDIO) samples


@dataclass(frozen=True, slots=True)
class Inputs:
    """Example inputs of one call: positional args, keyword args, and for each keyword input
    the dims that ``--dynamic`` marks ``Dim.AUTO`` (``{name: (dim, ...)}``)."""

    args: tuple = ()
    kwargs: dict = field(default_factory=dict)
    auto_dims: dict = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Case:
    """One benchmark case.

    Attributes:
        name:    unique id (``--only`` selects by it).
        group:   the summary set: ``common``, ``harder``, ``exportdb`` or ``seed``.
        build:   () -> nn.Module (called after ``torch.manual_seed(0)``).
        inputs:  (batch, seq) -> Inputs; called with ``(BATCH, SEQ)`` for the example and with
                 ``RESIZED`` for the resized check. None for cases with fixed inputs.
        fixed:   () -> (args, kwargs, dynamic_shapes) for cases whose inputs and spec are their
                 own (ExportDB, seeds); the spec is used in both modes.
        resized: () -> (args, kwargs) for fixed cases that have a resized call under --dynamic.
        auto:    () -> dynamic_shapes for fixed cases under --dynamic (None: keep their own).
    """

    name: str
    group: str
    build: Callable[[], torch.nn.Module]
    inputs: Callable[[int, int], Inputs] | None = None
    fixed: Callable[[], tuple] | None = None
    resized: Callable[[], tuple] | None = None
    auto: Callable[[], Any] | None = None


# --- input builders -------------------------------------------------------------------------

def _gen(batch: int, seq: int) -> torch.Generator:
    return torch.Generator().manual_seed(1000 * batch + seq)


def padding_mask(batch: int, seq: int) -> torch.Tensor:
    """An attention mask whose second row is padded at its last three positions (as a
    tokenizer's right padding makes it)."""
    mask = torch.ones(batch, seq, dtype=torch.long)
    if batch > 1:
        mask[1, -3:] = 0
    return mask


def text(batch: int, seq: int, *, mask: bool = True, token_types: bool = False,
         vocab: int = VOCAB) -> Inputs:
    """``input_ids`` (and ``attention_mask``, ``token_type_ids``): batch and seq dynamic."""
    g = _gen(batch, seq)
    kwargs = {"input_ids": torch.randint(3, vocab, (batch, seq), generator=g)}
    if mask:
        kwargs["attention_mask"] = padding_mask(batch, seq)
    if token_types:
        kwargs["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.long)
    return Inputs(kwargs=kwargs, auto_dims={k: (0, 1) for k in kwargs})


def seq2seq(batch: int, seq: int, *, vocab: int = VOCAB) -> Inputs:
    """Encoder ``input_ids``/``attention_mask`` and ``decoder_input_ids`` (seq - 2 long)."""
    g = _gen(batch, seq)
    kwargs = {
        "input_ids": torch.randint(3, vocab, (batch, seq), generator=g),
        "attention_mask": padding_mask(batch, seq),
        "decoder_input_ids": torch.randint(3, vocab, (batch, seq - 2), generator=g),
    }
    return Inputs(kwargs=kwargs, auto_dims={k: (0, 1) for k in kwargs})


def pixels(batch: int, seq: int, *, size: int = IMAGE, channels: int = 3) -> Inputs:
    """``pixel_values``: batch dynamic (images keep their size)."""
    x = torch.randn(batch, channels, size, size, generator=_gen(batch, seq))
    return Inputs(kwargs={"pixel_values": x}, auto_dims={"pixel_values": (0,)})


def audio(batch: int, seq: int) -> Inputs:
    """``input_values`` (raw samples): batch dynamic."""
    x = torch.randn(batch, AUDIO, generator=_gen(batch, seq))
    return Inputs(kwargs={"input_values": x}, auto_dims={"input_values": (0,)})


# --- config helpers -------------------------------------------------------------------------

def bert_like(**extra) -> dict:
    """The BERT-family size keywords: hidden 64, 2 layers, 4 heads."""
    return dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                intermediate_size=2 * HIDDEN, vocab_size=VOCAB, max_position_embeddings=64,
                **extra)


def llama_like(**extra) -> dict:
    """The Llama-family size keywords (grouped-query attention, no cache output)."""
    return dict(hidden_size=HIDDEN, num_hidden_layers=2, num_attention_heads=4,
                num_key_value_heads=2, intermediate_size=2 * HIDDEN, vocab_size=VOCAB,
                max_position_embeddings=64, use_cache=False, **extra)


def model(class_name: str, config_name: str, **config) -> Callable[[], torch.nn.Module]:
    """A builder of ``transformers.<class_name>(transformers.<config_name>(**config))``."""

    def build():
        import transformers

        cfg = getattr(transformers, config_name)(**config)
        return getattr(transformers, class_name)(cfg).eval()

    return build


def hf(name: str, group: str, class_name: str, config_name: str, inputs, **config) -> Case:
    return Case(name, group, model(class_name, config_name, **config), inputs=inputs)


def with_(fn, **kw):
    """``fn`` with keyword arguments bound: an input builder variant."""
    return lambda batch, seq: fn(batch, seq, **kw)
