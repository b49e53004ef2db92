"""Feature sweep: the newest features on realistic models (tests/models/{zoo,realistic}.py).

Per model: (1) export, save/load round trip, ``loaded.module()`` == eager on fresh inputs;
(2) ``run_decompositions()`` (and with ``torch.export.default_decompositions()``) == eager, and
every call_function target is core ATen; (3) a dynamic batch dim (pasting the suggested fix
when export refuses) == eager at several admitted sizes; (4) ``Dim.AUTO`` on every dim exports
and matches eager, or refuses with a clear ``ConstraintViolationError``.
Then hand-written cases: torch.cond, .item() + torch._check, find_graph_breaks.

Oracle: eager (and ``torch.export.export(strict=True)`` as the peer when deciding whether a
refusal is a bug). Bugs this sweep found are kept as regression tests (each with its minimal
repro).
"""
from __future__ import annotations

import functools
import inspect
import io
import operator
import re

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import unbroken
from tests.models.realistic import REALISTIC
from tests.models.zoo import ZOO

ENTRIES = {**ZOO, **REALISTIC}
MODELS = ["mlp", "cnn", "transformer_block", "lstm", "tiny_resnet", "gpt2_block",
          "bert_embeddings", "rotary_attention", "moe_topk", "misc_routing",
          "kv_cache_attention", "super_resolution"]
# Ops torch's own run_decompositions() keeps although their OpOverload lacks Tag.core (they
# are in the core ATen IR list): not an unbroken bug.
CORE_EXTRA = {torch.ops.aten.linalg_vector_norm.default}


def _roundtrip(ep):
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    return unbroken.load(buffer)


def _params(model) -> list[str]:
    return list(inspect.signature(model.forward).parameters)


def _fresh_model(name):
    return ENTRIES[name].make()[0]


def _check(program, name, args):
    """program.module()(*args) == a fresh eager model on args (fresh: buffers like a KV cache
    start from the same state on both sides)."""
    expected = _fresh_model(name)(*args)
    torch.testing.assert_close(program.module()(*args), expected)


@functools.lru_cache(maxsize=None)
def _exported(name):
    model, args = ENTRIES[name].make()
    return unbroken.export(model, args)


def _paste(error) -> dict:
    match = re.search(r"(from torch.export import Dim\n.*?\n\})", error.details, re.S)
    assert match, f"no pasteable dynamic_shapes in the message:\n{error.render()}"
    scope: dict = {}
    exec(match.group(1), scope)  # what a user does with the message
    return scope["dynamic_shapes"]


def _batched(name, size: int) -> tuple:
    """Fresh inputs with dim 0 of every tensor set to ``size`` (rows from several seeds)."""
    pieces = [ENTRIES[name].fresh_args(seed) for seed in range(size)]
    out = []
    for i, first in enumerate(pieces[0]):
        if isinstance(first, torch.Tensor) and first.dim() > 0:
            out.append(torch.cat([p[i] for p in pieces])[:size])
        else:
            out.append(first)
    return tuple(out)


# ---------------------------------------------------------------- (1) save / load round trip

@pytest.mark.parametrize("name", MODELS)
def test_save_load_round_trip_matches_eager(name):
    loaded = _roundtrip(_exported(name))
    for seed in (1, 2):
        _check(loaded, name, ENTRIES[name].fresh_args(seed))


# ---------------------------------------------------------------- (2) core ATen decompositions

def _non_core(program) -> set:
    return {str(n.target) for n in program.graph.nodes if n.op == "call_function"
            and n.target is not operator.getitem and n.target not in CORE_EXTRA
            and not (isinstance(n.target, torch._ops.OpOverload)
                     and torch.Tag.core in n.target.tags)}


@pytest.mark.parametrize("name", MODELS)
def test_run_decompositions_is_core_aten_and_matches_eager(name):
    decomposed = _exported(name).run_decompositions()
    assert _non_core(decomposed) == set()
    _check(decomposed, name, ENTRIES[name].fresh_args(3))



@pytest.mark.parametrize("name", [
    pytest.param("gpt2_block"),
    "tiny_resnet",
    pytest.param("lstm"),
    "kv_cache_attention"])
def test_default_decompositions_table_then_save_load(name):
    decomposed = _exported(name).run_decompositions(torch.export.default_decompositions())
    _check(_roundtrip(decomposed), name, ENTRIES[name].fresh_args(4))
    assert _non_core(decomposed) == set()


class _MaskedFill(nn.Module):
    def forward(self, x, mask):
        return x.masked_fill(mask, float("-inf"))


def test_default_decompositions_table_masked_fill_minimal():
    args = (torch.randn(2, 3), torch.tensor([[True, False, True]] * 2))
    ep = unbroken.export(_MaskedFill(), args)
    assert _non_core(ep.run_decompositions()) == set()  # passes
    assert _non_core(ep.run_decompositions(torch.export.default_decompositions())) == set()


def test_default_decompositions_table_lstm_minimal():
    ep = unbroken.export(nn.LSTM(2, 2), (torch.randn(3, 1, 2),))
    assert _non_core(ep.run_decompositions(torch.export.default_decompositions())) == set()


# ---------------------------------------------------------------- (3) dynamic batch

def _batch_range(spec, param):
    """(min, max) of dim 0 of ``param`` under a pasted spec; None when it is static."""
    entry = spec[param]
    if entry is None:
        return None
    dim = entry.get(0) if isinstance(entry, dict) else entry[0]
    if dim is None or isinstance(dim, int):
        return None
    return max(dim.min, 2), min(dim.max, 16)


@pytest.mark.parametrize("name", MODELS)
def test_dynamic_batch_or_pasted_fix_matches_eager(name):
    model, args = ENTRIES[name].make()
    params = _params(model)
    batch = Dim("batch", min=2, max=16)
    spec = {p: ({0: batch} if isinstance(a, torch.Tensor) and a.dim() > 0 else None)
            for p, a in zip(params, args)}
    try:
        ep = unbroken.export(model, args, dynamic_shapes=spec)
    except unbroken.ConstraintViolationError as error:
        spec = _paste(error)
        ep = unbroken.export(model, args, dynamic_shapes=spec)  # the fix must export
    first = next(p for p, a in zip(params, args) if isinstance(a, torch.Tensor))
    bounds = _batch_range(spec, first)
    sizes = [args[0].shape[0]] if bounds is None else [
        s for s in (bounds[0], 5, bounds[1]) if bounds[0] <= s <= bounds[1]]
    for size in sizes:
        _check(ep, name, _batched(name, size))


def test_kv_cache_batch_fix_is_static_like_torch():
    """The cache holds max_batch=2 rows: the only valid batch is 2 (torch agrees)."""
    model, args = REALISTIC["kv_cache_attention"].make()
    with pytest.raises(unbroken.ConstraintViolationError) as info:
        unbroken.export(model, args, dynamic_shapes={"x": {0: Dim("batch", min=2, max=16)}})
    assert "x.shape[0] == 2" in info.value.details
    assert _paste(info.value) == {"x": None}


# ---------------------------------------------------------------- (4) Dim.AUTO everywhere

@pytest.mark.parametrize("name", MODELS)
def test_auto_everywhere_exports_or_refuses_clearly(name):
    model, args = ENTRIES[name].make()
    spec = {p: ({i: Dim.AUTO for i in range(a.dim())} if isinstance(a, torch.Tensor) else None)
            for p, a in zip(_params(model), args)}
    try:
        ep = unbroken.export(model, args, dynamic_shapes=spec)
    except unbroken.ConstraintViolationError as error:
        assert error.code == "UB003"
        assert "Guards not implied by the spec" in error.details
        return
    _check(ep, name, args)
    _check(ep, name, ENTRIES[name].fresh_args(5))


class _Add(nn.Module):
    def forward(self, x, y):
        return x + y


def test_auto_adopts_equalities_for_2d_add():
    auto = {0: Dim.AUTO, 1: Dim.AUTO}
    args = (torch.randn(3, 4), torch.randn(3, 4))
    ep = unbroken.export(_Add(), args, dynamic_shapes={"x": auto, "y": auto})
    x, y = torch.randn(5, 7), torch.randn(5, 7)
    torch.testing.assert_close(ep.module()(x, y), x + y)


class _View(nn.Module):
    def forward(self, x):
        return x.view(x.shape[0], 2, 4)


def test_auto_adopts_specialization_implied_guards():
    ep = unbroken.export(_View(), (torch.randn(3, 8),),
                         dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO}})
    x = torch.randn(6, 8)
    torch.testing.assert_close(ep.module()(x), x.view(6, 2, 4))


def test_auto_on_lstm_model():
    model, args = ZOO["lstm"].make()
    ep = unbroken.export(model, args, dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO,
                                                            2: Dim.AUTO}})
    x = torch.randn(6, 5, 8)
    torch.testing.assert_close(ep.module()(x), model(x))


# ---------------------------------------------------------------- embedding bag

class _Bag(nn.Module):
    def __init__(self):
        super().__init__()
        self.bag = nn.EmbeddingBag(10, 4, mode="mean")

    def forward(self, ids, offsets):
        return self.bag(ids, offsets)


def test_embedding_bag_runs_with_grad_enabled():
    args = (torch.tensor([1, 2, 3, 4]), torch.tensor([0, 2]))
    model = _Bag()
    ep = unbroken.export(model, args)
    torch.testing.assert_close(ep.module()(*args), model(*args))


# ---------------------------------------------------------------- torch.cond

class CondHead(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.register_buffer("scale", torch.tensor(2.0))

    def forward(self, x):
        def positive(x):
            return self.lin(x).relu() * self.scale

        def negative(x):
            return torch.sigmoid(x) - 1

        return torch.cond(x.sum() > 0, positive, negative, (x,))


COND_INPUTS = (torch.ones(3, 4), -torch.ones(3, 4))


def test_cond_save_load_both_branches():
    model = CondHead().eval()
    ep = unbroken.export(model, (torch.randn(3, 4),))
    loaded = _roundtrip(ep)
    for x in COND_INPUTS:
        torch.testing.assert_close(loaded.module()(x), model(x))


def test_cond_dynamic_batch_save_load():
    model = CondHead().eval()
    ep = unbroken.export(model, (torch.randn(3, 4),),
                         dynamic_shapes={"x": {0: Dim("b", max=16)}})
    loaded = _roundtrip(ep)
    for n in (2, 5, 16):
        for sign in (1, -1):
            x = sign * torch.rand(n, 4)
            torch.testing.assert_close(loaded.module()(x), model(x))


def test_cond_run_decompositions_refuses_clearly():
    """Recorded behaviour: run_decompositions() on a program with torch.cond is refused with
    UB117 (torch.export supports it; a refusal, not a wrong result)."""
    ep = unbroken.export(CondHead().eval(), (torch.randn(3, 4),))
    with pytest.raises(unbroken.UnsupportedError) as info:
        ep.run_decompositions()
    assert info.value.code == "UB117"
    assert "torch.cond" in str(info.value)


# ---------------------------------------------------------------- .item() + torch._check

class IndexByItem(nn.Module):
    def forward(self, x, y):
        a = x.item()
        torch._check(a >= 0)
        torch._check(a < y.shape[0])
        return y[a] * 2


def test_item_checks_are_runtime_asserts_before_save():
    ep = unbroken.export(IndexByItem(), (torch.tensor(3), torch.randn(10)))
    y = torch.randn(10)
    torch.testing.assert_close(ep.module()(torch.tensor(9), y), y[9] * 2)
    for bad in (-1, 10):
        with pytest.raises(RuntimeError):
            ep.module()(torch.tensor(bad), y)


def test_item_checks_survive_save_load():
    loaded = _roundtrip(unbroken.export(IndexByItem(), (torch.tensor(3), torch.randn(10))))
    y = torch.randn(10)
    torch.testing.assert_close(loaded.module()(torch.tensor(9), y), y[9] * 2)
    for bad in (-1, 10):
        with pytest.raises(RuntimeError):
            loaded.module()(torch.tensor(bad), y)


class _Nonzero(nn.Module):
    def forward(self, x):
        return x.nonzero().float().sum(0)


def test_nonzero_save_load_minimal():
    x = torch.randn(3, 4)
    loaded = _roundtrip(unbroken.export(_Nonzero(), (x,)))
    torch.testing.assert_close(loaded.module()(x), _Nonzero()(x))


# ---------------------------------------------------------------- find_graph_breaks

def _breaks(model, args):
    return [(b.code, b.frames[-1].source.split("#")[0].strip())
            for b in unbroken.find_graph_breaks(model, args)]


class Preprocess(nn.Module):
    """No composite ops: normalisation with a batch-norm and Python-side bookkeeping."""

    def __init__(self):
        super().__init__()
        self.norm = nn.BatchNorm1d(4)
        self.calls = 0

    def forward(self, x):
        x = self.norm(x)
        self.calls += 1
        if x.abs().max() > 100:
            x = x.clamp(-100, 100)
        values = x.nonzero().tolist()  # data-dependent length: no Python list
        return x * len(values) + id(x)


def test_find_graph_breaks_preprocess_all_breaks():
    model = Preprocess()
    assert _breaks(model, (torch.randn(5, 4),)) == [
        ("UB101", "if x.abs().max() > 100:"),
        ("UB105", "values = x.nonzero().tolist()"),
        ("UB103", "return x * len(values) + id(x)"),
    ]
    assert model.calls == 0


class Head(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(8, 4)
        self.seen = 0

    def forward(self, x):
        self.seen += 1
        if x.abs().max() > 10:
            x = x.clamp(-10, 10)
        return self.lin(x)


class Classifier(nn.Module):
    def __init__(self):
        super().__init__()
        self.body = nn.Sequential(nn.Linear(8, 8), nn.ReLU())
        self.head = Head()

    def forward(self, x):
        h = self.body(x)
        if h.mean().item() > 0.5:
            h = h * 0.5
        out = self.head(h)
        scores = out.nonzero().tolist()
        return out, len(scores)


def test_find_graph_breaks_classifier_all_breaks():
    torch.manual_seed(0)
    assert _breaks(Classifier(), (torch.randn(4, 8),)) == [
        ("UB105", "if h.mean().item() > 0.5:"),
        ("UB101", "if x.abs().max() > 10:"),
        ("UB105", "scores = out.nonzero().tolist()"),
    ]


class ConvStack(nn.Module):
    def __init__(self):
        super().__init__()
        self.convs = nn.ModuleList([nn.Conv1d(4, 4, 3, padding=1) for _ in range(3)])
        self.steps = 0

    def forward(self, x):
        for conv in self.convs:
            x = conv(x)
            if x.std() > 1:
                x = x / x.std()
        self.steps += 1
        return x + id(x)


def test_find_graph_breaks_conv_stack_all_breaks():
    torch.manual_seed(0)
    assert _breaks(ConvStack(), (torch.randn(2, 4, 6),)) == [
        ("UB101", "if x.std() > 1:"),
        ("UB103", "return x + id(x)"),
    ]


class _LinearThenBreaks(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        x = self.lin(x)
        if x.sum() > 0:
            x = x * 2
        return x + id(x)


def test_find_graph_breaks_after_linear_minimal():
    assert [code for code, _ in _breaks(_LinearThenBreaks(), (torch.randn(4),))] == [
        "UB101", "UB103"]
