"""try/except/finally in traced code: exceptions the program raises reach its own handlers,
through the exception table, exactly as in CPython (checked against CPython)."""
import contextlib

import pytest
import torch

import unbroken
from unbroken.frontend import interpret


def lookup(d, k):
    try:
        return d[k]
    except KeyError as e:
        return f"missing {e}"


def nested(n):
    log = []
    try:
        try:
            if n > 2:
                raise ValueError("big")
            log.append("ok")
        except TypeError:
            log.append("type")
        finally:
            log.append("finally")
    except ValueError as e:
        log.append(str(e))
    else:
        log.append("else")
    return log


def helper_raises(n):
    if n < 0:
        raise IndexError(n)
    return n


def caller_catches(n):
    try:
        return helper_raises(n) * 2
    except (IndexError, KeyError):
        return -1


def reraise_outer(n):
    try:
        try:
            raise KeyError(n)
        except KeyError:
            raise
    except KeyError as e:
        return ("outer", e.args)


def stop_iteration(xs):
    it = iter(xs)
    out = []
    while True:
        try:
            out.append(next(it))
        except StopIteration:
            break
    return out


def suppressed(n):
    with contextlib.suppress(ZeroDivisionError):
        n = 10 // n
    return n


def finally_on_return(n):
    log = []
    try:
        return n
    finally:
        log.append(n)


@pytest.mark.parametrize("fn, args", [
    (lookup, ({"a": 1}, "a")), (lookup, ({"a": 1}, "b")),
    (nested, (1,)), (nested, (5,)),
    (caller_catches, (3,)), (caller_catches, (-3,)),
    (reraise_outer, (7,)),
    (stop_iteration, ([1, 2, 3],)),
    (suppressed, (0,)), (suppressed, (5,)),
    (finally_on_return, (4,)),
])
def test_matches_cpython(fn, args):
    assert interpret(fn, *args) == fn(*args)


def test_uncaught_exception_is_reported_at_the_raise():
    with pytest.raises(unbroken.GraphBreakError) as info:
        interpret(helper_raises, -1)
    assert info.value.code == "UB104"
    assert info.value.frames[-1].function == "helper_raises"


class Fallback(torch.nn.Module):
    """HF-style: attributes missing on the module come from a config dict."""

    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.config = {"scale": 3.0}

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            return self.config[name]

    def forward(self, x):
        try:
            bias = self.missing_bias
        except KeyError:
            bias = 0.5
        return self.lin(x) * self.scale + bias


def test_module_getattr_fallback_and_handlers_in_forward():
    model = Fallback()
    ep = unbroken.export(model, (torch.randn(2, 4),))
    x = torch.randn(2, 4)
    torch.testing.assert_close(ep.module()(x), model(x))
