"""Real Hugging Face ``transformers`` models (tiny random configs, no download) export and
compute what eager computes: a representative slice of ``make corpus``, run on every change.

The cases (model classes, configs, inputs) are the corpus benchmark's own
(``benchmarks/corpus_models.py``), so a case fixed for the benchmark is tested as it is measured.
"""
from __future__ import annotations

import sys
from pathlib import Path

import pytest
import torch

import unbroken

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "benchmarks"))

from corpus_cases import BATCH, SEQ  # noqa: E402
from corpus_compare import compare  # noqa: E402
from corpus_registry import all_cases  # noqa: E402

CASES = all_cases(("common", "harder"))

# One or two of each family, and every case a fix of issue 7 made export (the comment says
# which construct it needed).
SLICE = [
    "bert", "gpt2", "llama", "t5", "vit", "wav2vec2",
    "bloom",    # custom autograd.Function (GeLUFunction)
    "falcon",   # list index: fused_qkv[..., [-2], :]
    "codegen",  # nn.Softmax(dim=-1) made in forward
    "mamba",    # SiLUActivation() made in forward
    "wavlm",    # vars(module), importlib.metadata probes (as wav2vec2)
    "swin",     # AdaptiveAvgPool1d: its kernel restrides its result with as_strided_
]


def _export_and_compare(name: str, *, grad: bool):
    case = CASES[name]
    example = case.inputs(BATCH, SEQ)
    torch.manual_seed(0)
    model = case.build()
    with torch.no_grad():
        expected = model(*example.args, **example.kwargs)
    with torch.set_grad_enabled(grad):
        ep = unbroken.export(model, example.args, example.kwargs)
    with torch.no_grad():
        got = ep.module()(*example.args, **example.kwargs)
    return compare(expected, got)


@pytest.mark.slow
@pytest.mark.parametrize("name", SLICE)
def test_real_model_matches_eager(name):
    match = _export_and_compare(name, grad=True)
    assert match.ok, match.detail
