"""Oracle tests: the bytecode interpreter against CPython, part 3 — data and objects.

Strings and formatting, list and dict methods, namedtuples, attributes of a plain object,
``assert``, ``try``/``except`` without an exception, ``with``. See ``test_cpython_parity.py``
for the conventions (``check`` must be equal; ``check_breaks`` pins a known refusal).
"""
from __future__ import annotations

import collections
import collections.abc
import copy
import dataclasses
import types
from collections import namedtuple
from typing import NamedTuple

import pytest
from hypothesis import given
from hypothesis import strategies as st

from tests.frontend.parity import PARITY, check

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

small_ints = st.integers(-20, 20)
int_lists = st.lists(small_ints, max_size=6)
floats = st.floats(-1e4, 1e4, allow_nan=False, allow_infinity=False)
words = st.lists(st.sampled_from(["a", "bb", "ccc", "x y", ""]), max_size=4)


# ---------------------------------------------------------------- strings

def f_strings(n, x, s):
    return (
        f"{n}", f"{x:.3f}", f"{n:05d}", f"{n:+d}", f"{x!r}", f"{s!r}", f"{s:>8}|", f"{s:<4}|",
        f"{s:^7}|", f"{n * 1000:,}", f"{abs(n):x}", f"{abs(n):b}", f"{x:.2e}", f"{x:10.1f}",
        f"{{literal}} {n}", f"{n=}", f"{s}-{n}-{x:g}", f"{0.25:.0%}",
    )


def percent_and_format(n, x, s):
    return (
        "%d-%s-%.2f" % (n, s, x), "%5d|" % n, "%-5s|" % s, "%r" % s, "%x" % abs(n), "%%",
        "{}-{:>4}".format(n, s), "{a}/{b:.1f}".format(a=s, b=x), "{0}{0}{1}".format(s, n),
        "{:03d}".format(abs(n)),
    )


def string_methods(parts, sep):
    joined = sep.join(parts)
    return (
        joined, joined.split(sep) if sep else joined.split(), "a b  c".split(), "a,b,,c".split(","),
        "k=v=w".split("=", 1), "  pad  ".strip(), "xxhixx".strip("x"), joined.upper(), "MiXeD".lower(),
        joined.replace("a", "A"), joined.startswith("a"), joined.endswith(("c", "y")),
        "ab" * 3, "abc".find("c"), "a-b".partition("-"), str.join("+", ["1", "2"]), "Ab".isupper(),
        "layer.0.weight".rsplit(".", 1), "x".join(parts) + "!", "%s" % joined, len(joined),
    )


@PARITY
@given(n=small_ints, x=floats, s=st.sampled_from(["", "ab", "hello"]))
def test_f_strings_with_format_specs(n, x, s):
    check(f_strings, n, x, s)


@PARITY
@given(n=small_ints, x=floats, s=st.sampled_from(["", "ab", "hello"]))
def test_percent_and_str_format(n, x, s):
    check(percent_and_format, n, x, s)


@PARITY
@given(parts=words, sep=st.sampled_from([",", " ", "::"]))
def test_join_split_and_string_methods(parts, sep):
    check(string_methods, parts, sep)


# ---------------------------------------------------------------- lists

def list_methods(xs):
    ys = list(xs)
    ys.append(7)
    ys.extend([8, 9])
    ys.extend(range(2))
    last = ys.pop()
    first = ys.pop(0)
    ys.insert(1, -1)
    ys.insert(100, 42)
    where = ys.index(8)
    count = ys.count(0)
    ys.reverse()
    zs = sorted(ys)
    ys.sort()
    ws = list(xs)
    ws.sort(key=lambda v: (-abs(v), v), reverse=True)
    if ws:
        ws.remove(ws[0])
    cp = ws.copy()
    cp.clear()
    return ys, zs, ws, cp, last, first, where, count, xs + [0], [0] * 3, list(range(3))


def list_of_lists(n):
    rows = [[0] * n for _ in range(n)]
    for i in range(n):
        rows[i][i] = 1
    return rows


@PARITY
@given(xs=int_lists)
def test_list_methods(xs):
    check(list_methods, xs)


@pytest.mark.parametrize("n", [0, 1, 3])
def test_nested_list_item_assignment(n):
    check(list_of_lists, n)


# ---------------------------------------------------------------- dicts

def dict_methods(keys, n):
    d = {}
    for i, k in enumerate(keys):
        d[k] = i
    got = d.get("a"), d.get("zz", n), d.get("zz")
    d.update({"u": n})
    d.update(v=2)
    d.setdefault("u", 100)
    d.setdefault("w", [])
    d["w"].append(n)
    popped = d.pop("u"), d.pop("missing", -1)
    merged = {**d, "extra": True}
    made = dict(zip(keys, range(10))), dict(a=1, b=n), dict([("p", 1)])
    return (d, got, popped, list(d.keys()), list(d.values()), list(d.items()), "a" in d,
            merged, made, len(d), d.copy(), {k: v for k, v in d.items() if k != "w"})


def dict_counting(xs):
    counts = {}
    for x in xs:
        counts[x] = counts.get(x, 0) + 1
    return counts, sorted(counts.items())


def dict_argmax(xs):
    counts = dict.fromkeys(xs, 0)
    for x in xs:
        counts[x] += 1
    return max(counts, default=None, key=counts.__getitem__)


@PARITY
@given(keys=st.lists(st.sampled_from(["a", "b", "c"]), max_size=5), n=small_ints)
def test_dict_methods(keys, n):
    check(dict_methods, keys, n)


@PARITY
@given(xs=st.lists(st.integers(0, 3), max_size=8))
def test_dict_counting(xs):
    check(dict_counting, xs)


@PARITY
@given(xs=st.lists(st.integers(0, 3), max_size=8))
def test_dict_argmax(xs):
    # max(..., key=<bound method of a dict>): the dict's own method (builtin_methods)
    check(dict_argmax, xs)


class _Bag:
    __class_getitem__ = classmethod(types.GenericAlias)

    def __init__(self, v):
        self.v = v


class _SlottedBag:
    __slots__ = ("v",)
    __class_getitem__ = classmethod(types.GenericAlias)

    def __init__(self, v):
        self.v = v


def generic_alias_calls(x):
    # `dict[str, Any]()` (torch.fx.traceback.annotate's body): the alias calls its origin and
    # is kept as the result's __orig_class__ where the result takes attributes
    made = dict[str, int]()
    made["a"] = x
    bag, slotted = _Bag[int](x), _SlottedBag[int](x)
    return (made, list[int]((1, x)), tuple[int, ...]((x,)), dict[str, int](b=x), bag.v,
            bag.__orig_class__.__origin__ is _Bag, slotted.v, hasattr(slotted, "__orig_class__"))


@PARITY
@given(x=small_ints)
def test_generic_alias_calls(x):
    check(generic_alias_calls, x)


# ---------------------------------------------------------------- namedtuples

Point = namedtuple("Point", ["x", "y"])


class Shape(NamedTuple):
    rows: int
    cols: int = 1


def namedtuple_use(a, b):
    p = Point(a, b)
    q = Point(y=a, x=b)
    x, y = p
    s = Shape(a)
    return (p, q, p[0], p.y, q.x + q[1], x - y, len(p), p == (a, b), s, s.rows * s.cols,
            s[-1], tuple(p), isinstance(p, tuple))


def namedtuple_methods(a, b):
    p = Point(a, b)
    return p._replace(x=0), p._asdict(), Point._fields, Point._make([b, a])


@PARITY
@given(a=small_ints, b=small_ints)
def test_namedtuple_construct_index_attribute(a, b):
    check(namedtuple_use, a, b)


def test_namedtuple_methods():
    check(namedtuple_methods, 3, 4)


# ---------------------------------------------------------------- attributes of a plain object

class Config:
    """A plain configuration object, as models keep for hyper-parameters."""

    def __init__(self, hidden, dropout=None):
        self.hidden = hidden
        self.dropout = dropout

    def doubled(self):
        return self.hidden * 2


def read_config(cfg):
    heads = getattr(cfg, "heads", 4)
    hidden = getattr(cfg, "hidden")
    has_dropout = hasattr(cfg, "dropout") and cfg.dropout is not None
    return heads, hidden, has_dropout, hasattr(cfg, "nothing"), cfg.hidden // heads, cfg.doubled()


def build_config(hidden):
    cfg = Config(hidden, dropout=0.1)
    return cfg.hidden + 1, cfg.dropout, cfg.doubled()


@pytest.mark.parametrize("cfg", [Config(8), Config(16, dropout=0.5)], ids=["plain", "dropout"])
def test_getattr_hasattr_on_object(cfg):
    check(read_config, cfg)


def test_object_constructed_inside():
    check(build_config, 12)


# ---------------------------------------------------------------- assert, try, with

def passing_asserts(n, xs):
    assert n >= 0
    assert len(xs) <= 10, "too many"
    assert isinstance(xs, list), f"got {type(xs)}"
    return n + len(xs)


def try_without_exception(n):
    try:
        y = n + 1
    except ValueError:
        y = -1
    try:
        z = [n][0]
    except (IndexError, KeyError) as error:
        z = str(error)
    else:
        z += 10
    return y, z


def try_finally(n):
    out = []
    try:
        out.append(n)
    finally:
        out.append(-n)
    return out


class Recorder:
    """A simple context manager: records enter/exit into a list it was given."""

    def __init__(self, log):
        self.log = log

    def __enter__(self):
        self.log.append("enter")
        return self

    def __exit__(self, exc_type, exc, tb):
        self.log.append("exit")
        return False


def with_context_manager(n):
    log = []
    with Recorder(log) as rec:
        log.append(n)
    return log, rec is not None


def walrus(xs):
    if (n := len(xs)) > 2:
        return n
    return [y for x in xs if (y := x * 2) > 0]


@PARITY
@given(n=st.integers(0, 20), xs=int_lists)
def test_assert_that_passes(n, xs):
    check(passing_asserts, n, xs)


@PARITY
@given(n=small_ints)
def test_try_except_without_exception(n):
    check(try_without_exception, n)


def test_try_finally_without_exception():
    check(try_finally, 3)


def test_with_user_context_manager():
    check(with_context_manager, 5)


@pytest.mark.parametrize("xs", [[1, 2, 3], [-1, 4]])
def test_walrus(xs):
    check(walrus, xs)


# ---------------------------------------------------------------- slices

def slice_fields(a, b, c, n):
    parts = slice(a, b, c) if c != 0 else slice(a, b)
    bare = slice(b)
    return (parts.start, parts.stop, parts.step, bare.start, bare.stop, bare.step,
            parts.indices(n), list(range(n))[parts])


@PARITY
@given(st.one_of(st.none(), small_ints), st.one_of(st.none(), small_ints),
       st.one_of(st.none(), st.integers(-3, 3)), st.integers(0, 10))
def test_slice_fields_and_indices(a, b, c, n):
    check(slice_fields, a, b, c, n)


# ---------------------------------------------------------------- OrderedDict's own methods

def ordered_dict_moves(keys, moves):
    from collections import OrderedDict
    d = OrderedDict((k, i) for i, k in enumerate(keys))
    log = []
    for key, last in moves:
        try:
            d.move_to_end(key, last=last)
            log.append(list(d.items()))
        except KeyError as error:
            log.append(("KeyError", error.args))
    while True:
        try:
            log.append(d.popitem(last=len(d) % 2 == 0))
        except KeyError as error:
            log.append(("KeyError", error.args))
            break
    return log


@PARITY
@given(st.lists(st.sampled_from("abcd"), max_size=4, unique=True),
       st.lists(st.tuples(st.sampled_from("abcde"), st.booleans()), max_size=4))
def test_ordered_dict_move_to_end_and_popitem(keys, moves):
    check(ordered_dict_moves, keys, moves)


# ---------------------------------------------------------------- defaultdict, sentinels, methods

def default_dicts(words):
    from collections import defaultdict
    groups = defaultdict(list)
    for word in words:
        groups[word[0]].append(word)
    counts = defaultdict(int, {"seed": 3})
    for word in words:
        counts[len(word)] += 1
    plain = defaultdict(None)
    try:
        plain["missing"]
    except KeyError as error:
        missing = error.args
    copied = groups.copy()
    copied["new"].append(1)
    return (sorted(groups.items()), sorted(counts.items(), key=str), missing,
            groups.default_factory is list, "new" in groups, "x" in groups,
            groups.get("x"), type(copied).__name__)


@PARITY
@given(words)
def test_default_dicts(ws):
    check(default_dicts, [w or "e" for w in ws])


def sentinels_and_bound_methods(values):
    import sys
    import types
    missing = object()
    found = max(values, default=missing)
    log = []
    bound = types.MethodType(lambda self, v: self.append(v), log)
    bound(1)
    try:
        raise ValueError("handled")
    except ValueError:
        inside = sys.exception() is not None if hasattr(sys, "exception") else True
    outside = sys.exc_info()
    return found is missing, log, inside, outside


@PARITY
@given(int_lists)
def test_sentinels_bound_methods_and_the_handled_exception(values):
    check(sentinels_and_bound_methods, values)


# ---------------------------------------------------------------- copies and identities

@dataclasses.dataclass(frozen=True)
class _Config:
    width: int
    names: tuple = ()
    extra: dict = dataclasses.field(default_factory=dict)


def copies_and_identities(values, width):
    shared = list(values)
    nested = {"a": shared, "b": [shared, (shared, width)], "c": {"w": width}}
    shallow = copy.copy(nested)
    deep = copy.deepcopy(nested)
    deep["a"].append(99)  # the memo made one copy of `shared`, reached three times
    listed = copy.copy(shared)
    listed.append(-1)
    config = _Config(width, ("x",), {"k": values[:1]})
    replaced = dataclasses.replace(config, width=width + 1)
    first, second = [], []
    return (shallow["a"] is shared, deep["a"] is shared, deep["b"][0] is deep["a"],
            deep["b"][1][0] is deep["a"], deep, listed, shared, id(shared) == id(shared),
            id(first) == id(second), id(width) == id(width), replaced,
            dataclasses.asdict(replaced), dataclasses.astuple(config))


@PARITY
@given(int_lists, small_ints)
def test_copies_deep_copies_and_identities(values, width):
    """``copy.copy`` (its type table holds C methods the trace has no model of, such as
    ``bytearray.copy``: refused only if called), ``copy.deepcopy`` (its memo is keyed by
    ``id()``: shared references stay shared), ``dataclasses.replace``/``asdict``."""
    check(copies_and_identities, values, width)


Point = namedtuple("Point", "x y")


def classes_of_values(values):
    """``value.__class__`` of the builtin containers made in the trace (a list's and a dict's
    were taken for methods: ``[].__class__ is list`` was False)."""
    made = [list(values), dict.fromkeys(values), tuple(values), set(values), slice(1, 2),
            (v for v in values), Point(1, 2), collections.OrderedDict(), collections.Counter(),
            collections.defaultdict(list), frozenset(values), range(3), "s", 1.5, None]
    return [(type(v).__name__, v.__class__ is type(v), v.__class__.__name__) for v in made]


@PARITY
@given(int_lists)
def test_the_class_of_builtin_values(values):
    check(classes_of_values, values)


def dict_views(keys, other):
    d = {k: i for i, k in enumerate(keys)}
    ks, vs, its = d.keys(), d.values(), d.items()
    d["late"] = -1  # views are live
    out = [list(ks), list(vs), list(its), len(ks), "late" in ks, ("late", -1) in its, -1 in vs,
           ks & set(other), sorted(ks | set(other)), sorted(ks - set(other)),
           sorted(ks ^ set(other)), ks == set(keys) | {"late"}, ks != set(other),
           sorted(its - {("late", -1)}), ks.isdisjoint(other), vs == vs, vs == d.values(),
           isinstance(ks, list), isinstance(ks, collections.abc.KeysView),
           type(vs).__name__, list(reversed(ks)), bool(ks), bool({}.keys()),
           sorted(d.items(), key=lambda kv: kv[1])[0]]
    return out


@PARITY
@given(st.lists(st.sampled_from("abcde"), max_size=4, unique=True),
       st.lists(st.sampled_from("abcxy"), max_size=3))
def test_dict_views(keys, other):
    check(dict_views, keys, other)


def index_within_bounds(values, value, start, stop):
    """``list.index``/``tuple.index`` with ``start`` and ``stop`` (they were ignored:
    ``[1, 2, 1].index(1, 1)`` gave 0), negative ones from the end; CPython's errors."""
    out = []
    for seq in (list(values), tuple(values)):
        for bounds in ((), (start,), (start, stop)):
            try:
                out.append(seq.index(value, *bounds))
            except ValueError as error:
                out.append(("ValueError", str(error)))
    return out


@PARITY
@given(st.lists(st.integers(0, 3), max_size=6), st.integers(0, 3), st.integers(-8, 8),
       st.integers(-8, 8))
def test_index_within_bounds(values, value, start, stop):
    check(index_within_bounds, values, value, start, stop)


class _Defaulting(dict):
    def __missing__(self, key):
        return ("missing", key)


def counters_and_dict_subclasses(words, more):
    """``Counter``'s Python methods on a counter made in the trace (``update`` counts,
    ``most_common``, ``+``/``-``/``|``, ``copy``), ``__missing__`` of dict subclasses
    (``Counter()[k]`` is 0), ``dict()``/``update()`` of mappings and of pairs."""
    counts = collections.Counter(words)
    counts.update(more)
    counts.subtract(words[:1])
    total = counts + collections.Counter(more)
    out = [counts.most_common(2), sorted((total - counts).items()),
           sorted((counts | total).items()), counts["absent"], dict(counts.copy()),
           sorted(counts.elements()), _Defaulting(a=1)["a"], _Defaulting()["b"],
           dict(collections.OrderedDict(zip(words, more))), "absent" in counts]
    merged = {"x": 0}
    merged.update(counts)
    merged.update([("y", 1)])
    out.append(merged)
    for bad in (["abc"], [("a", 1), "b"]):
        try:
            out.append(dict(bad))
        except ValueError as error:
            out.append(str(error))
    return out


@PARITY
@given(words, st.lists(st.sampled_from(["a", "x", "bb"]), max_size=3))
def test_counters_and_dict_subclasses(ws, more):
    check(counters_and_dict_subclasses, ws, more)


# ---------------------------------------------------------------- keys of the program's own classes
# Objects whose class defines ``__hash__``/``__eq__`` in Python key dicts (their methods
# interpreted: lookups, ``in``, ``del``, ``pop``, ``get``, ``setdefault``; iteration gives the
# key objects themselves back); an identity-hashed object keys by identity; tuples holding
# either hash element by element; ``hash()`` of numbers, tuples and such objects is CPython's
# (a ``__hash__`` giving -1 or a huge int is reduced as CPython reduces it); a class defining
# ``__eq__`` alone is unhashable, and a ``__hash__`` returning a non-int is a TypeError.

class _Point:
    def __init__(self, x, y):
        self.x, self.y = x, y

    def __hash__(self):
        return hash((self.x, self.y)) if self.x != 7 else -1

    def __eq__(self, other):
        if not isinstance(other, _Point):
            return NotImplemented
        return (self.x, self.y) == (other.x, other.y)


class _Huge:
    def __init__(self, n):
        self.n = n

    def __hash__(self):
        return self.n * 2 ** 70


class _EqOnly:
    def __eq__(self, other):
        return True


class _BadHash:
    def __hash__(self):
        return "not an int"


class _Plain:
    pass


def user_keys(pairs: list, probes: list):
    table = {}
    for x, y in pairs:
        table[_Point(x, y)] = table.get(_Point(x, y), 0) + 1
    found = [table.get(_Point(x, y), "missing") for x, y in probes]
    present = [_Point(x, y) in table for x, y in probes]
    keys = [(p.x, p.y) for p in table]
    same_objects = all(k is key for k, key in zip(table, list(table.keys())))
    popped = []
    for x, y in probes:
        try:
            popped.append(table.pop(_Point(x, y)))
        except KeyError:
            popped.append("key error")
    if pairs:
        table.setdefault(_Point(*pairs[0]), "set")
        try:
            del table[_Point(99, 99)]
        except KeyError:
            popped.append("del missing")
    plain, other = _Plain(), _Plain()
    by_identity = {plain: 1, (plain, 2): 3}
    identity = [by_identity.get(plain), by_identity.get(other), by_identity.get((plain, 2)),
                (other, 2) in by_identity]
    hashes = [hash(n) for n in (0, 1, -1, -2, 2 ** 61, 2 ** 70, 10 ** 30)] + \
        [hash((x, y)) for x, y in pairs] + [hash(_Point(x, y)) for x, y in pairs] + \
        [hash(_Huge(n)) for n in (1, -1, 3)] + [hash(2.5), hash(-0.0), hash((1, (2, 3.5)))]
    errors = []
    for bad in (_EqOnly, _BadHash):
        try:
            {bad(): 1}
        except TypeError as error:
            errors.append(str(error))
        try:
            hash(bad())
        except TypeError as error:
            errors.append(str(error))
    try:
        hash([1, 2])
    except TypeError as error:
        errors.append(str(error))
    return found, present, keys, same_objects, popped, sorted(table.values(), key=str), \
        identity, hashes, errors


_pairs = st.lists(st.tuples(st.integers(0, 8), st.integers(0, 3)), max_size=6)


@PARITY
@given(_pairs, _pairs)
def test_objects_of_the_programs_classes_as_keys(pairs, probes):
    check(user_keys, pairs, probes)


def user_sets(points: list, probes: list):
    """Sets of objects of the program's own classes (Python ``__hash__``/``__eq__``) and of
    identity-hashed ones: built by ``{...}``, ``set()``, comprehensions and ``add``; the
    operators and methods; membership; ``remove`` of a missing one; iteration giving the
    objects themselves."""
    made = [_Point(x, y) for x, y in points]
    s = {p for p in made}
    t = set(_Point(x, y) for x, y in probes)
    plain = [_Plain() for _ in range(3)]
    u = {plain[0], plain[1]}
    u.add(plain[0])
    frozen = frozenset(made[:2])
    out = [len(s), len(t), len(s | t), len(s & t), len(s - t), len(s ^ t), s <= t, s == t,
           len(frozen), len(u), plain[2] in u, plain[1] in u,
           sorted((p.x, p.y) for p in s.union(t)), sorted((p.x, p.y) for p in s.intersection(t)),
           s.isdisjoint(t), t.issubset(s), all(any(p is q for q in made) for p in s)]
    for x, y in probes:
        out.append(_Point(x, y) in s)
        try:
            s.remove(_Point(x, y))
            out.append("removed")
        except KeyError:
            out.append("key error")
        s.discard(_Point(x, y))
    s |= {_Point(50, 50)}
    s -= t
    out.append(sorted((p.x, p.y) for p in s))
    out.append(len({(p, 1) for p in plain} | {(plain[0], 1)}))
    try:
        out.append({[1]})
    except TypeError as error:
        out.append(str(error))
    try:
        set([_EqOnly()])
    except TypeError as error:
        out.append(str(error))
    return out


@PARITY
@given(_pairs, _pairs)
def test_sets_of_the_programs_objects(points, probes):
    check(user_sets, points, probes)
