"""The per-trace cache of functional ops' meta outputs (unbroken.ir.meta_cache): a hit gives
the program and the guards a trace without the cache gives, and what it cannot state exactly
is never cached."""
from __future__ import annotations

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.models.realistic import REALISTIC
from tests.models.zoo import ZOO
from unbroken.ir.meta_cache import MetaCache
from unbroken.symbolic.env import ShapeEnvironment


class Blocks(torch.nn.Module):
    """Four identical blocks: every op after the first block repeats one on equal metadata."""

    def __init__(self):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.LayerNorm(16), torch.nn.Linear(16, 16), torch.nn.GELU())
            for _ in range(4))

    def forward(self, x):
        for block in self.blocks:
            h = block(x)  # linear on 3-d input: a view of its addmm in the meta decomposition
            h.mul_(0.5)   # written in place: fresh memory in eager, and in the cache's rebuild
            x = x + h
        return x.softmax(-1)


def _without_cache(monkeypatch):
    monkeypatch.setattr(MetaCache, "get", lambda self, key: None)


def _summary(ep):
    guards = [str(c) for c in ep.range_constraints.items()]
    return ep.graph_module.code, guards


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_hits_give_the_program_and_ranges_of_a_trace_without_cache(dynamic, monkeypatch):
    model, x = Blocks().eval(), torch.randn(3, 5, 16)
    spec = ({0: Dim.AUTO, 1: Dim.AUTO},) if dynamic else None
    hits = []
    real_get = MetaCache.get

    def counting_get(self, key):
        out = real_get(self, key)
        hits.append(out is not None)
        return out

    monkeypatch.setattr(MetaCache, "get", counting_get)
    cached = unbroken.export(model, (x,), dynamic_shapes=spec)
    assert sum(hits) >= 9  # blocks 2-4: layer_norm, linear, gelu and add each
    _without_cache(monkeypatch)
    plain = unbroken.export(model, (x,), dynamic_shapes=spec)
    assert _summary(cached) == _summary(plain)
    other = torch.randn(2, 7, 16) if dynamic else torch.randn(3, 5, 16)
    torch.testing.assert_close(cached.module()(other), model(other), rtol=0, atol=0)


@pytest.mark.parametrize("name", ["gpt2_block", "transformer_block"])
def test_realistic_models_same_graph_and_guards_with_and_without_cache(name, monkeypatch):
    entry = REALISTIC.get(name) or ZOO[name]
    model, args = entry.make()
    spec = ({0: Dim.AUTO, 1: Dim.AUTO},)
    cached = unbroken.export(model, args, dynamic_shapes=spec)
    _without_cache(monkeypatch)
    plain = unbroken.export(model, args, dynamic_shapes=spec)
    assert _summary(cached) == _summary(plain)


def test_key_states_values_exactly():
    cache = MetaCache()
    op = torch.ops.aten.add.Tensor
    t = torch.empty(2, 3, device="meta")
    alphas = (1, True, 1.0, 0.0, -0.0)
    keys = {cache.key("kernel", op, (t, t), {"alpha": alpha}) for alpha in alphas}
    assert len(keys) == 5
    assert cache.key("kernel", op, (t, t.t()), {}) != cache.key("kernel", op, (t, t), {})
    assert cache.key("kernel", op, (t, t), {}) != cache.key("composite", op, (t, t), {})


def test_key_refuses_what_it_cannot_state():
    cache = MetaCache()
    op = torch.ops.aten.add.Tensor
    assert cache.key("kernel", op, (torch.ones(2), torch.ones(2)), {}) is None  # values
    assert cache.key("kernel", op, (torch.empty(2, device="meta"), object()), {}) is None


def test_offset_and_grad_outputs_are_not_stored():
    cache = MetaCache()
    base = torch.empty(4, 4, device="meta")
    for out in (base[1:], torch.empty(2, device="meta", requires_grad=True)):
        cache.put(("k", id(out)), out, None)
        assert cache.get(("k", id(out))) is None
    cache.put(("k",), (base, 3), None)
    got, number = cache.get(("k",))
    assert got is not base and got.shape == base.shape and got.stride() == base.stride()
    assert number == 3


def test_environment_changes_start_over():
    env = ShapeEnvironment()
    s = env.create_symbol("", 4, source="x.shape[0]")
    cache = MetaCache(env)
    t = torch.empty_strided([env.symint(s), 3], [3, 1], device="meta")
    key = cache.key("kernel", torch.ops.aten.relu.default, (t,), {})
    cache.put(key, torch.empty_strided([env.symint(s), 3], [3, 1], device="meta"),
              cache.symbol_count())
    assert cache.get(key).shape[0].node.expr == s
    env.create_unbacked_symbol("size")  # a new symbol: what kernels decide may change
    assert cache.key("kernel", torch.ops.aten.relu.default, (t,), {}) != key


def test_outputs_made_with_new_symbols_are_not_stored():
    env = ShapeEnvironment()
    cache = MetaCache(env)
    before = cache.symbol_count()
    u = env.create_unbacked_symbol("size")
    cache.put(("nonzero",), torch.empty_strided([env.symint(u), 1], [1, 1], device="meta"), before)
    assert cache.get(("nonzero",)) is None

