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
from tests.exactness import assert_bit_exact
from tests.state_leak import ModelSnapshot

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


# The 12 models of SLICE are also in the slice every Python x torch cell runs (ci/cells.txt).
@pytest.mark.slow
@pytest.mark.matrix
@pytest.mark.parametrize("name", SLICE)
def test_real_model_matches_eager(name):
    match = _export_and_compare(name, grad=True)
    assert match.ok, match.detail


# Cases issue 7 fixed after the first corpus run (the comment says which construct): the
# program equals eager bit for bit and the caller's model is left exactly as it was.
FIXED = [
    "funnel",          # self.pooling_mult = 1, then *= 2, on a submodule
    "detr",            # setattr() on the ModelOutput it builds
    "rwkv",            # self.layers_are_rescaled = ..., weights rescaled in place under no_grad
    "big_bird",        # NumPy on constants: np.array(plan) // block, np.zeros, np.stack
    "llama_kv_cache",  # a DynamicCache output (transformers' cache pytrees registered)
    "llava",           # output-capturing hooks registered in forward; an f-string of a tensor
]                      # built as a check's message


@pytest.mark.slow
@pytest.mark.parametrize("name", FIXED)
def test_fixed_case_is_bit_exact_and_leaves_the_model(name):
    case = CASES[name]
    example = case.inputs(BATCH, SEQ)
    torch.manual_seed(0)
    model = case.build()
    before = ModelSnapshot.of(model)
    ep = unbroken.export(model, example.args, example.kwargs)
    assert before.diff(ModelSnapshot.of(model)) == []
    with torch.no_grad():
        got = ep.module()(*example.args, **example.kwargs)
        want = model(*example.args, **example.kwargs)  # eager's first call, from the same state
    assert_bit_exact(got, want)


@pytest.mark.slow
def test_llama_decode_step_with_a_cache_input():
    """A DynamicCache input (past_key_values) is rebuilt inside the trace by transformers' own
    unflatten function; the step's program equals eager and leaves the caller's cache as is."""
    import copy

    from transformers.exporters.exporter_dynamo import register_cache_pytrees_for_model

    case = CASES["llama_kv_cache"]
    torch.manual_seed(0)
    model = case.build()
    register_cache_pytrees_for_model(model)
    prompt = case.inputs(BATCH, SEQ).kwargs
    with torch.no_grad():
        cache = model(**prompt).past_key_values
    step = {"input_ids": torch.randint(0, 100, (BATCH, 1)), "past_key_values": cache,
            "attention_mask": torch.ones(BATCH, SEQ + 1, dtype=torch.long)}
    keys = [layer.keys.clone() for layer in cache.layers]
    ep = unbroken.export(model, (), step)
    assert all(torch.equal(layer.keys, k) for layer, k in zip(cache.layers, keys, strict=True))
    with torch.no_grad():
        got = ep.module()(**copy.deepcopy(step))
        want = model(**copy.deepcopy(step))
    assert_bit_exact(got, want)
