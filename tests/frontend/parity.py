"""Shared helpers of the CPython parity suite (``tests/frontend/test_cpython_parity*.py``).

- :data:`PARITY` is the hypothesis ``settings`` every property test of the suite uses: modest
  and deterministic, so the suite stays fast and never writes a ``.hypothesis`` database.
- :func:`assert_same` is the strict comparison: equal values *and* identical types,
  recursively through lists, tuples and dicts (``True`` is not ``1``, ``2.0`` is not ``2``, a
  namedtuple is not a tuple, dict key order counts, floats compare by ``repr`` so that ``-0.0``
  is not ``0.0``).
- :func:`check` runs a function natively and through ``unbroken.frontend.interpret`` (each on
  fresh deep copies of the arguments) and requires :func:`assert_same` results: for constructs
  the interpreter MUST support.
- :func:`check_breaks` requires a well-formed ``GraphBreakError`` of the given code (and the
  user's stack) from the interpreter where CPython returns: for known limitations, so that
  lifting one shows (the test then becomes a :func:`check`).

Import them as ``from tests.frontend.parity import ...``: an absolute import from the repository
root (``pythonpath = ["."]`` in pyproject.toml), so it does not depend on pytest's import mode.
"""
from __future__ import annotations

import copy

import pytest
from hypothesis import settings

# The interpreter under test. While it is missing, this import is the one (clear) error.
from unbroken import GraphBreakError
from unbroken.frontend import interpret

__all__ = ["PARITY", "assert_same", "check", "check_breaks"]

# Modest and deterministic: the suite must stay fast and must not write a .hypothesis database.
PARITY = settings(max_examples=15, deadline=None, derandomize=True, database=None)


def assert_same(actual, expected, path="result"):
    """Equal values and identical types, recursively through lists, tuples and dicts."""
    assert type(actual) is type(expected), (
        f"{path}: got {type(actual).__name__} {actual!r}, "
        f"CPython gives {type(expected).__name__} {expected!r}")
    if isinstance(expected, (list, tuple)):
        assert len(actual) == len(expected), f"{path}: got {actual!r}, CPython gives {expected!r}"
        for index, (a, e) in enumerate(zip(actual, expected)):
            assert_same(a, e, f"{path}[{index}]")
    elif isinstance(expected, dict):
        assert list(actual) == list(expected), f"{path}: keys {list(actual)} != {list(expected)}"
        for key in expected:
            assert_same(actual[key], expected[key], f"{path}[{key!r}]")
    elif isinstance(expected, float):
        assert repr(actual) == repr(expected), f"{path}: got {actual!r}, CPython gives {expected!r}"
    else:
        assert actual == expected, f"{path}: got {actual!r}, CPython gives {expected!r}"


def check(fn, *args, **kwargs):
    """Run ``fn`` natively and through the interpreter (on fresh copies of the arguments)."""
    expected = fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    actual = interpret(fn, *copy.deepcopy(args), **copy.deepcopy(kwargs))
    assert_same(actual, expected)


def check_breaks(code: str, fn, *args, **kwargs):
    """CPython runs ``fn``; the interpreter refuses it with a graph break ``code`` that carries
    the user's stack (a known limitation, see the module docstring)."""
    fn(*copy.deepcopy(args), **copy.deepcopy(kwargs))
    with pytest.raises(GraphBreakError) as info:
        interpret(fn, *copy.deepcopy(args), **copy.deepcopy(kwargs))
    assert info.value.code == code, info.value.render()
    assert info.value.frames, "a graph break must carry the user's stack"
