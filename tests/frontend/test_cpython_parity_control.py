"""Oracle tests: the bytecode interpreter against CPython, part 2 — control flow and iteration.

Branches, ``while``/``for`` loops (``break``, ``continue``, ``else``), iteration over every
container a forward() meets, comprehensions, generator expressions consumed by builtins,
unpacking, slicing and ``del``. See ``test_cpython_parity.py`` for the conventions.
"""
from __future__ import annotations

import contextvars
import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.frontend.parity import PARITY, check

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

small_ints = st.integers(-20, 20)
int_lists = st.lists(small_ints, max_size=7)


# ---------------------------------------------------------------- branches

def classify(n):
    if n < 0:
        kind = "negative"
    elif n == 0:
        kind = "zero"
    elif n < 10:
        kind = "small"
    else:
        kind = "large"
    return kind


def ternaries(a, b):
    bigger = a if a > b else b
    sign = -1 if a < 0 else (0 if a == 0 else 1)
    label = "even" if a % 2 == 0 else "odd"
    return bigger, sign, label, [x if x > 0 else 0 for x in (a, b)]


def nested_branches(a, b):
    if a > 0:
        if b > 0:
            return a + b
        return a - b
    elif b > 0 and a > -5 or b == -1:
        return b
    return 0


def dead_raise(n):
    """A ``raise`` on a branch that the input does not take is not a graph break."""
    if n < 0:
        raise ValueError("negative")
    return n * 2


@PARITY
@given(n=small_ints)
def test_if_elif_else(n):
    check(classify, n)


@PARITY
@given(a=small_ints, b=small_ints)
def test_ternary(a, b):
    check(ternaries, a, b)


@PARITY
@given(a=small_ints, b=small_ints)
def test_nested_branches(a, b):
    check(nested_branches, a, b)


def test_raise_on_branch_not_taken():
    check(dead_raise, 4)


# ---------------------------------------------------------------- while loops

def while_break_continue(n):
    i = 0
    total = 0
    while True:
        i += 1
        if i > n:
            break
        if i % 3 == 0:
            continue
        total += i
    return total, i


def while_else(xs, target):
    i = 0
    while i < len(xs):
        if xs[i] == target:
            found = i
            break
        i += 1
    else:
        found = -1
    return found


def collatz_steps(n):
    steps = 0
    while n != 1:
        n = n // 2 if n % 2 == 0 else 3 * n + 1
        steps += 1
    return steps


@PARITY
@given(n=st.integers(0, 20))
def test_while_break_continue(n):
    check(while_break_continue, n)


@PARITY
@given(xs=int_lists, target=st.integers(-3, 3))
def test_while_else(xs, target):
    check(while_else, xs, target)


@pytest.mark.parametrize("n", [1, 6, 27])
def test_while_data_dependent_trip_count(n):
    check(collatz_steps, n)


# ---------------------------------------------------------------- for loops over containers

def for_range(n):
    out = []
    for i in range(n):
        out.append(i)
    for i in range(2, n):
        out.append(i * 10)
    for i in range(n, 0, -2):
        out.append(-i)
    return out, sum(range(1, n + 1, 3))


def for_containers(xs):
    total = 0
    for x in xs:
        total += x
    for x in tuple(xs):
        total -= 2 * x
    d = {"a": 1, "b": 2, "c": 3}
    keys = []
    for k in d:
        keys.append(k)
    pairs = []
    for k, v in d.items():
        pairs.append((k, v * total))
    for k in d.keys():
        keys.append(k * 2)
    values = []
    for v in d.values():
        values.append(v)
    for ch in "hi":
        keys.append(ch)
    return total, keys, pairs, values


def for_enumerate_zip(xs, ys):
    out = []
    for i, x in enumerate(xs):
        out.append((i, x))
    for i, x in enumerate(xs, start=1):
        out.append((i, -x))
    for x, y in zip(xs, ys):
        out.append((x, y))
    for i, (x, y) in enumerate(zip(xs, ys)):
        out.append((i, x + y))
    for a, b, c in zip(xs, ys, range(100)):
        out.append((a, b, c))
    return out


def for_reversed_sorted(xs):
    out = []
    for x in reversed(xs):
        out.append(x)
    for i in reversed(range(len(xs))):
        out.append(i)
    for x in sorted(xs):
        out.append(x)
    for x in sorted(xs, reverse=True):
        out.append(x)
    return out, sorted(xs, key=lambda v: (abs(v), v)), list(reversed(tuple(xs)))


def nested_loops(n, m):
    grid = []
    for i in range(n):
        row = []
        for j in range(m):
            if j > i:
                break
            if (i + j) % 2:
                continue
            row.append(i * j)
        grid.append(row)
    return grid


def for_else(xs, target):
    for i, x in enumerate(xs):
        if x == target:
            where = i
            break
    else:
        where = None
    for x in xs:
        pass
    else:
        done = True
    return where, done


def loop_variable_after_loop(n):
    i = -1
    for i in range(n):
        pass
    return i


@PARITY
@given(n=st.integers(0, 8))
def test_for_over_range(n):
    check(for_range, n)


@PARITY
@given(xs=int_lists)
def test_for_over_list_tuple_dict_items_str(xs):
    check(for_containers, xs)


@PARITY
@given(xs=int_lists, ys=int_lists)
def test_for_over_enumerate_and_zip(xs, ys):
    check(for_enumerate_zip, xs, ys)


@PARITY
@given(xs=int_lists)
def test_for_over_reversed_and_sorted(xs):
    check(for_reversed_sorted, xs)


@PARITY
@given(n=st.integers(0, 5), m=st.integers(0, 5))
def test_nested_loops_with_break_continue(n, m):
    check(nested_loops, n, m)


@PARITY
@given(xs=int_lists, target=st.integers(-3, 3))
def test_for_else(xs, target):
    check(for_else, xs, target)


@pytest.mark.parametrize("n", [0, 1, 5])
def test_loop_variable_survives_loop(n):
    check(loop_variable_after_loop, n)


def iterate_set(xs):
    """Iteration order of a set of small ints is CPython's hash order, not insertion order."""
    return [x for x in set(xs)], list({3, 1, 2}), sorted({x % 3 for x in xs})


@PARITY
@given(xs=int_lists)
def test_iterate_set(xs):
    check(iterate_set, xs)


# ---------------------------------------------------------------- comprehensions

def comprehensions(xs):
    squares = [x * x for x in xs]
    evens = [x for x in xs if x % 2 == 0]
    clipped = [x if x > 0 else 0 for x in xs]
    index = {x: i for i, x in enumerate(xs)}
    distinct = {x % 3 for x in xs}
    pairs = [(i, j) for i in range(3) for j in range(i) if (i + j) % 2]
    table = [[i * j for j in range(3)] for i in range(len(xs))]
    flat = [v for row in table for v in row if v]
    return squares, evens, clipped, index, distinct, pairs, table, flat


def comprehension_captures(xs, scale):
    offset = 1
    shifted = [x * scale + offset for x in xs]
    named = {f"k{i}": v * scale for i, v in enumerate(xs) if v != offset}
    return shifted, named


def generator_expressions(xs):
    return (
        sum(x for x in xs),
        sum(x * x for x in xs if x > 0),
        any(x > 5 for x in xs),
        all(x > -10 for x in xs),
        tuple(x + 1 for x in xs),
        max((abs(x) for x in xs), default=0),
        min((x for x in xs), default=None),
        list(x for x in range(3)),
        sorted(x % 4 for x in xs),
        ",".join(str(x) for x in xs),
    )


@PARITY
@given(xs=int_lists)
def test_list_dict_set_comprehensions(xs):
    check(comprehensions, xs)


@PARITY
@given(xs=int_lists, scale=st.integers(-3, 3))
def test_comprehension_reads_enclosing_locals(xs, scale):
    check(comprehension_captures, xs, scale)


@PARITY
@given(xs=int_lists)
def test_generator_expressions_into_builtins(xs):
    check(generator_expressions, xs)


# ---------------------------------------------------------------- unpacking, slicing, del

def unpacking(xs):
    a, b = xs[0], xs[1]
    a, b = b, a
    first, *rest = xs
    *init, last = xs
    head, *middle, tail = xs
    (p, q), r = (a, b), last
    x, y, z = range(3)
    s1, s2 = "hi"
    return a, b, first, rest, init, last, head, middle, tail, p, q, r, x, y, z, s1, s2


def rotate(a, b, c):
    a, b, c = c, a, b
    return a, b, c


def slicing(xs, s):
    return (
        xs[1:-1:2], xs[::-1], xs[-2:], xs[:-1], xs[-1], xs[::2], xs[1:], xs[:100],
        xs[-100:], xs[5:2], tuple(xs)[1:3], s[::-1], s[1:], s[-1], xs[len(xs) // 2:],
    )


def slice_assignment(xs):
    ys = list(xs)
    ys[0] = 100
    ys[-1] = -100
    ys[1:3] = [7]
    zs = list(xs)
    zs[::2] = [0] * len(zs[::2])
    return ys, zs


def deletion(xs):
    ys = list(xs)
    del ys[0]
    del ys[-1]
    zs = list(xs)
    del zs[1:3]
    d = {"a": 1, "b": 2, "c": 3}
    del d["b"]
    tmp = len(xs)
    del tmp
    return ys, zs, d


@PARITY
@given(xs=st.lists(small_ints, min_size=2, max_size=6))
def test_tuple_unpacking_and_starred(xs):
    check(unpacking, xs)


@PARITY
@given(a=small_ints, b=small_ints, c=small_ints)
def test_swap_and_rotate(a, b, c):
    check(rotate, a, b, c)


@PARITY
@given(xs=st.lists(small_ints, min_size=1, max_size=7), s=st.sampled_from(["a", "abc", "hello"]))
def test_slicing_and_negative_indices(xs, s):
    check(slicing, xs, s)


@PARITY
@given(xs=st.lists(small_ints, min_size=3, max_size=6))
def test_slice_assignment(xs):
    check(slice_assignment, xs)


@PARITY
@given(xs=st.lists(small_ints, min_size=3, max_size=6))
def test_del(xs):
    check(deletion, xs)


# ---------------------------------------------------------------- match statements

class _Point:
    __match_args__ = ("x", "y")

    def __init__(self, x, y):
        self.x, self.y = x, y


def match_subject(subject):
    match subject:
        case []:
            return "empty"
        case [a, 3]:
            return ("pair ending in 3", a)
        case (a, b, *rest) if a > b:
            return ("descending start", a, b, rest)
        case {"k": v, **others}:
            return ("mapping", v, sorted(others))
        case _Point(0, y=yy):
            return ("point on the y axis", yy)
        case _Point(x, y):
            return ("point", x, y)
        case int(n) if n < 0:
            return ("negative", n)
        case int() | float():
            return "number"
        case str() as text:
            return ("text", text)
        case _:
            return "other"


@settings(PARITY, max_examples=80)
@given(subject=st.one_of(
    int_lists, small_ints, st.floats(allow_nan=False), st.text(max_size=3),
    st.dictionaries(st.sampled_from(["k", "j"]), small_ints, max_size=2),
    st.tuples(small_ints, small_ints).map(lambda t: _Point(*t)),
))
def test_match_statement(subject):
    """A match statement was refused (UB100); each kind of pattern now runs as CPython's."""
    check(match_subject, subject)


@pytest.mark.parametrize("subject", [[], [7, 3], (5, 1, 2), {"k": 1, "j": 2}, _Point(0, 4),
                                     _Point(1, 2), -3, 2.5, "ab", None])
def test_match_statement_each_pattern(subject):
    check(match_subject, subject)


# ---------------------------------------------------------------- generator.throw
# contextlib's ``__exit__`` throws the exception out of a ``with`` block into the generator of a
# ``@contextmanager``: caught there, re-raised, or turned into another.

def contextmanager_with_exceptions(raised: str, caught: bool):
    import contextlib

    log = []

    @contextlib.contextmanager
    def managed(tag):
        log.append(("enter", tag))
        try:
            yield tag * 2
        except KeyError:
            log.append("caught")
            if not caught:
                raise
        finally:
            log.append("finally")

    errors = {"key": KeyError("k"), "value": ValueError("v"), "none": None}
    try:
        with managed(3) as value:
            log.append(value)
            if errors[raised] is not None:
                raise errors[raised]
        log.append("after")
    except (KeyError, ValueError) as error:
        log.append(("propagated", type(error).__name__))
    return log


def generator_throw(kind: str, resume: bool):
    def body():
        try:
            yield 1
            yield 2
        except ZeroDivisionError:
            yield "handled"
        except IndexError:
            return
        yield 3

    exceptions = {"zero": ZeroDivisionError(), "zero class": ZeroDivisionError,
                  "index": IndexError("i"), "key": KeyError("k")}
    out = []
    it = body()
    if resume:
        out.append(next(it))
    try:
        out.append(it.throw(exceptions[kind]))
        out.append(next(it))
    except StopIteration:
        out.append("stop")
    except (ZeroDivisionError, KeyError, IndexError) as error:
        out.append(("raised", type(error).__name__))
    return out


@pytest.mark.parametrize("raised", ["key", "value", "none"])
@pytest.mark.parametrize("caught", [True, False])
def test_exceptions_through_a_contextmanager(raised, caught):
    check(contextmanager_with_exceptions, raised, caught)


def generator_send_and_close(sends: list, close_at: int, ignore_exit: bool):
    """An accumulating coroutine driven by ``send``, closed part way: its ``finally`` runs,
    a body that yields on ``GeneratorExit`` is a RuntimeError; sending to a just-started
    generator, to a finished one, or with a wrong call raises as CPython's."""
    log = []

    def running_total():
        total = 0
        try:
            while True:
                try:
                    value = yield total
                except GeneratorExit:
                    log.append("exit")
                    if ignore_exit:
                        yield -1
                    raise
                if value is None:
                    return total
                total += value
        finally:
            log.append(("finally", total))

    out = []

    def close(generator, what):
        try:
            out.append((what, generator.close()))
        except RuntimeError as error:
            out.append((what, "runtime", str(error)))

    it = running_total()
    for error_case in (lambda: it.send(3), lambda: it.send()):
        try:
            error_case()
        except TypeError as error:
            out.append(("type error", str(error)))
    out.append(it.send(None))  # starts it
    for index, value in enumerate(sends):
        if index == close_at:
            close(it, "close")
        try:
            out.append(it.send(value))
        except StopIteration:
            out.append("stop")
        except GeneratorExit:  # resumed in its handler after ignoring one: re-raised
            out.append("exit raised")
    close(it, "close at the end")
    if ignore_exit:
        close(it, "close again")  # paused at its `yield -1`: GeneratorExit raised there
    fresh = running_total()
    out.append(("close a fresh one", fresh.close()))
    try:
        fresh.send(None)
    except StopIteration:
        out.append("fresh stop")
    return out, log


@PARITY
@given(st.lists(st.one_of(st.none(), small_ints), max_size=5), st.integers(0, 5), st.booleans())
def test_generator_send_and_close(sends, close_at, ignore_exit):
    check(generator_send_and_close, sends, close_at, ignore_exit)


@pytest.mark.parametrize("kind", ["zero", "zero class", "index", "key"])
@pytest.mark.parametrize("resume", [True, False])
def test_generator_throw(kind, resume):
    check(generator_throw, kind, resume)


# ---------------------------------------------------------------- yield from
# A generator delegating with ``yield from``, driven by a drawn sequence of next / send / throw
# / close: values pass through, the inner generator's ``return`` is the value of the
# ``yield from`` (and of the outer's StopIteration), ``throw`` reaches the inner generator
# first (caught there, or raised in the outer where it is paused), ``close`` closes both.

def yield_from_driven(operations: list, inner: str, catch_outer: bool):
    log = []

    def accumulate():
        total = 0
        try:
            while True:
                try:
                    value = yield total
                except ValueError as error:
                    log.append(("inner caught", str(error)))
                    value = -100
                if value is None or total > 50:
                    return ("total", total)
                total += value
        finally:
            log.append("inner finally")

    def nested(depth):
        if depth == 0:
            result = yield from accumulate()
            return result
        result = yield from nested(depth - 1)
        yield ("depth", depth)
        return (depth, result)

    sources = {"generator": accumulate, "nested": lambda: nested(2),
               "list": lambda: [1, 2, 3], "dict": lambda: {"a": 1, "b": 2},
               "generator expression": lambda: (i * i for i in range(4)),
               "range": lambda: range(3), "string": lambda: "xyz"}

    def outer():
        try:
            result = yield from sources[inner]()
            yield ("returned", result)
            again = yield from accumulate()
            return ("outer", again)
        except KeyError as error:
            if not catch_outer:
                raise
            log.append(("outer caught", str(error)))
            yield "recovered"
        finally:
            log.append("outer finally")

    it = outer()
    out = []
    for operation, value in operations:
        try:
            if operation == "next":
                out.append(next(it))
            elif operation == "send":
                out.append(it.send(value))
            elif operation == "throw":
                out.append(it.throw(ValueError(str(value)) if value % 2 else KeyError(value)))
            else:
                out.append(("close", it.close()))
        except StopIteration as stop:
            out.append(("stop", stop.value))
        except (ValueError, KeyError, TypeError, AttributeError, RuntimeError) as error:
            out.append((type(error).__name__, str(error)))
    # closed here, not left to CPython's finalizer (the interpreter does not finalize a
    # generator it abandons: the finally blocks would run after the return in CPython)
    try:
        out.append(("last close", it.close()))
    except RuntimeError as error:
        out.append(("last close", str(error)))
    return out, log


_operations = st.lists(st.tuples(st.sampled_from(["next", "next", "send", "throw", "close"]),
                                 st.one_of(st.none(), small_ints)), max_size=9)


@PARITY
@given(_operations, st.sampled_from(["generator", "nested", "list", "dict",
                                     "generator expression", "range", "string"]),
       st.booleans())
def test_yield_from(operations, inner, catch_outer):
    check(yield_from_driven, operations, inner, catch_outer)


class _Echo:
    """An iterator of the program's own class with a ``send`` of its own."""

    def __init__(self):
        self.seen = []

    def __iter__(self):
        return self

    def __next__(self):
        if len(self.seen) > 3:
            raise StopIteration
        self.seen.append(None)
        return len(self.seen)

    def send(self, value):
        self.seen.append(value)
        if len(self.seen) > 3:
            raise StopIteration(("sent", tuple(self.seen)))
        return value


class _Plain:
    def __iter__(self):
        return iter([7, 8])


def yield_from_a_user_iterator(sends: list):
    """``yield from`` an object of the program's own class: ``__iter__``/``__next__`` drive
    it, and a value sent on reaches its ``send`` (AttributeError when it has none)."""
    out = []
    def outer(source):
        result = yield from source()
        yield ("returned", result)

    for source in (_Echo, _Plain):
        it = outer(source)
        try:
            out.append(next(it))
            for value in sends:
                out.append(it.send(value))
        except StopIteration as stop:
            out.append(("stop", stop.value))
        except AttributeError as error:
            out.append(("attribute error", str(error)))
    return out


@PARITY
@given(st.lists(st.one_of(st.none(), small_ints), max_size=5))
def test_yield_from_a_user_iterator(sends):
    check(yield_from_a_user_iterator, sends)


# ---------------------------------------------------------------- == on objects from outside
# A class's ``__eq__`` (a dataclass's, torch's ``TreeSpec``'s) decides ``==`` and ``!=`` on its
# instances met as outside objects, reflected when only the right side defines one.

@dataclasses.dataclass
class _Spot:
    x: int


class _Tagged:
    def __init__(self, tag):
        self.tag = tag

    def __eq__(self, other):
        if not isinstance(other, _Tagged):
            return NotImplemented
        return self.tag == other.tag


class _Odd:
    def __ne__(self, other):
        return "ne called"


def equalities(a, b, c):
    return [a == b, a != b, a == c, c == a, c != a, a != a, b == 3, 3 == b, c != c]


@pytest.mark.parametrize("a, b, c", [
    (_Spot(1), _Spot(1), _Spot(2)),
    (_Tagged("u"), _Tagged("u"), _Tagged("v")),
    (_Tagged("u"), _Spot(1), _Odd()),
])
def test_equality_of_outside_objects(a, b, c):
    check(equalities, a, b, c)


def test_equality_of_pytree_specs():
    import torch.utils._pytree as pytree

    def specs(x):
        first, second = pytree.tree_flatten((x,))[1], pytree.tree_flatten((x,))[1]
        other = pytree.tree_flatten([x, x])[1]
        return first == second, first != second, first == other, first != other

    check(specs, 1)


# ---------------------------------------------------------------- contextvars
_LEVEL = contextvars.ContextVar("parity_level", default=1)


def context_variable(step):
    before = _LEVEL.get()
    token = _LEVEL.set(before + step)
    inside = (_LEVEL.get(), contextvars.ContextVar.get(_LEVEL))
    _LEVEL.reset(token)
    return before, inside, _LEVEL.get(), _LEVEL.get(7)


@pytest.mark.parametrize("step", [1, 5])
def test_context_variable_set_and_reset(step):
    check(context_variable, step)


# ---------------------------------------------------------------- the iterator protocol
# A class of the program's own with ``__iter__`` returning ``self`` and ``__next__``: drawn
# lazily (the loop body and ``__next__`` interleave as in CPython), the same object after
# ``iter()``, ``next()`` with and without a default. Before: ``next(it, default)`` gave the
# default at once, and a ``for`` over one recursed without end.

class _Countdown:
    def __init__(self, n, log):
        self.n, self.log = n, log

    def __iter__(self):
        return self

    def __next__(self):
        if self.n <= 0:
            self.log.append("stop")
            raise StopIteration
        self.n -= 1
        self.log.append(("next", self.n))
        return self.n


class _NotAnIterator:
    def __iter__(self):
        return 5


def iterator_protocol(n, take, stop_early):
    log = []
    it = _Countdown(n, log)
    out = [iter(it) is it, next(it, "default")]
    for value in it:
        log.append(("body", value))
        if stop_early and value == take:
            break
    out.append([v * 2 for v in it])
    out.append(next(it, "exhausted"))
    out.append(sorted(_Countdown(take, [])) + list(zip(_Countdown(2, []), "ab")))
    for bad in (lambda: next(3), lambda: iter(_NotAnIterator()), lambda: next(it)):
        try:
            bad()
        except (TypeError, StopIteration) as error:
            out.append((type(error).__name__, str(error)))
    return out, log


@PARITY
@given(st.integers(0, 6), st.integers(0, 4), st.booleans())
def test_the_iterator_protocol_of_the_programs_classes(n, take, stop_early):
    check(iterator_protocol, n, take, stop_early)
