"""Ops whose meta kernel is written in Python and calls a composite that ``ir.composites``
keeps whole (``_euclidean_dist``, which ``torch.cdist`` reaches for more than 25 rows, calls
``matmul``; ``_safe_softmax`` calls ``softmax``): the composite inside the meta computation is
not an op of the program, so it is computed, not recorded (before: UB117 "a tensor was created
on the meta device" for cdist, UB120 "trying to pop from empty mode stack" for
_safe_softmax). Every export is compared bit for bit with eager."""
from __future__ import annotations

import importlib.util

import pytest
import torch

import unbroken


def _exact(model, *args):
    ep = unbroken.export(model, args)
    expected, got = model(*args), ep.module()(*args)
    for e, g in zip(expected, got, strict=True):
        assert torch.equal(e, g), (e, g)
    return ep


class _Distances(torch.nn.Module):
    def forward(self, x, y):
        return (torch.cdist(x, y),                       # mm path: _euclidean_dist
                torch.cdist(x[:3], y[:4]),               # few rows: _cdist_forward
                torch.cdist(x, y, p=1.0),
                torch.cdist(x, y, compute_mode="donot_use_mm_for_euclid_dist"),
                torch.cdist(x[None], y[None].expand(2, -1, -1)),  # batched
                torch.ops.aten._safe_softmax(x, -1))


def test_python_meta_kernels_calling_kept_composites():
    ep = _exact(_Distances(), torch.randn(30, 5), torch.randn(40, 5))
    targets = {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}
    assert "aten._euclidean_dist.default" in targets
    assert "aten.matmul.default" not in targets  # computed for the meta output only


class _Codebook(torch.nn.Module):
    """A vector quantizer's nearest code (diffusers' VectorQuantizer)."""

    def __init__(self):
        super().__init__()
        self.embedding = torch.nn.Embedding(32, 4)

    def forward(self, z):
        indices = torch.argmin(torch.cdist(z, self.embedding.weight), dim=1)
        return indices, self.embedding(indices)


def test_nearest_codebook_entry():
    _exact(_Codebook(), torch.randn(50, 4))


@pytest.mark.slow
@pytest.mark.skipif(importlib.util.find_spec("diffusers") is None,
                    reason="diffusers not installed")
def test_diffusers_vector_quantizer():
    from diffusers.models.autoencoders.vae import VectorQuantizer

    torch.manual_seed(0)
    model = VectorQuantizer(32, 4, beta=0.25, sane_index_shape=True).eval()
    z = torch.randn(2, 4, 8, 8)
    ep = unbroken.export(model, (z,))
    expected, got = model(z), ep.module()(z)
    assert torch.equal(expected[0], got[0]) and torch.equal(expected[1], got[1])
    assert torch.equal(expected[2][2], got[2][2])
