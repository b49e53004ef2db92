"""Every zoo model exports, verifies, and computes what eager computes.

Oracle: the eager model on the example inputs and on fresh random inputs of the same shapes.
"""
from __future__ import annotations

import functools
import re

import pytest
import torch

import unbroken
from tests.exactness import assert_matches_eager
from tests.models.zoo import ZOO
from tests.state_leak import ModelSnapshot
from unbroken.exporter.process_state import ProcessState

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

FRESH_SEEDS = (1, 2, 3)

ENTRIES = [pytest.param(name, marks=[pytest.mark.slow] if entry.slow else [], id=name)
           for name, entry in ZOO.items()]


@functools.lru_cache(maxsize=None)
def exported(name: str):
    """(model, example args, ExportedProgram), exported once per model per session."""
    return exported_with_changes(name)[:3]


@functools.lru_cache(maxsize=None)
def exported_with_changes(name: str):
    """As ``exported``, plus what the export changed in the model and in the process."""
    model, args = ZOO[name].make()
    before, state = ModelSnapshot.of(model), ProcessState.capture()
    ep = unbroken.export(model, args)
    process = [] if ProcessState.capture() == state else ["process state"]
    return model, args, ep, before.diff(ModelSnapshot.of(model)) + process


@pytest.mark.parametrize("name", ENTRIES)
def test_export_changes_neither_the_model_nor_the_process(name):
    assert exported_with_changes(name)[3] == []


def inplace_ops(program_text: str) -> list[str]:
    """Names of in-place ATen overloads (``relu_``, ``add_``...) printed in ``program_text``."""
    names = re.findall(r"aten\.(\w+)\.\w+", program_text)
    return sorted({n for n in names if n.endswith("_") and not n.startswith("__")})


def test_inplace_ops_helper():
    text = "torch.ops.aten.relu_.default(x); torch.ops.aten.add.Tensor(a, b); aten.__and__.Tensor"
    assert inplace_ops(text) == ["relu_"]


@pytest.mark.parametrize("name", ENTRIES)
def test_exports_and_verifies(name):
    _, _, ep = exported(name)
    ep.validate()


@pytest.mark.parametrize("name", ENTRIES)
def test_matches_eager_on_example_inputs(name):
    model, args, ep = exported(name)
    assert_matches_eager(ep.module(), model, args, fast_path=ZOO[name].fast_path)


@pytest.mark.parametrize("name", ENTRIES)
@pytest.mark.parametrize("seed", FRESH_SEEDS)
def test_matches_eager_on_fresh_inputs(name, seed):
    model, _, ep = exported(name)
    fresh = ZOO[name].fresh_args(seed)
    assert_matches_eager(ep.module(), model, fresh, fast_path=ZOO[name].fast_path)


@pytest.mark.parametrize("name", ENTRIES)
def test_no_inplace_ops(name):
    _, _, ep = exported(name)
    assert inplace_ops(str(ep)) == []
    mutating = [str(n.target) for n in ep.graph.nodes if n.op == "call_function"
                and isinstance(n.target, torch._ops.OpOverload) and n.target._schema.is_mutable]
    assert mutating == []


@pytest.mark.parametrize("name", ENTRIES)
def test_example_and_fresh_inputs_differ_but_agree_in_shape(name):
    """Guards the zoo itself: fresh inputs are new values with the example's shapes/dtypes."""
    _, args = ZOO[name].make()
    fresh = ZOO[name].fresh_args(1)
    assert [(a.shape, a.dtype) for a in fresh] == [(a.shape, a.dtype) for a in args]
    assert any(not torch.equal(a, b) for a, b in zip(args, fresh))
