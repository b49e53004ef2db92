"""einops through the builtin-method table: its pattern parsing calls ``set`` methods unbound
(``set.symmetric_difference(left, right)``), ``str`` and ``dict`` methods, and caches recipes
with ``functools.lru_cache``. Every einops entry point exports and equals eager bit for bit,
side by side with torch.export (static shapes and a dynamic batch)."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact

einops = pytest.importorskip("einops")
from einops.layers.torch import EinMix, Rearrange, Reduce  # noqa: E402


class Functions(torch.nn.Module):
    """Every einops function, as a model's forward() calls them."""

    def forward(self, x, y):
        a = einops.rearrange(x, "b c (h p) -> b h (c p)", p=2)
        b = einops.repeat(y, "b c -> b c r", r=3)
        c = einops.reduce(x, "b c h -> b c", "mean")
        d = einops.reduce(x, "b c (h2 p) -> b c h2", "max", p=2)
        packed, shapes = einops.pack([x, b], "b c *")
        u1, u2 = einops.unpack(packed, shapes, "b c *")
        e = einops.einsum(x, x, "b c h, b d h -> b c d")
        f = einops.rearrange([y, y], "n b c -> b (n c)")
        return a, b, c, d, packed, u1, u2, e, f


class Layers(torch.nn.Module):
    """einops.layers.torch: Rearrange / Reduce modules and EinMix (a weight of its own)."""

    def __init__(self):
        super().__init__()
        self.patch = Rearrange("b c (h p) -> b h (c p)", p=2)
        self.pool = Reduce("b h d -> b d", "mean")
        self.mix = EinMix("b h d -> b h e", weight_shape="d e", d=6, e=5)

    def forward(self, x):
        patches = self.patch(x)
        return self.pool(patches), self.mix(patches)


def _inputs(batch=2):
    torch.manual_seed(0)
    return torch.randn(batch, 3, 4), torch.randn(batch, 3)


def _side_by_side(model, args, dynamic_shapes=None):
    # eager first, as a model runs before it is exported: einops' first call in a process
    # fills its global backend registry (a write outside forward() that export refuses)
    model(*args)
    ours = unbroken.export(model, args, dynamic_shapes=dynamic_shapes)
    peer = torch.export.export(model, args, dynamic_shapes=dynamic_shapes)
    for program in (ours, peer):
        assert_bit_exact(program.module()(*args), model(*args))
    return ours


def test_einops_functions_export_bit_exact():
    _side_by_side(Functions(), _inputs())


def test_einops_layers_export_bit_exact():
    _side_by_side(Layers(), _inputs()[:1])


def test_einops_functions_with_a_dynamic_batch():
    batch = Dim("batch", min=2, max=64)
    program = _side_by_side(Functions(), _inputs(), ({0: batch}, {0: batch}))
    bigger = _inputs(batch=5)
    assert_bit_exact(program.module()(*bigger), Functions()(*bigger))
