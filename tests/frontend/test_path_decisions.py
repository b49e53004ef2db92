"""frontend.paths: the decisions on tensor data of one path (PathDecisions), and the source
text of each (condition_text)."""
from __future__ import annotations

import pytest

from unbroken.frontend.paths import PathDecisions, condition_text
from unbroken.frontend.translator import decode

pytestmark = pytest.mark.matrix


def _conditions(fn) -> list[str]:
    """The condition text of every conditional jump of ``fn`` (and of the comprehensions in
    it, which are code objects of their own before 3.12), in code order."""
    return _jump_texts(fn.__code__)


def _jump_texts(code) -> list[str]:
    texts = []
    for index, instr in enumerate(decode(code)):
        if instr.name.startswith("POP_JUMP") and instr.lineno is not None:
            texts.append(condition_text(code, index, instr.lineno)[1])
        if hasattr(instr.arg, "co_code"):
            texts += _jump_texts(instr.arg)
    return texts


def _if(x):
    if x.sum() > 0:
        return 1
    return 2


def _ternary(x):
    return 1 if x.any() else 2


def _while(x):
    while x.max() > 0.5:
        x = x - 1
    return x


def _assert(x):
    assert x.min() >= 0, "negative"
    return x


def _not(done, x):
    while not done.all():
        x = x * 0.5
    return x


def _multiline(x, y):
    if (x.sum()
            > y.sum()):
        return x
    return y


@pytest.mark.parametrize("fn, text", [
    (_if, "x.sum() > 0"), (_ternary, "x.any()"), (_while, "x.max() > 0.5"),
    (_assert, "x.min() >= 0"), (_multiline, "x.sum() > y.sum()"),
    (_not, "done.all()")])  # `not t` decides the truth of `t`: its side is t's value
def test_the_condition_is_the_users_source_text(fn, text):
    assert set(_conditions(fn)) == {text}


def test_an_operand_of_and_is_its_own_condition():
    def both(x, y):
        if x.any() and y.any():
            return 1
        return 2

    # each operand is decided by its own jump (3.11 positions both on the whole `and`)
    assert _conditions(both) == ["x.any()", "y.any()"]


def test_operands_of_nested_and_or_in_source_order():
    def compare_first(x, y):
        if x.sum() > 0 and y.any():  # 3.11: both jumps at the first operand's position
            return 1
        return 2

    def grouped(x, y, z):
        if (x.any() or y.any()) and z.any():  # 3.11: all at the whole statement's position
            return 1
        return 2

    def loop(x, y):
        while x.any() and y.any():  # 3.11 compiles the test twice
            x = x - 1
        return x

    assert _conditions(compare_first) == ["x.sum() > 0", "y.any()"]
    assert _conditions(grouped) == ["x.any()", "y.any()", "z.any()"]
    assert set(_conditions(loop)) == {"x.any()", "y.any()"}
    assert _conditions(loop)[:2] == ["x.any()", "y.any()"]


def test_a_comprehension_filter():
    def positives(x):
        return [v for v in x if v > 0]

    assert _conditions(positives) == ["v > 0"]


class _Frame:
    """What PathDecisions reads of a translator: its code, next instruction and line."""

    def __init__(self, fn, index):
        self.code, self.ip, self.lineno = fn.__code__, index + 1, fn.__code__.co_firstlineno


def _jump(fn) -> int:
    return next(i for i, instr in enumerate(decode(fn.__code__))
                if instr.name.startswith("POP_JUMP"))


def test_the_example_side_is_taken_and_every_decision_forks():
    path = PathDecisions()
    frame = [_Frame(_if, _jump(_if))]
    assert path.decide(frame, True) is True
    decision = path.decisions[0]
    assert (decision.condition.source_text, decision.condition.taken) == ("x.sum() > 0", True)
    assert not decision.forced and decision.forkable
    assert path.forks() == [((decision.site, False),)]


def test_prescribed_sides_are_replayed_and_only_later_decisions_fork():
    first = PathDecisions()
    frames = [_Frame(_if, _jump(_if))]
    first.decide(frames, True)
    (prescribed,) = first.forks()
    second = PathDecisions(prescribed)
    assert second.decide(frames, True) is False  # the other side, whatever the example does
    assert second.decisions[0].forced
    assert second.decide(frames, True) is True  # past the prescription: the example's side
    assert [len(p) for p in second.forks()] == [2]  # only the new decision forks


def test_a_decision_at_another_site_than_prescribed_is_divergence():
    first = PathDecisions()
    first.decide([_Frame(_if, _jump(_if))], True)
    second = PathDecisions(first.forks()[0])
    assert second.decide([_Frame(_while, _jump(_while))], True) is True
    assert second.diverged and not second.decisions[0].forced


def test_evaluations_past_the_unrolling_bound_do_not_fork():
    path = PathDecisions(unroll=2)
    frames = [_Frame(_while, _jump(_while))]
    for _ in range(4):
        path.decide(frames, True)
    assert [d.condition.occurrence for d in path.decisions] == [1, 2, 3, 4]
    assert len(path.forks()) == 2
    assert len(path.unforked()) == 2


def test_a_break_knows_the_decisions_before_it():
    path = PathDecisions()
    frames = [_Frame(_if, _jump(_if))]
    early, late = ValueError("early"), ValueError("late")
    path.note(early)
    path.decide(frames, False)
    path.note(late)
    assert path.before(early) == ()
    assert [d.condition.taken for d in path.before(late)] == [False]
