"""benchmarks/export_time.py: the floors a row is compared with. The fake forward of a dynamic
row runs on symbolic sizes for the dims the row makes dynamic (the problem the export of the
row solves); the static one, on the example sizes."""
import pytest
import torch
from torch.export import Dim

from benchmarks import export_time as bench


def _zoo(name: str, mode: str):
    model, args, kwargs = bench.MODELS[name]()
    return model, args, kwargs, bench.dynamic_shapes(name, mode, args, kwargs)


@pytest.mark.parametrize("mode", ["auto", "dims"])
def test_a_dynamic_rows_fake_forward_has_its_dims_symbolic(mode):
    model, args, kwargs, spec = _zoo("mlp", mode)
    out = bench.fake_forward(model, args, kwargs, spec)
    assert isinstance(out.shape[0], torch.SymInt)  # the batch dim the row makes dynamic
    assert out.shape[1:] == model(*args).shape[1:]  # the others stay the example's
    static = bench.fake_forward(model, args, kwargs, None)
    assert not any(isinstance(size, torch.SymInt) for size in static.shape)
    assert static.shape == model(*args).shape


def test_a_composite_that_reads_sizes_runs_symbolically():
    """The LSTM's native kernel reads concrete sizes; on symbolic ones it decomposes, as it
    does under every trace of torch's (the Python dispatcher)."""
    model, args, kwargs, spec = _zoo("lstm", "dims")
    out = bench.fake_forward(model, args, kwargs, spec)
    eager = model(*args)
    flat_out, flat_eager = torch.utils._pytree.tree_leaves(out), \
        torch.utils._pytree.tree_leaves(eager)
    assert [len(t.shape) for t in flat_out] == [len(t.shape) for t in flat_eager]
    assert any(isinstance(s, torch.SymInt) for t in flat_out for s in t.shape)


class _Keywords(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = torch.nn.Linear(4, 3)

    def forward(self, x=None, mask=None):
        return self.proj(x) * mask.unsqueeze(-1)


def test_keyword_inputs_take_their_dims_by_name():
    batch = Dim("batch")
    x, mask = torch.randn(5, 2, 4), torch.ones(5, 2)
    spec = {"x": {0: batch}, "mask": {0: batch}}
    out = bench.fake_forward(_Keywords(), (), {"x": x, "mask": mask}, spec)
    assert isinstance(out.shape[0], torch.SymInt) and out.shape[1:] == (2, 3)


def test_rows_report_the_symbolic_floor_in_dynamic_modes_only():
    dynamic = bench.measure("mlp", "auto", 1, sides=("unbroken",))
    static = bench.measure("mlp", "static", 1, sides=("unbroken",))
    for row in (dynamic, static):
        assert row["fake_forward"]["median_s"] > 0 and row["fake_forward_ratio"] > 0
    assert dynamic["symbolic_fake_forward"]["median_s"] > 0
    assert dynamic["symbolic_fake_forward_ratio"] == pytest.approx(
        dynamic["symbolic_fake_forward"]["median_s"] / dynamic["unbroken"]["median_s"])
    assert static["symbolic_fake_forward"]["median_s"] is None
    assert static["symbolic_fake_forward_ratio"] is None
    header = bench.COLUMNS.index("unbroken / symbolic fake fwd")
    cells = bench.table_rows([dynamic, static])
    assert cells[0][header].endswith("x") and cells[1][header] == "-"
    assert bench.errors_of([dynamic, static]) == []


@pytest.mark.slow
def test_a_fresh_process_measures_the_fake_forwards_first_call():
    """The floor of a first export: the fake forward run once in a fresh process (torch's
    lazily imported modules and cold caches are in it), reported beside the first exports."""
    row = {"model": "mlp", "mode": "static", "unbroken": bench._summary([0.01])}
    bench.add_process_columns(row, 1, sides=("unbroken",))
    first = row["fake_forward"]["first_process"]
    assert first["error"] is None and first["median_s"] > 0
    assert row["fake_forward"]["process_process"]["median_s"] > first["median_s"]
    assert row["unbroken"]["first_process"]["median_s"] > 0
    cells = bench.table_rows([{**row, "strict": bench._summary([]),
                               "non_strict": bench._summary([]), "strict_ratio": None,
                               "non_strict_ratio": None, "fake_forward_ratio": None}])
    column = bench.COLUMNS.index("first fake fwd s CPU (a fresh process)")
    assert cells[0][column] == f"{first['median_s']:.2f}"
    # no non-strict side here: its whole-process ratio over the fake forward's is unknown
    assert cells[0][-1] == "-"


def test_the_whole_process_ratio_over_the_fake_forwards():
    def side(whole):
        return {**bench._summary([0.01]), "process_process": bench._summary([whole])}

    row = {"non_strict": side(6.0), "fake_forward": side(5.0)}
    assert bench._process_ratio(row, "non_strict", "fake_forward") == pytest.approx(1.2)
    assert bench._process_ratio({"non_strict": side(6.0)}, "non_strict", "fake_forward") is None


class _Nested(torch.nn.Module):
    def forward(self, pair, extra=None):
        return pair[0] + pair[1] * extra["scale"]


def test_inputs_inside_structures_are_made_fake_too():
    pair, extra = (torch.randn(3, 2), torch.randn(3, 2)), {"scale": torch.randn(2)}
    for spec in (None, ((), None)):
        out = bench.fake_forward(_Nested(), (pair, extra), {}, spec)
        assert out.shape == (3, 2)
