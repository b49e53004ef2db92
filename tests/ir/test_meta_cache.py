"""The per-trace cache of functional ops' meta outputs (unbroken.ir.meta_cache): a hit gives
the program and the guards a trace without the cache gives, and what it cannot state exactly
is never cached."""
from __future__ import annotations

import contextlib

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.models.realistic import REALISTIC
from tests.models.zoo import ZOO
from unbroken.ir.meta_cache import MetaCache, clear_shared_entries
from unbroken.ir.ops import is_inplace_op
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
    monkeypatch.setattr(MetaCache, "get", lambda self, key, base=None: None)
    monkeypatch.setattr(MetaCache, "shared_computation", lambda self, key, base=None: None)


def _counting_computations(monkeypatch) -> list:
    """The ops whose meta outputs the recorder computes from now on (None: a composite's)."""
    computed = []
    real = unbroken.ir.recorder.Recorder._meta_of

    def counting(self, kernel, args, kwargs, func=None, computation=None):
        computed.append(func)
        return real(self, kernel, args, kwargs, func, computation)

    monkeypatch.setattr(unbroken.ir.recorder.Recorder, "_meta_of", counting)
    return computed


def _summary(ep):
    guards = [str(c) for c in ep.range_constraints.items()]
    return ep.graph_module.code, guards


@pytest.mark.parametrize("dynamic", [False, True], ids=["static", "dynamic"])
def test_hits_give_the_program_and_ranges_of_a_trace_without_cache(dynamic, monkeypatch):
    model, x = Blocks().eval(), torch.randn(3, 5, 16)
    spec = ({0: Dim.AUTO, 1: Dim.AUTO},) if dynamic else None
    hits = []
    real_get = MetaCache.get

    def counting_get(self, key, base=None):
        out = real_get(self, key, base)
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



class ViewBlocks(torch.nn.Module):
    """Views in every block: heads split and merged, slices at an offset, a multi-output
    split, and a write through a view that must reach its base."""

    def __init__(self):
        super().__init__()
        self.proj = torch.nn.ModuleList(torch.nn.Linear(16, 48) for _ in range(3))

    def forward(self, x):
        b, s, _ = x.shape
        for proj in self.proj:
            q, k, v = proj(x).split(16, dim=-1)
            q = q.view(b, s, 2, 8).transpose(1, 2)
            k = k.view(b, s, 2, 8).transpose(1, 2)
            att = (q @ k.transpose(-1, -2)).softmax(-1) @ v.view(b, s, 2, 8).transpose(1, 2)
            h = att.transpose(1, 2).reshape(b, s, 16).clone()
            h[:, 1:].mul_(0.5)           # through a view at an offset, into h
            x = x + h.narrow(2, 4, 8).repeat(1, 1, 2) + h.unbind(2)[0].unsqueeze(2)
        return x


def test_view_hits_give_the_program_of_a_trace_without_cache(monkeypatch):
    """A view op on metadata the trace has seen is rebuilt as a view of its base (its sizes,
    strides and offset): same program, ranges and values as computing it, every block's views
    after the first a hit, writes through them reaching their bases."""
    model, x = ViewBlocks().eval(), torch.randn(2, 5, 16)
    spec = ({0: Dim.AUTO, 1: Dim.AUTO},)
    view_hits = []
    real_get = MetaCache.get

    def counting_get(self, key, base=None):
        out = real_get(self, key, base)
        if base is not None and out is not None:
            view_hits.append(key[1])
        return out

    monkeypatch.setattr(MetaCache, "get", counting_get)
    cached = unbroken.export(model, (x,), dynamic_shapes=spec)
    ops = {str(op) for op in view_hits}
    assert {"aten.view.default", "aten.transpose.int", "aten.split.Tensor",
            "aten.slice.Tensor", "aten.unbind.int"} <= ops, ops
    assert len(view_hits) >= 14
    _without_cache(monkeypatch)
    plain = unbroken.export(model, (x,), dynamic_shapes=spec)
    assert _summary(cached) == _summary(plain)
    for shape in ((2, 5, 16), (1, 7, 16), (3, 2, 16)):
        other = torch.randn(shape)
        torch.testing.assert_close(cached.module()(other), model(other), rtol=0, atol=0)


def test_view_outputs_are_stored_as_views_of_their_base():
    env = ShapeEnvironment()
    s = env.create_symbol("", 4, source="x.shape[0]")
    cache = MetaCache(env)
    base = torch.empty_strided([env.symint(s), 6], [6, 1], device="meta")
    narrow = base.as_strided([env.symint(s), 3], [6, 1], 2)  # base[:, 2:5]
    narrow_t = base.as_strided([3, env.symint(s)], [1, 6], 2)
    cache.put(("v",), (narrow, narrow_t), cache.symbol_count(), base)
    other = torch.empty_strided([env.symint(s), 6], [6, 1], device="meta")
    a, b = cache.get(("v",), other)
    for got, want in ((a, narrow), (b, narrow_t)):
        assert got.untyped_storage()._cdata == other.untyped_storage()._cdata
        assert got.storage_offset() == want.storage_offset() == 2
        assert got.shape == want.shape and got.stride() == want.stride()
    fresh = torch.empty(3, device="meta")  # not in base's memory: not stored
    cache.put(("w",), fresh, cache.symbol_count(), base)
    assert cache.get(("w",), base) is None
    static = torch.empty(4, 6, device="meta")
    other_dtype = static.view(torch.int32)  # a view of another dtype: as_strided cannot
    cache.put(("d",), other_dtype, cache.symbol_count(), static)
    assert cache.get(("d",), static) is None
    cache.put(("s",), static[1:], cache.symbol_count(), static)  # the same dtype: stored
    assert cache.get(("s",), static).storage_offset() == 6


# --- entries shared between traces ---------------------------------------------------------

class _Defaults(torch.nn.Module):
    """Ops whose meta output depends on the process: the default dtype (``ones``) and the
    grad mode (a composite's decomposition: ``dropout``'s in training)."""

    def __init__(self):
        super().__init__()
        self.linear = torch.nn.Linear(6, 6)

    def forward(self, x):
        return torch.nn.functional.dropout(self.linear(x), 0.0, True) + torch.ones(6)


def test_static_outputs_are_shared_by_the_next_trace_with_the_same_program(monkeypatch):
    """A static export computes each meta output its shapes had in an earlier trace once per
    process (FakeTensorMode's dispatch cache is process-wide too): the second export of a
    model computes none, and gives the program of a trace with no cache."""
    model, x = Blocks().eval(), torch.randn(3, 5, 16)
    first = unbroken.export(model, (x,))
    computed = _counting_computations(monkeypatch)
    second = unbroken.export(model, (x,))
    # only the in-place writes (``h.mul_``), which no cache serves, are computed again
    assert computed and all(func is not None and is_inplace_op(func) for func in computed)
    _without_cache(monkeypatch)
    computed.clear()
    plain = unbroken.export(model, (x,))
    assert _summary(first) == _summary(second) == _summary(plain)
    assert len([f for f in computed if f is None or not is_inplace_op(f)]) >= 12
    torch.testing.assert_close(second.module()(x), model(x), rtol=0, atol=0)


@pytest.mark.parametrize("dtype", [torch.float64, torch.float16])
def test_shared_outputs_follow_the_default_dtype_and_grad_mode(dtype):
    """What a kernel reads from the process is in the key: an export under another default
    dtype or grad mode computes its own outputs, each program as eager."""
    model, x = _Defaults(), torch.randn(2, 6)
    for state in (contextlib.nullcontext(), _default_dtype(dtype), torch.no_grad(),
                  contextlib.nullcontext()):
        with state:
            ep = unbroken.export(model, (x,))
            want, got = model(x), ep.module()(x)
        assert got.dtype == want.dtype and got.requires_grad == want.requires_grad
        torch.testing.assert_close(got, want, rtol=0, atol=0)


@contextlib.contextmanager
def _default_dtype(dtype):
    previous = torch.get_default_dtype()
    torch.set_default_dtype(dtype if dtype.is_floating_point else previous)
    try:
        yield
    finally:
        torch.set_default_dtype(previous)


def test_only_static_entries_of_torchs_own_ops_are_shared():
    env = ShapeEnvironment()
    static, symbolic = MetaCache(env), MetaCache(env)
    t = torch.empty(2, 3, device="meta")
    relu = torch.ops.aten.relu.default
    key = static.key("kernel", relu, (t,), {})
    static.put(key, torch.empty(2, 3, device="meta"), static.symbol_count())
    assert MetaCache(ShapeEnvironment()).get(key) is not None  # another trace's cache
    assert MetaCache().key("kernel", relu, (t,), {}, on_cpu=False) != key  # another device
    unshared = static.key("kernel", torch.ops.aten.abs.default, (t,), {})
    static.put(unshared, torch.empty(2, 3, device="meta"), static.symbol_count(),
               share=False)  # relaid out as eager's kernel: the trace's own
    assert static.get(unshared) is not None and MetaCache().get(unshared) is None
    s = env.create_symbol("", 4, source="x.shape[0]")
    u = torch.empty_strided([env.symint(s), 3], [3, 1], device="meta")
    skey = symbolic.key("kernel", relu, (u,), {})
    symbolic.put(skey, torch.empty_strided([env.symint(s), 3], [3, 1], device="meta"),
                 symbolic.symbol_count())
    assert symbolic.get(skey) is not None and MetaCache(env).get(skey) is None
    clear_shared_entries()
    assert MetaCache(ShapeEnvironment()).get(key) is None


def test_an_op_kept_whole_by_run_decompositions_is_its_own_path(monkeypatch):
    """``run_decompositions`` keeps an op its table does not name whole, its meta output from
    calling the op itself (``record_opaque``); a composite kept whole in a trace computes it
    with its decomposition. The two ways have keys of their own, shared entries included."""
    model, x = Blocks().eval(), torch.randn(3, 5, 16)
    paths = []
    real = MetaCache.key

    def recording_key(self, path, *args, **kwargs):
        paths.append(path)
        return real(self, path, *args, **kwargs)

    monkeypatch.setattr(MetaCache, "key", recording_key)
    ep = unbroken.export(model, (x,))
    assert "composite" in paths and "opaque" not in paths
    paths.clear()
    kept = ep.run_decompositions({})  # an empty table: every op kept whole
    assert "opaque" in paths and "composite" not in paths
    torch.testing.assert_close(kept.module()(x), model(x), rtol=0, atol=0)


class _Conv3dLayout(torch.nn.Module):
    """A 3-d convolution on a channels_last_3d input, whose output layout eager's CPU kernel
    takes from ATen's backend selection (MKLDNN keeps channels_last_3d, the slow kernel does
    not), read by the program."""

    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv3d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y * y.stride()[1]


def test_an_output_laid_out_by_the_backend_selection_is_not_shared_between_traces():
    """ATen's backend selection reads the process's settings (``torch.backends.mkldnn``):
    an output laid out by it, and a composite computed from one (``conv3d``), stays the
    trace's own. Shared, the export under MKLDNN disabled got the layout of the one before
    (a stride of 1 where eager's is 64)."""
    model = _Conv3dLayout()
    x = torch.randn(2, 3, 6, 6, 6).to(memory_format=torch.channels_last_3d)
    strides = []
    for enabled in (True, False, True):
        with torch.backends.mkldnn.flags(enabled=enabled):
            want = model(x)
            got = unbroken.export(model, (x,)).module()(x)
            strides.append(model.conv(x).stride()[1])
        torch.testing.assert_close(got, want, rtol=0, atol=0)
    assert strides[0] != strides[1]  # the settings do change eager's layout here


class _Relaid(torch.nn.Module):
    """Ops whose meta output ``ir.layouts`` relays out as eager's CPU kernel lays it out: a
    batch norm in evaluation (the input's suggested memory format, empty statistics), an
    elementwise op with a Python meta kernel (TensorIterator's order), an FFT (the probe);
    the program reads each layout."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.BatchNorm2d(3).eval()

    def forward(self, x, y):
        a = self.norm(x)
        b = torch.floor_divide(x, y)
        c = torch.fft.fft(x, dim=1)
        return a * a.stride()[1], b * b.stride()[1], c.real * c.stride()[1]


def test_relaid_out_static_outputs_are_shared_unless_probed(monkeypatch):
    """A relayout computed from the arguments' metadata alone (batch norm, the elementwise
    ops) is a function of the cache's key: a second export computes none of those outputs,
    while the probe's (which runs eager's kernel with the trace's ``requires_grad``) stays the
    trace's own. Each memory format of the inputs keeps its own eager layout."""
    model = _Relaid()
    computed = _counting_computations(monkeypatch)
    aten = torch.ops.aten
    for layout in (torch.contiguous_format, torch.channels_last):
        x = torch.randn(2, 3, 4, 5).to(memory_format=layout)
        y = torch.randn(2, 3, 4, 5).transpose(2, 3).contiguous().transpose(2, 3) + 3
        programs = []
        for round in range(2):
            computed.clear()
            ep = unbroken.export(model, (x, y))
            for got, want in zip(ep.module()(x, y), model(x, y)):
                torch.testing.assert_close(got, want, rtol=0, atol=0)
            programs.append(_summary(ep))
            if round == 1:
                assert aten._native_batch_norm_legit_no_training.default not in computed
                assert aten.floor_divide.default not in computed
                assert aten.fft_fft.default in computed
        assert programs[0] == programs[1]


# ----- symbolic outputs shared between traces, with the questions their computation asked -----
class _Attention(torch.nn.Module):
    """Attention with a mask, under Dim.AUTO: SDPA's decomposition on SymInts asks dozens
    of questions (broadcasts of the mask, the size-1 audit's notes)."""

    def __init__(self):
        super().__init__()
        self.qkv, self.out = torch.nn.Linear(16, 48), torch.nn.Linear(16, 16)

    def forward(self, x, mask):
        q, k, v = self.qkv(x).view(x.shape[0], x.shape[1], 3, 2, 8).unbind(2)
        q, k, v = (t.transpose(1, 2) for t in (q, k, v))
        h = torch.nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=mask)
        return self.out(h.transpose(1, 2).reshape(x.shape))


def _watching_shared(monkeypatch) -> list:
    """``(op, is a view, replayed)`` of every shared computation run from now on."""
    seen = []
    real = unbroken.ir.meta_cache.SharedComputation.wrap

    def watching(self, kernel):
        shared = real(self, kernel)

        def run(args, kwargs):
            out = shared(args, kwargs)
            seen.append((self.key[1], self.base is not None, self.replayed))
            return out
        return run

    monkeypatch.setattr(unbroken.ir.meta_cache.SharedComputation, "wrap", watching)
    return seen


def _full_summary(ep):
    env = ep._unbroken_env
    guards = [(g.expr, g.value, g.kind, g.op, g.frames) for g in env.guards]
    return _summary(ep), guards, list(env.facts), list(env.input_facts), \
        dict(ep.graph_module.meta), ep.range_constraints


def _counting_replays(monkeypatch) -> list:
    replays = []
    real = ShapeEnvironment.replay_calls

    def counting(self, log):
        replays.append(real(self, log))
        return replays[-1]

    monkeypatch.setattr(ShapeEnvironment, "replay_calls", counting)
    return replays


@pytest.mark.parametrize("spec", [
    ({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO}),
    ({0: Dim("b", min=2), 1: Dim("n", min=2)}, {0: Dim("b", min=2), 2: Dim("n", min=2),
                                              3: Dim("n", min=2)}),
], ids=["auto", "named"])
def test_symbolic_outputs_are_replayed_by_the_next_trace_with_its_questions(spec, monkeypatch):
    """A model exported again under dynamic shapes computes no meta output of a functional
    op its first export computed: each is replayed (its questions asked again, in order,
    with the logged answers) and the program, the guards with their frames and ops, the
    facts, the size-1 outcomes and the ranges are those of a trace that shares nothing."""
    model = _Attention().eval()
    x, mask = torch.randn(2, 5, 16), torch.randn(2, 1, 5, 5)
    clear_shared_entries()
    first = unbroken.export(model, (x, mask), dynamic_shapes=spec)
    replays = _counting_replays(monkeypatch)
    computed = []
    real = unbroken.ir.recorder.Recorder._meta_of

    def counting(self, kernel, args, kwargs, func=None, computation=None):
        computed.append(func if func is not None else computation)
        return real(self, kernel, args, kwargs, func, computation)

    monkeypatch.setattr(unbroken.ir.recorder.Recorder, "_meta_of", counting)
    second = unbroken.export(model, (x, mask), dynamic_shapes=spec)
    assert len(replays) >= 5 and all(replays)  # linear x2, sdpa, the rest of the block
    assert unbroken.ir.meta_cache.replay_mismatches == 0
    _without_cache(monkeypatch)
    plain = unbroken.export(model, (x, mask), dynamic_shapes=spec)
    assert _full_summary(first) == _full_summary(second) == _full_summary(plain)
    other = torch.randn(3, 7, 16), torch.randn(3, 1, 7, 7)
    torch.testing.assert_close(second.module()(*other), model(*other), rtol=0, atol=0)


class _Concat(torch.nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y], dim=1).relu()


def test_a_guard_recorded_inside_a_kernel_is_recorded_by_its_replay(monkeypatch):
    """``cat`` checks that the other dims agree inside its meta kernel: with two named Dims
    that is a constraint violation, in the export that computes it and in the one that
    replays it (a replay that skipped the questions would export a program for inputs eager
    refuses)."""
    x, y = torch.randn(4, 3), torch.randn(4, 5)
    spec = ({0: Dim("a")}, {0: Dim("b")})
    clear_shared_entries()
    for _ in range(2):
        replays = _counting_replays(monkeypatch)
        with pytest.raises(unbroken.ConstraintViolationError,
                           match=r"y\.shape\[0\] == x\.shape\[0\]"):
            unbroken.export(_Concat(), (x, y), dynamic_shapes=spec)
        monkeypatch.undo()
    assert replays and all(replays)
    ep = unbroken.export(_Concat(), (x, y), dynamic_shapes=({0: Dim("a")}, {0: Dim("a")}))
    a, b = torch.randn(6, 3), torch.randn(6, 5)
    torch.testing.assert_close(ep.module()(a, b), _Concat()(a, b), rtol=0, atol=0)


@pytest.mark.parametrize("layout", ["transposed", "channels_last"])
def test_a_computation_asks_the_same_questions_whatever_was_read_of_its_inputs_before(layout):
    """A shared entry's questions are replayed wherever the key matches, so what a kernel asks
    must not depend on what other code read of its inputs before (a tensor's contiguity
    computed lazily, on first read, would ask its questions in the first computation that
    reads it and in no later one): torch computes a symbolic tensor's contiguity when it
    makes the tensor. Checked on the questions of ``exp`` (which orders its output's dims by
    its input's strides) with and without the input's contiguity read first."""
    from torch._dispatch.python import enable_python_dispatcher
    logs = []
    for read_first in (False, True):
        env = ShapeEnvironment()
        a, b = env.create_symbol("", 4), env.create_symbol("", 6)
        sa, sb = env.symint(a), env.symint(b)
        if layout == "transposed":
            x = torch.empty_strided([sa, sb], [1, sa], device="meta")
        else:
            x = torch.empty([sa, 3, sb, 5], device="meta").to(memory_format=torch.channels_last)
        with enable_python_dispatcher():
            if read_first:
                for fmt in (torch.contiguous_format, torch.channels_last):
                    if x.dim() == 4 or fmt is torch.contiguous_format:
                        x.is_contiguous(memory_format=fmt)
                torch.ops.aten.is_non_overlapping_and_dense.default(x)
            with env.calls_logged() as log:
                torch.ops.aten.exp.default(x)
        logs.append([(name, [a[1] if type(a) is tuple else a for a in args], answer)
                     for name, args, _, answer in log])
    assert logs[0] and logs[0] == logs[1]


def test_view_outputs_are_replayed_as_views_of_their_base(monkeypatch):
    """A view op's shared entry is made again as a view of the tensor it views in this trace
    (``as_strided`` of it, as the trace's own view entries): the second export replays the
    views of the first and gives its program, guards and ranges."""
    model = _Attention().eval()
    x, mask = torch.randn(2, 5, 16), torch.randn(2, 1, 5, 5)
    spec = ({0: Dim.AUTO, 1: Dim.AUTO}, {0: Dim.AUTO, 2: Dim.AUTO, 3: Dim.AUTO})
    clear_shared_entries()
    first = unbroken.export(model, (x, mask), dynamic_shapes=spec)
    seen = _watching_shared(monkeypatch)
    second = unbroken.export(model, (x, mask), dynamic_shapes=spec)
    views = [(op, replayed) for op, is_view, replayed in seen if is_view]
    assert {torch.ops.aten.view.default, torch.ops.aten.transpose.int} <= {op for op, _ in views}
    assert all(replayed for _, replayed in views)
    assert _full_summary(first) == _full_summary(second)


@pytest.mark.parametrize("sizes, strides, order", [
    (("a", 5, 16), (80, 16, 1), (0, 1, 2)),  # contiguous
    (("a", 5, 16), (16, "16a", 1), (1, 0, 2)),  # stack over the sequence, batch first
    (("a", 1, 16), (16, 16, 1), (0, 1, 2)),  # a size-1 dim sharing its neighbour's stride
    (("a", 3, "b", 5), ("15b", 1, "15", 3), (0, 2, 3, 1)),  # channels last
    (("a", "b"), (1, "a"), (1, 0)),  # transposed
    (("a", 5), ("10", 1), None),  # a gap between rows: not dense
    (("a", 5), (0, 1), None),  # expanded
])
def test_the_memory_order_of_a_dense_layout_is_found(sizes, strides, order):
    """Symbolic outputs are shared between traces when they are dense (``_dense_order``): the
    dims' order in memory is read from the strides, as torch writes a permutation of the
    contiguous strides; a layout with gaps or overlaps has none."""
    import sympy

    from unbroken.ir.meta_cache import _dense_order, _Meta

    def parse(value):
        return value if isinstance(value, int) else sympy.sympify(
            value.replace("a", "*a").replace("b", "*b").lstrip("*"),
            locals={"a": sympy.Symbol("a", integer=True, positive=True),
                    "b": sympy.Symbol("b", integer=True, positive=True)})

    leaf = _Meta(tuple(map(parse, sizes)), tuple(map(parse, strides)), torch.float32)
    assert _dense_order(leaf) == order


class _Recurrent(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lstm = torch.nn.LSTM(8, 16, batch_first=True)

    def forward(self, x):
        out, (h, c) = self.lstm(x)
        return torch.stack([x.transpose(0, 1), x.transpose(0, 1)]).sum(0), out, h, c


@pytest.mark.parametrize("spec", [{0: Dim.AUTO}, {0: Dim("b", min=2)}], ids=["auto", "named"])
def test_permuted_dense_outputs_are_replayed_by_the_next_trace(spec, monkeypatch):
    """The LSTM's output ``(batch, seq, hidden)`` is laid out sequence first (its kernel
    stacks the steps) and ``stack`` of transposed tensors is dense but not contiguous: both
    are shared between traces, made again as ``empty`` in memory order then permuted (no
    view of anything), so a second export computes no ``lstm`` (its decomposition on SymInts
    is most of the export) and gives the program, guards and ranges of one that shares
    nothing, with the outputs' strides eager gives."""
    model = _Recurrent().eval()
    x = torch.randn(2, 5, 8)
    clear_shared_entries()
    first = unbroken.export(model, (x,), dynamic_shapes=(spec,))
    replays = _counting_replays(monkeypatch)
    seen = _watching_shared(monkeypatch)
    second = unbroken.export(model, (x,), dynamic_shapes=(spec,))
    assert replays and all(replays)
    ops = {op for op, _, _ in seen}
    assert {torch.ops.aten.lstm.input, torch.ops.aten.stack.default} <= ops
    assert all(replayed for _, _, replayed in seen)
    assert unbroken.ir.meta_cache.replay_mismatches == 0
    monkeypatch.undo()
    _without_cache(monkeypatch)
    plain = unbroken.export(model, (x,), dynamic_shapes=(spec,))
    assert _full_summary(first) == _full_summary(second) == _full_summary(plain)
    other = torch.randn(3, 5, 8)
    for got, want in zip(second.module()(other), model(other), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert got.stride() == want.stride()


class _Normalized(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(4)

    def forward(self, x):
        y = self.norm(self.conv(x.contiguous(memory_format=torch.channels_last)))
        return y, self.norm(self.conv(x))


@pytest.mark.parametrize("spec", [{0: Dim.AUTO, 2: Dim.AUTO}, {0: Dim("b", min=2)}],
                         ids=["auto", "named"])
def test_relaid_out_outputs_are_replayed_by_the_next_trace(spec, monkeypatch):
    """Batch norm's meta output is relaid out as eager's CPU kernel lays it out (the input's
    memory format; no statistics in evaluation): a function of the arguments' metadata, so
    the computation, relayout included, is shared between traces. Under symbolic sizes it
    costs ~10 ms a call (a Python decomposition), every export again before. The program,
    guards and ranges are those of a trace that shares nothing, and the outputs' strides
    eager's, channels-last and contiguous."""
    model = _Normalized().eval()
    x = torch.randn(2, 3, 6, 6)
    clear_shared_entries()
    first = unbroken.export(model, (x,), dynamic_shapes=(spec,))
    seen = _watching_shared(monkeypatch)
    second = unbroken.export(model, (x,), dynamic_shapes=(spec,))
    norms = [replayed for op, _, replayed in seen
             if op is torch.ops.aten._native_batch_norm_legit_no_training.default]
    assert len(norms) >= 2 and all(norms)
    monkeypatch.undo()
    _without_cache(monkeypatch)
    plain = unbroken.export(model, (x,), dynamic_shapes=(spec,))
    assert _full_summary(first) == _full_summary(second) == _full_summary(plain)
    other = torch.randn(3, 3, 6, 6)
    for got, want in zip(second.module()(other), model(other), strict=True):
        torch.testing.assert_close(got, want, rtol=0, atol=0)
        assert got.stride() == want.stride()
