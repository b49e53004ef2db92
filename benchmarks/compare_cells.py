"""Compare unbroken's export time between cells (Python x torch): the JSON files of
``benchmarks/export_time.py --json`` (``make bench``), the first one the baseline.

    python benchmarks/compare_cells.py results/export-time-...-py3.11-torch2.14.1.json \\
        results/export-time-...-py3.12-torch2.14.1.json results/...-py3.13-torch2.14.1.json

For each other file, per model and shape mode: unbroken's median there / in the baseline
(above 1: slower than the baseline), with torch's own ratios beside it when both files timed
torch (a change that torch shows too is the machine's load, not the interpreter), then the
geometric mean and the largest ratio. Files of one cell measured several times (rounds run
alternately, A B C A B C) are combined per model by the median of their medians, or with
``--combine min`` by the smallest: on a shared machine whose load comes and goes, the quietest
round of each cell is the fairer comparison.
"""
from __future__ import annotations

import argparse
import json
import math
import statistics
from collections import defaultdict
from pathlib import Path


def _cell(report: dict) -> str:
    env = report["environment"]
    return f"Python {env['python']}, torch {env['torch']}"


def _medians(reports: list[dict], combine=statistics.median) -> dict:
    """(model, mode) -> side -> the reports' medians combined (their median, or minimum)."""
    values: dict = defaultdict(lambda: defaultdict(list))
    for report in reports:
        for row in report["results"]:
            for side in ("unbroken", "strict", "non_strict"):
                if row[side]["median_s"]:
                    values[(row["model"], row["mode"])][side].append(row[side]["median_s"])
    return {key: {side: combine(v) for side, v in sides.items()}
            for key, sides in values.items()}


def _group(paths: list[str], combine=statistics.median) -> list[tuple[str, dict]]:
    """The files grouped by cell, in the order their cells first appear."""
    by_cell: dict = {}
    for path in paths:
        report = json.loads(Path(path).read_text())
        by_cell.setdefault(_cell(report), []).append(report)
    return [(cell, _medians(reports, combine)) for cell, reports in by_cell.items()]


def _ratio(ours: dict, base: dict, side: str) -> str:
    if side in ours and side in base:
        return f"{ours[side] / base[side]:.2f}x"
    return "-"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("reports", nargs="+", help="export_time.py JSON files; the first "
                                                   "file's cell is the baseline")
    parser.add_argument("--combine", choices=("median", "min"), default="median",
                        help="how one cell's rounds are combined (default: median)")
    options = parser.parse_args(argv)
    cells = _group(options.reports, min if options.combine == "min" else statistics.median)
    (base_cell, base), others = cells[0], cells[1:]
    for cell, medians in others:
        print(f"{cell} vs {base_cell} (unbroken's median there / in the baseline)")
        print(f"{'model':18} {'shapes':7} {'unbroken':>9} {'strict':>8} {'non-strict':>10}")
        logs = []
        for key, sides in medians.items():
            if key not in base or "unbroken" not in sides or "unbroken" not in base[key]:
                continue
            ratio = sides["unbroken"] / base[key]["unbroken"]
            logs.append(math.log(ratio))
            print(f"{key[0]:18} {key[1]:7} {ratio:8.2f}x {_ratio(sides, base[key], 'strict'):>8} "
                  f"{_ratio(sides, base[key], 'non_strict'):>10}")
        if logs:
            print(f"geometric mean {math.exp(sum(logs) / len(logs)):.2f}x, "
                  f"largest {math.exp(max(logs)):.2f}x over {len(logs)} rows\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
