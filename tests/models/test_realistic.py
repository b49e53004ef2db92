"""Realistic architectures (tests/models/realistic.py) export and compute what eager computes.

Oracle: the eager model on the example inputs and on fresh random inputs of the same shapes.
Train-mode models: dropout (random) is checked for shape and randomness only; batch norm in
train mode must update its running statistics like eager over two calls.
Known failures are marked ``xfail(strict=True)`` with the bug they hit, so a fix shows up as
an XPASS that fails the suite until the mark is removed.
"""
from __future__ import annotations

import copy
import functools

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact, assert_matches_eager
from tests.models.realistic import REALISTIC

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

FRESH_SEEDS = (1, 2)

XFAIL: dict[str, str] = {
}


def _param(name: str, *extra_marks):
    marks = list(extra_marks)
    if REALISTIC[name].slow:
        marks.append(pytest.mark.slow)
    if name in XFAIL:
        marks.append(pytest.mark.xfail(strict=True, reason=XFAIL[name]))
    return pytest.param(name, marks=marks, id=name)


DETERMINISTIC = [_param(n) for n, e in REALISTIC.items() if not e.random and not e.train]
TRAIN = [_param(n) for n, e in REALISTIC.items() if e.train and not e.random]
RANDOM = [_param(n) for n, e in REALISTIC.items() if e.random]
ALL = [_param(n) for n in REALISTIC]


@functools.lru_cache(maxsize=None)
def exported(name: str):
    """(eager model, example args, ExportedProgram); eval models only (export is cached)."""
    model, args = REALISTIC[name].make()
    return model, args, unbroken.export(model, args)


def test_registry_is_consistent():
    assert len(REALISTIC) >= 20
    for name, entry in REALISTIC.items():
        assert entry.name == name
        _, args = entry.make()
        fresh = entry.fresh_args(1)
        assert [(a.shape, a.dtype) for a in fresh] == [(a.shape, a.dtype) for a in args]


@pytest.mark.parametrize("name", ALL)
def test_exports_and_verifies(name):
    entry = REALISTIC[name]
    if entry.train:  # do not cache: export must not depend on the eager model's later state
        model, args = entry.make()
        ep = unbroken.export(model, args)
    else:
        _, _, ep = exported(name)
    ep.validate()


@pytest.mark.parametrize("name", DETERMINISTIC)
def test_matches_eager_on_example_inputs(name):
    model, args, ep = exported(name)
    assert_matches_eager(ep.module(), model, args, fast_path=REALISTIC[name].fast_path)


@pytest.mark.parametrize("name", DETERMINISTIC)
@pytest.mark.parametrize("seed", FRESH_SEEDS)
def test_matches_eager_on_fresh_inputs(name, seed):
    model, _, ep = exported(name)
    fresh = REALISTIC[name].fresh_args(seed)
    assert_matches_eager(ep.module(), model, fresh, fast_path=REALISTIC[name].fast_path)


@pytest.mark.parametrize("name", RANDOM)
def test_random_model_exports_and_runs(name):
    """Dropout in train mode: the output has eager's shape and is random (two calls differ)."""
    entry = REALISTIC[name]
    model, args = entry.make()
    ep = unbroken.export(model, args)
    module = ep.module()
    with torch.no_grad():
        first, second, expected = module(*args), module(*args), model(*args)
    assert first.shape == expected.shape and first.dtype == expected.dtype
    assert not torch.equal(first, second), "dropout in train mode was captured as deterministic"
    model.eval()
    with torch.no_grad():
        assert not torch.allclose(first, model(*args)), "train-mode dropout behaves like eval"


@pytest.mark.parametrize("name", TRAIN)
def test_train_mode_matches_eager_and_updates_buffers(name):
    """Batch norm in train mode: outputs and running statistics match eager over two calls."""
    entry = REALISTIC[name]
    model, args = entry.make()
    eager = copy.deepcopy(model)
    before = {k: v.clone() for k, v in model.named_buffers()}
    ep = unbroken.export(model, args)
    for k, v in model.named_buffers():  # export itself must not run the model eagerly
        assert torch.equal(v, before[k]), f"export changed buffer {k}"
    module = ep.module()
    with torch.no_grad():
        for call_args in (args, entry.fresh_args(1)):
            assert_bit_exact(module(*call_args), eager(*call_args))
    got = dict(module.named_buffers())
    want = dict(eager.named_buffers())
    assert set(got) == set(want)
    for k in want:
        assert not torch.equal(want[k], before[k]), f"eager did not update {k}?"
        assert torch.equal(got[k], want[k]), f"buffer {k} after two calls is not eager's"


# -- dynamic shapes on a few realistic models ----------------------------------------------------

def _dynamic_cases():
    from torch.export import Dim

    batch = Dim("batch", min=2, max=64)
    seq = Dim("seq", min=2, max=32)
    return {
        # name: (dynamic_shapes, fresh input shapes that the spec admits)
        "tiny_resnet": (({0: batch, 2: 8 * Dim("h", min=2, max=16),
                          3: 8 * Dim("w", min=2, max=16)},), [(3, 3, 40, 48)]),
        "bert_embeddings": (({0: batch, 1: seq}, {0: batch, 1: seq}), [(3, 7), (3, 7)]),
        "vit_patch_embed": (({0: batch},), [(5, 3, 16, 16)]),
        "mobilenet_v2_block": (({0: batch, 2: Dim("h2", min=4, max=32),
                                 3: Dim("w2", min=4, max=32)},), [(3, 8, 12, 10)]),
        "rotary_attention": (({0: batch, 1: seq},), [(3, 9, 32)]),
        "tiny_unet": (({2: 4 * Dim("h", min=2, max=16), 3: 4 * Dim("w", min=2, max=16)},),
                      [(1, 3, 24, 20)]),
    }


DYNAMIC_XFAIL: dict[str, str] = {}


@pytest.mark.parametrize("name", [
    pytest.param(n, id=n, marks=[pytest.mark.xfail(strict=True, reason=DYNAMIC_XFAIL[n])]
                 if n in DYNAMIC_XFAIL else [])
    for n in ("tiny_resnet", "bert_embeddings", "vit_patch_embed", "mobilenet_v2_block",
              "rotary_attention", "tiny_unet")])
def test_dynamic_shapes_match_eager_at_new_sizes(name):
    dynamic_shapes, shapes = _dynamic_cases()[name]
    model, args = REALISTIC[name].make()
    ep = unbroken.export(model, args, dynamic_shapes=dynamic_shapes)
    g = torch.Generator().manual_seed(7)
    fresh = tuple(torch.randn(*s, generator=g) if a.is_floating_point()
                  else torch.randint(0, 2, s, generator=g) for a, s in zip(args, shapes))
    assert_matches_eager(ep.module(), model, fresh, fast_path=REALISTIC[name].fast_path)
