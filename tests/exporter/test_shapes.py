"""exporter.shapes: what the first trace learns of ``Dim.AUTO`` dims, adopted in place or by
tracing again (the rounds of ``exporter.pipeline._export``).

Two properties, over a corpus (the zoo, the realistic models, tiny Hugging Face text models):

* the number of traces: one, unless the first trace's adoption pins a dim, makes two dims
  equal or derives one from another; a range-only adoption is narrowed in place, unless
  the narrower ranges would have answered one of the trace's questions otherwise (then it
  traces again: the fallback);
* the one-trace result is the two-trace result: an export whose adoption was narrowed in
  place is compared with the same export made with ``narrow_in_place=False`` (the old path,
  which traces again under the narrowed spec): graph code, range constraints, the
  placeholders' meta shapes, the module call signatures, and the outputs of both programs on
  inputs drawn at sizes the program admits (each program also against eager).
"""
from __future__ import annotations

import dataclasses
import random

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.export import Dim
from torch.testing import assert_close
from torch.utils import _pytree as pytree

import unbroken
import unbroken.exporter.pipeline as pipeline
from tests.models import hf_text
from tests.models.realistic import REALISTIC
from tests.models.zoo import ZOO
from unbroken import InputMismatchError
from unbroken.exporter.shapes import AdoptAuto
from unbroken.exporter.trace import Trace

A = Dim.AUTO


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

class _Rounds:
    """Counts the traces of the exports made while installed (not the traces at size 1 of
    ``unbroken.size_one``, which force dims static), and records each round's adoption (the
    refinements that sent the export back to trace again)."""

    def __init__(self, monkeypatch, *, in_place: bool = True):
        self.traces = 0
        self.adoptions: list[dict] = []
        self.stopped: list = []  # per trace: (the guard it stopped at or None, its op nodes)
        real_run, real_stages = Trace.run, pipeline.run_stages

        def run(trace):
            self.traces += not trace.options.forced_static
            try:
                return real_run(trace)
            finally:
                if not trace.options.forced_static:
                    nodes = [n for n in trace.builder.root_graph.nodes
                             if n.op == "call_function"]
                    self.stopped.append((trace.stopped_for, len(nodes)))

        def stages(call, options):
            if not in_place:
                options = dataclasses.replace(options, narrow_in_place=False)
            try:
                return real_stages(call, options)
            except AdoptAuto as adopt:
                self.adoptions.append(dict(adopt.adoption.refinements))
                raise

        monkeypatch.setattr(Trace, "run", run)
        monkeypatch.setattr(pipeline, "run_stages", stages)


def _all_auto(args) -> tuple:
    """``Dim.AUTO`` on every dim of every tensor of ``args`` (a tuple of inputs)."""
    return tuple(pytree.tree_map(
        lambda x: {d: A for d in range(x.dim())} if isinstance(x, torch.Tensor) else None, a)
        for a in args)


def _user_placeholders(ep) -> list:
    return [n for n in ep.graph.nodes if n.op == "placeholder"][-_user_input_count(ep):]


def _user_input_count(ep) -> int:
    return sum(1 for s in ep.graph_signature.input_specs if s.kind.name == "USER_INPUT")


def _summary(ep) -> dict:
    """What must be identical between the one-trace and the two-trace programs."""
    return {
        "code": ep.graph_module.code,
        "ranges": {str(s): (int(r.lower), str(r.upper))
                   for s, r in ep.range_constraints.items()},
        "shapes": [str(n.meta["val"].shape) if isinstance(n.meta["val"], torch.Tensor)
                   else repr(n.meta["val"]) for n in ep.graph.nodes if n.op == "placeholder"],
        "calls": [(e.fqn, repr(e.signature)) for e in ep.module_call_graph],
        "signature": repr(ep.graph_signature),
    }


def _draws(ep, args, kwargs, count: int, seed: int) -> list:
    """``count`` inputs shaped like ``(args, kwargs)`` at sizes drawn within the program's
    ranges (each symbol at most 4 above its example size; derived dims follow their roots);
    values drawn like the example's (integer inputs within the example's values)."""
    flat, spec = pytree.tree_flatten((args, kwargs))
    tensors = [x for x in flat if isinstance(x, torch.Tensor)]
    placeholders = _user_placeholders(ep)
    hints: dict = {}
    for node, example in zip(placeholders, tensors, strict=True):
        for size, actual in zip(node.meta["val"].shape, example.shape, strict=True):
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                hints[size.node.expr] = actual
    ranges = {s: r for s, r in ep.range_constraints.items()}
    rng = random.Random(seed)
    generator = torch.Generator().manual_seed(seed)
    draws = []
    for _ in range(count):
        values = {s: rng.randint(int(ranges[s].lower), int(min(ranges[s].upper, h + 4)))
                  for s, h in hints.items()}
        new_flat, index = [], 0
        for leaf in flat:
            if not isinstance(leaf, torch.Tensor):
                new_flat.append(leaf)
                continue
            node = placeholders[index]
            index += 1
            shape = [int(s.node.expr.xreplace(values)) if isinstance(s, torch.SymInt) else s
                     for s in node.meta["val"].shape]
            new_flat.append(_like(leaf, shape, generator))
        draws.append(pytree.tree_unflatten(new_flat, spec))
    return draws


def _like(example: torch.Tensor, shape, generator) -> torch.Tensor:
    if example.dtype.is_floating_point:
        return torch.randn(shape, generator=generator, dtype=example.dtype)
    if example.dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=generator).bool()
    high = int(example.max()) + 1 if example.numel() else 1
    return torch.randint(int(example.min()) if example.numel() else 0, max(high, 1), shape,
                         generator=generator, dtype=example.dtype)


def _same_programs(model, args, kwargs, spec, monkeypatch, *, draws: int = 3) -> int:
    """Export in place and with the old two-trace path; assert the programs are identical
    and compute the same as each other and as eager on drawn inputs. Returns the traces the
    in-place export made."""
    with monkeypatch.context() as patch:
        one = _Rounds(patch)
        ep = unbroken.export(model, args, kwargs, dynamic_shapes=spec)
    with monkeypatch.context() as patch:
        two = _Rounds(patch, in_place=False)
        retraced = unbroken.export(model, args, kwargs, dynamic_shapes=spec)
    assert two.traces >= one.traces
    ours, theirs = _summary(ep), _summary(retraced)
    for key in ours:
        assert ours[key] == theirs[key], key
    checked = 0
    for draw_args, draw_kwargs in [(args, kwargs), *_draws(ep, args, kwargs, draws, seed=1)]:
        try:
            out = ep.module()(*draw_args, **draw_kwargs)
        except InputMismatchError:  # a relation the drawn sizes break: both must refuse
            with pytest.raises(InputMismatchError):
                retraced.module()(*draw_args, **draw_kwargs)
            continue
        assert_close(retraced.module()(*draw_args, **draw_kwargs), out, rtol=0, atol=0)
        with torch.no_grad():
            assert_close(out, model(*draw_args, **draw_kwargs), rtol=1e-4, atol=1e-4)
        checked += 1
    assert checked >= 1  # at least the example inputs
    return one.traces


# --------------------------------------------------------------------------------------------
# the number of traces
# --------------------------------------------------------------------------------------------

class _Table(nn.Module):
    """``table[:seq]``: the code requires ``seq <= 16`` only (a range-only adoption)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("table", torch.arange(16.0))

    def forward(self, x):
        return x + self.table[: x.shape[1]]


class _TableMask(_Table):
    """``table[:seq]`` (seq <= 16) and then a whole slice of the sequence dim
    (``y[:, None, None, :]``, as BERT's attention mask): slicing to the end asks whether
    ``seq <= 9223372036854775807``, which every int64 size is, whatever its range: no slice
    node, and nothing the narrower range answers otherwise."""

    def forward(self, x):
        return super().forward(x)[:, None, None, :]


class _TableThenFirst16(_Table):
    """``table[:seq]`` (seq <= 16) and then ``y[:, :16]``: whether the slice is the whole dim
    (``seq <= 16``) is known under the narrower range only, so the program under ``seq <= 16``
    has no slice node for it."""

    def forward(self, x):
        return super().forward(x)[:, :16]


class _Sum(nn.Module):
    def forward(self, x, y):
        return x + y  # x.shape[0] == y.shape[0]: the two dims become one


class _Pinned(nn.Module):
    def __init__(self):
        super().__init__()
        self.linear = nn.Linear(8, 4)

    def forward(self, x):
        return self.linear(x)  # x.shape[1] == 8: pinned


def test_a_range_only_adoption_is_one_trace(monkeypatch):
    rounds = _Rounds(monkeypatch)
    unbroken.export(_Table(), (torch.randn(2, 12),), dynamic_shapes=({0: A, 1: A},))
    assert (rounds.traces, rounds.adoptions) == (1, [])


@pytest.mark.parametrize("model, args, refinement", [
    (_Sum(), (torch.randn(3, 4), torch.randn(3, 4)), ["x.shape[0]", "x.shape[1]"]),  # y's
    (_Pinned(), (torch.randn(3, 8),), ["static"]),
], ids=["equal_dims", "pinned"])
def test_an_adoption_that_changes_symbols_traces_again(monkeypatch, model, args, refinement):
    """Pinning a dim or making two dims one changes the symbols: the export traces again
    with them (the first trace stops at that guard: see the tests of stopping early)."""
    rounds = _Rounds(monkeypatch)
    ep = unbroken.export(model, args, dynamic_shapes=_all_auto(args))
    assert rounds.traces == 2 and sorted(rounds.adoptions[0].values()) == refinement
    assert_close(ep.module()(*args), model(*args))


_CORPUS = {**{f"zoo/{k}": v for k, v in ZOO.items()},
           **{f"realistic/{k}": v for k, v in REALISTIC.items()}}
# refused with every dim Dim.AUTO for reasons of their own (not the rounds)
_REFUSED: set[str] = set()
_SLOW = {"zoo/cnn", "zoo/encoder_layer", "zoo/lstm", "realistic/decoder_layer",
         "realistic/gru_encoder", "realistic/lstm_bidir_stack", "realistic/tiny_resnet",
         "realistic/tiny_unet", "realistic/rotary_attention", "realistic/conv1d_tcn"}


def _corpus_params():
    for name, entry in _CORPUS.items():
        if name in _REFUSED:
            continue
        marks = [pytest.mark.slow] if name in _SLOW or getattr(entry, "slow", False) else []
        yield pytest.param(name, marks=marks, id=name)


@pytest.mark.parametrize("name", list(_corpus_params()))
def test_traces_again_only_when_an_adoption_changes_symbols(monkeypatch, name):
    """Every dim Dim.AUTO: one trace per round, and a round only for an adoption that pins,
    relates or derives dims. (A range-only adoption may trace again too, when the narrower
    ranges would answer the trace otherwise, as for ``_TableThenFirst16``; none of this corpus
    does: if one starts to, the replay has become stricter than it needs to be.) Traced to
    the end: a trace stopped early adopts the guards met so far, and a narrowing found by a
    later round is a round of its own when it cannot be adopted in place."""
    model, args = _CORPUS[name].make()
    _trace_to_the_end(monkeypatch)
    rounds = _Rounds(monkeypatch)
    unbroken.export(model, args, dynamic_shapes=_all_auto(args))
    assert rounds.traces == 1 + len(rounds.adoptions)
    for adoption in rounds.adoptions:
        assert any(not (isinstance(r, tuple) and r[0] == "range") for r in adoption.values())


class _SumThenWork(nn.Module):
    """``x + y`` makes the two batch dims one; then a long tail of work."""

    def forward(self, x, y):
        z = x + y
        for _ in range(24):
            z = torch.sin(z) * 2
        return z


class _SumInTry(nn.Module):
    """The equal-dims guard is met inside a ``try`` whose handler computes something else:
    stopping the trace there must never be taken for the program's own exception."""

    def forward(self, x, y):
        try:
            z = (x + y) * 2
        except Exception:
            z = x - y
        return z.sin()


class _Attention(nn.Module):
    """sdpa with a mask whose last dim may broadcast: the meta kernel decides ``mask_len ==
    seq`` and checks ``mask_len == seq or mask_len == 1`` in the same call; the check implies
    the decision (sizes >= 2), so the program keeps the mask's dim apart with an assertion
    (as when tracing to the end), not one symbol for both."""

    def forward(self, q, mask):
        return F.scaled_dot_product_attention(q, q, q, attn_mask=mask)


def _trace_to_the_end(monkeypatch):
    monkeypatch.setattr(pipeline, "_EARLY_ROUNDS", 0)


@pytest.mark.parametrize("model, args", [
    (_SumThenWork(), (torch.randn(3, 4), torch.randn(3, 4))),
    (_SumInTry(), (torch.randn(3, 4), torch.randn(3, 4))),
    (_Pinned(), (torch.randn(3, 8),)),
], ids=["equal_dims", "inside_try", "pinned"])
def test_the_first_trace_stops_at_a_guard_that_needs_another(monkeypatch, model, args):
    """An adoption that pins or relates dims needs another trace whatever else the first one
    finds: the first stops at that guard (issue 23 item 1), and the program is the one
    tracing to the end gives, computing what eager does."""
    spec = _all_auto(args)
    with monkeypatch.context() as patch:
        _trace_to_the_end(patch)
        full = _Rounds(patch)
        whole = unbroken.export(model, args, dynamic_shapes=spec)
    rounds = _Rounds(monkeypatch)
    ep = unbroken.export(model, args, dynamic_shapes=spec)
    assert rounds.adoptions == full.adoptions and rounds.traces == full.traces == 2
    (guard, first), (none, second) = rounds.stopped
    assert guard is not None and none is None
    assert first == 1 and second == full.stopped[1][1] == full.stopped[0][1]  # 1: the op
    assert _summary(ep) == _summary(whole)
    resized = tuple(torch.randn(5, *a.shape[1:]) for a in args)
    assert_close(ep.module()(*resized), model(*resized), rtol=0, atol=0)


def test_a_check_of_the_same_operation_keeps_the_trace_going(monkeypatch):
    args = (torch.randn(2, 3, 6, 4), torch.randn(2, 1, 6, 6))
    spec = _all_auto(args)
    with monkeypatch.context() as patch:
        _trace_to_the_end(patch)
        whole = unbroken.export(_Attention(), args, dynamic_shapes=spec)
    rounds = _Rounds(monkeypatch)
    ep = unbroken.export(_Attention(), args, dynamic_shapes=spec)
    assert all(guard is None for guard, _ in rounds.stopped)
    assert _summary(ep) == _summary(whole)
    assert len(ep.range_constraints) == 7  # a symbol per dim but the mask's head dim (1)
    resized = (torch.randn(3, 2, 5, 4), torch.randn(3, 1, 5, 5))
    assert_close(ep.module()(*resized), _Attention()(*resized), rtol=0, atol=0)


@pytest.mark.parametrize("name", list(_corpus_params()))
def test_stopping_early_gives_the_program_of_tracing_to_the_end(monkeypatch, name):
    """Every dim Dim.AUTO on the zoo and realistic models: the same program either way."""
    model, args = _CORPUS[name].make()
    spec = _all_auto(args)
    with monkeypatch.context() as patch:
        _trace_to_the_end(patch)
        whole = unbroken.export(model, args, dynamic_shapes=spec)
    assert _summary(unbroken.export(model, args, dynamic_shapes=spec)) == _summary(whole)


# --------------------------------------------------------------------------------------------
# one trace gives the two-trace program
# --------------------------------------------------------------------------------------------

def test_range_narrowed_in_place_is_the_retraced_program(monkeypatch):
    traces = _same_programs(_Table(), (torch.randn(2, 12),), {}, ({0: A, 1: A},), monkeypatch)
    assert traces == 1


def test_a_narrowing_that_changes_what_the_ranges_answered_traces_again(monkeypatch):
    """The first trace asked the ranges whether ``[:, :16]`` is the whole sequence dim (not
    known on [2, oo)); under ``seq <= 16`` they answer yes and the slice goes: narrowing in
    place would keep a node the narrowed spec's trace does not have. The fallback is taken: a
    second trace, the same program as the old path's."""
    args = (torch.randn(2, 12),)
    traces = _same_programs(_TableThenFirst16(), args, {}, ({0: A, 1: A},), monkeypatch)
    assert traces == 2
    ep = unbroken.export(_TableThenFirst16(), args, dynamic_shapes=({0: A, 1: A},))
    assert not [n for n in ep.graph.nodes if n.op == "call_function"
                and n.target is torch.ops.aten.slice.Tensor and n.args[1] == 1]


def test_slicing_to_the_end_is_one_trace_and_no_slice(monkeypatch):
    """``y[:, None, None, :]`` after a narrowing: ``seq <= 9223372036854775807`` holds for any
    int64 size, on the wide range as on the narrow one: narrowed in place, and the whole
    slice is no node of either program."""
    args = (torch.randn(2, 12),)
    assert _same_programs(_TableMask(), args, {}, ({0: A, 1: A},), monkeypatch) == 1
    ep = unbroken.export(_TableMask(), args, dynamic_shapes=({0: A, 1: A},))
    assert not [n for n in ep.graph.nodes if n.target is torch.ops.aten.slice.Tensor
                and n.args[1] == 3]


@pytest.mark.parametrize("name, spec", [
    ("zoo/embedding_posenc", None),
    ("realistic/gpt2_block", None),
    ("zoo/transformer_block", ({0: A, 1: A},)),  # batch and sequence AUTO: seq <= 15
])
def test_corpus_narrowed_in_place_is_the_retraced_program(monkeypatch, name, spec):
    model, args = _CORPUS[name].make()
    traces = _same_programs(model, args, {}, spec or _all_auto(args), monkeypatch)
    assert traces == 1


@pytest.mark.slow
@pytest.mark.skipif(not hf_text.available(), reason="transformers is not installed")
def test_hugging_face_bert_gives_the_retraced_program(monkeypatch):
    """BERT's position table bounds the sequence (<= 512), and its attention mask is a whole
    slice of the sequence dim (``mask[:, None, None, :]``): as in ``_TableMask``, nothing
    the narrower range answers otherwise, so it is narrowed in place (with token_type_ids
    given, a round of its own: its dims are input_ids')."""
    entry = next(m for m in hf_text.TEXT_MODELS if m.name == "bert")
    model, inputs = entry.build(), entry.inputs(batch=2, seq=12)
    del inputs["token_type_ids"]
    spec = {name: {0: A, 1: A} for name in inputs}
    assert _same_programs(model, (), inputs, spec, monkeypatch, draws=2) == 1


@pytest.mark.slow
@pytest.mark.skipif(not hf_text.available(), reason="transformers is not installed")
def test_hugging_face_gpt2_traces_again_for_its_equal_batch_dims(monkeypatch):
    """GPT-2 with an attention mask, batch and sequence Dim.AUTO: ``attention_mask.view(
    batch, -1)`` makes the mask's batch input_ids' (an equal-dims adoption: a second trace;
    the first stops at that line, before the blocks), and nothing else sends it back."""
    entry = next(m for m in hf_text.TEXT_MODELS if m.name == "gpt2")
    model, inputs = entry.build(), entry.inputs(batch=2, seq=12)
    rounds = _Rounds(monkeypatch)
    ep = unbroken.export(model, (), inputs,
                         dynamic_shapes={name: {0: A, 1: A} for name in inputs})
    assert rounds.traces == 2
    assert rounds.adoptions == [{"attention_mask.shape[0]": "input_ids.shape[0]"}]
    (guard, stopped_at), (_, whole) = rounds.stopped
    assert guard and stopped_at < whole / 10
    draw = entry.inputs(batch=3, seq=9, seed=1)
    with torch.no_grad():
        assert_close(ep.module()(**draw), model(**draw), rtol=1e-4, atol=1e-4)
