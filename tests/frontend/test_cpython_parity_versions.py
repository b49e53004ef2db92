"""Oracle tests: the bytecode interpreter against CPython, part 6 — the constructs whose
bytecode differs between CPython 3.11, 3.12 and 3.13 (``unbroken.frontend.opcodes.versions``).

Each program here compiles to instructions that one version has and another does not: inlined
comprehensions (3.12, PEP 709: ``LOAD_FAST_AND_CLEAR``, the loop variable saved and restored,
a cell variable inside the comprehension), ``super()`` as ``LOAD_SUPER_ATTR`` (3.12), slices as
``BINARY_SLICE``/``STORE_SLICE`` (3.12), the intrinsics (``+x``, ``f(*a, *b)``, PEP 479's
``StopIteration`` in a generator), the end of ``for`` loops (``END_FOR``), the NULL of a call
after the callable and ``CALL_KW`` (3.13), ``TO_BOOL`` and the comparisons that cast to bool
(3.13), split f-strings (``CONVERT_VALUE``/``FORMAT_*``, 3.13), defaults and closures set by
``SET_FUNCTION_ATTRIBUTE`` (3.13) and the fused local loads and stores (3.13). The suite runs
on every supported version; on each, the same programs must give CPython's answer.
"""
from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.frontend.parity import PARITY, check

pytestmark = pytest.mark.matrix

small_ints = st.integers(-20, 20)
int_lists = st.lists(small_ints, max_size=6)


# ---------------------------------------------------------------- inlined comprehensions

def comprehension_shadows_a_local(xs):
    i = "outer"
    squares = [i * i for i in xs]
    return i, squares


def comprehension_shadows_an_unbound_name(xs):
    out = [j + 1 for j in xs]
    try:
        return out, j  # noqa: F821 - unbound after the comprehension, as in CPython
    except NameError as error:
        return out, type(error).__name__


def comprehension_nested_and_filtered(xs):
    pairs = [(a, b) for a in xs if a % 2 == 0 for b in xs if b > a]
    table = {a: [b * a for b in xs] for a in xs[:3]}
    unique = {a % 4 for a in xs}
    return pairs, table, sorted(unique)


def comprehension_captured_by_lambdas(xs):
    funcs = [lambda: v * 2 for v in xs]  # noqa: B023 - late binding is what is tested
    return [f() for f in funcs]


def comprehension_reads_a_cell(xs):
    scale = 3

    def scaled():
        return [scale * x for x in xs]

    values = [scale + x for x in xs]
    return values, scaled()


def comprehension_raises_and_restores(xs):
    k = "kept"
    try:
        return [10 // k for k in xs], k
    except ZeroDivisionError:
        return "caught", k


@given(int_lists)
@PARITY
def test_inlined_comprehensions(xs):
    check(comprehension_shadows_a_local, xs)
    check(comprehension_shadows_an_unbound_name, xs)
    check(comprehension_nested_and_filtered, xs)
    check(comprehension_captured_by_lambdas, xs)
    check(comprehension_reads_a_cell, xs)
    check(comprehension_raises_and_restores, xs)


# ---------------------------------------------------------------- super()

class Base:
    scale = 2

    def __init__(self, value):
        self.value = value

    def total(self, extra=0):
        return self.value * self.scale + extra


class Child(Base):
    scale = 5

    def __init__(self, value):
        super().__init__(value + 1)

    def total(self, extra=0):
        return super().total(extra=extra) + super(Child, self).total() + super().scale


class GrandChild(Child):
    def total(self, extra=0):
        parent = super().total
        return parent(extra) - 1


def super_calls(v, extra):
    return Child(v).total(extra), GrandChild(v).total(extra=extra)


@given(small_ints, small_ints)
@PARITY
def test_super_forms(v, extra):
    check(super_calls, v, extra)


# ---------------------------------------------------------------- slices, unary, calls

def slices(xs, a, b):
    ys = list(xs)
    head = ys[a:b]
    ys[a:b] = [0, 0]
    tail = ys[b:]
    ys[:a] = []
    return head, tail, ys, xs[::-1], xs[a:]


def intrinsics(xs, v):
    def count(*args):
        return len(args), args

    return +v, -v, ~v, not v, count(*xs, *xs), count(*xs, v, *[v])


def calls_with_keywords(xs, v):
    def f(a, b=2, *rest, c=3, **kw):
        return a, b, rest, c, sorted(kw.items())

    items = list(xs)
    items.sort(key=lambda n: -n, reverse=False)
    return (f(v), f(v, c=v), f(1, 2, 3, 4, c=5, d=6), f(*xs[:1] or [0], **{"c": v, "z": 1}),
            items, "-".join(str(n) for n in xs))


@given(int_lists, st.integers(-3, 8), st.integers(-3, 8))
@PARITY
def test_slices(xs, a, b):
    check(slices, xs, a, b)


@given(int_lists, small_ints)
@PARITY
def test_intrinsics_and_calls(xs, v):
    check(intrinsics, xs, v)
    check(calls_with_keywords, xs, v)


# ---------------------------------------------------------------- loops, truth, comparisons

def loops_and_truth(xs, v):
    total = 0
    for x in xs:
        if x:
            total += x
        elif not x and v:
            total -= 1
    for i, x in enumerate(xs):
        if i > 2:
            break
        total += i
    else:
        total += 100
    while v > 0 and total:
        v -= 1
    flags = [x < v for x in xs], [x == v or x > 0 for x in xs]
    return total, v, flags, bool(xs) and xs[0] < v, None if not xs else xs[-1]


def swaps_and_unpacking(xs, v):
    a, b = v, v + 1
    a, b = b, a
    first, *rest = xs or [0]
    c = d = a
    return a, b, c, d, first, rest


@given(int_lists, small_ints)
@PARITY
def test_loops_truth_and_stores(xs, v):
    check(loops_and_truth, xs, v)
    check(swaps_and_unpacking, xs, v)


# ---------------------------------------------------------------- f-strings, functions

def fstrings(v, name):
    return (f"{v}", f"{v!r}", f"{name!r:>12}", f"{v:+05d}", f"{name!s}{v!a}", f"{v:{4}}",
            f"{name=}")


def functions_with_defaults(v):
    def kwonly(a, *, k=v, j=[v]):
        return a + k + j[0]

    lam = lambda z=v, *, w=2: z * w  # noqa: E731
    return kwonly(1), kwonly(1, k=0), lam(), lam(3, w=v)


def generator_stopiteration(xs):
    def gen():
        yield from_list(xs)
        raise StopIteration  # PEP 479: becomes a RuntimeError

    def from_list(values):
        return len(values)

    produced = []
    try:
        for value in gen():
            produced.append(value)
    except RuntimeError as error:
        return produced, str(error)
    return produced, None


def generator_values(xs):
    def gen():
        for x in xs:
            if x % 2:
                yield x
        return "done"

    return list(gen()), sum(x for x in xs if x > 0)


@given(small_ints, st.sampled_from(["a", "name", ""]))
@PARITY
def test_fstrings_and_defaults(v, name):
    check(fstrings, v, name)
    check(functions_with_defaults, v)


@given(int_lists)
@PARITY
def test_generators(xs):
    check(generator_stopiteration, xs)
    check(generator_values, xs)


# ---------------------------------------------------------------- with, try, match

class Manager:
    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return len(self.log)

    def __exit__(self, kind, value, traceback):
        self.log.append(kind.__name__ if kind else "clean")
        return kind is KeyError


def with_and_try(v):
    log = []
    with Manager(log) as entered:
        log.append(entered)
    with Manager(log):
        if v > 0:
            raise KeyError(v)
    try:
        with Manager(log):
            raise ValueError(v)
    except ValueError as error:
        log.append(str(error))
    finally:
        log.append("finally")
    return log


def match_forms(value):
    match value:
        case [first, *rest] if first > 0:
            return "seq", first, rest
        case {"k": k, **others}:
            return "map", k, others
        case int(n) if n < 0:
            return "negative", n
        case int() | float():
            return "number", value
        case _:
            return "other", None


@given(small_ints)
@PARITY
def test_with_and_try(v):
    check(with_and_try, v)


@pytest.mark.parametrize("value", [[1, 2, 3], [-1, 2], {"k": 1, "j": 2}, -4, 3, 2.5, "s"])
def test_match_forms(value):
    check(match_forms, value)
