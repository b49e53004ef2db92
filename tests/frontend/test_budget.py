"""The interpreter's budget (issue 6, item 8): a loop that never ends at export time is refused
with UB122 at the loop's line, within the budget; the budget can be raised."""
from __future__ import annotations

import time

import pytest
import torch

import unbroken
from unbroken.frontend.budget import Budget, current_budget


class SpinsInPython(torch.nn.Module):
    def forward(self, x):
        items = []
        while True:  # LOOP
            items.append(len(items))
        return x


class SpinsOnTensors(torch.nn.Module):
    def forward(self, x):
        while True:  # LOOP
            x = x + 1
        return x


def _count(k):
    total = 0
    for i in range(k):
        total += i
    return total


class LoopsUntilSizeChanges(torch.nn.Module):
    """The loop's exit depends on nothing that changes; the inner helper loops too."""

    def forward(self, x):
        while x.shape[0] > 0:  # LOOP
            x = x * _count(3)
        return x


class BoundedLoop(torch.nn.Module):
    def forward(self, x):
        for _ in range(500):
            x = x + _count(20)
        return x


def _loop_line(cls) -> int:
    import inspect

    lines, start = inspect.getsourcelines(cls.forward)
    return start + next(i for i, text in enumerate(lines) if "# LOOP" in text)


@pytest.mark.parametrize("cls, limits", [(SpinsInPython, {"instructions": 50_000}),
                                         (SpinsOnTensors, {"seconds": 0.5}),
                                         (LoopsUntilSizeChanges, {"instructions": 20_000})])
def test_endless_loop_is_refused_at_its_line(cls, limits):
    started = time.monotonic()
    with unbroken.budget(**limits):
        with pytest.raises(unbroken.GraphBreakError) as info:
            unbroken.export(cls(), (torch.randn(2),))
    assert time.monotonic() - started < 30
    error = info.value
    assert error.code == "UB122"
    assert error.frames[-1].lineno == _loop_line(cls)
    assert "while True" in error.frames[-1].source or "while x.shape" in error.frames[-1].source
    assert "unbroken.budget(" in error.hint
    assert current_budget() == Budget()  # the block's budget ends with the block


def test_find_graph_breaks_reports_the_budget_too():
    with unbroken.budget(instructions=20_000):
        breaks = unbroken.find_graph_breaks(SpinsInPython(), (torch.randn(2),))
    assert [b.code for b in breaks] == ["UB122"]


def test_raising_the_budget_lets_a_long_bounded_loop_export():
    x = torch.randn(2)
    with unbroken.budget(instructions=20_000):
        with pytest.raises(unbroken.GraphBreakError, match="UB122"):
            unbroken.export(BoundedLoop(), (x,))
    with unbroken.budget(instructions=200_000):
        ep = unbroken.export(BoundedLoop(), (x,))
    torch.testing.assert_close(ep.module()(x), BoundedLoop()(x))


def test_the_path_budget_nests_and_keeps_what_is_not_given():
    with unbroken.budget(paths=8, unroll=2):
        with unbroken.budget(path_seconds=5, instructions=1_000):
            inner = current_budget()
    assert (inner.paths, inner.unroll, inner.path_seconds, inner.instructions) == \
        (8, 2, 5.0, 1_000)
    assert inner.path_instructions == Budget().path_instructions
    assert current_budget() == Budget()


# --------------------------------------------------------------------------------------------
# a requested stop (the exporter's adopt_early)
# --------------------------------------------------------------------------------------------

def test_a_requested_stop_ends_the_trace_at_the_next_instruction_once_confirmed():
    from unbroken.frontend.budget import CLOCK_EVERY, BudgetMeter, TraceStopped

    meter = BudgetMeter(current_budget())
    meter.count = 10
    asked = []
    meter.request_stop(lambda: asked.append(1) or True)
    meter.request_stop(lambda: pytest.fail("a second request while one is pending"))
    meter.count += 1  # what the interpreter does before it looks at the meter
    assert meter.count % CLOCK_EVERY == 0
    with pytest.raises(TraceStopped):
        meter.exhausted()
    assert asked == [1]
    meter.request_stop(lambda: False)  # not confirmed: the trace goes on, nothing pending
    assert meter.exhausted() is None and meter.exhausted() is None
