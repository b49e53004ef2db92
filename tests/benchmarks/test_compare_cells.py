"""benchmarks/compare_cells.py: unbroken's export time in one cell against a baseline cell."""
import json

from benchmarks import compare_cells


def _report(python: str, rounds: list[float], strict: float | None = None) -> dict:
    side = {"median_s": None, "runs_s": [], "error": None}
    return {"environment": {"python": python, "torch": "2.14.1"},
            "results": [{"model": "mlp", "mode": "static",
                         "unbroken": {**side, "median_s": rounds[0]},
                         "strict": {**side, "median_s": strict},
                         "non_strict": side}]}


def test_ratios_against_the_first_cell_with_rounds_combined(tmp_path, capsys):
    paths = []
    for index, report in enumerate([_report("3.11.7", [0.010], strict=0.2),
                                    _report("3.12.1", [0.030], strict=0.2),
                                    _report("3.12.1", [0.012], strict=0.4),
                                    _report("3.12.1", [0.011], strict=0.3)]):
        path = tmp_path / f"r{index}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    assert compare_cells.main(paths) == 0
    out = capsys.readouterr().out
    assert "Python 3.12.1, torch 2.14.1 vs Python 3.11.7, torch 2.14.1" in out
    # the median of the three rounds (0.012) over the baseline (0.010); strict's 0.3 / 0.2
    assert "mlp                static      1.20x    1.50x          -" in out
    assert "geometric mean 1.20x, largest 1.20x over 1 rows" in out


def test_combine_min_takes_each_cells_quietest_round(tmp_path, capsys):
    paths = []
    for index, report in enumerate([_report("3.11.7", [0.020]), _report("3.11.7", [0.010]),
                                    _report("3.13.0", [0.030]), _report("3.13.0", [0.011])]):
        path = tmp_path / f"r{index}.json"
        path.write_text(json.dumps(report))
        paths.append(str(path))
    assert compare_cells.main([*paths, "--combine", "min"]) == 0
    assert "geometric mean 1.10x, largest 1.10x over 1 rows" in capsys.readouterr().out
