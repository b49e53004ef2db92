"""Worker processes: one fresh process per job, at most ``jobs`` at a time, each with a
deadline.

Isolation is the point: a case may call ``os._exit``, crash the interpreter, loop forever,
raise ``SystemExit`` from a pytree flatten function, or leave torch's global state changed
(a default device, a dispatch mode). Each of those stays in the process of that one job,
and the job's outcome says what happened.

Start-up cost decides the design. A ``spawn``-ed process imports torch again (seconds per
job on the CI machine); ``fork`` of a process that has run torch ops copies its thread pools in
an unusable state. The ``forkserver`` context avoids both: one server process imports torch,
unbroken and the modules a first export loads, and exports once on meta tensors, running no
kernel (:mod:`unbroken.check.preload`); every job is a fork of that warm server. What a job
costs beyond the export itself (the fork, importing the case's file again, sending the
outcome back) is measured by ``benchmarks/check_scaling.py``. Where ``forkserver`` does not
exist (Windows), ``spawn`` is used.

User output of a job (prints, warnings, a segfault's stack from ``faulthandler``) goes to a
temporary file that is returned with the job's result, so that parallel jobs never mix their
output on the terminal.
"""
from __future__ import annotations

import faulthandler
import multiprocessing
import os
import signal
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from multiprocessing.connection import wait
from typing import Any

__all__ = ["Job", "JobResult", "run_jobs", "context"]

_OUTPUT_LIMIT = 20_000  # characters of a job's output kept in its result


@dataclass(frozen=True, slots=True)
class Job:
    """One unit of work for a worker.

    key:      the caller's handle for the job (a target, or a case id).
    function: a module-level function (it is pickled by name) called as ``function(*args)``.
    args:     its arguments (picklable).
    """

    key: str
    function: Callable
    args: tuple


@dataclass(frozen=True, slots=True)
class JobResult:
    """What became of a job.

    key:     the job's key.
    value:   what ``function`` returned; None unless ``status == "done"``.
    status:  ``"done"``, ``"timeout"`` (killed at the deadline) or ``"crashed"`` (the process
             ended without a result).
    seconds: wall time from start to result (or to the kill).
    output:  what the job printed, at most the last 20,000 characters.
    detail:  for a crash, how the process ended (``exit code 3``, ``signal SIGSEGV``).
    """

    key: str
    value: Any
    status: str
    seconds: float
    output: str
    detail: str = ""


def context():
    """The multiprocessing context of the workers (see the module docstring)."""
    if "forkserver" in multiprocessing.get_all_start_methods():
        ctx = multiprocessing.get_context("forkserver")
        ctx.set_forkserver_preload(["unbroken.check.preload"])
        return ctx
    return multiprocessing.get_context("spawn")


def run_jobs(jobs: list[Job], workers: int, timeout: float,
             on_result: Callable[[JobResult], None]) -> None:
    """Run every job in its own process, ``workers`` at a time; call ``on_result`` in this
    process for each, in completion order."""
    ctx = context()
    pending = list(reversed(jobs))
    running: dict[Any, _Running] = {}
    try:
        while pending or running:
            while pending and len(running) < max(1, workers):
                job = _Running.start(ctx, pending.pop(), timeout)
                running[job.connection] = job
            _wait_some(running, on_result)
    finally:
        for job in running.values():
            job.kill()


def _wait_some(running: dict, on_result) -> None:
    now = time.monotonic()
    next_deadline = min(job.deadline for job in running.values())
    ready = wait([*running, *(j.process.sentinel for j in running.values())],
                 timeout=max(0.0, next_deadline - now))
    finished = {job.connection for job in running.values()
                if job.connection in ready or job.process.sentinel in ready}
    for connection in finished:
        on_result(running.pop(connection).finish())
    now = time.monotonic()
    for connection in [c for c, job in running.items() if job.deadline <= now]:
        on_result(running.pop(connection).time_out())


class _Running:
    """A started job: its process, the read end of its pipe, its output file, its deadline."""

    def __init__(self, job: Job, process, connection, output_path: str, deadline: float):
        self.job, self.process, self.connection = job, process, connection
        self.output_path, self.deadline = output_path, deadline
        self.started = time.monotonic()

    @classmethod
    def start(cls, ctx, job: Job, timeout: float) -> _Running:
        receive, send = ctx.Pipe(duplex=False)
        handle, output_path = tempfile.mkstemp(prefix="unbroken-job-", suffix=".log")
        os.close(handle)
        process = ctx.Process(target=_worker_main, args=(send, job.function, job.args,
                                                           output_path), daemon=True)
        process.start()
        send.close()
        return cls(job, process, receive, output_path, time.monotonic() + timeout)

    def finish(self) -> JobResult:
        seconds = time.monotonic() - self.started
        try:
            value = self.connection.recv()
        except (EOFError, OSError):
            self.process.join(5)
            return self._result(None, "crashed", seconds, _how_it_ended(self.process))
        self.process.join(5)
        if self.process.is_alive():  # a thread of the user's kept it running: the result is in
            self.process.kill()
        return self._result(value, "done", seconds)

    def time_out(self) -> JobResult:
        seconds = time.monotonic() - self.started
        self.kill()
        return self._result(None, "timeout", seconds)

    def kill(self) -> None:
        if self.process.is_alive():
            self.process.kill()
        self.process.join(5)
        self.connection.close()

    def _result(self, value, status: str, seconds: float, detail: str = "") -> JobResult:
        self.connection.close()
        output = _read_and_remove(self.output_path)
        return JobResult(self.job.key, value, status, seconds, output, detail)


def _how_it_ended(process) -> str:
    code = process.exitcode
    if code is None:
        return "still running without a result"
    if code < 0:
        try:
            return f"killed by signal {signal.Signals(-code).name}"
        except ValueError:
            return f"killed by signal {-code}"
    return f"exit code {code}"


def _read_and_remove(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            text = f.read()
    finally:
        os.unlink(path)
    return text[-_OUTPUT_LIMIT:]


def _worker_main(connection, function, args, output_path: str) -> None:
    """The body of a worker process: output to the job's file, run, send the value."""
    with open(output_path, "w") as output:
        os.dup2(output.fileno(), 1)
        os.dup2(output.fileno(), 2)
    sys.stdout = open(1, "w", buffering=1, closefd=False)
    sys.stderr = open(2, "w", buffering=1, closefd=False)
    faulthandler.enable(sys.stderr)
    value = function(*args)
    sys.stdout.flush()
    sys.stderr.flush()
    connection.send(value)
    connection.close()
