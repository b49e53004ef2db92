"""find_graph_breaks: every break in one run, in program order, without touching the model."""
import inspect
import json

import pytest
import torch
import torch.nn as nn

import unbroken
from tests.exporter.test_uncaught import RaisesOnlyWhenTraced
from unbroken.cli import main
from unbroken.exporter.trace import Trace

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


def _line(obj, marker: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    return start + next(i for i, text in enumerate(lines) if marker in text)


class Legacy(nn.Module):
    def __init__(self):
        super().__init__()
        self.calls = 0
        self.norm = nn.BatchNorm1d(3)  # train mode: running stats would change if run for real

    def forward(self, x):
        x = self.norm(x)
        if x.mean() > 0:  # B1
            x = x * 2
        self.calls = self.calls + 1  # the model's state: traced (as torch.export), no break
        rows = x.nonzero().tolist()  # B2
        if x.sum() < 1000:  # B3
            x = x - 1
        return x * len(rows) + id(x)  # B4


def test_every_break_in_order_with_its_line():
    model = Legacy()
    before = {k: v.clone() for k, v in model.state_dict().items()}
    breaks = unbroken.find_graph_breaks(model, (torch.randn(4, 3),))
    assert [b.code for b in breaks] == ["UB101", "UB105", "UB101", "UB103"]
    assert [b.location.lineno for b in breaks] == [_line(Legacy, f"# B{i}") for i in range(1, 5)]
    assert model.calls == 0  # nothing the user owns changed
    for key, value in model.state_dict().items():
        torch.testing.assert_close(value, before[key])


def test_no_break_gives_an_empty_list():
    assert unbroken.find_graph_breaks(nn.Linear(3, 2), (torch.randn(4, 3),)) == []


def test_the_path_taken_follows_the_example_values():
    class Branches(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                return x + id(x)  # POSITIVE
            return x - id(x)  # NEGATIVE

    # the example's path first; the other side is explored too, and says which side it is
    positive = unbroken.find_graph_breaks(Branches(), (torch.ones(2),))
    negative = unbroken.find_graph_breaks(Branches(), (-torch.ones(2),))
    assert [b.location.lineno for b in positive[1:]] == [_line(Branches, "# POSITIVE"),
                                                         _line(Branches, "# NEGATIVE")]
    assert [b.location.lineno for b in negative[1:]] == [_line(Branches, "# NEGATIVE"),
                                                         _line(Branches, "# POSITIVE")]
    assert [c.taken for b in positive[1:] for c in b.path_conditions] == [True, False]
    assert [c.taken for b in negative[1:] for c in b.path_conditions] == [False, True]


def test_a_failure_that_cannot_be_stepped_over_ends_the_list():
    class Stops(nn.Module):
        def forward(self, x):
            if x.sum() > 0:
                x = x * 2
            raise ValueError("no")

    breaks = unbroken.find_graph_breaks(Stops(), (torch.ones(2),))
    assert [b.code for b in breaks] == ["UB101", "UB104"]


def test_check_reports_all_breaks_in_its_json(tmp_path):
    source = tmp_path / "cases.py"
    source.write_text(inspect.cleandoc('''
        import torch
        import unbroken

        class Two(torch.nn.Module):
            def forward(self, x):
                if x.sum() > 0:
                    x = x + 1
                return x + id(x)

        unbroken.case(Two(), (torch.ones(3),))
    '''))
    report = tmp_path / "report.json"
    assert main(["check", str(source), "--json", str(report), "--quiet"]) == 1
    case = json.loads(report.read_text())["cases"][0]
    assert [b["code"] for b in case["findings"]] == ["UB101", "UB103"]


def test_unbrokens_own_bug_is_raised_not_listed(monkeypatch):
    """An InternalError during the trace is unbroken's bug: never a graph break in the list."""
    def broken(self, signature, dims):
        raise unbroken.InternalError("a bug planted by the test")

    monkeypatch.setattr(Trace, "_lift_inputs", broken)
    with pytest.raises(unbroken.InternalError, match="planted"):
        unbroken.find_graph_breaks(lambda x: x + 1, (torch.randn(2),))


def test_uncaught_exception_eager_does_not_raise_is_a_bug():
    """An exception only the trace raises (eager, on a copy of the model, returns) is
    unbroken's failure (InternalError), not a graph break ("eager would fail too")."""
    with pytest.raises(unbroken.InternalError, match="eager execution on the same inputs"):
        unbroken.find_graph_breaks(RaisesOnlyWhenTraced(), (torch.randn(2),))
