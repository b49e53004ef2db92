"""Fuzzing unbroken.load: damaged and edited files either load into a program that runs on its
example inputs, or raise SerializationError; never another exception type, never more than a
second. ``benchmarks/fuzz_load.py`` runs the same mutations at a larger scale."""
import gc
import io
import json
import time
import zipfile
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unbroken
from unbroken.ir.serialize import Limits

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

GOLDEN = Path(__file__).resolve().parents[2] / "golden"
ORIGINAL = (GOLDEN / "program_v2.ubp").read_bytes()
with zipfile.ZipFile(io.BytesIO(ORIGINAL)) as _archive:
    MEMBERS = {n: _archive.read(n) for n in _archive.namelist()}
NAMES = sorted(MEMBERS)
LIMITS = Limits(json_bytes=1 << 20, tensor_bytes=1 << 20)
unbroken.load(io.BytesIO(ORIGINAL))  # the first load imports torch's meta kernels: not timed
FUZZ = settings(max_examples=40, deadline=None, derandomize=True,
                suppress_health_check=list(HealthCheck))


def _rezip(members: dict) -> bytes:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    return buffer.getvalue()


def outcome(data: bytes) -> str:
    """'loaded' or 'refused'; any other exception propagates (and fails the test)."""
    # This thread's CPU time, not wall time: the bound is on the work load() does (in this
    # thread), and must not fail because other processes share the cores, or torch's worker
    # threads spin after an op (a hang or a bomb still burns this thread's CPU). The
    # collector is off while timed: a full collection of the test process's heap (thousands
    # of tests in, on the matrix slice) may take a second of it
    collecting = gc.isenabled()
    gc.disable()
    try:
        start = time.thread_time()
        try:
            program = unbroken.load(io.BytesIO(data), limits=LIMITS)
            args, kwargs = program.example_inputs
            program.module()(*args, **kwargs)
            result = "loaded"
        except unbroken.SerializationError:
            result = "refused"
        assert time.thread_time() - start < 1.0
    finally:
        if collecting:
            gc.enable()
    return result


@FUZZ
@given(st.lists(st.integers(0, len(ORIGINAL) * 8 - 1), min_size=1, max_size=8))
def test_bit_flips(bits):
    data = bytearray(ORIGINAL)
    for bit in bits:
        data[bit // 8] ^= 1 << (bit % 8)
    outcome(bytes(data))


@FUZZ
@given(st.integers(0, len(ORIGINAL) - 1))
def test_truncation(length):
    assert outcome(ORIGINAL[:length]) == "refused"


@FUZZ
@given(st.sampled_from(NAMES), st.data())
def test_member_byte_edits(name, data):
    content = bytearray(MEMBERS[name])
    for _ in range(data.draw(st.integers(1, 4))):
        at = data.draw(st.integers(0, max(len(content) - 1, 0)))
        content[at:at + 1] = data.draw(st.binary(min_size=0, max_size=3))
    outcome(_rezip({**MEMBERS, name: bytes(content)}))


@FUZZ
@given(st.sampled_from(NAMES), st.integers(1, 4 << 20))
def test_inflated_members(name, extra):
    inflated = MEMBERS[name] + b" " * extra
    result = outcome(_rezip({**MEMBERS, name: inflated}))
    assert result == "refused" or (name != "tensors.safetensors" and extra <= 1 << 20)


JSON_VALUES = st.recursive(
    st.none() | st.booleans() | st.integers(-2 ** 70, 2 ** 70) | st.floats(allow_nan=False)
    | st.text(max_size=12) | st.sampled_from(["s0", "u0", "op:aten::relu.default", "tensor",
                                             "BUFFER", "x", "9**9**9", "(s0//2)"]),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8), inner,
                                                                max_size=4),
    max_leaves=12)


def _paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for key, item in value.items():
            yield from _paths(item, prefix + (key,))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            yield from _paths(item, prefix + (index,))


DOCUMENT = json.loads(MEMBERS["program.json"])
DEEP = json.loads("[" * 100 + "]" * 100)
PATHS = [p for p in _paths(DOCUMENT) if p]


@FUZZ
@given(st.lists(st.tuples(st.sampled_from(PATHS), JSON_VALUES | st.just("DEEP")), min_size=1,
                max_size=3))
def test_json_edits(edits):
    document = json.loads(MEMBERS["program.json"])
    for path, value in edits:
        parent = document
        try:
            for key in path[:-1]:
                parent = parent[key]
            parent[path[-1]] = DEEP if value == "DEEP" else value
        except (KeyError, IndexError, TypeError):  # an earlier edit removed the path
            continue
    outcome(_rezip({**MEMBERS, "program.json": json.dumps(document).encode()}))
