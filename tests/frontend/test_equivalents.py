"""The Python equivalents of lazy iterator functions (``frontend.equivalents``) against CPython.

Every public callable of ``itertools`` is either handled by the interpreter directly or run as
its equivalent; each program here runs natively and interpreted (``tests.frontend.parity``),
with a log of every draw from its iterators and every call of its functions, so the order in
which CPython draws and calls (its laziness) is compared too, not only the values.
"""
import collections
import functools
import itertools
import sys
import types

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


# ----------------------------------------------------------------- heapq, bisect, deque, Counter
@PARITY
@given(st.lists(st.integers(-3, 3), max_size=8), st.lists(st.integers(-3, 3), max_size=4))
def test_heapq_keeps_cpythons_layout(values, pushed):
    import heapq

    def program(values, pushed):
        heap = list(values)
        heapq.heapify(heap)
        layouts = [list(heap)]
        for value in pushed:
            heapq.heappush(heap, value)
            layouts.append(list(heap))
        out = [heapq.heappushpop(heap, 0), list(heap)]
        if heap:
            out += [heapq.heapreplace(heap, 1), list(heap)]
        while heap:
            out.append(heapq.heappop(heap))
        try:
            heapq.heappop(heap)
        except IndexError as error:
            out.append(str(error))
        # tuples with equal first items: the layout decides which comes first
        pairs = [(v % 2, i) for i, v in enumerate(values)]
        heapq.heapify(pairs)
        return layouts, out, pairs, heapq.nsmallest(2, values), heapq.nlargest(1, values)
    check(program, values, pushed)


@PARITY
@given(st.lists(st.integers(-5, 5), max_size=6).map(sorted), st.integers(-6, 6),
       st.integers(0, 3))
def test_bisect_and_insort(values, x, lo):
    import bisect

    def program(values, x, lo):
        a = list(values)
        out = [bisect.bisect_left(a, x), bisect.bisect_right(a, x), bisect.bisect(a, x, lo),
               bisect.bisect_left(a, x, lo, len(a)), bisect.bisect_right(a, -x, key=lambda v: -v)
               if a == sorted(a, key=lambda v: -v) else None]
        bisect.insort(a, x)
        bisect.insort_left(a, x + 1, lo)
        try:
            bisect.bisect_left(a, x, -1)
        except ValueError as error:
            out.append(str(error))
        return out, a
    check(program, values, x, lo)


@PARITY
@given(st.lists(st.integers(0, 9), max_size=6), st.one_of(st.none(), st.integers(0, 4)),
       st.integers(-3, 3))
def test_deque(values, maxlen, n):
    import collections

    def program(values, maxlen, n):
        d = collections.deque(values, maxlen)
        out = [list(d), len(d), d.maxlen, bool(d)]
        d.append(10)
        d.appendleft(11)
        d.extend([12, 13])
        d.extendleft([14])
        out.append(list(d))
        d.rotate(n)
        out += [list(d), list(reversed(d)), 12 in d, d.count(12), repr(d)]
        for attempt in (lambda: d.pop(), lambda: d.popleft(), lambda: d[0], lambda: d[-1],
                        lambda: d.index(12), lambda: d.remove(99), lambda: d.insert(0, 1)):
            try:
                out.append(attempt())
            except (IndexError, ValueError) as error:
                out.append((type(error).__name__, str(error)))
        d.clear()
        for attempt in (lambda: d.pop(), lambda: d[0]):
            try:
                out.append(attempt())
            except IndexError as error:
                out.append(str(error))
        return out
    check(program, values, maxlen, n)


def test_counter_and_exit_stack():
    import collections
    import contextlib

    class Noted:
        def __init__(self, log, name):
            self.log, self.name = log, name

        def __enter__(self):
            self.log.append(("enter", self.name))
            return self.name

        def __exit__(self, *details):
            self.log.append(("exit", self.name, details[0] is None))
            return False

    def program(words):
        counts = collections.Counter(words)
        counts.update(["a", "z"])
        log = []
        with contextlib.ExitStack() as stack:
            names = [stack.enter_context(Noted(log, n)) for n in ("x", "y")]
            stack.callback(log.append, "callback")
        try:
            with contextlib.ExitStack() as stack:
                stack.enter_context(Noted(log, "z"))
                raise KeyError("inside")
        except KeyError as error:
            log.append(("caught", str(error)))
        return sorted(counts.items()), counts.most_common(2), names, log
    check(program, ["a", "b", "a", "c"])


class Queued(torch.nn.Module):
    """A work queue and a heap of scored tensors inside forward()."""

    def forward(self, xs):
        import collections
        import heapq

        queue, done = collections.deque(xs), []
        while queue:
            x = queue.popleft()
            done.append(x * 2 if len(queue) % 2 else x)
        heap = [(i % 2, i, x) for i, x in enumerate(done)]
        heapq.heapify(heap)
        return [heapq.heappop(heap)[2] for _ in range(len(heap))]


def test_export_with_a_deque_and_a_heap_matches_eager():
    xs = [torch.randn(2) for _ in range(4)]
    got, want = unbroken.export(Queued(), (xs,)).module()(xs), Queued()(xs)
    assert len(got) == len(want) and all(torch.equal(g, w) for g, w in zip(got, want))


def deque_kinds(values):
    """An equivalent class answers ``isinstance``/``issubclass``/``match`` as the C class it
    stands for, for its own instances and for real ones made outside."""
    import collections.abc
    made = collections.deque(values)
    answers = []
    for d in (made, _OUTSIDE_DEQUE):
        answers.append((isinstance(d, collections.deque), type(d) is collections.deque,
                        isinstance(d, (int, collections.abc.MutableSequence)),
                        issubclass(type(d), collections.abc.Sequence),
                        isinstance(d, collections.abc.Hashable)))
        match d:
            case collections.deque():
                answers.append("deque pattern")
        match d:
            case [first, *rest]:
                answers.append(("sequence pattern", first, len(rest)))
            case _:
                answers.append("no sequence")
    return answers


_OUTSIDE_DEQUE = collections.deque([7, 8, 9])


@PARITY
@given(st.lists(st.integers(-5, 5), max_size=4))
def test_an_equivalent_class_answers_as_the_class_it_stands_for(values):
    check(deque_kinds, values)


class _HoldsADeque(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.buffer = collections.deque([1, 2], maxlen=3)

    def forward(self, x):
        return x * (isinstance(self.buffer, collections.deque) + 2 * len(self.buffer))


def test_a_real_deque_from_outside_is_a_deque():
    """Before: ``isinstance(self.buffer, collections.deque)`` was False in the trace (the
    name read as the equivalent class), a silent wrong answer."""
    x = torch.randn(3)
    torch.testing.assert_close(unbroken.export(_HoldsADeque(), (x,)).module()(x),
                               _HoldsADeque()(x))


_OUTSIDE_NAMESPACE = types.SimpleNamespace(a=1, b="x")


def namespaces(values, names):
    made = types.SimpleNamespace(**{name: v for name, v in zip(names, values)})
    made.extra = len(values)
    out = [repr(made), vars(made), made == types.SimpleNamespace(**vars(made)),
           made != _OUTSIDE_NAMESPACE, made == 3,
           isinstance(made, types.SimpleNamespace), isinstance(_OUTSIDE_NAMESPACE,
                                                               types.SimpleNamespace),
           getattr(made, "missing", "default"), hasattr(made, "extra")]
    del made.extra
    out.append(sorted(vars(made)))
    for bad in (lambda: types.SimpleNamespace([("a", 1), (2, 3)]),
                lambda: types.SimpleNamespace({}, {})):
        try:
            out.append(bad())
        except TypeError as error:
            out.append(("TypeError", str(error)))
    return out


@PARITY
@given(st.lists(st.integers(-5, 5), max_size=3), st.permutations(["p", "q", "r"]))
def test_simple_namespace(values, names):
    check(namespaces, values, names)


def caches_made_in_the_function(calls, maxsize, typed):
    log = []

    @functools.lru_cache(maxsize=maxsize, typed=typed)
    def square(n, scale=1):
        log.append((n, scale))
        return n * n * scale

    @functools.cache
    def pair(a, b):
        log.append(("pair", a, b))
        return (a, b)

    out = [square(n) if k == 0 else square(n, scale=k) if k == 1 else square(float(n))
           for n, k in calls]
    out += [pair(1, 2), pair(1, 2), pair(1, b=2), pair(b=2, a=1)]
    info = square.cache_info()
    out += [tuple(info), info.currsize, square.__name__, square.__wrapped__(3),
            square.cache_parameters(), pair.cache_info().hits]
    square.cache_clear()
    out += [tuple(square.cache_info()), square(2)]
    try:
        square([1])
    except TypeError as error:
        out.append(str(error))
    return out, log


@PARITY
@given(st.lists(st.tuples(st.integers(-3, 3), st.integers(0, 2)), max_size=8),
       st.sampled_from([None, 0, 1, 2, 128]), st.booleans())
def test_lru_cache_of_a_function_made_in_forward(calls, maxsize, typed):
    check(caches_made_in_the_function, calls, maxsize, typed)


class _CachedHelper(torch.nn.Module):
    def forward(self, x, y):
        runs = []

        @functools.lru_cache(maxsize=None)
        def project(t, k):
            runs.append(k)
            return t * k

        return project(x, 2) + project(x, 2) + project(y, 2) + len(runs)


def test_lru_cache_in_forward_finds_a_tensor_again_only_as_the_same_tensor():
    x, y = torch.randn(3), torch.randn(3)
    ep = unbroken.export(_CachedHelper(), (x, y))
    torch.testing.assert_close(ep.module()(x, y), _CachedHelper()(x, y))
