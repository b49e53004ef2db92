"""Tensors built from Python data that holds symbolic scalars.

``torch.tensor(data)`` (and ``torch.as_tensor``, ``x.new_tensor``) reads Python numbers. Called
natively on data holding a ``SymInt``/``SymFloat``/``SymBool`` (a dynamic size, an ``.item()``),
it converts each one to a Python number: a guard that specializes a size (UB003), or no number
at all for an unbacked item (UB105/UB120). As torch.export, the tensor is instead computed by
the graph: one ``scalar_tensor`` per element, ``stack``-ed level by level (a sub-list with no
symbolic element is one constant tensor), with the dtype ``torch.tensor`` infers from the
elements' Python types. No value is read, so no guard is made.

The elements are converted to that dtype one by one, as ``torch.tensor`` converts each Python
number (floats truncated toward zero into integer dtypes, non-zero to ``True`` into bool).
"""
from __future__ import annotations

import torch

from .constant import ConstantVariable
from .containers import ListVariable, SequenceVariable, SizeVariable
from .tensor import SymbolicVariable

__all__ = ["LEGACY_CONSTRUCTORS", "legacy_constructor", "symbolic_data_tensor"]

# The keywords a built tensor honours; any other (pin_memory, out...) leaves the call native.
_KEYWORDS = frozenset({"dtype", "device", "requires_grad"})

# The dtype ``torch.tensor`` infers from Python scalar types: the widest one present wins.
_KIND_ORDER = (bool, int, float)


def symbolic_data_tensor(tx, data, kwargs):
    """The tensor ``torch.tensor(data, **kwargs)`` computed by the graph, or None when ``data``
    holds no symbolic scalar (or is not a rectangular nesting of numbers, or a keyword other
    than dtype/device/requires_grad is given): the caller then calls torch natively, which
    raises eager's error for ragged data."""
    if not set(kwargs) <= _KEYWORDS or not _has_symbolic(data):
        return None
    kinds = _element_kinds(data)
    if kinds is None or _shape(data) is None:
        return None
    requires_grad = kwargs.get("requires_grad", ConstantVariable(False))
    if not requires_grad.is_constant():
        return None
    dtype = kwargs.get("dtype", ConstantVariable(None))
    if dtype.is_constant() and dtype.as_constant() is None:
        dtype = ConstantVariable(_inferred_dtype(kinds))
    options = {"dtype": dtype}
    if "device" in kwargs:
        options["device"] = kwargs["device"]
    result = _build(tx, data, options)
    if requires_grad.as_constant():
        result = result.getattr(tx, "requires_grad_").call(tx, [ConstantVariable(True)], {})
    return result


# The legacy CPU tensor types, called with data: ``torch.LongTensor([n, m])`` is
# ``torch.tensor([n, m], dtype=torch.int64, device="cpu")``.
LEGACY_CONSTRUCTORS = {
    torch.DoubleTensor: torch.float64, torch.FloatTensor: torch.float32,
    torch.HalfTensor: torch.float16, torch.BFloat16Tensor: torch.bfloat16,
    torch.LongTensor: torch.int64, torch.IntTensor: torch.int32,
    torch.ShortTensor: torch.int16, torch.CharTensor: torch.int8,
    torch.ByteTensor: torch.uint8, torch.BoolTensor: torch.bool,
}


def legacy_constructor(tx, cls, args, kwargs):
    """``torch.LongTensor(data)`` with symbolic scalars in ``data``, built as
    ``symbolic_data_tensor``; None for any other call (a ``torch.Size`` or ints give the
    *shape* of an uninitialized tensor there, not its data)."""
    if kwargs or len(args) != 1 or isinstance(args[0], SizeVariable) \
            or not _is_sequence(args[0]):
        return None
    options = {"dtype": ConstantVariable(LEGACY_CONSTRUCTORS[cls]),
               "device": ConstantVariable(torch.device("cpu"))}
    return symbolic_data_tensor(tx, args[0], options)


def _is_sequence(tracker) -> bool:
    return isinstance(tracker, SequenceVariable)


def _has_symbolic(tracker) -> bool:
    if isinstance(tracker, SymbolicVariable):
        return True
    return _is_sequence(tracker) and any(_has_symbolic(e) for e in tracker.elements)


def _element_kinds(tracker) -> set | None:
    """The Python types (bool, int, float) of the leaves, or None for any other leaf."""
    if _is_sequence(tracker):
        kinds = set()
        for element in tracker.elements:
            found = _element_kinds(element)
            if found is None:
                return None
            kinds |= found
        return kinds
    if isinstance(tracker, SymbolicVariable):
        return {tracker.python_type()}
    if isinstance(tracker, ConstantVariable) and type(tracker.as_constant()) in _KIND_ORDER:
        return {type(tracker.as_constant())}
    return None


def _shape(tracker) -> tuple | None:
    """The nesting's shape, or None when it is ragged (or mixes numbers and sequences)."""
    if not _is_sequence(tracker):
        return ()
    shapes = {_shape(e) for e in tracker.elements}
    if len(shapes) > 1 or None in shapes:
        return None
    return (len(tracker.elements), *(shapes.pop() if shapes else ()))


def _inferred_dtype(kinds: set) -> torch.dtype:
    widest = max(kinds, key=_KIND_ORDER.index) if kinds else float
    return {bool: torch.bool, int: torch.int64}.get(widest, torch.get_default_dtype())


def _build(tx, tracker, options):
    """The tensor of one level: a scalar, a constant sub-list, or a stack of the elements."""
    if isinstance(tracker, SymbolicVariable) or not _is_sequence(tracker):
        return tx.call_leaf(torch.scalar_tensor, [tracker], options)
    if not _has_symbolic(tracker):
        return tx.call_leaf(torch.tensor, [tracker], options)
    parts = [_build(tx, element, options) for element in tracker.elements]
    return tx.call_leaf(torch.stack, [ListVariable(parts)], {})
