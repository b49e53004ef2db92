"""Python equivalents of lazy iterator functions, interpreted in place of the C originals.

``itertools.accumulate``, ``count``, ``repeat``, ``groupby``... are C types: a leaf call
cannot run them on traced values (they call the program's functions and draw from its
generators), and modelling each as a tracker of its own would re-implement CPython's laziness
function by function. Each is written here as a generator with CPython's semantics (what is
drawn from which iterator, and when; the values and errors; documented "roughly equivalent"
code in the ``itertools`` docs, rewritten where the C behaviour differs), and the interpreter
runs it like the program's own code (``variables.builder``: ``PYTHON_EQUIVALENTS``). Laziness
then comes for free: ``zip(range(3), itertools.count())`` draws three numbers, ``islice`` of
an endless generator stops where CPython's does, a ``groupby`` group read after the groupby
moved on is empty, and the program's functions run when CPython would run them.

``zip``, ``enumerate``, ``map``, ``filter``, ``islice`` and ``pairwise`` over materialized
sequences keep their direct handlers (``frontend.builtins``); the equivalents here serve them
when an argument is a lazy iterator (a generator, or one of these), which may be endless or
observe the order of draws.

Frames in this file are unbroken's (``trace_site.is_internal``): a diagnostic names the
program's line that called the function.
"""
from __future__ import annotations

import operator
import sys

__all__ = ["PYTHON_EQUIVALENTS"]


def accumulate(iterable, func=None, *, initial=None):
    iterator = iter(iterable)
    total = initial
    if initial is None:
        try:
            total = next(iterator)
        except StopIteration:
            return
    yield total
    for element in iterator:
        total = total + element if func is None else func(total, element)
        yield total


def count(start=0, step=1):
    for value in (start, step):
        if type(value) in (str, bytes, bytearray, list, tuple, dict, set):
            raise TypeError("a number is required")  # (the common non-numbers)
    value = start
    while True:
        yield value
        value += step


def cycle(iterable):
    saved = []
    for element in iterable:
        yield element
        saved.append(element)
    while saved:
        for element in saved:  # (not `yield from`: the interpreter does not run SEND)
            yield element


def repeat(obj, times=None):
    if times is None:
        while True:
            yield obj
    for _ in range(times):
        yield obj


def starmap(function, iterable):
    for args in iterable:
        yield function(*args)


def takewhile(predicate, iterable):
    for element in iterable:
        if not predicate(element):
            return
        yield element


def dropwhile(predicate, iterable):
    iterator = iter(iterable)
    for element in iterator:
        if not predicate(element):
            yield element
            break
    for element in iterator:
        yield element


def filterfalse(predicate, iterable):
    for element in iterable:
        if not (bool(element) if predicate is None else predicate(element)):
            yield element


def groupby(iterable, key=None):
    # a group is drawn from the shared iterator; moving the groupby on drains what is left of
    # the current group, so a group read afterwards is empty (as CPython's)
    iterator = iter(iterable)
    state = {"exhausted": False}

    def group(target):
        yield state["value"]
        for value in iterator:
            state["value"], state["key"] = value, value if key is None else key(value)
            if not target == state["key"]:
                return
            yield value
        state["exhausted"] = True

    try:
        state["value"] = next(iterator)
    except StopIteration:
        return
    state["key"] = state["value"] if key is None else key(state["value"])
    while not state["exhausted"]:
        target = state["key"]
        current = group(target)
        yield target, current
        if target == state["key"] and not state["exhausted"]:
            for _ in current:
                pass


def tee(iterable, n=2):
    if n < 0:
        raise ValueError("n must be >= 0")
    iterator = iter(iterable)
    link = [None, None]  # [value, next link]: the values drawn, shared by the copies
    return tuple(_tee_copy(iterator, link) for _ in range(n))


def _tee_copy(iterator, link):
    while True:
        if link[1] is None:
            try:
                link[0] = next(iterator)
            except StopIteration:
                return
            link[1] = [None, None]
        value, link = link
        yield value


def islice(iterable, *args):
    if not 1 <= len(args) <= 3:
        raise TypeError(f"islice expected at most 4 arguments, got {len(args) + 1}" if args
                        else "islice expected at least 2 arguments, got 1")
    bounds = slice(*args)
    bound = "0 <= x <= sys.maxsize."
    stop = _islice_index(bounds.stop, "Stop argument for islice() must be None or an integer: "
                         + bound)
    start = _islice_index(bounds.start, "Indices for islice() must be None or an integer: "
                          + bound)
    step = _islice_index(bounds.step, "Step for islice() must be a positive integer or None.")
    start = 0 if start is None else start
    step = 1 if step is None else step
    if step == 0:
        raise ValueError("Step for islice() must be a positive integer or None.")
    iterator = iter(iterable)
    position, wanted = 0, start
    while True:  # CPython's order: skip up to the next wanted item, then test the stop
        while position < wanted:
            try:
                next(iterator)
            except StopIteration:
                return
            position += 1
        if stop is not None and position >= stop:
            return
        try:
            item = next(iterator)
        except StopIteration:
            return
        position += 1
        wanted = wanted + step if stop is None else min(wanted + step, stop)
        yield item


def _islice_index(value, message):
    if value is None:
        return None
    try:
        index = operator.index(value)
    except TypeError:
        index = -1
    if not 0 <= index <= sys.maxsize:
        raise ValueError(message)
    return index


def pairwise(iterable):
    iterator = iter(iterable)
    try:
        previous = next(iterator)
    except StopIteration:
        return
    for element in iterator:
        yield previous, element
        previous = element


def zip_(*iterables, strict=False):
    iterators = [iter(it) for it in iterables]
    if not iterators:
        return
    while True:
        items = []
        for index, iterator in enumerate(iterators):
            try:
                items.append(next(iterator))
            except StopIteration:
                if strict:
                    _check_zip_lengths(index, iterators)
                return
        yield tuple(items)


def _check_zip_lengths(index, iterators):
    """``zip(strict=True)``: argument ``index`` (0-based) ran out; CPython's errors."""
    if index > 0:
        plural = f"s 1-{index}" if index > 1 else " 1"
        raise ValueError(f"zip() argument {index + 1} is shorter than argument{plural}")
    for later, iterator in enumerate(iterators[1:], 2):
        try:
            next(iterator)
        except StopIteration:
            continue
        plural = f"s 1-{later - 1}" if later > 2 else " 1"
        raise ValueError(f"zip() argument {later} is longer than argument{plural}")


def enumerate_(iterable, start=0):
    index = start
    for element in iterable:
        yield index, element
        index += 1


def map_(function, *iterables):
    for args in zip_(*iterables):
        yield function(*args)


def filter_(function, iterable):
    for element in iterable:
        if (bool(element) if function is None else function(element)):
            yield element


def _itertools_equivalents() -> dict:
    import itertools

    table = {getattr(itertools, name): function for name, function in (
        ("accumulate", accumulate), ("count", count), ("cycle", cycle), ("repeat", repeat),
        ("starmap", starmap), ("takewhile", takewhile), ("dropwhile", dropwhile),
        ("filterfalse", filterfalse), ("groupby", groupby), ("tee", tee))}
    return table


# the C callable -> its equivalent here, interpreted wherever the program calls it
PYTHON_EQUIVALENTS: dict = _itertools_equivalents()

# handlers of frontend.builtins that take these when an argument is a lazy iterator
LAZY_EQUIVALENTS: dict = {"zip": zip_, "enumerate": enumerate_, "map": map_, "filter": filter_,
                          "islice": islice, "pairwise": pairwise}
