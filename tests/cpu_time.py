"""CPU time of one piece of work, for the tests that bound how much work a refusal may do (a
crafted file, a costly expression).

CPU time, not wall time: the bound is on the work done, and must not fail because other
processes share the cores (a hang or a bomb still burns CPU). The collector is paused while the
clock runs: late in a whole suite a generation-2 collection walks millions of objects (about a
second measured) and would be charged to whichever small piece of work happened to trigger it.
Nothing is collected first: that would cost such a walk per test.
"""
from __future__ import annotations

import contextlib
import gc
import time


class CpuClock:
    seconds: float = 0.0


@contextlib.contextmanager
def cpu_clock():
    """``with cpu_clock() as clock: ...`` then ``clock.seconds``: the CPU time of the body,
    collector paused (and restored as it was, whether the body raises or not)."""
    clock = CpuClock()
    was_enabled = gc.isenabled()
    gc.disable()
    start = time.process_time()
    try:
        yield clock
    finally:
        clock.seconds = time.process_time() - start
        if was_enabled:
            gc.enable()
