"""size_one.audit and size_one.at_one: which sets of dims at 1 an answer is re-asked under,
and where an answer given inside a node's meta computation goes."""
import sympy
import torch
import torch.nn as nn
from torch.export import Dim
from torch.testing import assert_close

import unbroken
import unbroken.size_one.admission
from unbroken.size_one.at_one import flipped_at_one, holds_at_one
from unbroken.size_one.audit import SizeOneAudit
from unbroken.symbolic.env import ShapeEnvironment


def test_flipped_sets_at_one_are_exactly_the_failing_ones():
    a, b, c, d = sympy.symbols("a b c d", integer=True, positive=True)
    fails = {frozenset({b}), frozenset({a, b})}
    holds = lambda ones: frozenset(ones) not in fails  # noqa: E731
    assert set(flipped_at_one([a, b], holds)) == fails
    assert flipped_at_one([a, b, c, d], holds) is None  # too many to enumerate
    asked = []
    assert not holds_at_one([a, b], lambda ones: asked.append(set(ones)) or holds(ones),
                            within=fails)
    assert asked == [{b}]  # smallest first, stops at the first failure
    asked.clear()
    # a set naming a symbol no longer free (sensitive elsewhere) cannot occur: not checked
    assert holds_at_one([a], lambda ones: asked.append(set(ones)) or holds(ones), within=fails)
    assert asked == []


def test_unit_scope_records_which_sets_at_one_change_an_answer():
    audit = SizeOneAudit()
    env = ShapeEnvironment(size_one=audit)
    s0 = env.create_symbol("s0", 3, source="x.shape[0]")
    s1 = env.create_symbol("s1", 5, upper=64, source="x.shape[1]")
    audit.admit(s0, requested=False)
    audit.admit(s1, requested=False)
    with audit.unit_scope() as pending:
        assert env.decide_expr(sympy.Ne(s0 * s1, s0)) is True  # settled by the ranges
    # s1 == 1 makes it s0 != s0; s0 == 1 alone leaves s1 != 1, still true for s1 >= 2
    assert set(pending) == {s0, s1}
    assert pending.flips == {frozenset({s1}), frozenset({s0, s1})}
    assert not audit.sensitive  # inside a node: the node's metadata check decides


class EmbeddingsPlusPositions(nn.Module):
    """BERT-style embeddings: an in-place broadcast add (``+=``) with grad on. The recorder
    asks whether the add saves the tensor it writes (on stand-ins of its metadata); that
    question's broadcast answers are no decision of the program unless its answer changes
    at 1."""

    def __init__(self):
        super().__init__()
        self.words = nn.Embedding(10, 8)
        self.positions = nn.Embedding(16, 8)

    def forward(self, ids):
        embeddings = self.words(ids)
        embeddings += self.positions(torch.arange(ids.shape[1]))[None]
        return embeddings.tanh()


def test_the_recorders_saved_tensor_question_needs_no_trace_at_one(monkeypatch):
    calls = []
    real = unbroken.size_one.admission._traces_the_same
    monkeypatch.setattr(unbroken.size_one.admission, "_traces_the_same",
                        lambda *a, **k: calls.append(a) or real(*a, **k))
    model = EmbeddingsPlusPositions()
    ep = unbroken.export(model, (torch.randint(0, 10, (2, 5)),),
                         dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},))
    assert {int(r.lower) for r in ep.range_constraints.values()} == {1} and calls == []
    module = ep.module()
    ours, theirs = dict(module.named_parameters()), dict(model.named_parameters())
    names = sorted(theirs)
    for batch, seq in [(1, 1), (1, 5), (3, 1), (3, 7)]:
        ids = torch.randint(0, 10, (batch, seq))
        got, expected = module(ids), model(ids)
        assert_close(got, expected, rtol=0, atol=0)
        grads = torch.autograd.grad(got.sum(), [ours[n] for n in names])
        eager = torch.autograd.grad(expected.sum(), [theirs[n] for n in names])
        for a, b in zip(grads, eager):
            assert_close(a, b, rtol=0, atol=0)
