"""Every entry of the special-function tables (``torch_calls._SPECIAL``: torch functions the
interpreter answers itself; ``builtins._HANDLERS``: Python builtins it models) has a program
that uses it, exported and compared with eager (or with torch.export where both answer "we
are exporting" on purpose), or refused with the code its handler promises. A wrong mapping
(``_check_is_size`` read as ``_check``) cannot hide, and a new entry without a case fails
``test_every_entry_has_a_case``.
"""
import bisect
import collections
import dataclasses
import functools
import heapq
import importlib
import itertools
import operator
import sys
import types
import typing
import warnings

import pytest
import torch
import torch.nn as nn

import unbroken
from unbroken.frontend.builtins import _HANDLERS
from unbroken.frontend.equivalents import PYTHON_EQUIVALENTS
from unbroken.frontend.variables.native import CLASS_FACTORIES
from unbroken.frontend.variables.torch_calls import _GLOBAL_STATE_SETTERS, _SPECIAL
from unbroken.symbolic.torch_compat import (
    ENCODER_LAYER_FORWARD,
    FUNCTORCH_DIFFERENTIATION,
    MAKE_FX_TRACING,
    MODE_PUSHES,
    NATIVE_MULTI_HEAD_ATTENTION,
    NESTED_FROM_MASK_LEFT_ALIGNED,
    NESTED_TENSOR_BUILDERS,
    NN_FAST_PATH_HELPERS,
    scan_function,
)

EAGER, PEER = "eager", "torch.export"
_map = importlib.import_module("torch._higher_order_ops.map").map


@dataclasses.dataclass
class _Pair:
    first: float = 2.0
    second: float = 3.0


class _Base(nn.Module):
    def forward(self, x):
        return x * 2


class _Child(_Base):
    def forward(self, x):
        return super().forward(x) + 1


def _while(x):
    def cond(i, y):
        return i < 3

    def body(i, y):
        return i + 1, y * 2

    return torch.while_loop(cond, body, (torch.tensor(0), x))[1]


def _hop_while(x):
    return torch.ops.higher_order.while_loop(
        lambda i, y: i < 3, lambda i, y: (i + 1, y * 2), (torch.tensor(0), x), ())[1]


def _set_grad_enabled_and_back(x):
    torch._C._set_grad_enabled(False)
    y = x * 2
    torch._C._set_grad_enabled(True)
    return y


def _native_attention(x):
    """torch.nn's fused attention kernel called directly, without weights: (out, None)."""
    w, b = torch.ones(9, 3) / 3, torch.zeros(9)
    out, weights = NATIVE_MULTI_HEAD_ATTENTION(x[None], x[None], x[None], 3, 1, w, b,
                                               torch.eye(3), torch.zeros(3), None, False)
    return out[0] + (weights is None)


def _encoder_layer(x):
    """torch.nn's fused encoder layer called directly on a dense input with a key-padding
    mask (mask type 1) that hides the last position."""
    w, b = torch.ones(6, 2) / 3, torch.zeros(6)
    mask = torch.tensor([[0.0, 0.0, 0.0, float("-inf")]])
    return ENCODER_LAYER_FORWARD(x[None, :, :2], 2, 2, w, b, torch.eye(2), torch.zeros(2), False,
                                 False, 1e-5, torch.ones(2), torch.zeros(2), torch.ones(2),
                                 torch.zeros(2), torch.ones(4, 2), torch.zeros(4),
                                 torch.ones(2, 4), torch.zeros(2), mask, 1)[0]


def _check_is_size(x):
    n = x.shape[0] - 1
    torch._check_is_size(n)
    return x[:n] + 1


# (table entry, program over one tensor x of shape (4, 3), expected: EAGER, PEER or a UB code)
SPECIAL_CASES = [
    (torch.tensor, lambda x: x + torch.tensor([1.0, 2.0, 3.0]), EAGER),
    (torch.as_tensor, lambda x: x + torch.as_tensor([1.0, 2.0, 3.0]), EAGER),
    (torch.compiler.is_compiling, lambda x: x + 1 if torch.compiler.is_compiling() else x, PEER),
    (torch.compiler.is_exporting, lambda x: x + 1 if torch.compiler.is_exporting() else x, PEER),
    (torch.jit.is_scripting, lambda x: x + 1 if torch.jit.is_scripting() else x - 1, EAGER),
    (torch.jit.is_tracing, lambda x: x + 1 if torch.jit.is_tracing() else x - 1, EAGER),
    (torch._check, lambda x: (torch._check(x.shape[0] > 1), x + 1)[1], EAGER),
    (torch._check_is_size, _check_is_size, EAGER),
    (torch.cond, lambda x: torch.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1, (x,)),
     EAGER),
    (torch.ops.higher_order.cond,
     lambda x: torch.ops.higher_order.cond(x.sum() > 0, lambda t: t + 1, lambda t: t - 1,
                                           (x,)), EAGER),
    (_map, lambda x: _map(lambda row: row * 2, x), EAGER),
    (scan_function, lambda x: scan_function(lambda c, r: (c + r, c * r), x[0], x)[1], EAGER),
    (torch.while_loop, _while, EAGER),
    (torch.ops.higher_order.while_loop, _hop_while, EAGER),
    (torch.is_grad_enabled, lambda x: x + 1 if torch.is_grad_enabled() else x - 1, EAGER),
    (torch.is_inference_mode_enabled,
     lambda x: x + 1 if torch.is_inference_mode_enabled() else x - 1, EAGER),
    (torch._C._set_grad_enabled, _set_grad_enabled_and_back, EAGER),
    # torch's spelling of a no_grad region (the module() of a program that has one)
    (torch.ops.higher_order.wrap_with_set_grad_enabled,
     lambda x: torch.ops.higher_order.wrap_with_set_grad_enabled(False, lambda t: t * 2, x) + 1,
     EAGER),
]
# torch.nn's fast-path predicates (tests/frontend/test_nn_fast_paths.py has them inside the
# torch.nn forwards that ask them); here outside those forwards
SPECIAL_CASES += [
    *[(fn, lambda x, fn=fn: x + 1 if fn((x,) if fn is torch.overrides.has_torch_function
                                        else x) else x - 1, EAGER)
      for fn in (torch.overrides.has_torch_function, torch.overrides.has_torch_function_unary,
                 torch.overrides.has_torch_function_variadic)],
    (MAKE_FX_TRACING, lambda x: x + 1 if MAKE_FX_TRACING() else x - 1, PEER),
    *[(torch.compiler.is_dynamo_compiling,
       lambda x: x + 1 if torch.compiler.is_dynamo_compiling() else x, PEER)
      for _ in range(hasattr(torch.compiler, "is_dynamo_compiling"))],
    *[(fn, lambda x, fn=fn: x + 1 if fn(x) else x - 1, EAGER) for fn in NN_FAST_PATH_HELPERS],
    (NESTED_FROM_MASK_LEFT_ALIGNED, lambda x: x + 1 if NESTED_FROM_MASK_LEFT_ALIGNED(
        x[None], torch.ones(1, 4, dtype=torch.bool)) else x, "UB105"),
    (NESTED_TENSOR_BUILDERS[0], lambda x: NESTED_TENSOR_BUILDERS[0](
        x[None], torch.ones(1, 4, dtype=torch.bool)).to_padded_tensor(0.0), "UB108"),
    (NESTED_TENSOR_BUILDERS[1], lambda x: NESTED_TENSOR_BUILDERS[1]([x, x]).to_padded_tensor(
        0.0), "UB108"),
    (NATIVE_MULTI_HEAD_ATTENTION, _native_attention, EAGER),
    (ENCODER_LAYER_FORWARD, _encoder_layer, EAGER),
]
if hasattr(torch.ops.higher_order, "scan"):
    SPECIAL_CASES.append((torch.ops.higher_order.scan, lambda x: torch.ops.higher_order.scan(
        lambda c, r: (c + r, c * 1), [torch.zeros(3)], [x], [])[1], "UB113"))
if hasattr(torch.ops.higher_order, "associative_scan"):
    SPECIAL_CASES.append((torch.ops.higher_order.associative_scan,
                          lambda x: torch.ops.higher_order.associative_scan(
                              lambda a, b: a + b, [x], [])[0], "UB113"))
SETTERS = sorted({getattr(owner, name) for name in _GLOBAL_STATE_SETTERS
                  for owner in (torch, torch.random) if hasattr(owner, name)}, key=repr)

class _Box:
    """A plain object made in forward()."""


def _with_setattr(x):
    box = _Box()
    setattr(box, "scale", 3)
    return x * box.scale


def _with_delattr(x):
    box = _Box()
    box.scale, box.shift = 2, 1
    delattr(box, "shift")
    return x * box.scale + hasattr(box, "shift")


BUILTIN_CASES = [
    (setattr, _with_setattr, EAGER),
    (delattr, _with_delattr, EAGER),
    (len, lambda x: x * len([1, 2, 3]), EAGER),
    (id, lambda x: x * (id(x) == id(x)) + ({id(x): 2}[id(x)] if id([]) != id(x) else 0),
     EAGER),
    (hash, lambda x: x * (hash((3, 2.5, -1)) % 7) + {x: 1}[x] * (hash(x) == hash(x)), EAGER),
    (isinstance, lambda x: x + 1 if isinstance(x, torch.Tensor) else x, EAGER),
    (issubclass, lambda x: x + issubclass(bool, int), EAGER),
    (type, lambda x: x + 1 if type(x) is torch.Tensor else x, EAGER),
    (getattr, lambda x: x * getattr(x, "shape")[0], EAGER),
    (hasattr, lambda x: x + hasattr(x, "no_such_attribute") + hasattr(x, "shape"), EAGER),
    (range, lambda x: sum(x * i for i in range(1, 4)), EAGER),
    (enumerate, lambda x: sum(x * i for i, _ in enumerate("abc")), EAGER),
    (zip, lambda x: sum(x * a * b for a, b in zip([1, 2], [3, 4, 5])), EAGER),
    (reversed, lambda x: x * list(reversed([1, 2]))[0], EAGER),
    (iter, lambda x: x * next(iter([5, 6])), EAGER),
    (next, lambda x: x * next(iter([]), 7), EAGER),
    (tuple, lambda x: x * len(tuple("ab")), EAGER),
    (list, lambda x: x * list(range(3))[-1], EAGER),
    (dict, lambda x: x * dict(a=2, b=3)["b"], EAGER),
    (set, lambda x: x * len(set([1, 1, 2])), EAGER),
    (frozenset, lambda x: x * len(frozenset("aab")), EAGER),
    (min, lambda x: x * min(3, 2, 5), EAGER),
    (max, lambda x: x * max([3, 2, 5], key=lambda v: -v), EAGER),
    (sum, lambda x: sum([x, x, 1.0]), EAGER),
    (any, lambda x: x + any([0, 0, 1]), EAGER),
    (all, lambda x: x + all([1, 0]), EAGER),
    (sorted, lambda x: x * sorted([3, 1, 2], reverse=True)[1], EAGER),
    (map, lambda x: sum(map(lambda v: v * 2, [1, 2])) * x, EAGER),
    (filter, lambda x: x * len(list(filter(None, [0, 1, 2]))), EAGER),
    (int, lambda x: x * int("3") + int(2.7), EAGER),
    (float, lambda x: x * float("1.5"), EAGER),
    (bool, lambda x: x * bool([]) + bool("a"), EAGER),
    (complex, lambda x: x * complex(2, 1).real, EAGER),
    (str, lambda x: x * len(str(123)), EAGER),
    (repr, lambda x: x * len(repr("ab")), EAGER),
    (ascii, lambda x: x * len(ascii("é")), EAGER),
    (format, lambda x: x * len(format(3.14159, ".2f")), EAGER),
    (slice, lambda x: x[slice(1, None, 2)], EAGER),
    (super, _Child(), EAGER),
    (object, lambda x: x * (max([], default=object()) is not None), EAGER),  # a sentinel
    (functools.reduce, lambda x: x * functools.reduce(operator.mul, [1, 2, 3]), EAGER),
    (callable, lambda x: x * callable(len) + callable(3), EAGER),
    # traced values: a tensor and a list are not callable (the class's __call__ decides)
    (callable, lambda x: x + callable(x) + callable([x]) * 2 + callable(x.relu) * 4, EAGER),
    # a generator in the chain runs in order; inspect.Signature.bind iterates a chain
    (itertools.chain, lambda x: sum(itertools.chain([x, 2 * x], (x * i for i in range(3)),
                                                    x.unbind(0))), EAGER),
    (itertools.chain.from_iterable,
     lambda x: torch.stack(list(itertools.chain.from_iterable([[x, x + 1], (x * 2,)]))), EAGER),
    # the fields of a dataclass (more in test_dataclass_fields.py)
    (dataclasses.fields, lambda x: x * sum(f.default for f in dataclasses.fields(_Pair)), EAGER),
    # combinators that only arrange the items: CPython's own, on the trackers
    (itertools.zip_longest, lambda x: sum(
        a * (1 if b is None else b) for a, b in itertools.zip_longest(x.unbind(0), [2])), EAGER),
    (itertools.product, lambda x: sum(
        a * b for a, b in itertools.product([x, x + 1], [1, 3])), EAGER),
    (itertools.permutations, lambda x: sum(
        a - b for a, b in itertools.permutations([x, 2 * x, x * x], 2)), EAGER),
    (itertools.combinations, lambda x: sum(
        a / (b + 3) for a, b in itertools.combinations([x, x + 1, x * 2], 2)), EAGER),
    (itertools.combinations_with_replacement, lambda x: sum(
        a * b for a, b in itertools.combinations_with_replacement([x, x + 1], 2)), EAGER),
    (itertools.islice, lambda x: sum(itertools.islice(x.unbind(0), 0, None, 2)), EAGER),
    (itertools.compress, lambda x: sum(itertools.compress([x, x + 1, x * 3], [1, 0, 1])),
     EAGER),
    (itertools.pairwise, lambda x: sum(
        a * b for a, b in itertools.pairwise(x.unbind(0))), EAGER),
    *[(itertools.batched, lambda x: sum(
        sum(b) for b in itertools.batched(x.unbind(0), 2)), EAGER)
      for _ in range(hasattr(itertools, "batched"))],
]

# itertools' lazy functions, run as their Python equivalents (frontend.equivalents; their
# laziness against CPython: test_equivalents.py)
BUILTIN_CASES += [
    (itertools.accumulate, lambda x: list(itertools.accumulate(x.unbind(0), torch.mul))[-1],
     EAGER),
    (itertools.count, lambda x: sum(r * i for i, r in zip(itertools.count(2), x.unbind(0))),
     EAGER),
    (itertools.cycle, lambda x: sum(itertools.islice(itertools.cycle([x, 2 * x]), 5)), EAGER),
    (itertools.repeat, lambda x: torch.stack(list(itertools.repeat(x, 3))), EAGER),
    (itertools.starmap, lambda x: sum(itertools.starmap(torch.mul, [(x, x), (x, 2)])), EAGER),
    (itertools.takewhile, lambda x: sum(itertools.takewhile(lambda r: r.shape[0] == 3,
                                                            [x[0], x[1], x[:2, 0]])), EAGER),
    (itertools.dropwhile, lambda x: sum(itertools.dropwhile(lambda r: r.shape[0] == 2,
                                                            [x[0, :2], x[1], x[2]])), EAGER),
    (itertools.filterfalse, lambda x: sum(itertools.filterfalse(lambda r: r.shape[0] == 2,
                                                                [x[0, :2], x[1], x[2]])), EAGER),
    (itertools.groupby, lambda x: torch.stack([sum(r for _, r in g) for _, g in itertools.groupby(
        zip([0, 0, 1, 1], x.unbind(0)), key=lambda pair: pair[0])]), EAGER),
    (itertools.tee, lambda x: sum(a * b for a, b in zip(*itertools.tee(
        r + 1 for r in x.unbind(0)))), EAGER),
]


# heapq's, bisect's and collections' C functions and deque: their Python equivalents
def _heap_program(x):
    heap = [(3, 0), (1, 1), (2, 2)]
    heapq.heapify(heap)
    heapq.heappush(heap, (0, 3))
    order = [heapq.heappop(heap)[1], heapq.heappushpop(heap, (5, 4))[1],
             heapq.heapreplace(heap, (9, 5))[1]]
    return x * sum(i * 10 ** k for k, i in enumerate(order))


def _max_heap_program(x):
    values = [4, 1, 3, 2, 5]
    return x * sum(heapq.nlargest(2, values)) + x * sum(heapq.nsmallest(2, values))


def _bisect_program(x):
    a = [1, 3, 5]
    bisect.insort_left(a, 3)
    bisect.insort_right(a, 4)
    return x * (bisect.bisect_left(a, 3) + 10 * bisect.bisect_right(a, 3) + 100 * len(a))


BUILTIN_CASES += [
    *[(fn, _heap_program, EAGER) for fn in (heapq.heapify, heapq.heappush, heapq.heappop,
                                             heapq.heappushpop, heapq.heapreplace)],
    *[(fn, _max_heap_program, EAGER) for fn in PYTHON_EQUIVALENTS
      if getattr(fn, "__module__", None) == "_heapq" and fn.__name__.endswith("_max")],
    *[(fn, _bisect_program, EAGER) for fn in (bisect.bisect_left, bisect.bisect_right,
                                               bisect.insort_left, bisect.insort_right)],
    (collections.deque, lambda x: torch.stack(list(collections.deque([x, x + 1, x * 2],
                                                                     maxlen=2))), EAGER),
    (types.SimpleNamespace, lambda x: types.SimpleNamespace(a=x, b=2).a * 2, EAGER),
    (functools._lru_cache_wrapper,  # noqa: SLF001 (what lru_cache builds)
     lambda x: functools.lru_cache(maxsize=None)(lambda t: t * 2)(x) + 1, EAGER),
    *[(fn, lambda x: x * collections.Counter("abca")["a"], EAGER) for fn in PYTHON_EQUIVALENTS
      if getattr(fn, "__name__", "") == "_count_elements"],
    (sys.exc_info, lambda x: x * (sys.exc_info()[0] is None), EAGER),
    *[(sys.exception, lambda x: x * (sys.exception() is None), EAGER)
      for _ in range(hasattr(sys, "exception"))],
]


# the standard library's class factories, run natively on constant descriptions
def _namedtuple_program(x):
    pair = collections.namedtuple("Pair", "a b", defaults=[2])
    return pair(x).a * pair(x, 3).b


BUILTIN_CASES += [
    (collections.namedtuple, _namedtuple_program, EAGER),
    (typing.NamedTuple, lambda x: typing.NamedTuple("P", [("a", int)])(3).a * x, EAGER),
    (dataclasses.make_dataclass,
     lambda x: dataclasses.make_dataclass("D", [("a", int)])(a=4).a * x, EAGER),
    (collections.namedtuple, lambda x: collections.namedtuple("P", "a", defaults=[x])().a,
     "UB108"),
]


# torch.func's differentiating transforms, refused at the call that opens their level
_DIFFERENTIATION_PROGRAMS = {
    "torch.func.grad / vjp / jacrev / hessian":
        lambda x: torch.func.grad(lambda t: (t * t).sum())(x),
    "torch.func.jvp / jacfwd":
        lambda x: torch.func.jvp(lambda t: t.sin(), (x,), (torch.ones_like(x),))[1],
    "torch.func.functionalize": lambda x: torch.func.functionalize(lambda t: t.mul(2))(x),
}
SPECIAL_CASES += [(fn, _DIFFERENTIATION_PROGRAMS[transform], "UB108")
                  for fn, transform in FUNCTORCH_DIFFERENTIATION.items()]


class _FunctionMode(torch.overrides.TorchFunctionMode):
    def __torch_function__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


class _DispatchMode(torch.utils._python_dispatch.TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        return func(*args, **(kwargs or {}))


_FUNCTION_MODE_PUSHES = (torch.overrides.TorchFunctionMode.__enter__, torch.overrides._push_mode,
                         torch._C._push_on_torch_function_stack)


def _mode_program(push):
    """Enter a mode of the program's own through ``push``, popped again in eager: refused at
    the push (UB110)."""
    function_side = push in _FUNCTION_MODE_PUSHES

    def program(x):
        push(_FunctionMode() if function_side else _DispatchMode())
        try:
            return x + 1
        finally:
            (torch.overrides if function_side else torch.utils._python_dispatch)._pop_mode()

    return program


SPECIAL_CASES += [(push, _mode_program(push), "UB110") for push in MODE_PUSHES]


def _id(case):
    key = case[0]
    return getattr(key, "__qualname__", None) or getattr(key, "__name__", None) or str(key)


def _export(program, x):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)  # torch deprecates _check_is_size
        return unbroken.export(program, (x,))


def _peer(program, x):
    module = program if isinstance(program, nn.Module) else _AsModule(program)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        return torch.export.export(module, (x,), strict=True).module()(x)


class _AsModule(nn.Module):
    def __init__(self, fn):
        super().__init__()
        self.fn = fn

    def forward(self, x):
        return self.fn(x)


@pytest.mark.parametrize("key, program, expected", SPECIAL_CASES + BUILTIN_CASES,
                         ids=[_id(c) for c in SPECIAL_CASES + BUILTIN_CASES])
def test_export_agrees_with_eager(key, program, expected):
    x = torch.randn(4, 3)
    if expected.startswith("UB"):
        program(x)  # eager runs: the refusal is the handler's policy, not eager's failure
        with pytest.raises(unbroken.GraphBreakError) as info:
            _export(program, x)
        assert info.value.code == expected and info.value.frames, info.value.render()
        return
    got = _export(program, x).module()(x)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", FutureWarning)
        want = program(x) if expected == EAGER else _peer(program, x)
    torch.testing.assert_close(got, want)


@pytest.mark.parametrize("setter", SETTERS, ids=lambda f: f.__name__)
def test_global_state_setters_are_refused(setter):
    """Not run eagerly (it would change this process's state): each is refused as UB107."""
    def program(x):
        setter(0)
        return x

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(program, (torch.randn(2),))
    assert info.value.code == "UB107" and info.value.frames


def test_every_entry_has_a_case():
    covered = {case[0] for case in SPECIAL_CASES + BUILTIN_CASES} | set(SETTERS)
    assert set(_SPECIAL) - covered == set()
    assert set(_HANDLERS) - covered == set()
    assert set(PYTHON_EQUIVALENTS) - covered == set()
    assert set(CLASS_FACTORIES) - covered == set()


def test_the_while_loop_operator_with_additional_inputs_is_refused():
    def program(x):
        return torch.ops.higher_order.while_loop(
            lambda i, y, k: i < 3, lambda i, y, k: (i + 1, y * k), (torch.tensor(0), x),
            (torch.tensor(2.0),))[1]

    x = torch.randn(3)
    program(x)  # eager runs it
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(program, (x,))
    assert info.value.code == "UB113" and "additional_inputs" in info.value.message
