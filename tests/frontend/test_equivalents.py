"""The Python equivalents of lazy iterator functions (``frontend.equivalents``) against CPython.

Every public callable of ``itertools`` is either handled by the interpreter directly or run as
its equivalent; each program here runs natively and interpreted (``tests.frontend.parity``),
with a log of every draw from its iterators and every call of its functions, so the order in
which CPython draws and calls (its laziness) is compared too, not only the values.
"""
import itertools
import sys

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

import unbroken
from tests.frontend.parity import PARITY, check
from unbroken.frontend.builtins import _HANDLERS
from unbroken.frontend.equivalents import PYTHON_EQUIVALENTS

pytestmark = pytest.mark.matrix


def test_every_itertools_callable_is_handled_or_has_its_equivalent():
    public = {name for name in dir(itertools) if not name.startswith("_")
              and callable(getattr(itertools, name))}
    covered = {name for name in public
               if getattr(itertools, name) in _HANDLERS
               or getattr(itertools, name) in PYTHON_EQUIVALENTS}
    assert covered == public, f"not covered: {sorted(public - covered)}"
    assert itertools.chain.from_iterable in _HANDLERS


def _logged(values, log, name="it"):
    """A generator over ``values`` that notes each draw in ``log``."""
    for value in values:
        log.append((name, value))
        yield value


def _noting(function, log, name):
    def noted(*args):
        log.append((name, args))
        return function(*args)
    return noted


def _taking(iterator, n):
    """The first ``n`` items of ``iterator`` (or fewer), drawn one by one with next()."""
    out = []
    for _ in range(n):
        try:
            out.append(next(iterator))
        except StopIteration:
            out.append("stop")
            break
    return out


small_ints = st.lists(st.integers(-3, 3), max_size=6)


@PARITY
@given(small_ints, st.integers(0, 8), st.one_of(st.none(), st.integers(-2, 2)))
def test_accumulate(values, n, initial):
    def program(values, n, initial):
        log = []
        plain = _taking(itertools.accumulate(_logged(values, log), initial=initial), n)
        called = list(itertools.accumulate(values, _noting(max, log, "max")))
        return plain, called, log
    check(program, values, n, initial)


@PARITY
@given(st.integers(-3, 3), st.integers(-2, 2), small_ints)
def test_count_repeat_cycle_drawn_as_far_as_used(start, step, values):
    def program(start, step, values):
        log = []
        zipped = list(zip(_logged(values, log), itertools.count(start, step)))
        counted = list(zip(itertools.count(start), _logged(values, log, "second")))
        repeated = list(zip(values, itertools.repeat("r")))
        bounded = list(itertools.repeat(start, len(values)))
        cycled = _taking(itertools.cycle(_logged(values, log, "cycle")), 2 * len(values) + 1)
        return zipped, counted, repeated, bounded, cycled, log
    check(program, start, step, values)


@PARITY
@given(small_ints, st.integers(0, 8))
def test_predicates_run_when_cpython_runs_them(values, n):
    def program(values, n):
        log = []
        positive = _noting(lambda v: v > 0, log, "positive")
        taken = _taking(itertools.takewhile(positive, _logged(values, log)), n)
        dropped = _taking(itertools.dropwhile(positive, _logged(values, log, "d")), n)
        false = list(itertools.filterfalse(positive, values))
        falsy = list(itertools.filterfalse(None, values))
        starred = list(itertools.starmap(_noting(pow, log, "pow"), [(v, 2) for v in values]))
        return taken, dropped, false, falsy, starred, log
    check(program, values, n)


@PARITY
@given(st.lists(st.integers(0, 2), max_size=8))
def test_groupby_groups_and_invalidation(values):
    def program(values):
        log = []
        grouped = [(k, list(g)) for k, g in itertools.groupby(_logged(values, log))]
        keyed = [(k, list(g)) for k, g in itertools.groupby(values, key=lambda v: v % 2)]
        # a group read once the groupby has moved on is empty, as CPython's
        stale = [(k, g) for k, g in itertools.groupby(values)]
        late = [(k, list(g)) for k, g in stale]
        # a group half read, then the next one
        iterator = itertools.groupby(_logged(values, log, "half"))
        half = []
        for key, group in iterator:
            half.append((key, next(group)))
        return grouped, keyed, late, half, log
    check(program, values)


@PARITY
@given(small_ints, st.integers(0, 3))
def test_tee_copies_share_the_draws(values, n):
    def program(values, n):
        log = []
        copies = itertools.tee(_logged(values, log), n)
        out = [_taking(copy, 2) for copy in copies] + [list(copy) for copy in copies]
        return len(copies), out, log
    check(program, values, n)


@PARITY
@given(st.integers(0, 6), st.one_of(st.none(), st.integers(0, 9)), st.integers(1, 3),
       st.integers(0, 8))
def test_islice_of_a_lazy_iterator_draws_what_cpython_draws(start, stop, step, length):
    def program(start, stop, step, length):
        log = []
        got = list(itertools.islice(_logged(range(length), log), start, stop, step))
        endless = list(itertools.islice(itertools.count(), start, start + 3))
        only_stop = list(itertools.islice(_logged(range(length), log, "s"), 2))
        return got, endless, only_stop, log
    check(program, start, stop, step, length)


@PARITY
@given(small_ints, small_ints)
def test_zip_enumerate_map_filter_pairwise_over_generators(a, b):
    def program(a, b):
        log = []
        zipped = list(zip(_logged(a, log, "a"), _logged(b, log, "b")))
        numbered = _taking(enumerate(_logged(a, log, "e"), 5), 2)
        mapped = list(map(_noting(lambda x, y: x * y, log, "mul"), _logged(a, log, "m"), b))
        kept = list(filter(_noting(bool, log, "bool"), _logged(b, log, "f")))
        kept_none = list(filter(None, _logged(a, log, "g")))
        pairs = list(itertools.pairwise(_logged(a, log, "p")))
        return zipped, numbered, mapped, kept, kept_none, pairs, log
    check(program, a, b)


def test_errors_are_cpythons():
    def program():
        out = []
        attempts = [
            lambda: itertools.islice(iter([]), -1),
            lambda: itertools.islice(iter([]), -1, 2),
            lambda: itertools.islice(iter([]), 0, 2, 0),
            lambda: itertools.tee([], -1),
            lambda: list(zip(iter([1, 2]), iter([1]), strict=True)),
            lambda: list(zip(iter([1]), iter([1, 2]), iter([1, 2]), strict=True)),
            lambda: list(zip(iter([1, 2]), iter([1, 2]), iter([1]), strict=True)),
            lambda: next(itertools.count("a")),
        ]
        for attempt in attempts:
            try:
                result = attempt()
                out.append(("ok", list(result) if result is not None else None))
            except (ValueError, TypeError) as error:
                out.append((type(error).__name__, str(error)))
        return out
    check(program)


class Sequence(torch.nn.Module):
    """transformers-style iteration over layers and their tensors with the lazy functions."""

    def forward(self, xs, scale):
        running = list(itertools.accumulate(xs))
        product = list(itertools.accumulate(xs, torch.mul, initial=scale))
        numbered = [x * i for i, x in zip(itertools.count(1), xs)]
        firsts = list(itertools.islice((x * 2 for x in xs), 2))
        taken = list(itertools.takewhile(lambda x: x.shape[0] == 3, xs + [xs[0][:2], xs[1]]))
        pairs = list(itertools.starmap(torch.add, zip(xs, itertools.repeat(scale))))
        groups = [sum(x for _, x in g)
                  for _, g in itertools.groupby(zip([0, 0, 1], xs), key=lambda p: p[0])]
        left, right = itertools.tee(x + 1 for x in xs)
        return running, product, numbered, firsts, taken, pairs, groups, list(left), list(right)


def test_export_with_the_lazy_functions_matches_eager():
    xs = [torch.randn(3), torch.randn(3), torch.randn(3)]
    scale = torch.randn(())
    got = unbroken.export(Sequence(), (xs, scale)).module()(xs, scale)
    want = Sequence()(xs, scale)
    flat_got, flat_want = torch.utils._pytree.tree_leaves(got), \
        torch.utils._pytree.tree_leaves(want)
    assert len(flat_got) == len(flat_want)
    assert all(torch.equal(g, w) for g, w in zip(flat_got, flat_want))


def test_an_endless_iterator_the_program_exhausts_is_refused_not_hung():
    class Endless(torch.nn.Module):
        def forward(self, x):
            return x * len(list(zip(itertools.count(), itertools.repeat(1))))

    with unbroken.budget(instructions=20_000):
        with pytest.raises(unbroken.GraphBreakError) as info:
            unbroken.export(Endless(), (torch.randn(2),))
    assert info.value.frames and info.value.frames[-1].filename == __file__


@pytest.mark.skipif(sys.version_info < (3, 12), reason="itertools.batched is 3.12+")
def test_batched_over_a_generator():
    def program(values):
        log = []
        return [list(b) for b in itertools.batched(_logged(values, log), 2)], log
    check(program, [1, 2, 3, 4, 5])
