"""exporter.paths: find_graph_breaks explores both sides of every decision on tensor data
(the path exploration)."""
from __future__ import annotations

import importlib.util
import inspect

import pytest
import torch
import torch.nn as nn

import unbroken
from tests.state_leak import ModelSnapshot
from unbroken.exporter.process_state import ProcessState

pytestmark = pytest.mark.matrix


def _line(obj, marker: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, text in enumerate(lines) if marker in text)


def _paths(breaks) -> dict[int, list[tuple[str, bool]]]:
    """line -> [(condition, taken)] of every break."""
    return {b.location.lineno: [(c.source_text, c.taken) for c in b.path_conditions]
            for b in breaks}


class OnlyUntaken(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            return x * 2
        return x + id(x)  # UNTAKEN


def test_a_break_only_on_the_untaken_branch_is_found_with_its_condition():
    breaks = unbroken.find_graph_breaks(OnlyUntaken(), (torch.ones(3),))
    assert [b.code for b in breaks] == ["UB101", "UB103"]
    (condition,) = breaks[1].path_conditions
    assert (condition.source_text, condition.taken) == ("x.sum() > 0", False)
    assert condition.line == _line(OnlyUntaken, "if x.sum() > 0")
    assert condition.file == inspect.getsourcefile(OnlyUntaken)
    assert breaks[1].location.lineno == _line(OnlyUntaken, "# UNTAKEN")
    assert "Found on the path where `x.sum() > 0` is False" in breaks[1].render()
    assert breaks[1].to_dict()["path_conditions"][0]["taken"] is False
    assert breaks.exploration.explored == 2 and breaks.exploration.complete
    assert breaks[0].path_conditions == ()  # the branch itself is reached on every path


class Nested(nn.Module):
    def forward(self, x):
        if x.sum() > 0:
            if x.max() > 10:
                x = x + id(x)  # INNER
            x = x * 2
        return x.nonzero().tolist()  # JOIN


def test_nested_branches_give_conjunctions_and_a_join_carries_nothing():
    breaks = unbroken.find_graph_breaks(Nested(), (torch.ones(3),))
    paths = _paths(breaks)
    assert paths[_line(Nested, "# INNER")] == [("x.sum() > 0", True), ("x.max() > 10", True)]
    assert paths[_line(Nested, "# JOIN")] == []  # reached on every path: reported once
    assert [b.location.lineno for b in breaks].count(_line(Nested, "# JOIN")) == 1
    assert paths[_line(Nested, "if x.max() > 10")] == [("x.sum() > 0", True)]
    assert breaks.exploration.explored == 3 and breaks.exploration.complete


class Ternary(nn.Module):
    def forward(self, x):
        return x.cos() if x.mean() < 0 else [x][int(x.max())]  # TERNARY


def test_a_ternary_forks():
    breaks = unbroken.find_graph_breaks(Ternary(), (torch.ones(3),))
    assert [b.code for b in breaks] == ["UB101", "UB105"]
    assert _paths(breaks[1:]) == {_line(Ternary, "# TERNARY"): [("x.mean() < 0", False)]}


class DataLoop(nn.Module):
    def forward(self, x):
        while x.sum() > 0:
            x = x - id(x)  # BODY
        return x


def test_a_while_on_tensor_data_is_unrolled_within_the_bound_and_says_so():
    # the example never enters the loop: its body's break is on the other side
    breaks = unbroken.find_graph_breaks(DataLoop(), (torch.zeros(3),))
    assert _paths(breaks)[_line(DataLoop, "# BODY")] == [("x.sum() > 0", False)] or \
        _paths(breaks)[_line(DataLoop, "# BODY")] == [("x.sum() > 0", True)]
    body = next(b for b in breaks if b.location.lineno == _line(DataLoop, "# BODY"))
    assert [(c.taken, c.occurrence) for c in body.path_conditions] == [(True, 1)]
    exploration = breaks.exploration
    assert not exploration.complete
    assert any("after its first 4 evaluation(s)" in reason for reason in exploration.cut)
    with unbroken.budget(unroll=2):
        fewer = unbroken.find_graph_breaks(DataLoop(), (torch.zeros(3),))
    assert fewer.exploration.explored < exploration.explored
    assert "incomplete" in exploration.describe()


ASSERTS = """\
import torch


class Asserts(torch.nn.Module):
    def forward(self, x):
        assert x.min() >= 0, f"negative values: {x.tolist()}"
        return x * 2
"""


def _module_from(tmp_path, source: str):
    """A module written to a file (pytest rewrites the asserts of test modules)."""
    path = tmp_path / "asserts_model.py"
    path.write_text(source)
    spec = importlib.util.spec_from_file_location("asserts_model", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_an_assert_on_data_is_a_run_time_check_not_a_fork(tmp_path):
    model = _module_from(tmp_path, ASSERTS).Asserts()
    breaks = unbroken.find_graph_breaks(model, (torch.ones(3),))
    # as torch.export: the assert becomes a run-time assertion in the graph (its message is
    # built only when it fails), so neither side is a break and nothing forks
    assert list(breaks) == [] and breaks.exploration.forks == 0
    ep = unbroken.export(model, (torch.ones(3),))
    with pytest.raises(Exception, match="negative|assert|Assert"):
        ep.module()(-torch.ones(3))


class Items(nn.Module):
    def forward(self, x):
        if x.sum().item() > 0:  # ITEM
            return x
        return x * id(x) if bool(x.max()) else x  # BOOL


def test_item_compared_and_bool_of_a_tensor_fork():
    breaks = unbroken.find_graph_breaks(Items(), (torch.ones(3),))
    # bool() of a tensor is its item compared with 0 (no decision); the `if` on it forks
    assert [b.code for b in breaks] == ["UB105", "UB105", "UB103"]
    assert [(c.source_text, c.taken) for c in breaks[1].path_conditions] == \
        [("x.sum().item() > 0", False)]
    assert _paths(breaks)[_line(Items, "# BOOL")] == \
        [("x.sum().item() > 0", False), ("bool(x.max())", True)]  # id(x) on the taken side
    assert breaks.exploration.explored == 3


class Flags(nn.Module):
    def __init__(self):
        super().__init__()
        self.use_bias = False

    def forward(self, x, scale=2):
        if self.use_bias:
            x = x + id(x)
        if x.shape[0] > 2 and scale > 1:
            x = x * scale
        return x + 1 if torch.jit.is_scripting() else x - 1


def test_decisions_on_values_fixed_at_export_time_are_not_forked():
    breaks = unbroken.find_graph_breaks(Flags(), (torch.ones(4, 2),),
                                        dynamic_shapes={"x": {0: torch.export.Dim("n")}})
    assert list(breaks) == []
    assert (breaks.exploration.explored, breaks.exploration.forks) == (1, 0)


class Many(nn.Module):
    def forward(self, x):
        for i in range(6):
            if x[i].sum() > 0:
                x = x + 1
        return x + id(x)


def test_a_budget_cut_is_reported_never_silent():
    with unbroken.budget(paths=3):
        breaks = unbroken.find_graph_breaks(Many(), (torch.ones(6, 2),))
    exploration = breaks.exploration
    assert exploration.explored == 3 and not exploration.complete
    assert any("budget of 3 paths" in reason for reason in exploration.cut)
    assert "3 paths explored; incomplete" in exploration.describe()
    with unbroken.budget(path_instructions=1):
        tiny = unbroken.find_graph_breaks(Many(), (torch.ones(6, 2),))
    assert any("instructions for all paths" in reason for reason in tiny.exploration.cut)
    assert [b.code for b in tiny] == [b.code for b in breaks]  # the example's path is whole
    with unbroken.budget(path_seconds=0):
        hurried = unbroken.find_graph_breaks(Many(), (torch.ones(6, 2),))
    assert hurried.exploration.explored == 1
    assert any("seconds for all paths" in reason for reason in hurried.exploration.cut)


class Stateful(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.norm = nn.BatchNorm1d(3)
        self.calls = 0

    def forward(self, x):
        x = self.norm(x)
        noise = torch.rand(())  # the random state is replayed on every path
        if x.sum() + noise > 0:
            self.count.add_(1)
            self.calls = self.calls + 1
            x = x * 2
        else:
            self.count.sub_(1)
            self.tag = "negative"
            x = x + id(x)
        if noise > 2:
            x = x.tolist()
        return x


@pytest.mark.filterwarnings("ignore::unbroken.frontend.overlay.StateWriteWarning")
def test_forking_leaves_no_trace_on_the_model_or_the_process():
    model, x = Stateful(), torch.randn(4, 3)
    before, process = ModelSnapshot.of(model), ProcessState.capture()
    rng = torch.random.get_rng_state()
    breaks = unbroken.find_graph_breaks(model, (x,))
    assert before.diff(ModelSnapshot.of(model)) == []
    assert ProcessState.capture() == process
    assert torch.equal(torch.random.get_rng_state(), rng)
    assert not hasattr(model, "tag") and model.calls == 0
    assert breaks.exploration.complete  # replay met the same decisions: no divergence
    assert breaks.exploration.explored == 4


class Moody(nn.Module):
    def __init__(self):
        super().__init__()
        self.mode = "plain"

    def forward(self, x):
        if x.sum() > 0:
            self.mode = "scaled"  # a write to the model's state, on one path only
        if self.mode == "scaled":  # a Python value: not forked, decided per path
            return x + id(x)  # SCALED
        return x.nonzero().tolist()  # PLAIN


@pytest.mark.filterwarnings("ignore::unbroken.frontend.overlay.StateWriteWarning")
def test_each_path_has_its_own_state():
    model = Moody()
    breaks = unbroken.find_graph_breaks(model, (torch.ones(3),))
    assert _paths(breaks[1:]) == {_line(Moody, "# SCALED"): [("x.sum() > 0", True)],
                                  _line(Moody, "# PLAIN"): [("x.sum() > 0", False)]}
    assert breaks.exploration.forks == 1 and model.mode == "plain"
