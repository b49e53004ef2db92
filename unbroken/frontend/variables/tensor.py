"""Tensors and symbolic numbers.

A :class:`TensorVariable` holds the *meta* tensor that stands for the value during tracing;
the recorder maps that meta tensor to the graph node that currently holds its value. Every
operation on it is a leaf call into PyTorch, recorded at the ATen level.
"""
from __future__ import annotations

import operator

import torch

from ...symbolic.diagnostics.catalogue import GraphBreakError, graph_break
from ...symbolic.torch_compat import function_modes
from ..overlay import refuse_in_branch
from .base import AttributeMissing, VariableTracker
from .constant import ConstantVariable
from .native import PureCallableVariable

__all__ = ["TensorVariable", "SymbolicVariable", "TensorMethodVariable"]

# Methods that need the values inside the tensor: refused with UB105.
_VALUE_METHODS = {"tolist", "__bool__", "__int__", "__float__", "__index__",
                  "__complex__", "__array__"}
_REFUSED_METHODS = {"backward": "UB108", "register_hook": "UB109", "retain_grad": "UB108",
                    "data_ptr": "UB103", "storage": "UB102", "untyped_storage": "UB102",
                    "set_": "UB121", "resize_": "UB121", "share_memory_": "UB108"}
_LAYOUT_QUERIES = {"stride", "is_contiguous", "is_non_overlapping_and_dense", "storage_offset"}
# Views on one layout, copies on another: whether a later write reaches the input depends on it.
LAYOUT_ALIASING = {"reshape", "reshape_as", "flatten", "contiguous", "unflatten"}
# What the meta stand-in holds as the eager tensor does (sizes, rank, dtype): read from it
# directly (``_read_directly``), not as a leaf call, whose recording and bookkeeping are
# ~45 us more than the read (a Hugging Face GPT-2 reads them ~40 times per forward).
_METADATA_ATTRIBUTES = frozenset({"shape", "ndim", "dtype"})
_METADATA_METHODS = frozenset({"size", "dim", "ndimension"})
_PLAIN_TENSOR_TYPES = (torch.Tensor, torch.nn.Parameter)
_REFUSED_ATTRIBUTES = {"data": "UB102", "grad": "UB105", "grad_fn": "UB105", "_version": "UB103",
                       "_base": "UB102"}


def note_layout_aliasing(tx, tensor: TensorVariable, result) -> None:
    """``result`` came from a layout-dependent op on ``tensor`` (``reshape``, ``contiguous``...:
    a view on some layouts, a copy on others): the program may hold for the example's layout
    only (``exporter.build`` decides, from writes into inputs or into the memory ``result`` has in
    the trace: its own if copied, ``tensor``'s if aliased)."""
    tx.output.layout_aliasing = True
    if isinstance(result, TensorVariable):
        tx.output.recorder.note_layout_dependent(result.meta)


class TensorVariable(VariableTracker):
    """A tensor. ``meta``: its meta tensor; ``is_parameter``: an ``nn.Parameter`` in eager;
    ``requires_grad``: the eager tensor's flag (meta tensors never carry autograd state)."""

    __slots__ = ("meta", "is_parameter", "requires_grad")

    def __init__(self, meta: torch.Tensor, source=None, *, is_parameter=False, requires_grad=False):
        super().__init__(source)
        self.meta = meta
        self.is_parameter = is_parameter
        self.requires_grad = requires_grad

    def python_type(self) -> type:
        return torch.nn.Parameter if self.is_parameter else torch.Tensor

    def describe(self) -> str:
        where = f" `{self.source.name()}`" if self.source is not None else ""
        return f"the tensor{where}"

    def unwrap(self, tx):
        return self.meta

    def truth(self, tx) -> bool:
        error = graph_break(
            "UB101", f"the truth value of {self.describe()} decides which code runs",
            frames=tx.user_frames())
        real = tx.output.real_value(self.meta)
        if real is not None and tx.output.recover(error):
            return tx.output.take_branch(bool(real))  # both sides explored (frontend.paths)
        raise error

    def items(self, tx) -> list:
        if self.meta.dim() == 0:
            raise graph_break("UB117", "iteration over a 0-d tensor")
        if not isinstance(self.meta.shape[0], int):
            _specialize_rows(tx, self)
        return list(tx.call_leaf(torch.Tensor.unbind, [self], {}).items(tx))

    def length(self, tx):
        return tx.call_leaf(len, [self], {})

    def getitem(self, tx, index: VariableTracker) -> VariableTracker:
        if _has_symbolic(index):
            return _symbolic_index(tx, self, index)
        return tx.call_leaf(operator.getitem, [self, index], {})

    def getattr(self, tx, name: str) -> VariableTracker:
        if name in _REFUSED_ATTRIBUTES:
            kind = _REFUSED_ATTRIBUTES[name]
            error = graph_break(kind, f"`{name}` of {self.describe()} cannot be captured",
                                frames=tx.user_frames())
            if tx.output.recover(error):  # go on as if the tensor itself were used
                return self if name in ("data", "_base") else ConstantVariable(None)
            raise error
        if name == "__class__":  # the eager tensor's class (``type(x)`` is the same)
            return tx.wrap(self.python_type())
        if name == "device":
            return ConstantVariable(tx.output.recorder.device_of(self.meta))
        if name in ("is_cuda", "is_cpu", "is_meta"):
            return ConstantVariable(tx.output.recorder.device_of(self.meta).type == name[3:])
        if name == "requires_grad":
            return ConstantVariable(tx.output.requires_grad(self.meta))
        if name == "is_leaf":
            return ConstantVariable(self.is_parameter or not tx.output.requires_grad(self.meta))
        if name in _METADATA_ATTRIBUTES and _read_directly(tx, self.meta):
            return tx.wrap(getattr(self.meta, name))
        try:
            descriptor = getattr(torch.Tensor, name)
        except AttributeError:
            written = tx.output.overlay.read(self.meta, name)
            if written is not None:
                return written
            raise AttributeMissing(name) from None
        if callable(descriptor) and not isinstance(descriptor, property):
            return TensorMethodVariable(self, name)
        return tx.call_leaf(getattr, [self, ConstantVariable(name)], {})

    def setattr(self, tx, name, value) -> None:
        """A Python attribute of the user's own (``x.note = ...``): kept in the trace's
        overlay for the rest of forward to read, never set on the caller's tensor (as
        ``torch.export``). PyTorch's tensor attributes (``requires_grad``, ``data``...)
        change the tensor itself: refused (UB116)."""
        if hasattr(torch.Tensor, name):
            raise graph_break("UB116", f"assignment to `{name}` of {self.describe()}",
                              frames=tx.user_frames())
        refuse_in_branch(tx, f"assignment to `{name}` of {self.describe()}")
        tx.output.overlay.write(self.meta, name, value, None, tx.user_frames(), kept=True)


class TensorMethodVariable(VariableTracker):
    """A bound tensor method such as ``x.view``. ``tensor``: the tracker; ``name``: the method."""

    __slots__ = ("tensor", "name")

    def __init__(self, tensor: TensorVariable, name: str):
        super().__init__(None)
        self.tensor = tensor
        self.name = name

    def python_type(self) -> type:
        return type(getattr(torch.Tensor, self.name))

    def describe(self) -> str:
        return f"the tensor method `{self.name}`"

    def call(self, tx, args, kwargs) -> VariableTracker:
        if self.name in _METADATA_METHODS and not kwargs and _read_directly(tx, self.tensor.meta):
            dims = _dim_arguments(args, self.tensor.meta.dim())
            if dims is not None:
                return tx.wrap(getattr(self.tensor.meta, self.name)(*dims))
        if self.name == "tolist" and not args and not kwargs and _small_static(self.tensor):
            return _tolist(tx, self.tensor)
        if self.name == "numpy":  # the array sharing its memory (variables.ndarray)
            return tx.output.call_numpy(tx, torch.Tensor.numpy, [self.tensor], kwargs)
        if self.name in _VALUE_METHODS:
            error = graph_break("UB105", f"`.{self.name}()` on {self.tensor.describe()}",
                                frames=tx.user_frames())
            real = tx.output.real_value(self.tensor.meta)
            if real is not None and tx.output.recover(error):
                return tx.wrap(getattr(real, self.name)())
            raise error
        if self.name in _REFUSED_METHODS:
            raise graph_break(_REFUSED_METHODS[self.name],
                              f"`.{self.name}()` on {self.tensor.describe()} cannot be captured",
                              frames=tx.user_frames())
        if self.name == "new_tensor":
            return self._new_tensor(tx, args, kwargs)
        if self.name == "type" and not args and not kwargs:  # the eager tensor's type name
            device = tx.output.recorder.device_of(self.tensor.meta)
            return ConstantVariable(torch.empty(0, dtype=self.tensor.meta.dtype,
                                                device=device).type())
        if self.name == "requires_grad_":
            return self._requires_grad_(tx, args, kwargs)
        if self.name in _LAYOUT_QUERIES:  # the program then holds only for this layout
            tx.output.layout_read = True
        method = getattr(torch.Tensor, self.name)
        result = tx.call_leaf(method, [self.tensor, *args], kwargs)
        if self.name in LAYOUT_ALIASING:
            note_layout_aliasing(tx, self.tensor, result)
        return result

    def _requires_grad_(self, tx, args, kwargs):
        """``x.requires_grad_(flag)``: a no-op when ``x`` already has that flag. A tensor
        forward() made (not an input, parameter, buffer or constant: those are the caller's)
        may start requiring grad: only what reaches an output or the state through it is
        refused (``TraceContext.check_grad_reproducible``). Otherwise turning autograd on or
        off for a tensor is not an ATen op, so a program cannot replay it."""
        flag = (kwargs.get("requires_grad") or (args[0] if args else None))
        wanted = True if flag is None else bool(flag.as_constant())
        meta = self.tensor.meta
        if wanted and not tx.output.requires_grad(meta) and \
                not tx.output.is_callers(meta) and \
                (meta.dtype.is_floating_point or meta.dtype.is_complex):
            tx.output.make_require_grad(meta)
            return self.tensor
        if wanted != tx.output.requires_grad(meta):
            raise graph_break("UB116", f"`.requires_grad_({wanted})` on "
                              f"{self.tensor.describe()} changes whether autograd tracks it",
                              frames=tx.user_frames(),
                              details="An exported program cannot make a tensor start or stop "
                                      "requiring grad; do it to the inputs or parameters "
                                      "before calling the model.")
        return self.tensor

    def _new_tensor(self, tx, args, kwargs):
        """``x.new_tensor(data)`` is ``torch.tensor(data)`` with x's dtype and device: built
        from the Python data natively (on the meta stand-in, the data would be lost)."""
        kwargs = dict(kwargs)
        kwargs.setdefault("dtype", ConstantVariable(self.tensor.meta.dtype))
        device = tx.output.recorder.device_of(self.tensor.meta)
        kwargs.setdefault("device", ConstantVariable(device))
        return tx.wrap(torch.tensor).call(tx, args[:1], kwargs)


class SymbolicVariable(VariableTracker):
    """A symbolic int/float/bool (a dynamic size or an expression of sizes).
    ``value``: the ``torch.SymInt``/``SymFloat``/``SymBool`` backed by our SymNode."""

    __slots__ = ("value",)

    def __init__(self, value, source=None):
        super().__init__(source)
        self.value = value

    def python_type(self) -> type:
        return {torch.SymInt: int, torch.SymFloat: float, torch.SymBool: bool}[type(self.value)]

    def describe(self) -> str:
        return f"the symbolic value {self.value}"

    def unwrap(self, tx):
        return self.value

    def truth(self, tx) -> bool:
        try:
            with tx.output.leaf_errors():
                return bool(self.value)
        except GraphBreakError as error:
            shadow = tx.output.recorder.shadow
            real = shadow.concrete(self.value) if shadow is not None else None
            if real is not None and error.code == "UB105" and tx.output.recover(error):
                return tx.output.take_branch(bool(real))  # both sides explored
            raise

    def getattr(self, tx, name: str) -> VariableTracker:
        attr = getattr(self.value, name, None)
        if attr is None:
            raise AttributeMissing(name)
        if callable(attr):
            return PureCallableVariable(attr)
        return ConstantVariable(attr)


# `.tolist()` reads each element with `.item()`: up to this many (one symbol each).
_TOLIST_LIMIT = 64


def _read_directly(tx, meta: torch.Tensor) -> bool:
    """Whether reading ``meta``'s sizes, rank or dtype natively answers what the leaf call
    ``getattr(x, "shape")`` would: a plain tensor (no ``__torch_function__`` of a subclass),
    no torch-function mode on the stack (one would see the read in eager) and no functorch
    transform open (there every call, reads too, goes through the leaf call that resumes
    the transform's layers, as in eager)."""
    return type(meta) in _PLAIN_TENSOR_TYPES and not tx.output.functorch_layers and \
        not function_modes()


def _dim_arguments(args, rank: int) -> list | None:
    """The arguments of ``x.size(d)``/``x.dim()`` as ints when they are none or one constant
    dim in range; None otherwise (a symbolic or keyword dim, one out of range: the leaf call
    raises as eager does)."""
    if not args:
        return []
    if len(args) == 1 and args[0].is_constant():
        dim = args[0].as_constant()
        if type(dim) is int and -rank <= dim < rank:
            return [dim]
    return None


def _small_static(tensor: TensorVariable) -> bool:
    shape = tensor.meta.shape
    return all(isinstance(d, int) for d in shape) and tensor.meta.numel() <= _TOLIST_LIMIT


def _tolist(tx, tensor: TensorVariable):
    """``t.tolist()`` of a small tensor of static shape, as torch.export reads it: nested
    lists of ``t[i, j].item()`` values (each an unbacked symbol, decided by ``torch._check``
    facts where a branch needs it)."""
    if tensor.meta.dim() == 0:
        return tx.call_leaf(torch.Tensor.item, [tensor], {})
    rows = tx.call_leaf(torch.Tensor.unbind, [tensor], {}).items(tx)
    return tx.wrap([_tolist(tx, row) for row in rows])


def _specialize_rows(tx, tensor: TensorVariable) -> None:
    """Iterating makes one element per row: a dynamic count is specialized, as ``unbind`` does
    (a guard that the size equals its example value: Dim.AUTO adopts it, a size declared
    dynamic is refused with the fix). A count read from tensor data (``nonzero()``) is
    data-dependent control flow (UB105)."""
    try:
        with tx.output.leaf_errors():
            int(tensor.meta.shape[0])
    except GraphBreakError as error:
        if error.code != "UB105":
            raise
        raise graph_break(
            "UB105", f"iteration over {tensor.describe()} whose number of rows depends on "
            "tensor data (a `nonzero()` count, a value read with `.item()`)",
            frames=tx.user_frames(),
            details=f"{error.message}\n\n{error.details}" if error.details else error.message,
            hint="Loop over a bound known at export time instead (`for i in range(n):`, "
                 "masking what does not apply), or branch with torch.cond.") from None


def _has_symbolic(index) -> bool:
    """True when a symbolic size is part of the index (alone, in a slice or a tuple)."""
    if isinstance(index, SymbolicVariable):
        return True
    parts = getattr(index, "parts", None) or getattr(index, "elements", ())
    return any(_has_symbolic(p) for p in parts)


def _symbolic_index(tx, tensor, index):
    """``x[...]`` whose index holds symbolic sizes, as explicit ``select``/``slice``/
    ``unsqueeze`` calls: Python's indexing would turn each symbolic int into a guard on its
    example value, these ops keep it symbolic."""
    parts = index.elements if issubclass(index.python_type(), tuple) else [index]
    if any(isinstance(p, TensorVariable) or
           (p.is_constant() and p.as_constant() is Ellipsis) for p in parts):
        return tx.call_leaf(operator.getitem, [tensor, index], {})  # advanced indexing
    result, dim = tensor, 0
    for part in parts:
        if part.is_constant() and part.as_constant() is None:
            result = tx.call_leaf(torch.unsqueeze, [result, ConstantVariable(dim)], {})
            dim += 1
        elif part.python_type() is slice:
            start, stop, step = (None if b.is_constant() and b.as_constant() is None else b
                                 for b in _slice_bounds(part))
            result = tx.call_leaf(torch.ops.aten.slice.Tensor, [
                result, ConstantVariable(dim), start or ConstantVariable(None),
                stop or ConstantVariable(None), step or ConstantVariable(1)], {})
            dim += 1
        else:
            result = tx.call_leaf(torch.select, [result, ConstantVariable(dim), part], {})
    return result


def _slice_bounds(part) -> list:
    """(start, stop, step) trackers of a slice index, constant or with symbolic bounds."""
    if not part.is_constant():
        return list(part.parts)
    value = part.as_constant()
    return [ConstantVariable(b) for b in (value.start, value.stop, value.step)]
