"""Attributes of functions created in forward() (``frontend.variables.functions.
NestedFunctionVariable``): ``functools.wraps``/``update_wrapper`` on a wrapper made during the
trace, decorators that tag a function, ``__dict__``, ``__defaults__``, ``__annotations__``.
The function is the trace's own object, so its attributes are written as CPython writes them
(and checked as CPython checks them), side by side with CPython; the real-library cases are
``x-transformers``' and ``vector-quantize-pytorch``'s ``maybe(fn)`` decorator."""
from __future__ import annotations

import functools
import inspect

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact
from tests.frontend.parity import check, check_breaks
from unbroken.frontend import interpret


def maybe(fn):
    """lucidrains' decorator: made in forward() for each call, ``fn`` may be None."""
    @functools.wraps(fn)
    def inner(x, *args, **kwargs):
        if fn is None:
            return x
        return fn(x, *args, **kwargs)
    return inner


def wraps_a_local_function(x):
    def double(v, k=2):
        """Doubles."""
        return v * k
    double.tag = "t"
    wrapper = maybe(double)
    return (wrapper(x), wrapper.__name__, wrapper.__qualname__, wrapper.__doc__,
            wrapper.__wrapped__ is double, wrapper.tag, sorted(wrapper.__dict__),
            wrapper.__module__, str(inspect.signature(wrapper)))


def wraps_none_and_a_global(x):
    none, outer = maybe(None), maybe(check)
    return (none(x), none.__name__, outer.__name__, outer.__wrapped__ is check,
            hasattr(none, "__wrapped__"), none.__wrapped__ is None)


def update_wrapper_by_hand(x):
    def wrapped(v: int) -> int:
        return v + 1

    def wrapper(*args):
        return wrapped(*args) * 2

    functools.update_wrapper(wrapper, wrapped, assigned=("__name__", "__annotations__"),
                             updated=())
    return wrapper(x), wrapper.__name__, wrapper.__annotations__, wrapper.__wrapped__(x)


def tags_and_dict(x):
    def f(a, b=3, *, c=4):
        return a + b + c
    f.calls = 0
    f.calls += 1
    f.__dict__["seen"] = True
    names = dict(f.__dict__)
    del f.seen
    f.__defaults__ = (10,)
    f.__kwdefaults__ = {"c": 20}
    f.__doc__ = "documented"
    return (f(x), names, hasattr(f, "seen"), getattr(f, "missing", "default"), f.__doc__,
            f.__defaults__, f.__kwdefaults__, f.__name__, f.__code__.co_name)


def replaces_dict(x):
    def f():
        return 1
    namespace = {"a": x}
    f.__dict__ = namespace
    namespace["b"] = 2
    f.c = 3
    return f.a, f.b, namespace["c"], f.__dict__ is namespace, f() + x


def annotations_read_back(x):
    def f(a: int, b: str = "s") -> float:
        return a
    first = f.__annotations__
    first["extra"] = bool
    same = f.__annotations__ is first
    f.__annotations__ = None
    return sorted(first), same, f.__annotations__


class Holder:
    pass


def call_and_get_of_a_local_function(x):
    def method(self, y):
        return (self is holder, y)
    holder = Holder()
    return (method.__call__(holder, x), method.__get__(holder)(x),
            method.__get__(None, Holder) is method)


def bad_name(x):
    def f():
        pass
    f.__name__ = x


def bad_defaults(x):
    def f():
        pass
    f.__defaults__ = [x]


def readonly_globals(x):
    def f():
        pass
    f.__globals__ = {}


@pytest.mark.parametrize("fn", [wraps_a_local_function, wraps_none_and_a_global,
                                update_wrapper_by_hand, tags_and_dict, replaces_dict,
                                annotations_read_back, call_and_get_of_a_local_function])
def test_function_attributes_as_cpython(fn):
    check(fn, 3)


@pytest.mark.parametrize("fn, error", [(bad_name, TypeError), (bad_defaults, TypeError),
                                       (readonly_globals, AttributeError)])
def test_invalid_attribute_writes_raise_cpythons_error(fn, error):
    def caught(x):
        try:
            fn(x)
        except error as exc:
            return type(exc).__name__
        return None
    check(caught, 3)


def replaces_code(x):
    def f():
        return 1
    f.__code__ = (lambda: 2).__code__
    return f()


def test_replacing_a_functions_code_is_refused():
    check_breaks("UB107", replaces_code, 3)


class Wrapped(torch.nn.Module):
    """A normalisation applied through a wrapper made in forward(), as x-transformers does."""

    def __init__(self):
        super().__init__()
        self.norm = torch.nn.LayerNorm(8)
        self.absent = None

    def forward(self, x):
        y = maybe(self.norm)(x)
        z = maybe(self.absent)(y)
        return maybe(torch.relu)(z) * len(maybe(self.norm).__dict__) ** 0


def test_a_wrapper_made_in_forward_exports_bit_exact():
    x = torch.randn(2, 5, 8)
    model = Wrapped().eval()
    before = dict(vars(model))
    program = unbroken.export(model, (x,))
    assert dict(vars(model)) == before  # the wrappers' attributes never reached the model
    peer = torch.export.export(Wrapped().eval(), (x,))
    for exported in (program, peer):  # (LayerNorm's init is deterministic)
        assert_bit_exact(exported.module()(x), Wrapped().eval()(x))


def test_a_branch_may_not_tag_a_function_made_before_it():
    class Tags(torch.nn.Module):
        def forward(self, x):
            def f():
                return 1

            def branch(v):
                f.tag = 1
                return v + 1

            return torch.cond(x.sum() > 0, branch, lambda v: v - 1, (x,))

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Tags(), (torch.randn(3),))
    assert info.value.code == "UB107"


def identity_of_functions(x):
    def local():
        pass
    return (torch.relu is torch.relu, functools.reduce is functools.reduce,
            maybe is maybe, local is local, torch.relu is torch.tanh, maybe is check)


def test_a_function_read_twice_is_the_same_object():
    check(identity_of_functions, 3)


def reads_an_outside_functions_attributes(x):
    return (hasattr(maybe, "missing"), getattr(maybe, "missing", x), len(maybe.__dict__),
            maybe.__name__, maybe.__defaults__)


def writes_an_outside_functions_dict(x):
    maybe.__dict__["seen"] = x
    return x


def test_an_outside_function_is_read_natively_and_never_written():
    check(reads_an_outside_functions_attributes, 3)
    with pytest.raises(unbroken.GraphBreakError) as info:
        interpret(writes_an_outside_functions_dict, 3)
    assert info.value.code == "UB107" and "maybe.__dict__" in info.value.render()
    assert "seen" not in maybe.__dict__


def test_vector_quantize_fsq_exports_bit_exact():
    """FSQ wraps ``einops.rearrange`` with its ``maybe`` decorator in forward()."""
    fsq_module = pytest.importorskip("vector_quantize_pytorch")
    torch.manual_seed(0)
    model = fsq_module.FSQ(levels=[8, 5, 5, 5], dim=32)
    x = torch.randn(2, 6, 32)
    program = unbroken.export(model, (x,))
    peer = torch.export.export(model, (x,))
    for exported in (program, peer):
        assert_bit_exact(exported.module()(x), model(x))


def _add(a, b, c=0):
    return a + b + c


def wraps_a_partial(x):
    p = functools.partial(_add, 1, c=2)
    wrapper = maybe(p)
    return (wrapper(x), wrapper.__name__, wrapper.__wrapped__ is p, p.func is _add, p.args,
            p.keywords, isinstance(p, functools.partial), hasattr(p, "__name__"), p.__module__)


def test_a_partial_is_wrapped_and_read_as_cpython():
    check(wraps_a_partial, 3)
