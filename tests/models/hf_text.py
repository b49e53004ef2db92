"""Tiny Hugging Face text models for the dynamic-shape tests and ``benchmarks/dynamic_text.py``.

Each entry builds a randomly initialised model (2 layers, hidden 64) and its inputs for a
batch and a sequence length: ``input_ids`` and ``attention_mask`` (and ``token_type_ids`` for
BERT-like models). Decoders are built with ``use_cache=False``: the export is of one forward.
transformers is optional: ``available()`` says whether it imports.
"""
from __future__ import annotations

import importlib.util
from collections.abc import Callable
from dataclasses import dataclass

import torch

__all__ = ["TextModel", "TEXT_MODELS", "available"]


def available() -> bool:
    """Whether transformers is installed (the dev extras install it)."""
    return importlib.util.find_spec("transformers") is not None


@dataclass(frozen=True, slots=True)
class TextModel:
    """name: short id; build: () -> eval-mode model; token_types: also pass token_type_ids."""

    name: str
    build: Callable[[], torch.nn.Module]
    token_types: bool = False

    def inputs(self, batch: int, seq: int, seed: int = 0) -> dict:
        generator = torch.Generator().manual_seed(seed)
        inputs = {"input_ids": torch.randint(0, 100, (batch, seq), generator=generator),
                  "attention_mask": torch.ones(batch, seq, dtype=torch.long)}
        if self.token_types:
            inputs["token_type_ids"] = torch.zeros(batch, seq, dtype=torch.long)
        return inputs


_SMALL = dict(vocab_size=100, hidden_size=64, num_hidden_layers=2, num_attention_heads=4,
              intermediate_size=128)


def _model(config_name: str, model_name: str, **config) -> Callable[[], torch.nn.Module]:
    def build():
        import transformers

        torch.manual_seed(0)
        cfg = getattr(transformers, config_name)(**config)
        return getattr(transformers, model_name)(cfg).eval()
    return build


TEXT_MODELS = [
    TextModel("bert", _model("BertConfig", "BertModel", **_SMALL), token_types=True),
    TextModel("roberta", _model("RobertaConfig", "RobertaModel", **_SMALL)),
    TextModel("distilbert", _model("DistilBertConfig", "DistilBertModel", vocab_size=100, dim=64,
                                   n_layers=2, n_heads=4, hidden_dim=128)),
    TextModel("gpt2", _model("GPT2Config", "GPT2Model", vocab_size=100, n_embd=64, n_layer=2,
                             n_head=4, use_cache=False, bos_token_id=0, eos_token_id=0)),
    TextModel("llama", _model("LlamaConfig", "LlamaModel", num_key_value_heads=2, use_cache=False,
                              **_SMALL)),
    TextModel("qwen2", _model("Qwen2Config", "Qwen2Model", num_key_value_heads=2, use_cache=False,
                              **_SMALL)),
    TextModel("t5_encoder", _model("T5Config", "T5EncoderModel", vocab_size=100, d_model=64,
                                   d_kv=16, d_ff=128, num_layers=2, num_heads=4)),
]
