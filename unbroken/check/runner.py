"""One ``unbroken check`` run: expand the targets, collect their cases, select, export each
case, and gather a :class:`Report`.

Collection and export both happen in worker processes (:mod:`unbroken.check.pool`) unless
``in_process`` is set: a target that fails to import, hangs or crashes while importing becomes
a :class:`CollectionFailure` and the other targets' cases still run.
"""
from __future__ import annotations

import os
import time
from dataclasses import dataclass, field
from pathlib import Path

from ..cases import CaseCollectionError, is_import_target, load_target, python_files
from ..symbolic.diagnostics import BUG_NOTE
from . import jobs
from .execute import CaseInfo, describe, relative, relative_text, run_case, use_root
from .outcome import CRASHED, TIMEOUT, CaseOutcome, CollectionFailure, Report
from .pool import Job, JobResult, run_jobs
from .select import keyword_matcher, shard

__all__ = ["CheckPlan", "Progress", "run_check"]


@dataclass(frozen=True, slots=True)
class CheckPlan:
    """What to run and how.

    targets:    paths (files, directories) and ``module:callable`` import paths.
    root:       the working directory: importable, and what report paths are relative to.
    keyword:    a ``-k`` expression, or None for every case.
    shard:      ``(I, N)``, or None for every case.
    workers:    processes at a time.
    timeout:    seconds allowed for one case (and for importing one target).
    in_process: run everything in this process (no isolation, no timeout; for debugging).
    path_budget: ``unbroken.budget`` arguments (``paths``, ``unroll``) for the exploration of
                the paths of a refused case's program (``--paths``, ``--unroll``).
    """

    targets: tuple[str, ...]
    root: str
    keyword: str | None = None
    shard: tuple[int, int] | None = None
    workers: int = 1
    timeout: float = 300.0
    in_process: bool = False
    path_budget: dict = field(default_factory=dict)


class Progress:
    """Told about the run as it goes; the console's live display subclasses it."""

    def collecting(self, targets: int) -> None:
        """``targets`` targets are about to be imported."""

    def running(self, cases: int) -> None:
        """``cases`` cases are about to be exported."""

    def finished(self, outcome: CaseOutcome) -> None:
        """One case is done."""

    def close(self) -> None:
        """The run is over."""


def run_check(plan: CheckPlan, progress: Progress | None = None) -> Report:
    """Collect, select and export; the report of the run."""
    progress = progress or Progress()
    started = time.perf_counter()
    use_root(plan.root)
    targets, failures = expand_targets(plan.targets, plan.root)
    try:
        progress.collecting(len(targets))
        infos, collect_failures, in_process_cases = _collect(targets, plan)
        failures += collect_failures
        selected = _select(infos, plan)
        progress.running(len(selected))
        outcomes, lost = _run(selected, in_process_cases, plan, progress)
        failures += lost
    finally:
        progress.close()
    shard_text = f"{plan.shard[0]}/{plan.shard[1]}" if plan.shard else None
    failures = [CollectionFailure(f.target, relative_text(f.message, plan.root))
                for f in failures]  # import tracebacks name the user's files
    return Report(sorted(outcomes, key=lambda o: o.id), failures, [],
                  time.perf_counter() - started, list(plan.targets), shard_text)


def expand_targets(targets, root: str) -> tuple[list[str], list[CollectionFailure]]:
    """Directories become their ``*.py`` files (as :func:`unbroken.cases.python_files` walks
    them); missing paths and non-Python files become failures."""
    expanded, failures = [], []
    for target in targets:
        path = Path(target)
        if is_import_target(target):
            expanded.append(target)
        elif not path.exists():
            failures.append(CollectionFailure(target, "no such file or directory"))
        elif path.is_dir():
            expanded += [relative(str(f.resolve()), root) for f in python_files(path)]
        elif path.suffix != ".py":
            failures.append(CollectionFailure(
                target, "not a Python file (expected *.py, a directory or module:callable)"))
        else:
            expanded.append(target)
    return list(dict.fromkeys(expanded)), failures


def _collect(targets: list[str], plan: CheckPlan):
    """(case infos without repeats, failures, {id: ExportCase} when in process)."""
    infos, failures, cases = {}, [], {}
    if plan.in_process:
        for target in targets:
            try:
                found = load_target(target)
            except CaseCollectionError as err:
                failures.append(CollectionFailure(target, err.summary))
                continue
            for case in found:
                info = describe(case, target, plan.root)
                infos.setdefault(info.id, info)
                cases.setdefault(info.id, case)
        return list(infos.values()), failures, cases

    def take(result: JobResult) -> None:
        if result.status != "done":
            failures.append(CollectionFailure(result.key, _lost_job_text(result, "importing it")))
        elif "error" in result.value:
            failures.append(CollectionFailure(result.key, result.value["error"]))
        else:
            for data in result.value["cases"]:
                infos.setdefault(data["id"], CaseInfo(**data))

    run_jobs([Job(t, jobs.collect_job, (t, plan.root)) for t in targets], plan.workers,
             plan.timeout, take)
    order = {t: i for i, t in enumerate(targets)}  # results arrive in completion order
    return sorted(infos.values(), key=lambda i: (order[i.target], i.id)), failures, cases


def _select(infos: list[CaseInfo], plan: CheckPlan) -> list[CaseInfo]:
    if plan.keyword:
        matches = keyword_matcher(plan.keyword)
        infos = [i for i in infos if matches(i.id)]
    if plan.shard:
        kept = shard([i.id for i in infos], *plan.shard)
        infos = [i for i in infos if i.id in kept]
    return infos


def _run(infos: list[CaseInfo], cases: dict, plan: CheckPlan, progress: Progress):
    outcomes: list[CaseOutcome] = []
    failures: list[CollectionFailure] = []
    if plan.in_process:
        for info in infos:
            outcomes.append(_run_in_process(cases[info.id], info, plan))
            progress.finished(outcomes[-1])
        return outcomes, failures
    by_id = {i.id: i for i in infos}

    def take(result: JobResult) -> None:
        info = by_id[result.key]
        if result.status == "done" and "error" in result.value:
            failures.append(CollectionFailure(info.target, result.value["error"]))
            return
        outcome = CaseOutcome.from_dict(result.value["outcome"]) if result.status == "done" \
            else _lost_case(info, result, plan.timeout, plan.root)
        outcomes.append(outcome)
        progress.finished(outcome)

    run_jobs([Job(i.id, jobs.case_job, (i.target, i.id, plan.root, plan.path_budget))
              for i in infos], plan.workers, plan.timeout, take)
    return outcomes, failures


def _run_in_process(case, info: CaseInfo, plan: CheckPlan) -> CaseOutcome:
    previous = os.getcwd()
    try:
        return run_case(case, info.target, plan.root, plan.path_budget)
    finally:
        os.chdir(previous)


def _lost_case(info: CaseInfo, result: JobResult, timeout: float,
               root: str) -> CaseOutcome:
    """The outcome of a case whose worker timed out or died."""
    status = TIMEOUT if result.status == "timeout" else CRASHED
    text = relative_text(_lost_job_text(result, "exporting it", timeout), root)
    return CaseOutcome(info.id, info.name, info.file, info.line, info.target, status,
                       result.seconds, diagnostic=text,
                       error={"code": None, "kind": status, "message": text.splitlines()[0]},
                       output=result.output)


def _lost_job_text(result: JobResult, doing: str, timeout: float | None = None) -> str:
    if result.status == "timeout":
        text = (f"The process {doing} did not finish within {result.seconds:.0f} s (--timeout) "
                "and was stopped.\n\nIf forward() (or code it calls) loops forever on these "
                "inputs, eager would hang too: bound the loop. If the model is only slow, give "
                "more time with --timeout SECONDS.")
    else:
        text = (f"The process {doing} ended without a result ({result.detail}).\n\n"
                "Unless the model's own code ends the process (os._exit, a crash in a C "
                f"extension), this is a crash of unbroken. {BUG_NOTE}")
    output = result.output.strip()
    return text + (f"\n\nOutput of the process:\n{output}" if output else "")
