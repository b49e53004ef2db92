"""Dim.AUTO on real Hugging Face text models (tests/models/hf_text.py): exported at batch 2,
seq 12 with every input dim Dim.AUTO, the program must run at batch 3, seq 9 and match eager,
with no dim pinned (issue 8: seq was silently specialized on almost every text model)."""
from __future__ import annotations

import warnings

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.models.hf_text import TEXT_MODELS, available

pytestmark = [pytest.mark.slow,
              pytest.mark.skipif(not available(), reason="transformers is not installed")]


def _export(entry):
    model = entry.build()
    example = entry.inputs(2, 12)
    spec = {name: {0: Dim.AUTO, 1: Dim.AUTO} for name in example}
    with warnings.catch_warnings():
        warnings.simplefilter("error", unbroken.SpecializationWarning)
        return model, unbroken.export(model, (), example, dynamic_shapes=spec)


@pytest.mark.parametrize("entry", TEXT_MODELS, ids=[e.name for e in TEXT_MODELS])
def test_auto_keeps_batch_and_sequence_dynamic(entry):
    model, ep = _export(entry)
    assert not ep.specializations
    resized = entry.inputs(3, 9, seed=1)
    torch.testing.assert_close(ep.module()(**resized)[0], model(**resized)[0])


def test_bert_mask_relation_is_checked_at_run_time():
    entry = next(e for e in TEXT_MODELS if e.name == "bert")
    _, ep = _export(entry)
    inputs = entry.inputs(3, 9)
    inputs["attention_mask"] = torch.ones(3, 7, dtype=torch.long)
    with pytest.raises(unbroken.InputMismatchError, match="attention_mask.shape.1. = 7"):
        ep.module()(**inputs)


def test_bert_batch_one_with_min_1():
    # the most common inference call: the program traced at batch 2 serves batch 1
    entry = next(e for e in TEXT_MODELS if e.name == "bert")
    model = entry.build()
    example = entry.inputs(2, 12)
    batch = Dim("batch", min=1, max=32)
    spec = {name: {0: batch, 1: Dim.AUTO} for name in example}
    ep = unbroken.export(model, (), example, dynamic_shapes=spec)
    one = entry.inputs(1, 9, seed=2)
    torch.testing.assert_close(ep.module()(**one)[0], model(**one)[0])
