"""Corpus benchmark: unbroken vs torch.export (strict and non-strict) on real models and ExportDB.

For every case (``corpus_registry``: Hugging Face ``transformers`` architectures built from tiny
random configs, every ExportDB example shipped inside torch, the seed tutorial's examples) and
every exporter, one fresh process (a child forked from ``corpus_worker.py --serve``, which has
imported torch, transformers and unbroken and exported nothing; ``--spawn``: a new interpreter)
builds the model with a fixed seed,
exports it twice (both calls timed), runs ``ep.module()`` against eager and records peak RSS.
With ``--dynamic``: ``Dim.AUTO`` on batch and sequence of each text input (batch of images and
audio), then the program runs on batch 3 / seq 9 too.

    python benchmarks/corpus.py [--only bert,gpt2] [--exporters unbroken,strict,nonstrict]
        [--groups outside2] [--dynamic] [--timeout 300] [--jobs 1] [--json FILE] [--markdown FILE]
        [--single-call] [--reuse OLD.json]
"""
from __future__ import annotations

import argparse
import datetime
import json
import os
import platform
import queue
import signal
import subprocess
import sys
import tempfile
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))

from corpus_registry import GROUPS, all_cases  # noqa: E402
from corpus_report import EXPORTERS, render, summary_rows  # noqa: E402

WORKER = HERE / "corpus_worker.py"
# ExportDB examples carry their own dynamic_shapes and no resized call: --dynamic would repeat
# the static run, so it measures the other sets.
DYNAMIC_GROUPS = ("common", "harder", "seed", "outside2")


class ForkServer:
    """A ``corpus_worker.py --serve`` process: it imports torch, transformers and unbroken once,
    then forks one fresh child per task (see ``corpus_worker.serve``)."""

    def __init__(self, log: Path):
        self._log = open(log, "w")
        self._process = subprocess.Popen([sys.executable, str(WORKER), "--serve"],
                                         stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                                         stderr=self._log, text=True)

    def run(self, task: dict) -> dict:
        """Send one task; the server's answer: ``{"rc", "timeout", "elapsed"}``."""
        self._process.stdin.write(json.dumps(task) + "\n")
        self._process.stdin.flush()
        answer = self._process.stdout.readline()
        if not answer:
            raise RuntimeError(f"the corpus fork server exited (see {self._log.name})")
        return json.loads(answer)

    def close(self) -> None:
        self._process.stdin.close()
        self._process.wait()
        self._log.close()


def spawn(task: dict) -> dict:
    """Run one task in a new interpreter (``--spawn``): the same answer as ``ForkServer.run``."""
    command = [sys.executable, str(WORKER), task["case"], task["exporter"], task["out"],
               "--group", task["group"]] + (["--dynamic"] if task["dynamic"] else []) + (
               ["--single-call"] if task["single_call"] else [])
    start = time.perf_counter()
    with open(task["log"], "w") as log:
        process = subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT,
                                   start_new_session=True)
        try:
            rc = process.wait(timeout=task["timeout"])
        except subprocess.TimeoutExpired:
            os.killpg(process.pid, signal.SIGKILL)  # the worker's own process group
            process.wait()
            return {"rc": None, "timeout": True, "elapsed": task["timeout"]}
    return {"rc": rc, "timeout": False, "elapsed": time.perf_counter() - start}


def run_one(runner, case: str, group: str, exporter: str, dynamic: bool,
            timeout: float, single_call: bool = False) -> dict:
    """Run one (case, exporter) in a fresh process; the record the worker wrote, or the
    driver's own for a timeout or a crash."""
    base = {"case": case, "group": group, "exporter": exporter, "dynamic": dynamic}
    with tempfile.TemporaryDirectory(prefix="corpus-") as tmp:
        out, log = Path(tmp) / "record.json", Path(tmp) / "log.txt"
        answer = runner({**base, "out": str(out), "log": str(log), "timeout": timeout,
                         "single_call": single_call})
        if answer["timeout"]:
            return {**base, "status": "timeout", "process_s": timeout,
                    "error": {"type": "timeout", "line": f"no result after {timeout:.0f} s"}}
        if answer["rc"] != 0 or not out.exists():
            tail = [line for line in log.read_text(errors="replace").splitlines() if line.strip()]
            return {**base, "status": "crash", "process_s": answer["elapsed"],
                    "returncode": answer["rc"],
                    "error": {"type": "crash",
                              "line": tail[-1][:300] if tail else f"rc={answer['rc']}"}}
        return {**json.loads(out.read_text()), "process_s": answer["elapsed"]}


def environment() -> dict:
    import torch
    import transformers

    import unbroken

    return {
        "date": datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "python": platform.python_version(), "torch": torch.__version__,
        "transformers": transformers.__version__, "unbroken": unbroken.__version__,
        "machine": f"{platform.machine()}, {os.cpu_count()} cores, {platform.system()}",
        "worker_threads": 1,
    }


def _parse(argv):
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", help="comma-separated case names (default: all)")
    parser.add_argument("--groups", help="comma-separated sets to run (default: all; "
                        f"{', '.join(GROUPS)}), e.g. --groups outside2 for the newest cases")
    parser.add_argument("--exporters", default=",".join(EXPORTERS),
                        help="comma-separated subset of unbroken,strict,nonstrict")
    parser.add_argument("--dynamic", action="store_true",
                        help="Dim.AUTO on batch/sequence, and a run on resized inputs")
    parser.add_argument("--timeout", type=float, default=300.0, help="seconds per process")
    parser.add_argument("--jobs", type=int, default=1, help="processes at a time")
    parser.add_argument("--json", type=Path, help="write every record and the environment")
    parser.add_argument("--markdown", type=Path, help="write the Markdown report")
    parser.add_argument("--single-call", action="store_true",
                        help="export once per process (no second, timed call): about half "
                             "the time on a loaded machine")
    parser.add_argument("--reuse", type=Path,
                        help="a previous --json report: its records for the exporters not "
                             "selected with --exporters are kept in this report (e.g. rerun "
                             "unbroken only after a change, keep torch's)")
    parser.add_argument("--spawn", action="store_true",
                        help="a new interpreter per case instead of a fork of a pre-imported one")
    parser.add_argument("--list", action="store_true", help="print the cases and exit")
    options = parser.parse_args(argv)
    options.exporters = [e for e in options.exporters.split(",") if e]
    options.groups = [g.strip() for g in (options.groups or "").split(",") if g.strip()]
    if set(options.groups) - set(GROUPS):
        parser.error(f"unknown sets {sorted(set(options.groups) - set(GROUPS))}; choose from "
                     f"{list(GROUPS)}")
    unknown = set(options.exporters) - set(EXPORTERS)
    if unknown:
        parser.error(f"unknown exporters {sorted(unknown)}; choose from {EXPORTERS}")
    return options


def select(options) -> dict:
    groups = DYNAMIC_GROUPS if options.dynamic and not options.only else tuple(GROUPS)
    if options.groups:
        groups = tuple(g for g in GROUPS if g in options.groups)
    cases = all_cases(groups)
    if options.only:
        names = [n.strip() for n in options.only.split(",") if n.strip()]
        missing = [n for n in names if n not in cases]
        if missing:
            sys.exit(f"unknown cases: {', '.join(missing)} (see --list)")
        cases = {n: cases[n] for n in cases if n in names}
    return cases


def main(argv=None) -> int:
    options = _parse(argv)
    cases = select(options)
    if options.list:
        for case in cases.values():
            print(f"{case.group:9} {case.name}")
        return 0
    tasks = [(c.name, c.group, e) for c in cases.values() for e in options.exporters]
    command = "python benchmarks/corpus.py " + " ".join(argv if argv is not None else sys.argv[1:])
    env = environment()
    records: dict[int, dict] = {}
    lock = threading.Lock()

    runners = queue.Queue()
    servers = [] if options.spawn else [
        ForkServer(Path(tempfile.gettempdir()) / f"corpus-server-{os.getpid()}-{i}.log")
        for i in range(max(1, options.jobs))]
    for i in range(max(1, options.jobs)):
        runners.put(spawn if options.spawn else servers[i].run)

    def task(index):
        name, group, exporter = tasks[index]
        runner = runners.get()
        try:
            record = run_one(runner, name, group, exporter, options.dynamic, options.timeout,
                             options.single_call)
        finally:
            runners.put(runner)
        with lock:
            records[index] = record
            print(f"[{len(records)}/{len(tasks)}] {name} {exporter}: {record['status']} "
                  f"({record.get('process_s', 0):.0f} s)", file=sys.stderr, flush=True)
            _write_json(options, env, command, [records[i] for i in sorted(records)])
        return record

    with ThreadPoolExecutor(max_workers=max(1, options.jobs)) as pool:
        list(pool.map(task, range(len(tasks))))
    for server in servers:
        server.close()
    ordered = [records[i] for i in range(len(tasks))]
    exporters = options.exporters
    if options.reuse:
        ordered, exporters = reuse(options.reuse, ordered, cases, options.exporters)
    _write_json(options, env, command, ordered)
    report = render(ordered, GROUPS, env, command, exporters)
    if options.markdown:
        options.markdown.parent.mkdir(parents=True, exist_ok=True)
        options.markdown.write_text(report)
    print(f"Python {env['python']}, torch {env['torch']}, transformers {env['transformers']}")
    header = ["set"] + [e for e in ("strict", "nonstrict", "unbroken") if e in exporters]
    print(" | ".join(header))
    for row in summary_rows(ordered, GROUPS, exporters):
        print(" | ".join(row))
    return 0


def reuse(path: Path, fresh: list[dict], cases: dict, exporters: list[str]):
    """``fresh`` plus the records of ``path`` (a previous --json report) for the selected
    cases and the exporters not rerun, in case order; and the exporters the report shows."""
    kept = [r for r in json.loads(path.read_text())["records"]
            if r["case"] in cases and r["exporter"] not in exporters]
    order = {name: i for i, name in enumerate(cases)}
    merged = sorted(fresh + kept, key=lambda r: (order[r["case"]], EXPORTERS.index(r["exporter"])))
    shown = [e for e in EXPORTERS if e in exporters or any(r["exporter"] == e for r in kept)]
    return merged, shown


def _write_json(options, env, command, records) -> None:
    if options.json:
        options.json.parent.mkdir(parents=True, exist_ok=True)
        payload = {"environment": env, "command": command, "dynamic": options.dynamic,
                   "records": records}
        options.json.write_text(json.dumps(payload, indent=1, default=str))


if __name__ == "__main__":
    sys.exit(main())
