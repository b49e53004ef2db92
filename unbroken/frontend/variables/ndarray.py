"""NumPy on traced tensors: ndarrays backed by the trace's tensors.

``x.numpy()`` (or ``np.asarray(x)``) of a traced tensor gives an :class:`NdarrayVariable`: the
tensor, seen as the NumPy array eager shares memory with. Operators, methods, attributes and
``numpy.<function>`` calls on such arrays run through ``torch._numpy`` (NumPy's API written
with torch ops on the tensor an ndarray wraps, the implementation torch.export strict traces
NumPy code with), called natively on the meta tensors while the recorder records: the graph
holds the torch ops. ``torch.from_numpy`` / ``torch.as_tensor`` / ``torch.tensor`` of such an
array give a tensor back (an alias, as eager shares memory; a copy for ``torch.tensor``).

Eager runs real NumPy, so every call is also run by real NumPy on stand-in arrays of the same
dtypes and (example) shapes, outside the trace: it says what eager's result is (an ndarray or
a NumPy scalar, its dtype) and whether it shares memory with an argument. A dtype that differs
from ``torch._numpy``'s is refused (UB108); a result NumPy copies where torch returned a view
is copied in the graph too.

What cannot be followed soundly is refused at its line: writes into an array (item assignment,
``+=``, ``out=``, ``fill``, ``sort``...: the array may share memory with a tensor of the trace),
reading the values (``.item()``, ``.tolist()``, ``float(a)``: UB105), the memory layout
(``strides``, ``flags``: UB102), ``numpy.random`` (UB103) and a tensor mixed into a NumPy call.
"""
from __future__ import annotations

import operator

import torch

from ...symbolic.diagnostics.catalogue import graph_break
from ...symbolic.torch_compat import (
    numpy_on_torch_call,
    numpy_on_torch_function,
    version_counter,
)
from .base import AttributeMissing, VariableTracker, hashable
from .constant import ConstantVariable
from .containers import SequenceVariable
from .tensor import SymbolicVariable, TensorVariable

try:
    import numpy as np
except ImportError:  # without NumPy no array exists: nothing here runs
    np = None

__all__ = ["NdarrayVariable", "call_numpy"]

_FROM_NUMPY = (torch.from_numpy, torch.as_tensor, torch.asarray, torch.tensor)
_CONVERTERS = ("asarray", "array", "asanyarray", "ascontiguousarray")
# Python conversions reading the value of an array or NumPy scalar.
_VALUE_FUNCTIONS = {float: "float", int: "int", bool: "bool", complex: "complex",
                    operator.index: "operator.index", operator.truth: "truth"}
_INPLACE_OPERATORS = frozenset([operator.iadd, operator.isub, operator.imul, operator.itruediv,
                                operator.ifloordiv, operator.imod, operator.ipow,
                                operator.imatmul, operator.iand, operator.ior, operator.ixor,
                                operator.ilshift, operator.irshift, operator.setitem,
                                operator.delitem])
_VALUE_METHODS = frozenset(["item", "tolist", "tobytes", "tofile", "dump", "dumps", "__array__",
                            "__float__", "__int__", "__index__", "__bool__", "__complex__",
                            "__str__", "__repr__", "__format__", "__iter__", "__reduce__"])
_WRITING_METHODS = frozenset(["fill", "sort", "partition", "resize", "put", "itemset",
                              "setfield", "setflags", "__setitem__", "__delitem__", "__iadd__",
                              "__isub__", "__imul__", "__itruediv__", "__ifloordiv__"])
_LAYOUT_ATTRIBUTES = frozenset(["strides", "flags", "ctypes", "data", "base",
                                "__array_interface__", "__array_struct__"])
# NumPy functions that write into an argument.
_WRITING_FUNCTIONS = frozenset(["copyto", "put", "place", "putmask", "fill_diagonal",
                                "put_along_axis"])


def _numpy_type(name: str, scalar: bool):
    return np.dtype(name).type if scalar else np.dtype(name)


def _numpy_dtype(tx, tensor: TensorVariable):
    """NumPy's dtype of ``tensor``'s elements, as ``.numpy()`` maps it (eager raises a
    TypeError for a dtype NumPy lacks: bfloat16, complex32, float8...)."""
    try:
        return torch.empty(0, dtype=tensor.meta.dtype).numpy().dtype
    except TypeError as exc:
        raise tx.user_exception(exc) from None


class NdarrayVariable(VariableTracker):
    """A NumPy array, or NumPy scalar (``scalar``), whose data is the traced ``tensor``."""

    __slots__ = ("tensor", "scalar", "watch")

    def __init__(self, tensor: TensorVariable, scalar: bool = False, source=None, watch=()):
        super().__init__(source)
        self.tensor = tensor
        self.scalar = scalar
        # (meta tensor, its version, where): memory this array shares in eager but not in
        # the trace (a NumPy view torch computed as a copy): a write to it since is refused
        self.watch = watch

    def python_type(self) -> type:
        if self.scalar:
            return torch.empty(0, dtype=self.tensor.meta.dtype).numpy().dtype.type
        return np.ndarray

    def describe(self) -> str:
        what = "NumPy scalar" if self.scalar else "NumPy array"
        return f"the {what} computed from {self.tensor.describe()}"

    def unwrap(self, tx):
        raise graph_break("UB108", f"{self.describe()} reaches code that takes tensors (a "
                          "PyTorch function, or the exported program's outputs, which are "
                          "tensors)", frames=tx.user_frames(),
                          details="Convert it with torch.from_numpy(...) first, or keep the "
                                  "computation in torch.")

    def truth(self, tx) -> bool:
        raise graph_break("UB101", f"the truth value of {self.describe()} decides which code "
                          "runs", frames=tx.user_frames(),
                          hint="Use torch.where or torch.cond on the tensor instead.")

    def items(self, tx) -> list:
        if self.scalar or self.tensor.meta.dim() == 0:
            raise tx.user_exception(TypeError("iteration over a 0-d array"))
        rows = self.tensor.items(tx)  # the tensor's rows (a dynamic count is specialized)
        return [NdarrayVariable(row, scalar=self.tensor.meta.dim() == 1, watch=self.watch)
                for row in rows]

    def length(self, tx):
        if self.scalar or self.tensor.meta.dim() == 0:
            raise tx.user_exception(TypeError("len() of unsized object"))
        return self.tensor.length(tx)

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        return call_numpy(tx, operator.getitem, [self, index], {})

    def getattr(self, tx, name: str) -> VariableTracker:
        owner = self.python_type()
        if not hasattr(owner, name):
            raise AttributeMissing(name)
        if name == "__class__":
            return tx.wrap(owner)
        if name in _LAYOUT_ATTRIBUTES:
            raise graph_break("UB102", f"`.{name}` of {self.describe()} reads its memory "
                              "layout, which the trace does not follow", frames=tx.user_frames())
        if callable(getattr(owner, name)):
            return NdarrayMethodVariable(self, name)
        return call_numpy(tx, getattr, [self, ConstantVariable(name)], {})

    def setattr(self, tx, name, value) -> None:
        _refuse_write(tx, self, f"assignment to `.{name}`")


class NdarrayMethodVariable(VariableTracker):
    """A bound method of an array: ``a.sum``, ``a.reshape``..."""

    __slots__ = ("array", "name")

    def __init__(self, array: NdarrayVariable, name: str):
        super().__init__(None)
        self.array = array
        self.name = name

    def python_type(self) -> type:
        return type(getattr(self.array.python_type(), self.name))

    def describe(self) -> str:
        return f"the NumPy method `{self.name}`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        return call_numpy(tx, _Method(self.name), [self.array, *args], kwargs)


class _Method:
    """``receiver.<name>(...)``, the same call on a NumPy or a ``torch._numpy`` array."""

    def __init__(self, name: str):
        self.name = name
        self.__qualname__ = self.__name__ = f"ndarray.{name}"

    def __call__(self, receiver, *args, **kwargs):
        return getattr(receiver, self.name)(*args, **kwargs)


def _refuse_write(tx, array, what: str):
    raise graph_break("UB121", f"{what} writes into {array.describe()}: in eager it may share "
                      "memory with a tensor, a write the trace does not follow",
                      frames=tx.user_frames(),
                      hint="Compute a new array instead (`a = a + 1`, `np.where(...)`), or do "
                           "the in-place update on the tensor with torch.")


def _name_of(fn) -> str:
    module = getattr(fn, "__module__", None) or ""
    name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
    return f"{module}.{name}" if module.startswith("numpy") else name


def call_numpy(tx, fn, args: list, kwargs: dict) -> VariableTracker:
    """``fn(*args, **kwargs)`` where ``fn`` is ``torch.Tensor.numpy``, a NumPy function, a
    torch conversion (``torch.from_numpy``...) of an array, or any other callable (an operator,
    an array method, ``getattr``) receiving an :class:`NdarrayVariable`."""
    if fn is torch.Tensor.numpy:
        return to_ndarray(tx, args[0], **{k: v.as_constant() for k, v in kwargs.items()})
    if fn in _FROM_NUMPY and args and isinstance(args[0], NdarrayVariable):
        return _to_tensor(tx, fn, args[0], args[1:], kwargs)
    module = getattr(fn, "__module__", None) or ""
    if module.split(".")[0] == "numpy":
        return _numpy_function(tx, fn, module, args, kwargs)
    if fn in _VALUE_FUNCTIONS:
        array = next(a for a in args if isinstance(a, NdarrayVariable))
        raise graph_break("UB105", f"`{_VALUE_FUNCTIONS[fn]}()` of {array.describe()} reads "
                          "its value", frames=tx.user_frames(),
                          hint="Keep the value in a tensor (torch.from_numpy(...)) and compute "
                               "with torch.")
    if fn in _INPLACE_OPERATORS:
        _refuse_write(tx, args[0], "an in-place operator")
    if isinstance(fn, _Method):
        if fn.name in _VALUE_METHODS:
            raise graph_break("UB105", f"`.{fn.name}()` of {args[0].describe()} reads its "
                              "values", frames=tx.user_frames(),
                              hint="Keep the values in a tensor (torch.from_numpy(...)).")
        if fn.name in _WRITING_METHODS:
            _refuse_write(tx, args[0], f"`.{fn.name}()`")
    tensor = _find(args, kwargs, TensorVariable)
    if tensor is not None:  # eager mixes them by rules of its own (a tensor, an array, errors)
        array = _find(args, kwargs, NdarrayVariable)
        raise graph_break("UB108", f"{tensor.describe()} and {array.describe()} are combined "
                          f"by `{_name_of(fn)}`", frames=tx.user_frames(),
                          hint="Convert one side first: torch.from_numpy(array), or "
                               "tensor.numpy().")
    if module.split(".")[0] == "torch":
        array = next(a for a in [*args, *kwargs.values()] if isinstance(a, NdarrayVariable))
        raise graph_break("UB108", f"`{_name_of(fn)}` receives {array.describe()}: PyTorch "
                          "functions take tensors", frames=tx.user_frames(),
                          hint="Convert it with torch.from_numpy(...) first.")
    return _run(tx, fn, fn, _name_of(fn), args, kwargs)


def to_ndarray(tx, tensor, force: bool = False) -> NdarrayVariable:
    """``tensor.numpy(force=...)``: the array sharing the tensor's memory, with eager's errors
    (a tensor that requires grad, one off the CPU, a dtype NumPy lacks)."""
    if not isinstance(tensor, TensorVariable):
        raise graph_break("UB108", f"`.numpy()` of {tensor.describe()}", frames=tx.user_frames())
    device = tx.output.recorder.device_of(tensor.meta)
    if force:  # eager: detach, move to the CPU, resolve the conjugate and negative bits
        tensor = tx.call_leaf(torch.Tensor.detach, [tensor], {})
        if device.type != "cpu":
            tensor = tx.call_leaf(torch.Tensor.cpu, [tensor], {})
        tensor = tx.call_leaf(torch.Tensor.resolve_neg,
                              [tx.call_leaf(torch.Tensor.resolve_conj, [tensor], {})], {})
    elif tx.output.requires_grad(tensor.meta):
        raise tx.user_exception(RuntimeError(
            "Can't call numpy() on Tensor that requires grad. Use tensor.detach().numpy() "
            "instead."))
    elif device.type != "cpu":
        raise tx.user_exception(TypeError(
            f"can't convert {device.type} device type tensor to numpy. Use Tensor.cpu() to "
            "copy the tensor to host memory first."))
    elif tensor.meta.is_conj() or tensor.meta.is_neg():
        raise tx.user_exception(RuntimeError(
            "Can't call numpy() on Tensor that has conjugate or negative bit set. Use "
            "tensor.resolve_conj().numpy() / tensor.resolve_neg().numpy() instead."))
    _numpy_dtype(tx, tensor)
    return NdarrayVariable(tensor)


def _to_tensor(tx, fn, array: NdarrayVariable, rest, kwargs) -> VariableTracker:
    """``torch.from_numpy(a)`` / ``torch.as_tensor(a)`` / ``torch.asarray(a)``: a tensor sharing
    the array's memory (an alias of its tensor; converted when a dtype asks for it);
    ``torch.tensor(a)``: a copy."""
    _check_watched(tx, [array])
    if array.watch and fn is not torch.tensor:
        raise graph_break("UB121", f"`{fn.__name__}` of {array.describe()}: in eager the tensor "
                          f"shares the memory `{array.watch[0][2]}` viewed (NumPy), in the "
                          "trace it is a copy (torch has no negative strides), so later writes "
                          "would diverge", frames=tx.user_frames(),
                          hint="Copy it: torch.tensor(a) or torch.from_numpy(a.copy()).")
    if fn is torch.from_numpy:
        if array.scalar:
            raise tx.user_exception(TypeError(
                f"expected np.ndarray (got numpy.{array.python_type().__name__})"))
        return tx.call_leaf(torch.ops.aten.alias.default, [array.tensor], {})
    if fn is torch.tensor:
        if kwargs.get("requires_grad") is not None and kwargs["requires_grad"].as_constant():
            raise graph_break("UB116", f"`torch.tensor({array.describe()}, requires_grad=True)` "
                              "makes a new leaf that requires grad", frames=tx.user_frames())
        kwargs = {k: v for k, v in kwargs.items() if k != "requires_grad"}
        copy = tx.call_leaf(torch.clone, [array.tensor], {})
        return tx.call_leaf(torch.Tensor.to, [copy, *rest], kwargs) if rest or kwargs else copy
    alias = tx.call_leaf(torch.ops.aten.alias.default, [array.tensor], {})
    return tx.call_leaf(torch.as_tensor, [alias, *rest], kwargs) if rest or kwargs else alias


def _numpy_function(tx, fn, module, args, kwargs) -> VariableTracker:
    name = getattr(fn, "__name__", None) or "?"
    if module.startswith("numpy.random"):
        raise graph_break("UB103", f"`numpy.random.{name}` is called: NumPy's global random "
                          "generator is process state that each eager call advances",
                          frames=tx.user_frames(),
                          details="Use torch's random functions (recorded in the graph).")
    if name in _CONVERTERS and args and isinstance(args[0], TensorVariable):
        args = [to_ndarray(tx, args[0]), *args[1:]]  # np.asarray(x): x's own array
    tensor = _find(args, kwargs, TensorVariable)
    if tensor is not None:
        raise graph_break("UB108", f"`numpy.{name}` is called on {tensor.describe()}",
                          frames=tx.user_frames(),
                          details="Convert the tensor with `.numpy()` first (then NumPy's "
                                  "function runs on the traced data), or use the torch "
                                  "function of the same name.")
    if _find(args, kwargs, NdarrayVariable) is None:  # sizes, SymInts: no array to follow
        traced = next(a for a in [*args, *kwargs.values()] if not a.is_constant())
        raise graph_break("UB108", f"`numpy.{name}` is called on {traced.describe()}: NumPy "
                          "runs at export time, on Python constants and on arrays of tensors "
                          "(`x.numpy()`)", frames=tx.user_frames(),
                          details="Use the torch function of the same name, which is "
                                  "recorded in the graph.")
    if name in _WRITING_FUNCTIONS or "out" in kwargs:
        _refuse_write(tx, _find(args, kwargs, NdarrayVariable) or args[0], f"`numpy.{name}`")
    on_torch = numpy_on_torch_function(module, name)
    if on_torch is None:
        array = _find(args, kwargs, NdarrayVariable)
        raise graph_break("UB108", f"`{module}.{name}` on {array.describe()}: torch has no "
                          "NumPy-on-torch version of it",
                          frames=tx.user_frames(),
                          hint="Compute it with torch functions on the tensor.")
    return _run(tx, fn, on_torch, f"{module}.{name}", args, kwargs)


def _find(args, kwargs, kind):
    for value in [*args, *kwargs.values()]:
        if isinstance(value, kind):
            return value
        if isinstance(value, SequenceVariable):
            found = _find(value.elements, {}, kind)
            if found is not None:
                return found
    return None


# ------------------------------------------------------------------ running a call


def _run(tx, eager_fn, torch_fn, name: str, args, kwargs) -> VariableTracker:
    """Run ``torch_fn`` (``torch._numpy``) on the traced tensors and check its result against
    ``eager_fn`` (NumPy) run on stand-ins."""
    _check_watched(tx, [*args, *kwargs.values()])
    standins: list = []  # (stand-in array, the tracker it stands for)
    eager, values, named = _eager_result(tx, eager_fn, name, args, kwargs, standins)
    # per result leaf: the argument trackers NumPy's result shares memory with (a view)
    shares = [[t for a, t in standins if np.shares_memory(r, a)]
              if isinstance(r, np.ndarray) else [] for r in _flat(eager)]
    operands = getattr(eager_fn, "__module__", None) in ("_operator", "operator")
    traced_args = [_traced(tx, a, operands) for a in args]
    if operands and len(args) == 2:  # `a / a.shape[0]`: the size stays symbolic
        traced_args = [_weak_size(tx, a, other) if isinstance(a, SymbolicVariable) else t
                       for a, t, other in zip(args, traced_args, args[::-1], strict=True)]
    traced_kwargs = {k: _traced(tx, v) for k, v in kwargs.items()}
    loop = _loop_dtype(eager_fn, eager) if "dtype" not in kwargs else None
    if loop is not None:  # compute in NumPy's loop dtype (see _loop_dtype)
        if eager_fn in _OPERATOR_UFUNCS:
            torch_fn = numpy_on_torch_function("numpy", _OPERATOR_UFUNCS[eager_fn])
        traced_kwargs["dtype"] = ConstantVariable(_torch_dtype(loop))
        named = {**named, "dtype": loop}
    _check_values(tx, torch_fn, name, eager, values, named)
    torch_shares: list = []  # per result leaf: whether torch's result shares an input's memory

    def leaf(*values, **named):
        inputs = [v for v in _flat([values, list(named.values())]) if isinstance(v, torch.Tensor)]
        result = numpy_on_torch_call(torch_fn, values, named, _numpy_type)
        torch_shares.clear()
        return _copy_where_numpy_copies(result, iter(shares), inputs, torch_shares)

    leaf.__qualname__ = leaf.__name__ = name
    result = tx.call_leaf(leaf, traced_args, traced_kwargs)
    leaves = iter(zip(_flat(eager), shares, torch_shares, strict=False))
    return _as_arrays(tx, result, leaves, name)


def _check_watched(tx, args) -> None:
    """Refuse reading an array whose eager memory was written since it was made, where the
    trace holds a copy (see ``NdarrayVariable.watch``)."""
    for arg in args:
        if isinstance(arg, SequenceVariable):
            _check_watched(tx, arg.elements)
        if not isinstance(arg, NdarrayVariable):
            continue
        for meta, version, made in arg.watch:
            # an inference tensor counts no writes: whether one happened is unknown
            if version is None or version_counter(meta) != version:
                raise graph_break(
                    "UB121", f"{arg.describe()} is read after an in-place write to the tensor "
                    f"it views in NumPy (made by `{made}`, a view in NumPy where torch "
                    "computes a copy: torch has no negative strides), so eager reads the "
                    "written values and the trace the old ones", frames=tx.user_frames(),
                    hint="Write the tensor after the last use of the array, or compute that "
                         "step with torch (torch.flip...).")


# Python's arithmetic operators on arrays are these NumPy ufuncs.
_OPERATOR_UFUNCS = {operator.add: "add", operator.sub: "subtract", operator.mul: "multiply",
                    operator.truediv: "true_divide", operator.floordiv: "floor_divide",
                    operator.mod: "remainder", operator.pow: "power"}


def _loop_dtype(fn, eager):
    """The dtype NumPy computes the elementwise ufunc ``fn`` in, when its result is floating or
    complex and the ufunc has a loop taking and giving that dtype (``'dd->d'`` in
    ``ufunc.types``): NumPy casts the operands to it and runs that loop. torch's kernels would
    pick their own (integer division and ``sqrt`` of integers in torch's default float32, where
    NumPy uses float64), so the ``torch._numpy`` ufunc is given the dtype explicitly."""
    name = _OPERATOR_UFUNCS.get(fn) if hashable(fn) else None
    ufunc = getattr(np, name) if name else fn if isinstance(fn, np.ufunc) else None
    if ufunc is None or ufunc.nout != 1 or not isinstance(eager, (np.ndarray, np.generic)) \
            or eager.dtype.kind not in "fc":
        return None
    char = eager.dtype.char
    return eager.dtype if f"{char * ufunc.nin}->{char}" in ufunc.types else None


def _torch_dtype(dtype):
    return torch.from_numpy(np.empty(0, dtype=dtype)).dtype


def _copy_where_numpy_copies(result, shares, inputs, torch_shares):
    """``result`` with each tensor that shares an input's memory where NumPy's result does not
    (``shares``: per leaf, what NumPy's shares) cloned; ``torch_shares`` gets, per leaf,
    whether torch's result shares an input's memory."""
    if isinstance(result, torch.Tensor):
        storage = result.untyped_storage()._cdata
        shared = any(t.untyped_storage()._cdata == storage for t in inputs)
        if shared and not next(shares):
            result, shared = result.clone(), False
        torch_shares.append(shared)
        return result
    if type(result) in (list, tuple):
        return type(result)(_copy_where_numpy_copies(r, shares, inputs, torch_shares)
                            for r in result)
    next(shares, None)
    torch_shares.append(False)
    return result


def _flat(value) -> list:
    if type(value) in (list, tuple):
        return [leaf for v in value for leaf in _flat(v)]
    return [value]


def _as_arrays(tx, tracker, leaves, name):
    """``tracker`` (the wrapped result of the ``torch._numpy`` call) with its tensors as
    arrays, each checked against NumPy's result (``leaves``: per leaf of it, in order, NumPy's
    value, the arguments it shares memory with, whether torch's shares an argument's)."""
    if isinstance(tracker, TensorVariable):
        eager, shared, torch_shared = next(leaves, (None, [], False))
        if not isinstance(eager, (np.ndarray, np.generic)):
            _disagree(tx, name, "an array", type(eager).__name__)
        dtype = _numpy_dtype(tx, tracker)
        if dtype != eager.dtype:
            _disagree(tx, name, f"dtype {dtype}", f"dtype {eager.dtype}")
        watch = tuple(w for arg in shared for w in arg.watch)  # a view of a view: its watches
        if shared and not torch_shared:  # a view in eager, a copy in the trace
            watch += tuple((arg.tensor.meta, version_counter(arg.tensor.meta), name)
                           for arg in shared)
        return NdarrayVariable(tracker, scalar=isinstance(eager, np.generic), watch=watch)
    if isinstance(tracker, SequenceVariable) and tracker.python_type() in (tuple, list):
        return tracker.rebuild([_as_arrays(tx, e, leaves, name) for e in tracker.elements])
    eager = next(leaves, (None,))[0]
    if isinstance(eager, (np.ndarray, np.generic)):
        _disagree(tx, name, tracker.describe(), f"a NumPy {type(eager).__name__}")
    return tracker


def _disagree(tx, name, ours, numpy):
    raise graph_break("UB108", f"`{name}`: torch's NumPy-on-torch version gives {ours} where "
                      f"NumPy gives {numpy}", frames=tx.user_frames(),
                      hint="Compute it with torch functions on the tensor (torch.from_numpy).")


def _traced(tx, tracker, lists_as_arrays=False):
    """The argument handed to the ``torch._numpy`` call: an array's tensor, a NumPy dtype as
    torch's, a NumPy constant (array or scalar) as a tensor made from it. ``lists_as_arrays``
    (an operator's operands, an index): a constant list is the array NumPy makes of it (made
    inside the leaf call, its values would be lost on the meta device)."""
    if isinstance(tracker, NdarrayVariable):
        return tracker.tensor
    if lists_as_arrays and tracker.is_constant() and type(tracker.as_constant()) is list:
        array = np.asarray(tracker.as_constant())
        if array.dtype.kind in "biuf":
            return tx.call_leaf(torch.as_tensor, [ConstantVariable(array)], {})
    if isinstance(tracker, SequenceVariable) and tracker.python_type() in (tuple, list):
        return tracker.rebuild([_traced(tx, e, lists_as_arrays and tracker.python_type() is tuple)
                                for e in tracker.elements])
    if tracker.is_constant():
        value = tracker.as_constant()
        if isinstance(value, (np.dtype, type)) and _is_numpy_dtype(value):
            return ConstantVariable(_torch_dtype(value))
        if isinstance(value, (np.ndarray, np.generic)):
            return tx.call_leaf(torch.as_tensor, [ConstantVariable(np.array(value))], {})
    return tracker


def _weak_size(tx, size: SymbolicVariable, other):
    """A symbolic Python number operand of ``other`` (an array) as the 0-d tensor of the dtype
    NEP 50 gives the pair: ``other``'s when the number's kind (bool < int < float) is not
    above the array's, else NumPy's default for the number's kind. ``torch._numpy`` would make
    it a tensor with ``torch.as_tensor``, which reads the size's value (a guard). Integer arrays
    narrower than int64 keep that path: a size beyond their range wraps around in torch where
    NumPy raises or compares exactly."""
    if not isinstance(other, NdarrayVariable):
        return size
    dtype = other.tensor.meta.dtype
    kind = {bool: 0, int: 1, float: 2}[size.python_type()]
    array_kind = 3 if dtype.is_complex else 2 if dtype.is_floating_point else \
        0 if dtype == torch.bool else 1
    if array_kind == 1 and dtype != torch.int64:
        return size
    if kind > array_kind:
        dtype = {1: torch.int64, 2: torch.float64}[kind]
    return tx.call_leaf(torch.scalar_tensor, [size], {"dtype": ConstantVariable(dtype)})


def _is_numpy_dtype(value) -> bool:
    return isinstance(value, np.dtype) or issubclass(value, np.generic)


_RNG_SEED = 0


def _eager_result(tx, fn, name, args, kwargs, standins: list):
    """``fn`` (NumPy's) run on stand-in arrays of the arguments' dtypes and example shapes:
    what type and dtype eager's result has. Random samples first; when NumPy fails on them
    (an integer array used as an index: out of bounds), zeros. An error on both, the same, is
    the program's own (bad shapes, a bad axis); errors that differ depend on the values, which
    the trace does not know (UB105)."""
    errors = []
    for zeros in (False, True):
        standins.clear()
        rng = np.random.default_rng(_RNG_SEED)  # our own generator: NumPy's global one untouched

        def value(tracker, zeros=zeros, rng=rng):
            if isinstance(tracker, NdarrayVariable):
                dtype = _numpy_dtype(tx, tracker.tensor)
                shape = tuple(_hint(d) for d in tracker.tensor.meta.shape)
                strides = tuple(_hint(d) for d in tracker.tensor.meta.stride())
                data = _laid_out(np.zeros(shape, dtype) if zeros else
                                 _stand_in(rng, dtype, shape), strides)
                standins.append((data, tracker))
                return data[()] if tracker.scalar else data
            if isinstance(tracker, SymbolicVariable):
                return _hint(tracker.value)
            if isinstance(tracker, SequenceVariable) and tracker.python_type() in (tuple, list):
                return tracker.python_type()(value(e) for e in tracker.elements)
            return tracker.as_constant()

        values = [value(a) for a in args]
        named = {k: value(v) for k, v in kwargs.items()}
        try:
            with np.errstate(all="ignore"):
                return fn(*values, **named), values, named
        except Exception as exc:  # noqa: BLE001 (decided below, from both attempts)
            errors.append(exc)
    first, second = errors
    if type(first) is type(second) and str(first) == str(second):
        raise tx.user_exception(second) from None  # the program's own error, at its line
    raise graph_break("UB105", f"`{name}` succeeds or fails depending on the array's values "
                      f"({type(first).__name__}: {first})", frames=tx.user_frames(),
                      hint="Compute this step with torch on the tensor.")


def _check_values(tx, torch_fn, name, eager, values, named) -> None:
    """Run ``torch_fn`` (``torch._numpy``) eagerly on the stand-ins NumPy computed ``eager``
    from, and refuse the call when the two differ: a semantic difference (an out-of-range
    Python int wrapped around by torch where NumPy 2 compares it exactly, a rounding mode) that
    dtypes alone would not show. Sample values only: a difference on other values may pass."""
    inputs = _as_torch([values, named])
    try:
        with np.errstate(all="ignore"):
            ours = numpy_on_torch_call(torch_fn, inputs[0], inputs[1], _numpy_type)
    except Exception as exc:  # noqa: BLE001 (torch._numpy fails where NumPy did not)
        _disagree(tx, name, f"an error ({type(exc).__name__})", "a result")
    theirs = _flat(eager)
    mine = _flat(ours)
    if len(mine) != len(theirs):
        _disagree(tx, name, f"{len(mine)} results", f"{len(theirs)}")
    for got, want in zip(mine, theirs, strict=True):
        if isinstance(got, torch.Tensor) and isinstance(want, (np.ndarray, np.generic)):
            got = got.numpy()
            close = got.shape == np.shape(want) and (
                np.allclose(got, want, equal_nan=True,  # kernels differ in the last bits
                            rtol=max(1e-4, 8 * float(np.finfo(want.dtype).eps)), atol=1e-6)
                if want.dtype.kind in "fc" else np.array_equal(got, want))
            if not close:
                _disagree(tx, name, "other values on sample data", "its own")


def _as_torch(value):
    """NumPy stand-ins and constants as ``torch._numpy`` takes them (tensors, torch dtypes)."""
    if isinstance(value, (np.ndarray, np.generic)):
        return torch.from_numpy(np.array(value))
    if isinstance(value, np.dtype) or (isinstance(value, type) and issubclass(value, np.generic)):
        return _torch_dtype(value)
    if type(value) in (list, tuple):
        return type(value)(_as_torch(v) for v in value)
    if type(value) is dict:
        return {k: _as_torch(v) for k, v in value.items()}
    return value


def _hint(size) -> int:
    if isinstance(size, int):
        return size
    hint = getattr(size.node, "hint", None)
    return 2 if hint is None else int(hint)


def _laid_out(data, strides):
    """``data`` with the traced tensor's strides (in elements), as ``.numpy()`` lays it out:
    whether NumPy returns a view or a copy (``ascontiguousarray``, ``reshape``) depends on it."""
    if data.size == 0 or data.ndim == 0:
        return data
    span = 1 + sum((n - 1) * s for n, s in zip(data.shape, strides, strict=True))
    memory = np.resize(data.reshape(-1), span)  # values repeat where the layout overlaps
    laid = np.lib.stride_tricks.as_strided(memory, data.shape,
                                           [s * data.itemsize for s in strides])
    return laid if data.size and all(s >= 0 for s in strides) else data


def _stand_in(rng, dtype, shape):
    if dtype.kind == "b":
        return rng.integers(0, 2, shape).astype(dtype)
    if dtype.kind in "iu":
        return rng.integers(1, 4, shape).astype(dtype)
    if dtype.kind == "c":
        return (rng.standard_normal(shape) + 1j * rng.standard_normal(shape)).astype(dtype)
    return rng.standard_normal(shape).astype(dtype)
