"""Shared pytest configuration.

Hypothesis: under CI (``CI`` set, as `.ci/run` has it) every run draws the same examples
(``derandomize``) and keeps no example database, so a red CI is reproducible and never
depends on luck; locally examples vary from run to run, which finds more bugs.
"""
import os

import pytest
from hypothesis import settings

from unbroken.exporter.process_state import ProcessState
from unbroken.ir.meta_cache import clear_shared_entries
from unbroken.size_one.audit import clear_shared_outcomes

settings.register_profile("ci", derandomize=True, database=None, deadline=None,
                          print_blob=True)
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") else "dev")


@pytest.fixture(autouse=True)
def process_state_unchanged():
    """Every test (every export and refusal in the suite) leaves PyTorch's process state
    (grad/inference mode, default dtype, modes, dispatch keys, patched kernels) as it was."""
    before = ProcessState.capture()
    yield
    after = ProcessState.capture()
    assert after == before, f"the process state changed: {before} -> {after}"


@pytest.fixture(autouse=True)
def fresh_shared_meta_entries():
    """Every test starts as a fresh process would: no meta outputs or size-1 check outcomes
    shared from another test's traces (a test may patch a kernel or count the computations
    it makes)."""
    clear_shared_entries()
    clear_shared_outcomes()
    yield
