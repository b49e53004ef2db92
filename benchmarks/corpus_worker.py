"""One corpus measurement in a fresh process: build one case, export it with one exporter (twice,
timed), run the program against eager, and write a JSON record.

    python benchmarks/corpus_worker.py CASE EXPORTER OUT.json [--dynamic] [--group SET]
    python benchmarks/corpus_worker.py --serve      # fork server used by corpus.py

EXPORTER is ``unbroken``, ``strict`` (``torch.export.export(strict=True)``) or ``nonstrict``.
The driver (``corpus.py``) runs one process per (case, exporter) with a timeout: by default a
child forked from a ``--serve`` process that has imported torch, transformers and unbroken and
exported nothing (so import time is not paid per case), with ``--spawn`` a new interpreter.
Anything the process does not survive (a crash, a hang) is recorded by the driver instead.
"""
from __future__ import annotations

import argparse
import copy
import json
import os
import resource
import signal
import sys
import time
import traceback
import warnings
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))
os.environ.setdefault("HF_HUB_OFFLINE", "1")            # no hub access, ever
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_VERBOSITY", "error")

import torch  # noqa: E402

torch.manual_seed(0)  # ExportDB makes its example inputs at import time
torch.set_num_threads(1)

import torch.utils._pytree as pytree  # noqa: E402
from corpus_cases import BATCH, BATCH_ONE, RESIZED, SEQ, Case  # noqa: E402
from corpus_compare import compare, describe_error, input_shapes, pinned_dims  # noqa: E402
from corpus_registry import GROUPS, all_cases  # noqa: E402
from torch.export import Dim  # noqa: E402

EXPORTERS = ("unbroken", "strict", "nonstrict")


def _export_fn(exporter: str):
    if exporter == "unbroken":
        import unbroken

        return unbroken.export
    strict = exporter == "strict"
    return lambda mod, args, kwargs=None, *, dynamic_shapes=None: torch.export.export(
        mod, args, kwargs, dynamic_shapes=dynamic_shapes, strict=strict)


def _rss_mb() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def input_leaves(args, kwargs) -> list[tuple[str, torch.Tensor]]:
    """The tensor inputs in pytree order, named ``args[i]...`` or by keyword."""
    items = [(f"args[{i}]", a) for i, a in enumerate(args)] + list(kwargs.items())
    leaves = []
    for name, value in items:
        for key, leaf in pytree.tree_flatten_with_path(value)[0]:
            if isinstance(leaf, torch.Tensor):
                leaves.append((name + pytree.keystr(key), leaf))
    return leaves


def _placeholder_shapes(ep) -> list:
    """Shapes of the user-input placeholders that are tensors, in order."""
    users = {s.arg.name for s in ep.graph_signature.input_specs
             if s.kind.name == "USER_INPUT" and hasattr(s.arg, "name")}
    shapes = []
    for node in ep.graph.nodes:
        val = node.meta.get("val")
        if node.op == "placeholder" and node.name in users and isinstance(val, torch.Tensor):
            shapes.append(list(val.shape))
    return shapes


class Plan:
    """What one case exports: example call, spec, and (under --dynamic) the resized call, the
    batch-1 call (cases built from a batch size) and the dims marked ``Dim.AUTO``."""

    def __init__(self, case: Case, dynamic: bool):
        self.resized = None
        self.batch_one = None
        self.auto_dims: dict[str, tuple] = {}
        if case.inputs is not None:
            example = case.inputs(BATCH, SEQ)
            self.args, self.kwargs = example.args, example.kwargs
            self.spec = None
            if dynamic:
                self.auto_dims = dict(example.auto_dims)
                # every keyword input named (torch and unbroken refuse a dict missing one);
                # a case with no dim to mark (a one-token decode step) is exported static
                self.spec = {k: {d: Dim.AUTO for d in example.auto_dims[k]}
                             if k in example.auto_dims else None
                             for k in example.kwargs} if example.auto_dims else None
                resized = case.inputs(*RESIZED)
                self.resized = (resized.args, resized.kwargs)
                one = case.inputs(*BATCH_ONE)
                self.batch_one = (one.args, one.kwargs)
        else:
            self.args, self.kwargs, self.spec = case.fixed()
            if dynamic and case.auto is not None:
                self.spec = case.auto()
                self.auto_dims = _auto_dims_of(self.spec)
                self.resized = case.resized()

    def call(self, fn, inputs: str = "example"):
        """``fn`` on a copy of the ``example``, ``resized`` or ``batch_one`` inputs."""
        args, kwargs = {"example": (self.args, self.kwargs), "resized": self.resized,
                        "batch_one": self.batch_one}[inputs]
        args, kwargs = copy.deepcopy((args, kwargs))  # a program may mutate its inputs
        with torch.no_grad():
            return fn(*args, **kwargs)


def _auto_dims_of(spec) -> dict[str, tuple]:
    """``{args[i]: dims}`` of a positional spec whose entries are dicts or tuples of Dims."""
    dims = {}
    for i, entry in enumerate(spec):
        if isinstance(entry, dict):
            dims[f"args[{i}]"] = tuple(entry)
        elif isinstance(entry, (tuple, list)):
            dims[f"args[{i}]"] = tuple(d for d, v in enumerate(entry) if v is not None)
    return dims


def _timed_export(export, model, plan, record, key):
    """Export under ``no_grad``, the mode the programs and eager then run in (``Plan.call``):
    torch.nn's fused inference paths are taken by eager in that mode only, and unbroken's
    program follows the mode it was exported in (``docs/user-guide.md``)."""
    with warnings.catch_warnings(record=True) as caught, torch.no_grad():
        warnings.simplefilter("always")
        start = time.perf_counter()
        ep = export(model, plan.args, plan.kwargs, dynamic_shapes=plan.spec)
        record[key] = time.perf_counter() - start
    notes = record.setdefault("warnings", [])
    for w in caught:
        line = f"{w.category.__name__}: {str(w.message).splitlines()[0][:200]}"
        if line not in notes and len(notes) < 10:
            notes.append(line)
    return ep


def _check_run(ep, reference, plan, record, key, inputs="example"):
    try:
        out = plan.call(ep.module(), inputs)
    except Exception as error:  # noqa: BLE001 -- the benchmark records any failure of the program
        record[key] = {"status": "run_error", "error": describe_error(error)}
        return
    record[key] = compare(reference, out).to_dict()


def measure(case: Case, exporter: str, dynamic: bool, single_call: bool = False) -> dict:
    record: dict = {"case": case.name, "group": case.group, "exporter": exporter,
                    "dynamic": dynamic}
    try:
        plan = Plan(case, dynamic)
        torch.manual_seed(0)
        reference_model = case.build()
        torch.manual_seed(0)
        model = case.build()
        reference = plan.call(reference_model)
        resized_reference = plan.call(reference_model, "resized") if plan.resized else None
        one_reference = plan.call(reference_model, "batch_one") if plan.batch_one else None
    except Exception as error:  # noqa: BLE001 -- a case that cannot even run eagerly
        record.update(status="build_error", error=describe_error(error),
                      traceback=traceback.format_exc(limit=-8))
        return record
    record["rss_before_export_mb"] = _rss_mb()
    export = _export_fn(exporter)
    try:
        ep = _timed_export(export, model, plan, record, "export_s")
    except Exception as error:  # noqa: BLE001 -- the first error is the measurement
        record.update(status="refused", error=describe_error(error),
                      traceback=traceback.format_exc(limit=-8))
        record["peak_rss_mb"] = _rss_mb()
        return record
    if not single_call:
        try:
            _timed_export(export, model, plan, record, "export2_s")
        except Exception as error:  # noqa: BLE001
            record["second_error"] = describe_error(error)
    _check_run(ep, reference, plan, record, "match")
    shapes = input_shapes(input_leaves(plan.args, plan.kwargs), _placeholder_shapes(ep))
    record["input_shapes"] = shapes
    record["range_constraints"] = {str(k): str(v) for k, v in ep.range_constraints.items()}
    if plan.resized is not None:
        record["pinned"] = pinned_dims(shapes, plan.auto_dims)
        _check_run(ep, resized_reference, plan, record, "resized", inputs="resized")
    if plan.batch_one is not None:
        _check_run(ep, one_reference, plan, record, "batch_one", inputs="batch_one")
    match = record["match"]
    record["status"] = ("ok" if match.get("status") in ("exact", "close")
                        else "run_error" if match.get("status") == "run_error" else "mismatch")
    record["peak_rss_mb"] = _rss_mb()
    return record


def run_case(name: str, group: str, exporter: str, dynamic: bool, out: str,
             single_call: bool = False) -> None:
    """Measure one (case, exporter) and write its record to ``out``."""
    record = measure(all_cases((group,))[name], exporter, dynamic, single_call)
    Path(out).write_text(json.dumps(record, indent=1, default=str))


def preload() -> None:
    """Import what every case needs, so that each forked child starts with it imported (and
    nothing exported yet): import time is not what the benchmark measures."""
    import transformers  # noqa: F401

    import unbroken.exporter.pipeline  # noqa: F401

    all_cases()


def serve() -> None:
    """Fork server: read one JSON task per line from stdin, run it in a forked child (stdout and
    stderr to the task's log, killed after its timeout), answer one JSON line per task."""
    preload()
    for line in sys.stdin:
        task = json.loads(line)
        start = time.perf_counter()
        pid = os.fork()
        if pid == 0:
            _child(task)
        rc, timed_out = _wait(pid, task["timeout"])
        answer = {"rc": rc, "timeout": timed_out, "elapsed": time.perf_counter() - start}
        sys.stdout.write(json.dumps(answer) + "\n")
        sys.stdout.flush()


def _child(task: dict) -> None:
    code = 1
    try:
        log = os.open(task["log"], os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o644)
        os.dup2(log, 1)
        os.dup2(log, 2)
        run_case(task["case"], task["group"], task["exporter"], task["dynamic"], task["out"],
                 task.get("single_call", False))
        code = 0
    except BaseException:  # noqa: BLE001 -- reported through the log and the exit code
        traceback.print_exc()
    finally:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)


def _wait(pid: int, timeout: float) -> tuple[int | None, bool]:
    deadline = time.monotonic() + timeout
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), False
        if time.monotonic() > deadline:
            os.kill(pid, signal.SIGKILL)  # our own child
            os.waitpid(pid, 0)
            return None, True
        time.sleep(0.05)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("case", nargs="?")
    parser.add_argument("exporter", nargs="?", choices=EXPORTERS)
    parser.add_argument("out", nargs="?")
    parser.add_argument("--dynamic", action="store_true")
    parser.add_argument("--group", choices=GROUPS, help="the case's set (loads only that set)")
    parser.add_argument("--single-call", action="store_true", help="no second export call")
    parser.add_argument("--serve", action="store_true", help="fork server (see serve())")
    options = parser.parse_args(argv)
    if options.serve:
        serve()
        return 0
    if not (options.case and options.exporter and options.out):
        parser.error("CASE EXPORTER OUT are required without --serve")
    group = options.group or next(g for g in GROUPS if options.case in all_cases((g,)))
    run_case(options.case, group, options.exporter, options.dynamic, options.out,
             options.single_call)
    return 0


if __name__ == "__main__":
    sys.exit(main())
