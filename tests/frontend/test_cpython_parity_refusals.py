"""Oracle tests: the bytecode interpreter against CPython, part 5 — what strict mode refuses.

Each function below contains one construct that cannot be captured. ``interpret`` must raise
``GraphBreakError`` with the catalogue id of that construct (``unbroken/symbolic/diagnostics/catalogue.py``)
and a user stack whose innermost frame is the offending statement: the line that carries the
marker comment ``# BREAK``. Lines are found from the source (``inspect.getsourcelines``), never
hard-coded, so editing this file cannot make the tests lie.

The refused constructs run *after* some ordinary code, so a break reported at the first line
of the function is caught as wrong. The traced functions are never run natively here: several
of them have side effects (writing a global) that the interpreter must refuse, not perform.
"""
from __future__ import annotations

import inspect
import linecache
import os

import pytest

from unbroken import GraphBreakError

# The interpreter under test. While it is missing, this import is the one (clear) error.
from unbroken.frontend import interpret
from unbroken.symbolic.diagnostics import UnbrokenError

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


def marked_line(fn, marker):
    """The 1-based line number of the only line of ``fn`` that ends with ``marker``."""
    lines, start = inspect.getsourcelines(fn)
    hits = [start + index for index, text in enumerate(lines) if text.rstrip().endswith(marker)]
    assert len(hits) == 1, f"{fn.__name__} must mark exactly one line with {marker!r}"
    return hits[0]


def frame_is(frame, fn, marker):
    """Whether a reported user frame is the line of ``fn`` marked with ``marker``."""
    return (
        frame.lineno == marked_line(fn, marker)
        and frame.function == fn.__code__.co_name
        and os.path.realpath(frame.filename) == os.path.realpath(fn.__code__.co_filename)
    )


def assert_frame(frame, fn, marker="# BREAK"):
    line = marked_line(fn, marker)
    assert frame_is(frame, fn, marker), (
        f"reported {frame.short()} in {frame.function}; expected line {line} of {fn.__name__}: "
        f"{linecache.getline(fn.__code__.co_filename, line).strip()}")
    assert frame.source == linecache.getline(fn.__code__.co_filename, line).strip()


def refuse(fn, *args, code):
    """Interpret ``fn`` and return the ``GraphBreakError`` it must raise, with id ``code``."""
    with pytest.raises(GraphBreakError) as info:
        interpret(fn, *args)
    error = info.value
    assert isinstance(error, UnbrokenError)
    assert error.code == code, f"expected {code}, got:\n{error}"
    assert error.frames, "a graph break must carry the user's stack"
    assert error.frames[0].function == fn.__code__.co_name, "the stack starts at the traced function"
    return error


# ---------------------------------------------------------------- raise

def raises_value_error(n):
    m = n * 2
    if m > 0:
        raise ValueError(f"bad value {m}")  # BREAK
    return m


def helper_that_raises(n):
    total = n + 1
    raise ValueError(f"cannot handle {total}")  # BREAK


def calls_raising_helper(n):
    m = n + 1
    result = helper_that_raises(m)  # CALL
    return result


def test_raise_is_refused_at_the_raise():
    error = refuse(raises_value_error, 3, code="UB104")
    assert_frame(error.frames[-1], raises_value_error)


def test_raise_in_callee_reports_the_whole_stack():
    error = refuse(calls_raising_helper, 3, code="UB104")
    assert len(error.frames) >= 2
    assert_frame(error.frames[-1], helper_that_raises)
    assert_frame(error.frames[-2], calls_raising_helper, "# CALL")


# ---------------------------------------------------------------- generators

def countdown(n):
    while n > 0:
        yield n
        n -= 1


def consumes_generator(n):
    total = 0
    for value in countdown(n):
        total += value
    return total


def test_generator_functions_run_lazily_like_cpython():
    # Generators are supported: the body runs on each next(), interleaved with the consumer.
    assert interpret(consumes_generator, 4) == consumes_generator(4)
    assert interpret(interleaved) == interleaved()


def producer(log):
    for i in range(3):
        log.append(("produce", i))
        yield i


def interleaved():
    log = []
    for value in producer(log):
        log.append(("consume", value))
    first = next(iter(producer(log)))
    return log, first


async def halved(n):
    return n / 2


def awaits(n):
    total = n + 1
    coroutine = halved(total)  # BREAK
    return coroutine


def test_async_function_is_refused():
    error = refuse(awaits, 3, code="UB106")
    assert_frame(error.frames[-1], awaits)


# ---------------------------------------------------------------- builtins without a graph meaning

def uses_globals(xs):
    n = len(xs)
    names = sorted(globals())  # BREAK
    return n, names


def test_globals_is_refused():
    error = refuse(uses_globals, [1, 2], code="UB103")
    assert_frame(error.frames[-1], uses_globals)


# ---------------------------------------------------------------- mutation of globals

COUNTER = 0


def writes_global(n):
    global COUNTER
    m = n + COUNTER
    COUNTER = m  # BREAK
    return m


def test_global_write_is_refused_and_not_performed():
    error = refuse(writes_global, 5, code="UB107")
    assert_frame(error.frames[-1], writes_global)
    assert COUNTER == 0, "the interpreter must not perform the side effect it refuses"


# ---------------------------------------------------------------- class definitions

def defines_class(n):
    size = n + 1
    class Local:  # BREAK
        width = size
    return Local.width


def test_class_definition_is_refused():
    error = refuse(defines_class, 2, code="UB112")
    assert_frame(error.frames[-1], defines_class)
