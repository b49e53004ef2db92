"""An ``and``/``or`` whose value a size question picks (``is_causal = q_len > 1 and mask is
None``): when both picks give the same bool (the operands after the question are plain
reads, ``is`` tests and constants), the question decides nothing at size 1, the size-1 audit
does not count it, and no trace at 1 is needed (``frontend.opcodes.control._picks_agree``).

Oracle: CPython evaluating the same expression at size 1 and at the example's size, and
eager at size 1 (every program either refuses size 1 or computes eager's values)."""
from __future__ import annotations

import importlib.util
import itertools

import pytest
import torch
import torch.nn as nn
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim
from torch.testing import assert_close

import unbroken
import unbroken.size_one.admission
from unbroken import InputMismatchError

pytestmark = pytest.mark.matrix


@pytest.fixture
def traces_at_one(monkeypatch):
    """How many traces at size 1 the admission runs."""
    calls = []
    original = unbroken.size_one.admission._traces_the_same

    def counted(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    monkeypatch.setattr(unbroken.size_one.admission, "_traces_the_same", counted)
    return calls


class _Attention(nn.Module):
    """Hugging Face's SDPA attention: ``is_causal`` picked by ``q_len > 1``, with a mask."""

    def __init__(self, rows: bool):
        super().__init__()
        self.out = nn.Linear(32, 32)
        self.rows = rows

    def forward(self, q, mask):
        batch, _, q_len, _ = q.shape
        is_causal = q_len > 1 and mask is None
        attn = torch.nn.functional.scaled_dot_product_attention(
            q, q * 0.5, q + 1, attn_mask=mask, is_causal=is_causal)
        merged = attn.transpose(1, 2).contiguous()
        if self.rows:  # the projection of (batch * q_len) rows, as GPT-2's Conv1D
            return self.out(merged.view(batch * q_len, -1))
        return self.out(merged.view(batch, q_len, -1))


@pytest.mark.parametrize("rows", [True, False], ids=["rows", "batched"])
def test_a_question_both_picks_answer_alike_needs_no_trace_at_one(traces_at_one, rows):
    """No trace at 1, and the sequence admits 1 bit for bit. The copy that is a view at 1
    reaches the projection either as rows (its size-1 dim merged away) or batched, a
    (batch, 1, 32) operand of ``linear``, whose kernel path depends on the size-1 dim's
    stride: eager's view there, replayed by torch's own stride rules from eager's result at
    1, has the copy's strides, so the product reads the same layout on both sides."""
    model = _Attention(rows)
    seq = Dim("seq", max=64)
    ep = unbroken.export(model, (torch.randn(2, 4, 6, 8), torch.ones(2, 1, 6, 6, dtype=torch.bool)),
                         dynamic_shapes={"q": {0: Dim("batch"), 2: seq},
                                         "mask": {0: Dim("batch"), 2: seq, 3: seq}})
    assert traces_at_one == []
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1}
    for batch, length in ((1, 1), (3, 1), (1, 5), (2, 6)):
        q = torch.randn(batch, 4, length, 8)
        mask = torch.rand(batch, 1, length, length) > 0.3
        mask[..., 0] = True
        assert_close(ep.module()(q, mask), model(q, mask), rtol=0, atol=0)


_OPERANDS = ("mask is None", "mask is not None", "True", "False", "flag", "None", "0", "1",
             "n >= 1")


def _chain_module(tmp_path, question: str, connector: str, operands: tuple, index: int):
    source = (
        "import torch\n"
        "class Chain(torch.nn.Module):\n"
        "    def forward(self, x, mask=None):\n"
        "        n = x.shape[0]\n"
        "        flag = True\n"
        f"        value = {question} {connector} {f' {connector} '.join(operands)}\n"
        "        return x * 2 if value else x * 3\n"
        "def chain(n, mask):\n"
        "    flag = True\n"
        f"    return {question} {connector} {f' {connector} '.join(operands)}\n")
    path = tmp_path / f"chain_{index}.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location(f"chain_{index}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


_COUNTER = itertools.count()


@settings(max_examples=40, deadline=None)
@given(question=st.sampled_from(["n > 1", "n >= 2", "n != 1", "n <= 1", "n == 1", "n < 2"]),
       connector=st.sampled_from(["and", "or"]),
       operands=st.lists(st.sampled_from(_OPERANDS), min_size=1, max_size=3).map(tuple),
       with_mask=st.booleans())
def test_drawn_chains_skip_the_trace_at_one_only_when_cpython_agrees(
        tmp_path_factory, question, connector, operands, with_mask):
    """For ``value = <size question> and/or <operands>``, then ``x * 2 if value else x * 3``:
    the export traces at 1 unless CPython gives ``value`` the same at 1 as at the example's
    size (never skipped when it does not), is exact wherever it admits 1, and skips the
    trace whenever the operands are plain reads, ``is`` tests and constants and CPython
    agrees."""
    module = _chain_module(tmp_path_factory.mktemp("chains"), question, connector, operands,
                           next(_COUNTER))
    mask = torch.ones(4) if with_mask else None
    same = module.chain(1, mask) == module.chain(3, mask) and \
        type(module.chain(1, mask)) is type(module.chain(3, mask))
    calls = []
    original = unbroken.size_one.admission._traces_the_same

    def counted(*args, **kwargs):
        calls.append(args[1])
        return original(*args, **kwargs)

    unbroken.size_one.admission._traces_the_same = counted
    try:
        model = module.Chain()
        ep = unbroken.export(model, (torch.randn(3, 4),), {"mask": mask},
                             dynamic_shapes={"x": {0: Dim("n")}, "mask": None if mask is None
                                             else {}})
    finally:
        unbroken.size_one.admission._traces_the_same = original
    admitted = {int(r.lower) for r in ep.range_constraints.values()} == {1}
    if admitted and not calls:
        assert same, "a question that changes the value was not counted"
    plain = "n >= 1" not in operands
    if same and plain:
        assert not calls and admitted
    for n in (1, 2, 5):
        x = torch.randn(n, 4)
        try:
            got = ep.module()(x, mask=mask)
        except InputMismatchError as error:
            assert n == 1 and "size 1" in str(error)
            continue
        assert_close(got, model(x, mask=mask), rtol=0, atol=0)
