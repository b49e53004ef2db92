"""Python builtins and constructors called from traced code.

Each builtin is handled on trackers: pure builtins on constants fold natively; on symbolic
sizes and tensors they become leaf calls (so `max(x.shape[0], 4)` records a guard, `abs(t)`
records an op); builtins that take callables (`sorted(key=)`, `map`, `filter`) call them
through the interpreter. What has no meaning in a graph (`id`, `open`, `input`, ...) is a
graph break; `print`, like `warnings.warn` and logger calls, reports and does not compute: it
is dropped from the trace (``variables.builder``), as torch.export strict drops it.
"""
from __future__ import annotations

import abc
import builtins
import collections
import dataclasses
import enum
import functools
import itertools
import math
import operator
import sys
import types
import warnings

import torch
from torch.utils import _pytree as pytree

from ..symbolic.diagnostics.catalogue import GraphBreakError, graph_break
from .equivalents import LAZY_EQUIVALENTS, real_class
from .protocol import (
    BoundMethodVariable,
    class_attribute,
    iterate,
    lookup,
    python_getattribute,
    raw_instance_dict,
    read_attribute,
)
from .variables.base import AttributeMissing, VariableTracker, identity_of
from .variables.builtin_methods import call_natively
from .variables.constant import (
    ConstantVariable,
    Identity,
    IdentityVariable,
    SetVariable,
    hash_is_stable,
)
from .variables.containers import (
    ChainVariable,
    DefaultDictVariable,
    DictVariable,
    GeneratorVariable,
    IteratorVariable,
    ListVariable,
    NamedTupleVariable,
    SizeVariable,
    SliceVariable,
    TupleVariable,
    dict_key,
    merged_entries,
    sorted_trackers,
)
from .variables.functions import UserFunctionVariable, bind_arguments
from .variables.grad_mode import GRAD_MODE_CLASSES, GradModeVariable
from .variables.native import NativeCallableVariable
from .variables.nn_module import NNModuleVariable
from .variables.numpy_values import NumpyCallVariable
from .variables.objects import (
    IGNORED_CONTEXTS,
    ContextManagerVariable,
    GetterVariable,
    IgnoredContextVariable,
    NewObjectVariable,
    ObjectVariable,
    PartialVariable,
    SuperVariable,
    construct_user_object,
    drain,
    iterator_of,
    next_of,
)
from .variables.tensor import SymbolicVariable, TensorVariable
from .variables.tensor_data import LEGACY_CONSTRUCTORS, legacy_constructor
from .variables.text import format_text

__all__ = ["BuiltinVariable", "ClassVariable", "call_builtin", "construct", "concrete"]

_REFUSED = {open: "UB103", input: "UB103", globals: "UB103",
            locals: "UB103", vars: "UB103", exec: "UB103", eval: "UB103", compile: "UB103",
            breakpoint: "UB103", __import__: "UB111",
            memoryview: "UB103", help: "UB103"}
# Builtins that fold natively when every argument is a constant, else run as leaf calls.
_PURE = {abs, divmod, pow, round, chr, ord, bin, hex, oct}


class BuiltinVariable(NativeCallableVariable):
    """A Python builtin (``len``, ``isinstance``, ``range``...), called through the handlers
    of this module."""

    __slots__ = ()

    def describe(self) -> str:
        return f"the builtin `{self.fn.__name__}`"

    def is_constant(self) -> bool:
        return True

    def as_constant(self):
        return self.fn

    def call(self, tx, args, kwargs) -> VariableTracker:
        return call_builtin(tx, self.fn, args, kwargs)


class ClassVariable(ConstantVariable):
    """A class (a constant whose calls construct instances). ``value``: the class object."""

    __slots__ = ()

    def describe(self) -> str:
        return f"the class `{self.value.__qualname__}`"

    def getattr(self, tx, name):
        found = lookup(tx, self, name, instance=self.value, source=self.source)
        if found is None:
            raise AttributeMissing(name)
        return found

    def call(self, tx, args, kwargs) -> VariableTracker:
        return construct(tx, self.value, args, kwargs)


def call_builtin(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """``fn(*args, **kwargs)`` for the Python builtin ``fn``, on trackers."""
    if fn is vars and len(args) == 1 and not kwargs:  # vars(obj) is obj.__dict__
        return args[0].getattr(tx, "__dict__")
    if fn in _REFUSED:
        raise graph_break(_REFUSED[fn], f"`{fn.__name__}()` is called", frames=tx.user_frames())
    handler = _HANDLERS.get(fn)
    if handler is not None:
        return handler(tx, *args, **kwargs)
    if isinstance(fn, type) and issubclass(fn, BaseException):
        return ObjectVariable(fn(*(a.as_constant() for a in args)))
    if fn in _PURE:
        return _fold_or_leaf(tx, fn, args, kwargs)
    raise graph_break("UB103", f"the builtin `{fn.__name__}` is not supported",
                      frames=tx.user_frames())


def _fold_or_leaf(tx, fn, args, kwargs):
    if all(a.is_constant() for a in [*args, *kwargs.values()]):
        try:
            value = fn(*(a.as_constant() for a in args),
                       **{k: v.as_constant() for k, v in kwargs.items()})
        except Exception as exc:  # the user's code raises: same as eager
            raise tx.user_exception(exc) from None
        return tx.wrap(value)
    return tx.call_leaf(fn, args, kwargs)


def _len(tx, obj):
    if isinstance(obj, TensorVariable):
        return tx.call_leaf(len, [obj], {})
    length = obj.length(tx)
    return length if isinstance(length, VariableTracker) else ConstantVariable(length)


def _isinstance(tx, obj, classes):
    # an equivalent class (``frontend.equivalents``) answers as the C class it stands for
    return ConstantVariable(issubclass(real_class(obj.python_type()),
                                       real_class(classes.as_constant())))


def _issubclass(tx, cls, classes):
    return ConstantVariable(issubclass(real_class(cls.as_constant()),
                                       real_class(classes.as_constant())))


def _type(tx, obj, *rest):
    if rest:
        raise graph_break("UB112", "`type(name, bases, dict)` creates a class",
                          frames=tx.user_frames())
    return tx.wrap(obj.python_type())


def _getattr(tx, obj, name, *default):
    found = read_attribute(tx, obj, name.as_constant())
    if found is not None:
        return found
    if default:
        return default[0]
    raise tx.user_exception(AttributeError(
        f"'{obj.python_type().__name__}' object has no attribute '{name.as_constant()}'"))


def _hasattr(tx, obj, name):
    return ConstantVariable(read_attribute(tx, obj, name.as_constant()) is not None)


def _setattr(tx, obj, name, value):
    """``setattr(obj, "name", value)``: the same write as ``obj.name = value``."""
    obj.setattr(tx, name.as_constant(), value)
    return ConstantVariable(None)


def _delattr(tx, obj, name):
    """``delattr(obj, "name")``: the same as ``del obj.name``."""
    if not hasattr(obj, "delattr"):
        raise graph_break("UB107", f"attribute `{name.as_constant()}` of {obj.describe()} is "
                          "deleted", frames=tx.user_frames())
    obj.delattr(tx, name.as_constant())
    return ConstantVariable(None)


def _range(tx, *args):
    """``range(...)``. A dynamic size as a bound is specialized (a guard that it equals its
    example value, as torch.export does: ``Dim.AUTO`` adopts it and says so, a size declared
    dynamic is refused with the fix), since the loop it drives is unrolled for that size. A
    bound read from tensor data is refused (UB105): no size makes the unrolled loop right."""
    if all(a.is_constant() for a in args):
        return ConstantVariable(range(*(a.as_constant() for a in args)))
    if not all(a.is_constant() or isinstance(a, SymbolicVariable) for a in args):
        raise graph_break("UB117", "`range()` of something other than ints and sizes: "
                          + ", ".join(a.describe() for a in args), frames=tx.user_frames())
    return ConstantVariable(range(*(_loop_bound(tx, a) for a in args)))


def _loop_bound(tx, bound) -> int:
    if bound.is_constant():
        return bound.as_constant()
    try:
        with tx.output.leaf_errors():
            return operator.index(bound.value)
    except GraphBreakError as error:
        if error.code != "UB105":
            raise
        raise graph_break(
            "UB105", f"`range()` bounded by {bound.describe()}, which depends on tensor data "
            "(a `nonzero()` count, a value read with `.item()`): the loop would be unrolled "
            "for one value", frames=tx.user_frames(),
            details=f"{error.message}\n\n{error.details}" if error.details else error.message,
            hint="Loop over a bound known at export time instead (masking what does not "
                 "apply), or express the loop with tensor operations / torch.cond.") from None


def _lazy(trackers) -> bool:
    """Whether one of ``trackers`` is an iterator (a generator, an ``itertools.chain``,
    ``iter(a_list)``): it may be endless, observe when it is drawn from, or be drawn from
    again after (``zip(range(n), it)`` then ``for x in it``: heapq's ``nsmallest``); CPython's
    laziness is then kept by interpreting the Python equivalent (``frontend.equivalents``)
    instead of materializing it."""
    return any(isinstance(t, IteratorVariable) for t in trackers)


def _lazily(tx, name: str, args, kwargs):
    return tx.wrap(LAZY_EQUIVALENTS[name]).call(tx, list(args), dict(kwargs))


def _enumerate(tx, iterable, start=None):
    if _lazy((iterable,)):
        return _lazily(tx, "enumerate", (iterable,) if start is None else (iterable, start), {})
    first = start.as_constant() if start is not None else 0
    return IteratorVariable([TupleVariable([ConstantVariable(first + i), v])
                             for i, v in enumerate(iterate(tx, iterable))])


def _zip(tx, *iterables, strict=None):
    if _lazy(iterables):
        return _lazily(tx, "zip", iterables, {} if strict is None else {"strict": strict})
    columns = [iterate(tx, it) for it in iterables]
    if strict is not None and strict.as_constant() and len({len(c) for c in columns}) > 1:
        raise tx.user_exception(ValueError(_zip_length_message([len(c) for c in columns])))
    return IteratorVariable([TupleVariable(list(row)) for row in zip(*columns)])


def _zip_length_message(lengths: list[int]) -> str:
    """CPython's error for ``zip(strict=True)`` over iterables of these (unequal) lengths: the
    first argument to run out, or the first after it that had more."""
    shortest = min(lengths)
    first = lengths.index(shortest)
    if first > 0:
        plural = f"s 1-{first}" if first > 1 else " 1"
        return f"zip() argument {first + 1} is shorter than argument{plural}"
    later = next(i for i, n in enumerate(lengths[1:], 2) if n > shortest)
    plural = f"s 1-{later - 1}" if later > 2 else " 1"
    return f"zip() argument {later} is longer than argument{plural}"


def _chain(tx, *iterables):
    # lazy, as CPython: each iterable's iterator is drawn from only when the chain reaches it
    # (a half-consumed iterator in the chain, inspect.Signature.bind's, advances in step)
    iterators = [_iter(tx, iterable) for iterable in iterables]
    # an object of the program's own iterator class is drawn from here, whole
    return ChainVariable([it if isinstance(it, IteratorVariable) else
                          IteratorVariable(drain(tx, it)) for it in iterators])


def _chain_from_iterable(tx, iterables):
    return _chain(tx, *iterate(tx, iterables))


def _combinator(fn, iterables: int | None, *, selectors: bool = False):
    """An ``itertools`` combinator that only arranges the items it is given (``zip_longest``,
    ``product``, ``permutations``, ``combinations``, ``islice``, ``pairwise``, ``batched``,
    ``compress``): CPython's own function run on the lists of the items' trackers,
    which it never looks inside. ``iterables``: how many leading arguments are iterables (None:
    all positional ones); the others, and the keywords but ``fillvalue``, are constants.
    ``selectors``: the second iterable holds constants whose truth selects (``compress``)."""
    def handler(tx, *args, **kwargs):
        if fn.__name__ in LAZY_EQUIVALENTS and _lazy(args[:1]):  # islice, pairwise
            return _lazily(tx, fn.__name__, args, kwargs)
        count = len(args) if iterables is None else iterables
        lists = [iterate(tx, a) for a in args[:count]]
        if selectors:
            lists[1] = [_constant_argument(tx, fn, item) for item in lists[1]]
        rest = [_constant_argument(tx, fn, a) for a in args[count:]]
        named = {k: v if k == "fillvalue" else _constant_argument(tx, fn, v)
                 for k, v in kwargs.items()}
        if fn is itertools.zip_longest:  # the filler is an item too: a tracker
            named.setdefault("fillvalue", ConstantVariable(None))
        try:
            result = fn(*lists, *rest, **named)
        except (TypeError, ValueError) as exc:  # the program's own error, at its line
            raise tx.user_exception(exc) from None
        return IteratorVariable([TupleVariable(list(item)) if isinstance(item, tuple) else item
                                 for item in result])
    return handler


def _constant_argument(tx, fn, tracker):
    if not tracker.is_constant():
        raise graph_break("UB108", f"`itertools.{fn.__name__}` with {tracker.describe()} where "
                          "it needs a value known at export time", frames=tx.user_frames())
    return tracker.as_constant()


_COMBINATORS = {
    itertools.zip_longest: _combinator(itertools.zip_longest, None),
    itertools.product: _combinator(itertools.product, None),
    itertools.permutations: _combinator(itertools.permutations, 1),
    itertools.combinations: _combinator(itertools.combinations, 1),
    itertools.combinations_with_replacement:
        _combinator(itertools.combinations_with_replacement, 1),
    itertools.islice: _combinator(itertools.islice, 1),
    itertools.compress: _combinator(itertools.compress, 2, selectors=True),
    **{getattr(itertools, name): _combinator(getattr(itertools, name), 1)
       for name in ("pairwise", "batched") if hasattr(itertools, name)},
}


def _reversed(tx, seq):
    return IteratorVariable(list(reversed(iterate(tx, seq))))


def _iter(tx, obj):
    return iterator_of(tx, obj)


def _next(tx, it, *default):
    value = next_of(tx, it)
    if value is None:
        if default:
            return default[0]
        if isinstance(it, GeneratorVariable):  # carries what the generator returned
            raise it.stop_iteration(tx)
        raise tx.user_exception(StopIteration())
    return value


def _tuple(tx, iterable=None):
    return TupleVariable([] if iterable is None else iterate(tx, iterable))


def _list(tx, iterable=None):
    return ListVariable([] if iterable is None else iterate(tx, iterable))


def _dict(tx, source=None, **kwargs):
    result = DictVariable({})
    if source is not None:
        result.entries.update(merged_entries(tx, source))
    result.entries.update(kwargs)
    return result


def _set(tx, iterable=None, *, cls=set):
    """``set(iterable)`` / ``frozenset(iterable)``: of constants, or holding tensors, modules
    and objects as CPython hashes them (``containers.dict_key``)."""
    values = [] if iterable is None else iterate(tx, iterable)
    made = call_natively(tx, cls, [[tx.key_of(v) for v in values]], {})
    if cls is frozenset and all(v.is_constant() for v in values):
        return ConstantVariable(made)
    return SetVariable(made)


def _reduce_pairwise(fn):
    def handler(tx, *args, key=None, default=None):
        items = iterate(tx, args[0]) if len(args) == 1 else list(args)
        if not items:
            if default is not None:
                return default
            raise tx.user_exception(ValueError(f"{fn.__name__}() arg is an empty sequence"))
        if key is not None and not (key.is_constant() and key.as_constant() is None):
            keyed = [(key.call(tx, [v], {}), v) for v in items]
            best = keyed[0]
            for candidate in keyed[1:]:
                better = _compare(tx, candidate[0], best[0], fn is max)
                best = candidate if better else best
            return best[1]
        if all(v.is_constant() for v in items):
            return ConstantVariable(fn(v.as_constant() for v in items))
        if _zero_dim_tensors(items):
            return _select_pairwise(tx, items, fn is max)
        if all(issubclass(v.python_type(), (int, float)) and not isinstance(v, TensorVariable)
               for v in items):  # sizes: keep symbolic, without guarding on the comparison
            symbolic = torch.sym_max if fn is max else torch.sym_min
            return functools.reduce(lambda a, b: tx.call_leaf(symbolic, [a, b], {}), items)
        return tx.call_leaf(fn, items, {})

    return handler


def _zero_dim_tensors(items) -> bool:
    """One-element (0-d) tensors of one dtype: ``max``/``min`` of them is a selection the
    program can make at run time."""
    return all(isinstance(v, TensorVariable) and v.meta.dim() == 0 for v in items) and \
        len({v.meta.dtype for v in items}) == 1


def _select_pairwise(tx, items, greater: bool):
    """``max(a, b, ...)`` / ``min`` of 0-d tensors, as CPython runs it: the running result
    is replaced by each later item that compares greater (less), so ties and NaNs pick what
    CPython picks, and the gradient reaches the tensor it picked. Recorded as
    ``where(b > a, b, a)`` (torch.export strict records ``maximum``, which differs on NaNs)."""
    compare = torch.gt if greater else torch.lt
    result = items[0]
    for item in items[1:]:
        better = tx.call_leaf(compare, [item, result], {})
        result = tx.call_leaf(torch.where, [better, item, result], {})
    return result


def _compare(tx, a, b, greater: bool) -> bool:
    op = (lambda x, y: x > y) if greater else (lambda x, y: x < y)
    if a.is_constant() and b.is_constant():
        return op(a.as_constant(), b.as_constant())
    return tx.call_leaf(op, [a, b], {}).truth(tx)


def _sum(tx, iterable, start=None):
    items = iterate(tx, iterable)
    acc = start if start is not None else ConstantVariable(0)
    for item in items:
        acc = tx.binary_op("+", acc, item)
    return acc


def _any_all(fn):
    def handler(tx, iterable):
        for item in iterate(tx, iterable):
            if item.truth(tx) is (fn is any):
                return ConstantVariable(fn is any)
        return ConstantVariable(fn is all)

    return handler


def _sorted(tx, iterable, key=None, reverse=None):
    return ListVariable(sorted_trackers(tx, iterate(tx, iterable), key, reverse))


def _map(tx, fn, *iterables):
    if _lazy(iterables):
        return _lazily(tx, "map", (fn, *iterables), {})
    columns = [iterate(tx, it) for it in iterables]
    return IteratorVariable([fn.call(tx, list(row), {}) for row in zip(*columns)])


def _filter(tx, fn, iterable):
    if _lazy((iterable,)):
        return _lazily(tx, "filter", (fn, iterable), {})
    items = iterate(tx, iterable)
    if fn.is_constant() and fn.as_constant() is None:
        return IteratorVariable([v for v in items if v.truth(tx)])
    return IteratorVariable([v for v in items if fn.call(tx, [v], {}).truth(tx)])


def _scalar(py_type):
    def handler(tx, value=None, *rest):
        if value is None:
            return ConstantVariable(py_type())
        if isinstance(value, TensorVariable):
            number = _tensor_number(tx, py_type, value) if not rest else None
            if number is not None:
                return number
            error = graph_break("UB105", f"`{py_type.__name__}()` of {value.describe()}",
                                frames=tx.user_frames())
            real = tx.output.real_value(value.meta) if py_type is bool else None
            if real is not None and tx.output.recover(error):  # a decision: both sides
                return ConstantVariable(tx.output.take_branch(bool(real)))
            raise error
        if py_type is bool and not value.is_constant() and (
                isinstance(value, NewObjectVariable) or not hasattr(value, "value")):
            # containers, modules, objects created in the trace: their own (traced) truth
            return ConstantVariable(value.truth(tx))
        return _fold_or_leaf(tx, py_type, [value, *rest], {})

    return handler


def _tensor_number(tx, py_type, tensor: TensorVariable) -> VariableTracker | None:
    """``int(t)``, ``float(t)``, ``bool(t)`` of a one-element tensor as eager computes them
    from ``t.item()``: a symbolic value the program reads at run time (an unbacked symbol), with
    no decision taken on it (a later ``if`` on it is a data-dependent decision, refused there).
    ``float`` of an integer converts, ``int`` of a float truncates, ``bool`` compares with 0.
    None where the conversion is not modelled (a complex tensor, ``int``/``float`` of a bool
    tensor, a size that is not one element): refused by the caller."""
    meta = tensor.meta
    dtype = meta.dtype
    if dtype.is_complex or (dtype is torch.bool and py_type is not bool) or \
            type(meta.numel()) is not int or meta.numel() != 1:
        return None
    item = tx.call_leaf(torch.Tensor.item, [tensor], {})
    if py_type is bool:
        return item if dtype is torch.bool else \
            tx.call_leaf(operator.ne, [item, ConstantVariable(0)], {})
    if py_type is float:
        return item if dtype.is_floating_point else tx.call_leaf(torch.sym_float, [item], {})
    return tx.call_leaf(math.trunc, [item], {}) if dtype.is_floating_point else item


def concrete(tx, value: VariableTracker):
    """The Python value of ``value`` with every symbolic size made concrete: each one records
    a guard that it equals its example value (refused later if the size was declared dynamic).
    Tensors cannot be made concrete: their values are unknown (UB105)."""
    if value.is_constant():
        return value.as_constant()

    def convert(v):
        if isinstance(v, torch.Tensor):
            raise graph_break("UB105", f"{value.describe()} is turned into a Python value "
                              "(text or number)", frames=tx.user_frames())
        if isinstance(v, torch.Size):
            return torch.Size([convert(e) for e in v])
        for sym, py in ((torch.SymBool, bool), (torch.SymInt, int), (torch.SymFloat, float)):
            if isinstance(v, sym):
                return py(v)
        return v

    with tx.output.leaf_errors():
        return pytree.tree_map(convert, value.unwrap(tx))


def _textual(fn):
    """``str``/``repr``/``ascii``/``format`` of one value (and a constant format spec): text
    computed when used (``variables.text``); other forms are computed now."""
    def handler(tx, value=None, *rest):
        if value is None:
            return ConstantVariable(fn())
        if not rest and fn is not format:
            return format_text(tx, value, fn, "")
        if fn is format and len(rest) <= 1 and all(
                r.is_constant() and isinstance(r.as_constant(), str) for r in rest):
            return format_text(tx, value, None, rest[0].as_constant() if rest else "")
        return ConstantVariable(fn(concrete(tx, value), *(concrete(tx, r) for r in rest)))

    return handler


def _slice(tx, *parts):
    none = ConstantVariable(None)
    if len(parts) == 1:
        parts = (none, parts[0], none)
    return SliceVariable(list(parts) + [none] * (3 - len(parts)))


def _super(tx, *args):
    if args:
        cls, obj = args[0].as_constant(), args[1]
    else:
        cls, obj = tx.zero_arg_super()
    return SuperVariable(cls, obj, obj.snapshot(tx) if isinstance(obj, NewObjectVariable)
                         else obj.unwrap(tx))


def _reduce(tx, fn, iterable, *initial):
    items = iterate(tx, iterable)
    if not initial and not items:
        raise tx.user_exception(TypeError("reduce() of empty iterable with no initial value"))
    acc, rest = (initial[0], items) if initial else (items[0], items[1:])
    for item in rest:
        acc = fn.call(tx, [acc, item], {})
    return acc


def _id(tx, obj):
    """``id(obj)``: an integer that is the same for two trackers exactly when ``is`` holds
    between them (``opcodes.arithmetic.is_same``): the id of the object a tracker stands for
    (a module, a tensor's meta tensor, a constant, an object from outside), or of the tracker
    itself for a value the trace made (a list, a dict, an instance), which lives as long as
    that value. ``copy.deepcopy`` keys its memo by it. The number itself is another in every
    run: compared, hashed or used as a key it is the program's; handed to a PyTorch operation
    it would be baked into the program as a constant eager never computes (refused,
    :class:`IdentityVariable`)."""
    return IdentityVariable(Identity.of(identity_of(obj), tx.user_frames()))


def _hash(tx, obj):
    """``hash(obj)``, as CPython computes it: a constant's own; a tuple's from its elements';
    an object of the program's own class through its ``__hash__`` (interpreted); others (a
    tensor, a module) by identity. A number that is the same in every process (of numbers,
    tuples of them, a ``__hash__`` computing one) is a constant; one that is not (a string's,
    hashed with the process's seed; by identity) is compared and keyed with, and refused
    where it would reach the program, as ``id()``'s value is."""
    key = dict_key(obj, tx)
    try:
        value = hash(key)
    except TypeError as error:  # unhashable: a list, a dict, a set
        raise tx.user_exception(error) from None
    if hash_is_stable(key):
        return ConstantVariable(value)
    return IdentityVariable(Identity.of(value, tx.user_frames(), "`hash()`'s value (a hash "
                                        "by identity or of a string: another in every run)"))


def _callable(tx, obj):
    kinds = (BoundMethodVariable, NativeCallableVariable, NNModuleVariable, ClassVariable)
    if isinstance(obj, kinds) or type(obj).__name__.endswith("FunctionVariable"):
        return ConstantVariable(True)
    if obj.is_constant():
        return ConstantVariable(callable(obj.as_constant()))
    # an instance is callable when its class (not its metaclass) defines __call__
    return ConstantVariable(any("__call__" in vars(k) for k in obj.python_type().__mro__))


def _handled_exception(tx):
    """The exception being handled (an ``except`` block running) in the innermost frame that
    handles one, as CPython's ``sys.exception()``; None when none is."""
    for translator in reversed(tx.output.site.translators):
        if translator.current_exception is not None:
            return translator.current_exception
    return None


def _sys_exception(tx):
    handled = _handled_exception(tx)
    return ConstantVariable(None) if handled is None else handled


def _exc_info(tx):
    """``sys.exc_info()``: ``(None, None, None)`` outside an ``except`` block (contextlib's
    ExitStack asks it on every exit), else the handled exception's type, the exception and
    its ``__traceback__`` (the traceback of the interpreter's raise: nothing the exported
    program computes can read it; logging it is dropped)."""
    handled = _handled_exception(tx)
    if handled is None:
        return TupleVariable([ConstantVariable(None)] * 3)
    raw = handled.unwrap(tx)
    return TupleVariable([tx.wrap(type(raw)), handled,
                          ConstantVariable(None) if raw.__traceback__ is None
                          else tx.wrap(raw.__traceback__)])


def _object(tx, *args, **kwargs):
    """``object()``: a fresh object with no state, made natively (a sentinel compared with
    ``is``, heapq's and many libraries' ``default=`` marker)."""
    if args or kwargs:
        raise tx.user_exception(TypeError("object() takes no arguments"))
    return tx.wrap(object())


def _dataclass_fields(tx, *args, **kwargs):
    """``dataclasses.fields(obj)``: the fields of ``obj``'s class, read natively when the
    ``__dataclass_fields__`` that ``obj`` would give is its class's own (no write of the trace
    to the instance or to a class of its MRO, nothing in the instance's dict, no
    ``__getattribute__`` written in Python): the class's dict of ``Field`` objects, made with
    the class, filtered as ``dataclasses`` filters it. Anything else runs ``dataclasses``' own
    code, interpreted. A Hugging Face model output calls it in ``__post_init__`` and on every
    attribute write (~140 µs interpreted, a dozen times per export)."""
    if len(args) == 1 and not kwargs:
        cls = _unshadowed_dataclass(tx, args[0])
        if cls is not None:
            return tx.wrap(dataclasses.fields(cls))
    return UserFunctionVariable(dataclasses.fields).call(tx, list(args), kwargs)


_FIELDS_NAME = "__dataclass_fields__"


def _unshadowed_dataclass(tx, target) -> type | None:
    """The dataclass whose own fields ``target.__dataclass_fields__`` is (see
    ``_dataclass_fields``), or None."""
    kind = type(target)
    if kind is ClassVariable:
        cls, instance = target.value, None
        if type(cls) not in (type, abc.ABCMeta):  # a metaclass may answer otherwise
            return None
    elif kind is NewObjectVariable or kind is ObjectVariable:
        cls, instance = type(target.value), target.value
        if python_getattribute(cls) or kind is NewObjectVariable and \
                _FIELDS_NAME in target.attributes:
            return None
    else:
        return None
    if type(class_attribute(cls, _FIELDS_NAME)) is not dict:
        return None  # not a dataclass: dataclasses' TypeError, from its own code
    overlay = tx.output.overlay
    if any(overlay.read(klass, _FIELDS_NAME) is not None for klass in cls.__mro__):
        return None
    if instance is not None and (overlay.read(instance, _FIELDS_NAME) is not None
                                 or _FIELDS_NAME in raw_instance_dict(instance)):
        return None
    return cls


_HANDLERS = {
    len: _len, id: _id, hash: _hash, isinstance: _isinstance, issubclass: _issubclass, type: _type,
    getattr: _getattr, hasattr: _hasattr, setattr: _setattr, delattr: _delattr, range: _range,
    enumerate: _enumerate, zip: _zip,
    reversed: _reversed, iter: _iter, next: _next, tuple: _tuple, list: _list, dict: _dict,
    set: _set, frozenset: functools.partial(_set, cls=frozenset), min: _reduce_pairwise(min),
    max: _reduce_pairwise(max), sum: _sum, any: _any_all(any), all: _any_all(all),
    sorted: _sorted, map: _map, filter: _filter, int: _scalar(int), float: _scalar(float),
    bool: _scalar(bool), complex: _scalar(complex), str: _textual(str),
    repr: _textual(repr), ascii: _textual(ascii), format: _textual(format), slice: _slice,
    super: _super,
    object: _object, functools.reduce: _reduce, callable: _callable,
    itertools.chain: _chain, itertools.chain.from_iterable: _chain_from_iterable,
    dataclasses.fields: _dataclass_fields, sys.exc_info: _exc_info,
    **({sys.exception: _sys_exception} if hasattr(sys, "exception") else {}),
    **_COMBINATORS,
}


def construct(tx, cls: type, args: list, kwargs: dict) -> VariableTracker:
    """``cls(*args, **kwargs)`` for a class met in traced code."""
    if cls in _HANDLERS or getattr(builtins, cls.__name__, None) is cls:
        return call_builtin(tx, cls, args, kwargs)
    if issubclass(cls, tuple) and hasattr(cls, "_fields"):
        bound = bind_arguments(tx, cls, args, kwargs, lambda v: tx.wrap(v))
        return NamedTupleVariable([bound[f] for f in cls._fields], cls)
    if cls is torch.Size:
        return SizeVariable(iterate(tx, args[0]) if args else [])
    if cls in _CONSTRUCTORS:
        return _CONSTRUCTORS[cls](tx, cls, args, kwargs)
    if issubclass(cls, enum.Enum):  # Mode("mean"): a lookup by value
        return _fold_or_leaf(tx, cls, args, kwargs)
    if cls in LEGACY_CONSTRUCTORS:  # torch.LongTensor([n, m]): built by the graph
        built = legacy_constructor(tx, cls, args, kwargs)
        if built is not None:
            return built
    if cls.__module__.split(".")[0] == "numpy":  # np.float64(0.5), np.dtype(...): constants
        return NumpyCallVariable(cls).call(tx, args, kwargs)
    native = _construct_native(tx, cls, args, kwargs)
    if native is not None:
        return native
    if issubclass(cls, torch.nn.Module):
        return _construct_module(tx, cls, args, kwargs)
    instance = construct_user_object(tx, cls, args, kwargs)
    if instance is not None:
        return instance
    raise graph_break("UB108", f"constructing an instance of `{cls.__qualname__}` inside "
                      "traced code is not supported yet", frames=tx.user_frames())


def _construct_module(tx, cls, args, kwargs):
    """``nn.Softmax(dim=-1)`` / ``SiLUActivation()`` built inside forward() from constants: a
    module without parameters or buffers is made natively (its ``__init__`` only stores the
    settings) and then traced like any module. One with state is refused: eager creates new,
    randomly initialised weights on every call, which no exported program reproduces."""
    if not all(a.is_constant() for a in [*args, *kwargs.values()]):
        raise graph_break("UB108", f"constructing the module `{cls.__name__}` inside forward() "
                          "from values that are not constants", frames=tx.user_frames())
    try:
        module = cls(*(a.as_constant() for a in args),
                     **{k: v.as_constant() for k, v in kwargs.items()})
    except Exception as exc:  # the program's own error (bad arguments), at its line
        raise tx.user_exception(exc) from None
    if any(True for _ in module.parameters()) or any(True for _ in module.buffers()):
        raise graph_break("UB108", f"constructing the module `{cls.__name__}` inside forward(): "
                          "it creates parameters or buffers anew on every call",
                          frames=tx.user_frames(),
                          details="Create it in __init__ and call self.<name>(...) in forward.")
    # it keeps the mode it was made in (training, as in eager), not the model's
    return NNModuleVariable(module, f"<{cls.__name__} made in forward>")


def _partial(tx, cls, args, kwargs):
    return PartialVariable(args[0], args[1:], kwargs, created=True)


def _default_dict(tx, cls, args, kwargs):
    factory = args[0] if args else ConstantVariable(None)
    if not (factory.is_constant() and factory.as_constant() is None) and \
            not _callable(tx, factory).as_constant():
        raise tx.user_exception(TypeError("first argument must be callable or None"))
    return DefaultDictVariable(_dict(tx, *args[1:], **kwargs).entries, factory)


def _method_type(tx, cls, args, kwargs):
    """``types.MethodType(function, obj)``: ``function`` bound to ``obj`` (contextlib's
    ExitStack binds a context manager's ``__exit__`` so)."""
    if len(args) != 2 or kwargs:
        raise tx.user_exception(TypeError(f"method expected 2 arguments, got {len(args)}"))
    function, receiver = args
    if not _callable(tx, function).as_constant():
        raise tx.user_exception(TypeError("first argument must be callable"))
    return BoundMethodVariable(receiver, function)


def _ordered_dict(tx, cls, args, kwargs):
    result = _dict(tx, *args, **kwargs)
    result.python_class = cls
    return result


def _getter(tx, cls, args, kwargs):
    return GetterVariable(cls, [a.as_constant() for a in args])


def _plain_python_class(cls) -> bool:
    return cls.__new__ is object.__new__ and type(cls) in (type, abc.ABCMeta) and \
        isinstance(getattr(cls, "__init__", None), types.FunctionType)


def _catch_warnings(tx, cls, args, kwargs):
    """``warnings.catch_warnings()``: the warning filters it saves and restores only decide
    which warnings are shown, and the trace shows none (``warnings.warn``, ``simplefilter``
    are dropped calls): nothing to enter. With ``record=True`` the program would read the
    warnings eager caught, which the trace does not have: refused."""
    record = kwargs.get("record", args[0] if args else ConstantVariable(False))
    if not record.is_constant() or record.as_constant():
        raise graph_break("UB107", "`warnings.catch_warnings(record=True)`: the program reads "
                          "the warnings eager records, which the trace does not emit",
                          frames=tx.user_frames(),
                          details="Record the warnings around the export, outside forward().")
    return IgnoredContextVariable(cls)


_CONSTRUCTORS = {functools.partial: _partial, collections.OrderedDict: _ordered_dict,
                 collections.defaultdict: _default_dict, types.MethodType: _method_type,
                 operator.itemgetter: _getter, operator.attrgetter: _getter,
                 warnings.catch_warnings: _catch_warnings}


def _construct_native(tx, cls, args, kwargs):
    """PyTorch classes that are safe to construct natively from constants.

    A plain Python class of torch's (``torch.distributions.Normal``: ``object.__new__`` and an
    ``__init__`` written in Python) given traced values is a leaf call straight away, never
    first built on the bare meta tensors to see what it is: its ``__init__`` may read their
    data (argument validation), which only the recorder can turn into a decision on a
    data-dependent value."""
    if not cls.__module__.startswith("torch"):
        return None
    if cls in GRAD_MODE_CLASSES:  # never entered natively: the trace keeps its own mode
        return GradModeVariable.construct(tx, cls, args, kwargs)
    if cls in IGNORED_CONTEXTS:  # it only reports: nothing to enter (its arguments evaluated)
        return IgnoredContextVariable(cls)
    if _plain_python_class(cls) and not all(a.is_constant() for a in [*args, *kwargs.values()]):
        # an argument with no native value (an object holding a traced method): its
        # ``__init__`` is interpreted, as a class of the program's own
        return tx.output.call_leaf(tx, cls, args, kwargs,
                                   opaque=lambda: construct_user_object(tx, cls, args, kwargs))
    values = [a.unwrap(tx) for a in args]
    named = {k: v.unwrap(tx) for k, v in kwargs.items()}
    instance = cls(*values, **named)
    if ContextManagerVariable.supports(instance):
        return ContextManagerVariable(instance)
    if isinstance(instance, (torch.device, torch.dtype, torch.Size)):
        return tx.wrap(instance)
    if hasattr(instance, "__enter__"):
        raise graph_break("UB110", f"the context manager `{cls.__name__}`", frames=tx.user_frames())
    if isinstance(instance, torch.nn.Module):
        return None
    return tx.call_leaf(cls, args, kwargs)

