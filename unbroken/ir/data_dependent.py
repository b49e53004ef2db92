"""Operators whose results depend on tensor values: ``.item()`` and ops whose output sizes
do (``nonzero``, ``masked_select``, boolean-mask indexing, the ``unique`` family,
``repeat_interleave`` by a tensor, ``bincount``).

With a shape environment, the recorder gives each such value a fresh *unbacked* symbol (no
example value; a size is >= 0 and at most the input's element count) instead of refusing it.
The handlers here build the meta outputs with those sizes; the recorder records the node and
binds the symbol to ``sym_size`` of it so that later code can compute with it.
"""
from __future__ import annotations

import torch

from ..symbolic.diagnostics import UnsupportedError
from ..symbolic.ranges import ValueRange

__all__ = ["SCALAR_OPS", "DATA_DEPENDENT_SIZES", "UNBACKED_INDEX_VIEWS", "integer_indexing",
           "has_unbacked_argument"]

aten = torch.ops.aten
_META = torch.device("meta")


def _nonzero(recorder, tensor):
    count = recorder.unbacked_size("nonzero() count", upper=_static_numel(tensor))
    return torch.empty((count, tensor.dim()), dtype=torch.long, device=_META)


def _masked_select(recorder, tensor, mask):
    shape = torch.broadcast_shapes(tensor.shape, mask.shape)
    count = recorder.unbacked_size("masked_select() count", upper=_static_numel(shape))
    return torch.empty((count,), dtype=tensor.dtype, device=_META)


def _bool_index(recorder, tensor, indices):
    """``x[mask]``, ``x[:, mask]``: one boolean mask over consecutive dims, every other index
    a full slice; the selected elements replace those dims (other index forms refused)."""
    masks = [i for i in indices if i is not None]
    if len(masks) != 1 or masks[0].dtype not in (torch.bool, torch.uint8):
        raise UnsupportedError("indexing with several tensors where one is a boolean mask",
                               code="UB114", frames=recorder.frames_provider())
    mask = masks[0]
    start = next(i for i, index in enumerate(indices) if index is not None)
    count = recorder.unbacked_size("mask count", upper=_static_numel(mask.shape))
    shape = (*tensor.shape[:start], count, *tensor.shape[start + mask.dim():])
    return torch.empty(shape, dtype=tensor.dtype, device=_META)


def _repeat_interleave(recorder, repeats, output_size=None):
    """``repeat_interleave(repeats)``: index ``i`` repeated ``repeats[i]`` times, as many
    as the repeats add up to (``output_size`` when the caller gives it)."""
    if output_size is None:
        output_size = recorder.unbacked_size("repeat_interleave() total")
    return torch.empty((output_size,), dtype=repeats.dtype, device=_META)


def _bincount(recorder, tensor, weights=None, minlength=0):
    """``bincount``: one count per value up to the largest (``max(x) + 1``, at least
    ``minlength``; none for an empty input), as the CPU kernel types it: int64 counts, or sums
    of the weights in float32 for float32 weights and in float64 for any other."""
    count = recorder.unbacked_size("bincount() length")
    if isinstance(minlength, torch.SymInt):  # read from data: a fact, not a range
        torch._check(count >= minlength)
    elif minlength:
        recorder.env.set_range(count.node.expr, ValueRange(minlength, None), spec=True)
    if weights is None:
        dtype = torch.long
    else:
        dtype = torch.float32 if weights.dtype == torch.float32 else torch.float64
    return torch.empty((count,), dtype=dtype, device=_META)


def _unique(recorder, tensor, dim, return_inverse, return_counts, what):
    """The ``unique`` family: the values kept (a fresh count along ``dim``, or of the
    flattened input), the inverse indices and the counts, each empty when not asked for, as
    eager's CPU kernels give them (with a ``dim`` they always return all three)."""
    if dim is not None:
        dim = dim % max(tensor.dim(), 1)
    numel = _static_numel(tensor) if dim is None else tensor.shape[dim]
    if numel == 0:
        count = 0  # nothing to keep: no symbol (it would be refined to 0 at once)
    else:
        count = recorder.unbacked_size(f"{what} count",
                                       upper=numel if isinstance(numel, int) else None)
    shape = (count,) if dim is None else (*tensor.shape[:dim], count, *tensor.shape[dim + 1:])
    kept = torch.empty(shape, dtype=tensor.dtype, device=_META)
    always = dim is not None
    inverse_shape = tensor.shape if dim is None else (tensor.shape[dim],)
    inverse = torch.empty(inverse_shape if return_inverse or always else (0,),
                          dtype=torch.long, device=_META)
    counts = torch.empty((count,) if return_counts or always else (0,), dtype=torch.long,
                         device=_META)
    return kept, inverse, counts


def _unique2(recorder, tensor, sorted=True, return_inverse=False, return_counts=False):
    return _unique(recorder, tensor, None, return_inverse, return_counts, "unique()")


def _unique_old(recorder, tensor, sorted=True, return_inverse=False):
    return _unique(recorder, tensor, None, return_inverse, False, "unique()")[:2]


def _unique_dim(recorder, tensor, dim, sorted=True, return_inverse=False, return_counts=False):
    return _unique(recorder, tensor, dim, return_inverse, return_counts, "unique(dim=...)")


def _unique_consecutive(recorder, tensor, return_inverse=False, return_counts=False, dim=None):
    return _unique(recorder, tensor, dim, return_inverse, return_counts,
                   "unique_consecutive()")


def _static_numel(shape_or_tensor):
    shape = getattr(shape_or_tensor, "shape", shape_or_tensor)
    total = 1
    for size in shape:
        if not isinstance(size, int):
            return None
        total *= size
    return total


# .item() and the ops whose output sizes depend on tensor values: with a shape environment they
# produce unbacked symbols instead of being refused.
SCALAR_OPS = {aten.item.default, aten._local_scalar_dense.default}
DATA_DEPENDENT_SIZES = {
    aten.nonzero.default: _nonzero,
    aten.masked_select.default: _masked_select,
    aten.index.Tensor: _bool_index,
    aten.repeat_interleave.Tensor: _repeat_interleave,
    aten.bincount.default: _bincount,
    aten._unique2.default: _unique2,
    aten._unique.default: _unique_old,
    aten.unique_dim.default: _unique_dim,
    aten.unique_consecutive.default: _unique_consecutive,
}


def _decided(fact) -> bool:
    """True when the shape environment proves ``fact`` (never a guard: an undecided fact is
    False, as ``guard_or_false``)."""
    if isinstance(fact, torch.SymBool):
        return fact.node.guard_or_false("", 0)
    return bool(fact)


def _select_at(recorder, tensor, dim, index):
    """``x[i]`` / ``x.select(dim, i)`` with an index only tensor data decides (``x.item()``):
    the result's size and strides do not depend on it. An index the ranges prove out of
    bounds is eager's IndexError; otherwise eager's kernel checks it at run time. Where the
    index lands (``i`` or ``i + size``) is known only when its sign is: else the view's storage
    offset is a fresh symbol, as torch's fake kernel makes it."""
    if tensor.dim() == 0:
        raise IndexError("select() cannot be applied to a 0-dim tensor.")
    dim = dim if dim >= 0 else dim + tensor.dim()
    size, stride = tensor.shape[dim], tensor.stride()[dim]
    if _decided(index >= size) or _decided(index < -size):
        raise IndexError(f"select(): index {index} out of range for tensor of size "
                         f"{list(tensor.shape)} at dimension {dim}")
    if _decided(index >= 0):
        offset = tensor.storage_offset() + index * stride
    elif _decided(index < 0):
        offset = tensor.storage_offset() + (index + size) * stride
    else:
        offset = recorder.unbacked_size("select() storage offset")
    shape = [s for d, s in enumerate(tensor.shape) if d != dim]
    strides = [s for d, s in enumerate(tensor.stride()) if d != dim]
    return tensor.as_strided(shape, strides, offset)


def _position(index, size):
    """Where a slice bound ``index`` lands in a dim of ``size`` (Python's clamping), or None
    when the ranges do not say (an unbacked bound of unknown sign or magnitude)."""
    if _decided(index >= 0):
        return index if _decided(index <= size) else (size if _decided(index > size) else None)
    if _decided(index < 0):
        if _decided(index >= -size):
            return index + size
        return 0 if _decided(index < -size) else None
    return None


def _slice_at(recorder, tensor, dim=0, start=None, end=None, step=1):
    """``x[a:b]`` / ``x.narrow``-like slices whose bounds only tensor data decides
    (``a, b = t.tolist()``). Each bound is placed where the ranges prove it lands (Python's
    clamping to the dim); the length is then computed, and is a fresh size in ``[0, size]``
    when a bound or their order is unknown, as is the storage offset when the start is: eager's
    kernel decides them at run time and the program reads them from the view it makes."""
    if tensor.dim() == 0:
        raise IndexError("slice() cannot be applied to a 0-dim tensor.")
    if _decided(step <= 0):
        raise ValueError("slice step must be positive")
    dim = dim if dim >= 0 else dim + tensor.dim()
    size, stride = tensor.shape[dim], tensor.stride()[dim]
    first = 0 if start is None else _position(start, size)
    last = size if end is None or (isinstance(end, int) and end >= size) \
        else _position(end, size)
    length = None
    if first is not None and last is not None:
        if _decided(last >= first):
            length = (last - first + step - 1) // step
        elif _decided(first >= last):
            length = 0
    if length is None:
        length = recorder.unbacked_size("slice() length", upper=_static_bound(size))
    offset = tensor.storage_offset() + first * stride if first is not None \
        else recorder.unbacked_size("slice() storage offset")
    shape, strides = list(tensor.shape), list(tensor.stride())
    shape[dim], strides[dim] = length, stride * step
    return tensor.as_strided(shape, strides, offset)


def _static_bound(size):
    """``size`` as an upper bound of a fresh size: itself when static, else none."""
    return size if isinstance(size, int) else None


# Views whose position (and, for a slice, length) an unbacked index decides: their meta
# kernels, which would ask for its sign or bounds, are replaced by these when an argument is
# unbacked.
UNBACKED_INDEX_VIEWS = {aten.select.int: _select_at, aten.slice.Tensor: _slice_at}


def has_unbacked_argument(env, args) -> bool:
    """True when a SymInt argument mentions a symbol only tensor data decides."""
    return any(isinstance(a, torch.SymInt) and any(env.is_unbacked(s) for s in
                                                   a.node.expr.free_symbols) for a in args)


def integer_indexing(func, args) -> bool:
    """``x[i]`` with integer index tensors: the output shape is known from the index shapes
    (only boolean masks make ``aten.index`` data-dependent)."""
    if func is not aten.index.Tensor:
        return False
    indices = [i for i in args[1] if i is not None]
    return all(not (i.dtype == torch.bool or i.dtype == torch.uint8) for i in indices)
