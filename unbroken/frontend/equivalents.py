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

import functools
import operator
import sys
import types

__all__ = ["LAZY_EQUIVALENTS", "PYTHON_EQUIVALENTS", "REAL_CLASSES", "real_class"]


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


# ----------------------------------------------------------------- heapq, bisect, collections
def _smaller(a, b):
    return a < b


def _larger(a, b):  # the max-heap's order: the same comparison, operands swapped
    return b < a


def heappush(heap, item):
    _check_heap(heap)
    heap.append(item)
    _sift_down(heap, 0, len(heap) - 1, _smaller)


def heappop(heap):
    return _pop(heap, _smaller)


def heapreplace(heap, item):
    return _replace(heap, item, _smaller)


def heapify(heap):
    _heapify(heap, _smaller)


def heappop_max(heap):
    return _pop(heap, _larger)


def heapreplace_max(heap, item):
    return _replace(heap, item, _larger)


def heapify_max(heap):
    _heapify(heap, _larger)


def _pop(heap, first):
    _check_heap(heap)
    if not heap:
        raise IndexError("index out of range")
    last = heap.pop()
    if heap:
        top, heap[0] = heap[0], last
        _sift_up(heap, 0, first)
        return top
    return last


def _replace(heap, item, first):
    _check_heap(heap)
    if not heap:
        raise IndexError("index out of range")
    top, heap[0] = heap[0], item
    _sift_up(heap, 0, first)
    return top


def heappushpop(heap, item):
    _check_heap(heap)
    if heap and heap[0] < item:
        item, heap[0] = heap[0], item
        _sift_up(heap, 0, _smaller)
    return item


def _heapify(heap, first):
    _check_heap(heap)
    for position in reversed(range(len(heap) // 2)):
        _sift_up(heap, position, first)


def _check_heap(heap):
    if not isinstance(heap, list):
        raise TypeError("heap argument must be a list")


def _sift_down(heap, start, position, first):
    """Move ``heap[position]`` up towards ``start`` while it comes ``first`` before its parent
    (the names are CPython's: "down" from the root's point of view)."""
    item = heap[position]
    while position > start:
        parent = (position - 1) >> 1
        if first(item, heap[parent]):
            heap[position] = heap[parent]
            position = parent
            continue
        break
    heap[position] = item


def _sift_up(heap, position, first):
    """Move the child that comes first up until a leaf is reached, then put the item there and
    sift it down: CPython's order of comparisons, hence its layout for equal items."""
    end, start, item = len(heap), position, heap[position]
    child = 2 * position + 1
    while child < end:
        right = child + 1
        if right < end and not first(heap[child], heap[right]):
            child = right
        heap[position] = heap[child]
        position = child
        child = 2 * position + 1
    heap[position] = item
    _sift_down(heap, start, position, first)


def bisect_left(a, x, lo=0, hi=None, *, key=None):
    lo, hi = _bisect_bounds(a, lo, hi)
    while lo < hi:
        middle = (lo + hi) // 2
        if (a[middle] if key is None else key(a[middle])) < x:
            lo = middle + 1
        else:
            hi = middle
    return lo


def bisect_right(a, x, lo=0, hi=None, *, key=None):
    lo, hi = _bisect_bounds(a, lo, hi)
    while lo < hi:
        middle = (lo + hi) // 2
        if x < (a[middle] if key is None else key(a[middle])):
            hi = middle
        else:
            lo = middle + 1
    return lo


def _bisect_bounds(a, lo, hi):
    if lo < 0:
        raise ValueError("lo must be non-negative")
    return lo, len(a) if hi is None else hi


def insort_left(a, x, lo=0, hi=None, *, key=None):
    a.insert(bisect_left(a, x if key is None else key(x), lo, hi, key=key), x)


def insort_right(a, x, lo=0, hi=None, *, key=None):
    a.insert(bisect_right(a, x if key is None else key(x), lo, hi, key=key), x)


def count_elements(mapping, iterable):
    """``collections._count_elements``, what ``Counter.update`` counts with."""
    for element in iterable:
        mapping[element] = mapping.get(element, 0) + 1


# the arguments a cache compares by value, as their hash and ``==`` do (anything else is found
# again only as the same object: a tensor's hash is its id)
_BY_VALUE = (int, float, complex, str, bytes, bool, type(None), type(...), frozenset)
_UNHASHABLE = (list, dict, set, bytearray)


def _same_argument(a, b) -> bool:
    if a is b:
        return True
    if type(a) is tuple and type(b) is tuple:
        return len(a) == len(b) and all(_same_argument(x, y) for x, y in zip(a, b))
    return isinstance(a, _BY_VALUE) and isinstance(b, _BY_VALUE) and a == b


def _check_hashable(value):
    if isinstance(value, _UNHASHABLE):
        raise TypeError(f"unhashable type: '{type(value).__name__}'")
    if type(value) is tuple:
        for item in value:
            _check_hashable(item)


class _lru_cache_wrapper:  # noqa: N801 (the name the program sees)
    """functools' C cache (what ``functools.lru_cache`` and ``functools.cache`` wrap a
    function made in forward() with): a result kept per arguments (keywords in their order,
    with their types when ``typed``), found again for equal constants or the same object (a
    tensor's hash is its id), least recently used dropped beyond ``maxsize``; an unhashable
    argument raises as CPython's; ``cache_info``/``cache_clear``."""

    def __init__(self, user_function, maxsize, typed, cache_info_type):
        if not callable(user_function):
            raise TypeError("the first argument must be callable")
        self.__wrapped__ = user_function
        self._maxsize = None if maxsize is None else max(maxsize, 0)
        self._typed, self._info_type = typed, cache_info_type
        self._keys, self._results = [], []  # least recently used first
        self._hits = self._misses = 0

    def __call__(self, *args, **kwargs):
        key = args + ((_KEYWORDS,) + tuple(kwargs.items()) if kwargs else ())
        if self._typed:
            key += tuple(type(v) for v in args) + tuple(type(v) for v in kwargs.values())
        elif len(key) == 1 and type(key[0]) in (int, str):
            key = (_ALONE, key[0])  # CPython keys a lone int or str by itself: 0 is not (0.0,)
        if self._maxsize == 0:  # no key made: nothing hashed
            self._misses += 1
            return self.__wrapped__(*args, **kwargs)
        for value in key:
            _check_hashable(value)
        for index, known in enumerate(self._keys):
            if len(known) == len(key) and all(_same_argument(a, b) for a, b in zip(known, key)):
                self._hits += 1
                result = self._results[index]
                del self._keys[index], self._results[index]
                self._keys.append(known)
                self._results.append(result)
                return result
        self._misses += 1
        result = self.__wrapped__(*args, **kwargs)
        self._keys.append(key)
        self._results.append(result)
        if self._maxsize is not None and len(self._keys) > self._maxsize:
            del self._keys[0], self._results[0]
        return result

    def cache_info(self):
        return self._info_type(self._hits, self._misses, self._maxsize, len(self._keys))

    def cache_clear(self):
        self._keys, self._results = [], []
        self._hits = self._misses = 0


_KEYWORDS = object()  # between a cache key's positional and keyword arguments
_ALONE = object()  # before the one int or str argument a cache keys by itself


def _namespace_takes_a_mapping() -> bool:
    """Whether this Python's ``types.SimpleNamespace`` takes a mapping or iterable of pairs
    before its keywords (3.13 added it): asked of the class itself."""
    try:
        types.SimpleNamespace({})
    except TypeError:
        return False
    return True


_NAMESPACE_TAKES_A_MAPPING = _namespace_takes_a_mapping()


class SimpleNamespace:
    """``types.SimpleNamespace``: attributes from its keywords (after a mapping or iterable of
    pairs where this Python's takes one), equal when their attributes are, shown as
    ``namespace(a=1)`` (a subclass by its own name), unhashable; CPython's errors."""

    def __init__(self, *args, **kwargs):
        if args and not _NAMESPACE_TAKES_A_MAPPING:
            raise TypeError("no positional arguments expected")
        if len(args) > 1:
            raise TypeError(f"SimpleNamespace expected at most 1 argument, got {len(args)}")
        for key, value in dict(args[0]).items() if args else ():
            if not isinstance(key, str):
                raise TypeError("keywords must be strings")
            setattr(self, key, value)
        for key, value in kwargs.items():
            setattr(self, key, value)

    def __repr__(self):
        name = "namespace" if type(self) is SimpleNamespace else type(self).__name__
        fields = ", ".join(f"{key}={value!r}" for key, value in vars(self).items())
        return f"{name}({fields})"

    def __eq__(self, other):
        if isinstance(other, SimpleNamespace):
            return vars(self) == vars(other)
        return NotImplemented

    __hash__ = None


class deque:  # noqa: N801 (the name the program sees)
    """``collections.deque`` over a list: its methods, ``maxlen`` dropping from the other
    end, and its errors (one more element held than CPython's C blocks would: no matter)."""

    def __init__(self, iterable=(), maxlen=None):
        if maxlen is not None and (type(maxlen) is not int or maxlen < 0):
            raise ValueError("maxlen must be non-negative")
        self._maxlen = maxlen
        self._items = []
        self.extend(iterable)

    @property
    def maxlen(self):
        return self._maxlen

    def append(self, item):
        self._items.append(item)
        if self._maxlen is not None and len(self._items) > self._maxlen:
            del self._items[0]

    def appendleft(self, item):
        self._items.insert(0, item)
        if self._maxlen is not None and len(self._items) > self._maxlen:
            self._items.pop()

    def extend(self, iterable):
        for item in list(iterable) if iterable is self else iterable:
            self.append(item)

    def extendleft(self, iterable):
        for item in list(iterable) if iterable is self else iterable:
            self.appendleft(item)

    def pop(self):
        if not self._items:
            raise IndexError("pop from an empty deque")
        return self._items.pop()

    def popleft(self):
        if not self._items:
            raise IndexError("pop from an empty deque")
        return self._items.pop(0)

    def clear(self):
        self._items.clear()

    def copy(self):
        return deque(self._items, self._maxlen)

    def count(self, value):
        return self._items.count(value)

    def index(self, value, *bounds):
        try:
            return self._items.index(value, *bounds)
        except ValueError:
            raise ValueError(f"{value!r} is not in deque") from None

    def insert(self, index, value):
        if self._maxlen is not None and len(self._items) >= self._maxlen:
            raise IndexError("deque already at its maximum size")
        self._items.insert(index, value)

    def remove(self, value):
        try:
            self._items.remove(value)
        except ValueError:
            raise ValueError(f"{value!r} is not in deque") from None

    def reverse(self):
        self._items.reverse()

    def rotate(self, n=1):
        if self._items:
            n %= len(self._items)
            if n:
                self._items[:] = self._items[-n:] + self._items[:-n]

    def __len__(self):
        return len(self._items)

    def __bool__(self):
        return bool(self._items)

    def __iter__(self):
        return iter(list(self._items))

    def __reversed__(self):
        return iter(list(reversed(self._items)))

    def __contains__(self, value):
        return value in self._items

    def __getitem__(self, index):
        if type(index) is slice:
            raise TypeError("sequence index must be integer, not 'slice'")
        try:
            return self._items[index]
        except IndexError:
            raise IndexError("deque index out of range") from None

    def __setitem__(self, index, value):
        try:
            self._items[index] = value
        except IndexError:
            raise IndexError("deque index out of range") from None

    def __delitem__(self, index):
        try:
            del self._items[index]
        except IndexError:
            raise IndexError("deque index out of range") from None

    def __eq__(self, other):
        return isinstance(other, deque) and self._items == other._items

    def __iadd__(self, other):
        self.extend(other)
        return self

    def __add__(self, other):
        if not isinstance(other, deque):
            raise TypeError(f'can only concatenate deque (not "{type(other).__name__}") to '
                            'deque')
        return deque(self._items + other._items, self._maxlen)

    def __repr__(self):
        inside = ", ".join(repr(item) for item in self._items)
        if self._maxlen is None:
            return f"deque([{inside}])"
        return f"deque([{inside}], maxlen={self._maxlen})"


def _itertools_equivalents() -> dict:
    import itertools

    table = {getattr(itertools, name): function for name, function in (
        ("accumulate", accumulate), ("count", count), ("cycle", cycle), ("repeat", repeat),
        ("starmap", starmap), ("takewhile", takewhile), ("dropwhile", dropwhile),
        ("filterfalse", filterfalse), ("groupby", groupby), ("tee", tee))}
    import bisect
    import collections
    import heapq

    table.update({heapq.heappush: heappush, heapq.heappop: heappop,
                  heapq.heapreplace: heapreplace, heapq.heappushpop: heappushpop,
                  heapq.heapify: heapify, bisect.bisect_left: bisect_left,
                  bisect.bisect_right: bisect_right, bisect.insort_left: insort_left,
                  bisect.insort_right: insort_right, collections.deque: deque,
                  types.SimpleNamespace: SimpleNamespace,
                  functools._lru_cache_wrapper: _lru_cache_wrapper})  # noqa: SLF001
    for name, function in (("heapify_max", heapify_max), ("heappop_max", heappop_max),
                           ("heapreplace_max", heapreplace_max)):  # nlargest's (3.14: public)
        for spelling in (name, "_" + name):
            if callable(getattr(heapq, spelling, None)):
                table[getattr(heapq, spelling)] = function
    if getattr(collections, "_count_elements", None) is not None:
        table[collections._count_elements] = count_elements  # noqa: SLF001 (Counter's)
    return table


# the C callable -> its equivalent here, interpreted wherever the program calls it
PYTHON_EQUIVALENTS: dict = _itertools_equivalents()

# an equivalent class -> the C class it stands for: ``isinstance``/``issubclass`` answer for
# the C class (an instance of the equivalent is one of ``collections.deque``, and so is a
# real deque from outside the trace, whichever of the two the program names)
REAL_CLASSES: dict = {equivalent: real for real, equivalent in PYTHON_EQUIVALENTS.items()
                      if isinstance(equivalent, type)}


def real_class(value):
    """``value`` with every equivalent class in it (a class or a tuple of them, nested, as
    ``isinstance`` takes) replaced by the C class it stands for."""
    if isinstance(value, tuple):
        return tuple(real_class(v) for v in value)
    return REAL_CLASSES.get(value, value) if isinstance(value, type) else value


# handlers of frontend.builtins that take these when an argument is a lazy iterator
LAZY_EQUIVALENTS: dict = {"zip": zip_, "enumerate": enumerate_, "map": map_, "filter": filter_,
                          "islice": islice, "pairwise": pairwise}
