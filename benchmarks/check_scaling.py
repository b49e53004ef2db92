"""`unbroken check` on a 50-case project: wall time at -j 1 and -j 2, and what worker isolation
costs per case.

The script writes a project of 10 files with 5 cases each (an MLP, a small CNN, an attention
block, an embedding model and a GRU head, declared in a loop over batch sizes, the way a team
declares its models) into a temporary directory, then runs the real command there as CI runs
it, once per mode and ``--repeat`` times each (the median is shown):

- ``--in-process``: every case exported in the command's own process (no isolation: the floor);
- ``-j 1``: one worker process per case, one at a time;
- ``-j 2``: one worker process per case, two at a time.

Each run is ``python -m unbroken check . --quiet --json FILE`` in a fresh process, so its
wall time includes importing torch and, for -j, starting the forkserver (which imports torch,
unbroken and torch._dynamo once more). Those are fixed costs of a run; the cost of isolation per
case is measured apart (``--probe``, in fresh processes): every case exported in one warm
process (the floor), then every case run as ``-j 1`` runs it, a forked worker each with the
forkserver already up. The difference per case is what a worker costs: the fork, importing
the case's file again (building its models), the first-export warm-up a single process pays
only once, and sending the outcome back.

    python benchmarks/check_scaling.py [--repeat 3] [--files 10] [--json results.json]
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

NETS = '''\
import torch


class Mlp(torch.nn.Module):
    def __init__(self, width):
        super().__init__()
        self.layers = torch.nn.Sequential(torch.nn.Linear(16, width), torch.nn.ReLU(),
                                          torch.nn.Linear(width, width), torch.nn.GELU(),
                                          torch.nn.Linear(width, 4))

    def forward(self, x):
        return self.layers(x).softmax(-1)


class Cnn(torch.nn.Module):
    def __init__(self, channels):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, channels, 3, padding=1)
        self.norm = torch.nn.BatchNorm2d(channels)
        self.head = torch.nn.Linear(channels, 10)

    def forward(self, x):
        x = torch.relu(self.norm(self.conv(x)))
        return self.head(x.mean((2, 3)))


class Attention(torch.nn.Module):
    def __init__(self, dim):
        super().__init__()
        self.qkv = torch.nn.Linear(dim, 3 * dim)
        self.out = torch.nn.Linear(dim, dim)
        self.norm = torch.nn.LayerNorm(dim)

    def forward(self, x):
        q, k, v = self.qkv(self.norm(x)).chunk(3, dim=-1)
        scores = (q @ k.transpose(-2, -1)) / q.shape[-1] ** 0.5
        return x + self.out(scores.softmax(-1) @ v)


class Embed(torch.nn.Module):
    def __init__(self, vocab):
        super().__init__()
        self.embedding = torch.nn.Embedding(vocab, 32)
        self.register_buffer("position", torch.randn(64, 32))

    def forward(self, tokens):
        x = self.embedding(tokens) + self.position[: tokens.shape[1]]
        return x.mean(1)


class GruHead(torch.nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.gru = torch.nn.GRU(8, hidden, batch_first=True)
        self.head = torch.nn.Linear(hidden, 2)

    def forward(self, x):
        out, _ = self.gru(x)
        return self.head(out[:, -1])
'''

CASES = '''\
import torch
import unbroken

from nets import Attention, Cnn, Embed, GruHead, Mlp

SIZE = {size}

for batch in (1, 4):
    unbroken.case(Mlp(SIZE).eval(), (torch.randn(batch, 16),))
unbroken.case(Cnn(SIZE // 4).eval(), (torch.randn(2, 3, 16, 16),))
unbroken.case(Attention(SIZE).eval(), (torch.randn(2, 8, SIZE),))
unbroken.case(Embed(100 + SIZE).eval(), (torch.randint(0, 100, (2, 12)),))
'''

GRU_CASE = "unbroken.case(GruHead(SIZE // 2).eval(), (torch.randn(2, 5, 8),))\n"


def write_project(root: Path, files: int) -> int:
    """The benchmark project under ``root``; returns its number of cases."""
    (root / "nets.py").write_text(NETS)
    cases = 0
    for i in range(files):
        # every second file swaps its batch-4 Mlp for a GRU head: 5 cases per file either way
        text = CASES.format(size=32 + 8 * i)
        if i % 2:
            text = text.replace("(1, 4)", "(1,)") + GRU_CASE
        (root / f"cases_{i:02d}.py").write_text(text)
        cases += 5
    return cases


def run_once(root: Path, mode: list[str]) -> tuple[float, dict]:
    """Wall time of one ``unbroken check`` process in ``root`` and its JSON report."""
    report = root / "report.json"
    command = [sys.executable, "-m", "unbroken", "check", ".", "--quiet", "--json",
               str(report), *mode]
    start = time.perf_counter()
    done = subprocess.run(command, cwd=root, capture_output=True, text=True)
    seconds = time.perf_counter() - start
    if done.returncode != 0:
        raise SystemExit(f"`{' '.join(mode) or 'check'}` exited {done.returncode}:\n"
                         f"{done.stdout}\n{done.stderr}")
    return seconds, json.loads(report.read_text())


MODES = {"in-process": ["--in-process"], "-j 1": ["-j", "1"], "-j 2": ["-j", "2"]}


def isolation_probe(root: str) -> None:
    """Run in a fresh process (``--probe ROOT``): the per-case cost of a worker, apart from the
    fixed costs of a run. Exports every case in this process once to warm up, then again
    (timed: the export floor); then starts the forkserver with an empty job and runs every case
    as ``-j 1`` does, one forked worker each (timed). Prints both sums as JSON."""
    from unbroken.check import jobs
    from unbroken.check.execute import collect, find_case, run_case, use_root
    from unbroken.check.pool import Job, run_jobs

    os.chdir(root)
    use_root(root)
    infos = [i for f in sorted(Path(root).glob("cases_*.py")) for i in collect(f.name, root)]
    cases = [(info, find_case(info.target, info.id, root)) for info in infos]
    for info, case in cases:  # warm-up: lazy imports and caches of a first export
        run_case(case, info.target, root)
    start = time.perf_counter()
    for info, case in cases:
        run_case(case, info.target, root)
    in_process = time.perf_counter() - start
    run_jobs([Job("empty", os.getpid, ())], 1, 600, lambda result: None)  # start the server
    exports = []
    start = time.perf_counter()
    run_jobs([Job(i.id, jobs.case_job, (i.target, i.id, root)) for i in infos], 1, 600,
             lambda result: exports.append(result.value["outcome"]["seconds"]))
    workers = time.perf_counter() - start
    print(json.dumps({"cases": len(infos), "in_process": in_process, "workers": workers,
                      "worker_exports": sum(exports)}))


def probe(root: Path, repeat: int) -> dict:
    """Medians of :func:`isolation_probe` over ``repeat`` fresh processes."""
    runs = [json.loads(subprocess.run([sys.executable, __file__, "--probe", str(root)],
                                      capture_output=True, text=True, check=True).stdout)
            for _ in range(repeat)]
    overheads = [(r["workers"] - r["in_process"]) / r["cases"] for r in runs]
    return {"runs": runs, "overhead_per_case_median": statistics.median(overheads),
            "export_per_case_median": statistics.median(r["in_process"] / r["cases"]
                                                        for r in runs)}


def measure(root: Path, repeat: int) -> dict:
    rows = {"isolation": probe(root, repeat)}
    for label, mode in MODES.items():
        walls, exports = [], []
        for _ in range(repeat):
            wall, report = run_once(root, mode)
            walls.append(wall)
            exports.append(sum(c["seconds"] for c in report["cases"]))
            total = report["summary"]["total"]
        rows[label] = {"wall": walls, "wall_median": statistics.median(walls),
                       "export_sum_median": statistics.median(exports), "cases": total}
    return rows


def print_table(rows: dict, cases: int) -> None:
    print(f"| mode | wall time ({cases} cases) | per case | sum of export times |")
    print("|---|---|---|---|")
    for label in MODES:
        row = rows[label]
        wall = row["wall_median"]
        print(f"| `{label}` | {wall:.1f} s | {1000 * wall / cases:.0f} ms | "
              f"{row['export_sum_median']:.1f} s |")
    isolation = rows["isolation"]
    speedup = rows["-j 1"]["wall_median"] / rows["-j 2"]["wall_median"]
    print(f"\nwarm export per case, in one process: "
          f"{1000 * isolation['export_per_case_median']:.0f} ms")
    print(f"isolation overhead per case (a forked worker per case, forkserver already up): "
          f"{1000 * isolation['overhead_per_case_median']:.0f} ms")
    print(f"-j 2 speed-up over -j 1: {speedup:.2f}x on {os.cpu_count()} cores")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=3, help="runs per mode (median shown)")
    parser.add_argument("--files", type=int, default=10, help="case files (5 cases each)")
    parser.add_argument("--json", metavar="FILE", help="write every run's figures to FILE")
    parser.add_argument("--probe", metavar="ROOT", help=argparse.SUPPRESS)
    options = parser.parse_args()
    if options.probe:
        return isolation_probe(options.probe)
    with tempfile.TemporaryDirectory(prefix="unbroken-bench-") as tmp:
        root = Path(tmp)
        cases = write_project(root, options.files)
        rows = measure(root, options.repeat)
    print_table(rows, cases)
    if options.json:
        import torch

        env = {"python": platform.python_version(), "torch": torch.__version__,
               "machine": platform.machine(), "cpus": os.cpu_count()}
        Path(options.json).write_text(json.dumps({"env": env, "rows": rows}, indent=2) + "\n")


if __name__ == "__main__":
    main()
