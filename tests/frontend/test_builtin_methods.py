"""Every method of the builtin value types against CPython, bound and unbound.

``unbroken.frontend.variables.builtin_methods`` holds one table of what each method of
``set``, ``frozenset``, ``dict``, ``list``, ``str``, ``bytes``, ``int``, ``float``, ``tuple``,
``range``, ``bool`` and ``complex`` does (reads, mutates, refused). Here every name ``dir()``
gives for those types is called through the interpreter on a receiver the trace made, bound
(``r.name(*args)``) and unbound (``type.name(r, *args)``), with arguments drawn from a pool, and
compared with CPython: the same result (strict types), the same receiver afterwards, or the
same exception type. A method no argument tuple of the pool fits fails the test (add one to
``_SPECIAL``), so a method new in some Python version cannot go untested. The table itself is
checked against CPython too: a method marked as reading never changes its receiver. Mutating
methods on a container from outside the trace are refused (UB107) and leave it unchanged.
"""
from __future__ import annotations

import types
from collections.abc import ItemsView, KeysView, ValuesView

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact
from tests.frontend.parity import assert_same
from unbroken import GraphBreakError
from unbroken.frontend import interpret
from unbroken.frontend.variables.builtin_methods import (
    BUILTIN_TYPES,
    MUTATES,
    READS,
    REFUSED,
    is_builtin_method,
    method_kind,
)
from unbroken.symbolic.diagnostics.catalogue import TracedException

pytestmark = pytest.mark.matrix

# Two values of each type (the receiver and an "other" operand) and one element-like value.
_VALUES = {
    set: ({1, 2, 3}, {2, 5}, 2), frozenset: (frozenset({1, 2, 3}), frozenset({2, 5}), 2),
    dict: ({"a": 1, "b": 2}, {"b": 3, "c": 4}, "a"), list: ([3, 1, 2], [2, 5], 2),
    str: ("hello world", "lo", "l"), bytes: (b"hello world", b"lo", b"l"), int: (12, 5, 3),
    float: (2.5, 0.5, 2.0), tuple: ((3, 1, 2), (2, 5), 2), range: (range(1, 10, 2), range(3), 3),
    bool: (True, False, True), complex: (1 + 2j, 0.5 - 1j, 1j),
}

# Arguments for methods the generic pool does not fit (or fits badly).
_SPECIAL = {
    "__format__": [("",), (">20",)], "__getattribute__": [("__doc__",), ("nope",)],
    "__setattr__": [("x", 1)], "__delattr__": [("x",)], "__reduce_ex__": [(2,)],
    "__class_getitem__": [(int,)], "format_map": [({"x": 1},)], "__getformat__": [("double",)],
    "from_bytes": [(b"\x01\x02", "big")], "to_bytes": [(2, "big"), (1, "little")],
    "__subclasshook__": [(int,)], "__init_subclass__": [()],
    "__mod__": [((),), (1,)], "__rmod__": [("%s",)], "__pow__": [(2,), (2, 5)],
}
_SPECIAL_BY_TYPE = {
    (str, "translate"): [({108: 76},)], (bytes, "translate"): [(None,), (bytes(range(256)),)],
    (str, "maketrans"): [("ab", "cd")], (bytes, "maketrans"): [(b"ab", b"cd")],
    (bytes, "fromhex"): [("00ff",)], (float, "fromhex"): [("0x1.8p1",)],
    (dict, "fromkeys"): [(("x", "y"),), (("x",), 0)], (str, "join"): [(["a", "b"],)],
    (bytes, "join"): [([b"a", b"b"],)], (str, "format"): [(1, 2)],
    (range, "__new__"): [(range, 5), (range, 1, 9, 2)],
}


def _pool(cls, name):
    receiver, other, element = _VALUES[cls]
    if (cls, name) in _SPECIAL_BY_TYPE:
        return _SPECIAL_BY_TYPE[(cls, name)]
    if name in _SPECIAL:
        return _SPECIAL[name]
    if name == "__new__":
        return [(cls,), (cls, other)]
    return [(), (other,), (element,), (1,), (0, 2), (element, element), (-1,), (other, 1)]


def _methods(cls):
    return sorted(n for n in dir(cls) if is_builtin_method(cls, n))


def _class_level(cls, name) -> bool:
    """Called on the class without a receiver (class and static methods, ``__new__``)."""
    return not isinstance(getattr(cls, name), (types.MethodDescriptorType,
                                                types.WrapperDescriptorType))


_MAKERS = {list: list, dict: dict, set: set}


def _fresh(seed):
    maker = _MAKERS.get(type(seed))
    return maker(seed) if maker is not None else seed


def call_bound(seed, name, args):
    r = _fresh(seed)
    result = getattr(r, name)(*args)
    return result, r


def call_unbound(cls, seed, name, args):
    r = _fresh(seed)
    result = getattr(cls, name)(r, *args)
    return result, r


def call_on_class(cls, seed, name, args):
    r = _fresh(seed)
    return getattr(cls, name)(*args), r


def _normal(value):
    """Iterators compare by what they yield. Dict views compare as the list snapshot the
    interpreter models them with (``builder._wrap_mapping_view``): a known difference of type,
    not of contents."""
    if isinstance(value, (KeysView, ValuesView, ItemsView)):
        return list(value)
    if hasattr(value, "__next__"):
        return ("iterator", list(value))
    if isinstance(value, tuple):
        return tuple(_normal(v) for v in value)
    return value


def _outcome(run):
    try:
        return "returns", _normal(run())
    except TracedException as error:
        return "raises", type(error.exception)
    except GraphBreakError:
        raise
    except Exception as error:  # noqa: BLE001 - CPython's own exception is the oracle
        return "raises", type(error)


def _check(fn, *args):
    expected = _outcome(lambda: fn(*args))
    actual = _outcome(lambda: interpret(fn, *args))
    assert actual[0] == expected[0], f"got {actual}, CPython gives {expected}"
    if expected[0] == "returns":
        assert_same(actual[1], expected[1])
    else:
        assert actual[1] is expected[1], f"got {actual[1]}, CPython raises {expected[1]}"
    return expected[0] == "returns" or expected[1] is not TypeError  # an argument tuple fits


_CASES = [(cls, name) for cls in BUILTIN_TYPES for name in _methods(cls)]


def _id(case):
    return f"{case[0].__name__}.{case[1]}"


@pytest.mark.parametrize("case", _CASES, ids=_id)
def test_method_matches_cpython_bound_and_unbound(case):
    cls, name = case
    seed = _VALUES[cls][0]
    kind, _ = method_kind(cls, name)
    forms = [(call_on_class, cls)] if _class_level(cls, name) else \
        [(call_bound, None), (call_unbound, cls)]
    accepted = 0
    for args in _pool(cls, name):
        for fn, owner in forms:
            call = (fn, seed, name, args) if owner is None else (fn, owner, seed, name, args)
            if kind == REFUSED:
                with pytest.raises(GraphBreakError) as info:
                    interpret(*call)
                assert info.value.code == "UB108", info.value.render()
                accepted += 1
                continue
            accepted += _check(*call)
    assert accepted, f"no argument tuple fits {cls.__name__}.{name}: add one to _SPECIAL"


@pytest.mark.parametrize("case", [c for c in _CASES if method_kind(*c)[0] == READS], ids=_id)
def test_reading_methods_leave_the_receiver_unchanged_in_cpython(case):
    """The table against CPython: a method marked as reading never changes its receiver."""
    cls, name = case
    for args in _pool(cls, name):
        receiver = _fresh(_VALUES[cls][0])
        before = repr(receiver)
        try:
            getattr(receiver, name)(*args)
        except Exception:  # noqa: BLE001 - a rejected argument tuple changes nothing either
            pass
        assert repr(receiver) == before, f"{cls.__name__}.{name}{args} changed its receiver"


_OUTSIDE = {list: [3, 1, 2], dict: {"a": 1, "b": 2}, set: {1, 2, 3}}


def _fits(cls, name, args) -> bool:
    """CPython runs ``name`` with ``args`` on a copy without raising, and changes it."""
    receiver = _fresh(_OUTSIDE[cls])
    try:
        getattr(receiver, name)(*args)
    except Exception:  # noqa: BLE001 - CPython's verdict
        return False
    return repr(receiver) != repr(_OUTSIDE[cls])


def mutate_outside(cls, name, args):
    return getattr(_OUTSIDE[cls], name)(*args)


def mutate_outside_unbound(cls, name, args):
    return getattr(cls, name)(_OUTSIDE[cls], *args)


@pytest.mark.parametrize("case", [c for c in _CASES if method_kind(*c)[0] == MUTATES], ids=_id)
def test_mutating_a_container_from_outside_is_refused_and_leaves_it(case):
    cls, name = case
    before = repr(_OUTSIDE[cls])
    args = next(a for a in _pool(cls, name) if _fits(cls, name, a))
    for fn in (mutate_outside, mutate_outside_unbound):
        with pytest.raises(GraphBreakError) as info:
            interpret(fn, cls, name, args)
        assert info.value.code == "UB107", info.value.render()
    assert repr(_OUTSIDE[cls]) == before


def test_einops_set_operations_unbound():
    """einops' own pattern checks: unbound set operations on sets the trace built."""
    def check_axes(left, right):
        difference = set.symmetric_difference(set(left), set(right))
        return sorted(difference), set.difference(set(left), {"b"}), frozenset(left) | {"z"}

    assert_same(interpret(check_axes, ["a", "b"], ["b", "c"]), check_axes(["a", "b"], ["b", "c"]))


def test_list_methods_carry_tensors_unseen():
    """Methods that only move elements run on lists holding tensors (each one opaque), bound
    and unbound; the program equals eager bit for bit, as torch.export's does."""
    class Shuffle(torch.nn.Module):
        def forward(self, x):
            xs = [x, x + 1, x * 2]
            xs[0:2] = xs[1:3]
            xs += [x - 1]
            list.__delitem__(xs, 1)
            last = list.pop(xs)
            xs = list.__mul__(xs, 2)
            return tuple(xs) + (last, *reversed(xs))

    x = torch.arange(3.0)
    model = Shuffle()
    for program in (unbroken.export(model, (x,)), torch.export.export(model, (x,))):
        assert_bit_exact(program.module()(x), model(x))


def test_unbound_method_of_a_dict_holding_tensors():
    class Pick(torch.nn.Module):
        def forward(self, x):
            d = {"a": x, "b": x + 1}
            dict.update(d, c=x * 3)
            key, last = dict.popitem(d)
            return dict.get(d, "a"), last, key == "c", sorted(dict.keys(d))

    x = torch.arange(3.0)
    model = Pick()
    for program in (unbroken.export(model, (x,)), torch.export.export(model, (x,))):
        got, want = program.module()(x), model(x)
        assert_bit_exact(got[:2], want[:2])
