"""The binding plan of inlined calls (``variables.functions.BindingPlan``) against its oracle,
``inspect.Signature.bind`` then ``apply_defaults``: the same arguments, in the same order, for
every call Python accepts; None (the caller then asks ``Signature.bind``) for every call it
refuses."""
from __future__ import annotations

import inspect

from hypothesis import given, settings
from hypothesis import strategies as st

from unbroken.frontend.variables.binding import BindingPlan


def plain(a, b, c=3):
    return a, b, c


def star_args(a, *args, b=2, **kwargs):
    return a, args, b, kwargs


def positional_only(a, b=1, /, c=2, *, d, e=5, **kw):
    return a, b, c, d, e, kw


def only_keywords(*, x, y=0):
    return x, y


def no_parameters():
    return None


def star_only(*args, **kwargs):
    return args, kwargs


FUNCTIONS = [plain, star_args, positional_only, only_keywords, no_parameters, star_only]
NAMES = ["a", "b", "c", "d", "e", "x", "y", "z", "args", "kwargs", "kw"]


def oracle(fn, args, kwargs):
    try:
        bound = inspect.signature(fn).bind(*args, **kwargs)
    except TypeError:
        return None
    bound.apply_defaults()
    return dict(bound.arguments)


@settings(max_examples=400, deadline=None)
@given(fn=st.sampled_from(FUNCTIONS), count=st.integers(0, 5),
       names=st.lists(st.sampled_from(NAMES), max_size=4, unique=True))
def test_plan_binds_as_signature_bind(fn, count, names):
    args = tuple(range(100, 100 + count))
    kwargs = {name: f"kw-{name}" for name in names}
    got = BindingPlan(inspect.signature(fn)).bind(args, kwargs)
    expected = oracle(fn, args, kwargs)
    if got is None:  # refused: Python refuses too, or a keyword names a positional-only one
        assert expected is None or any(
            inspect.signature(fn).parameters.get(n) is not None and
            inspect.signature(fn).parameters[n].kind is inspect.Parameter.POSITIONAL_ONLY
            for n in names)
        return
    assert list(got.items()) == list(expected.items())  # same values, same order
    assert [type(v) for v in got.values()] == [type(v) for v in expected.values()]


def test_examples():
    plan = BindingPlan(inspect.signature(star_args))
    assert plan.bind((1, 2, 3), {"b": 4, "z": 5}) == {"a": 1, "args": (2, 3), "b": 4,
                                                     "kwargs": {"z": 5}}
    assert plan.bind((), {"a": 1}) == {"a": 1, "args": (), "b": 2, "kwargs": {}}
    assert plan.bind((1,), {"a": 1}) is None  # multiple values for a
    assert BindingPlan(inspect.signature(plain)).bind((1, 2, 3, 4), {}) is None
    assert BindingPlan(inspect.signature(only_keywords)).bind((), {}) is None  # x missing
