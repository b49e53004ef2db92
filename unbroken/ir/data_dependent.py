"""Operators whose results depend on tensor values: ``.item()`` and ops whose output sizes
do (``nonzero``, ``masked_select``, boolean-mask indexing).

With a shape environment, the recorder gives each such value a fresh *unbacked* symbol (no
example value; a size is >= 0 and at most the input's element count) instead of refusing it.
The handlers here build the meta outputs with those sizes; the recorder records the node and
binds the symbol to ``sym_size`` of it so that later code can compute with it.
"""
from __future__ import annotations

import torch

from ..symbolic.diagnostics import UnsupportedError

__all__ = ["SCALAR_OPS", "DATA_DEPENDENT_SIZES", "integer_indexing"]

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
    """``x[mask]`` with one boolean mask over the leading dims (other index forms refused)."""
    masks = [i for i in indices if i is not None]
    if len(masks) != 1 or indices[0] is None or masks[0].dtype not in (torch.bool, torch.uint8):
        raise UnsupportedError("indexing with several tensors where one is a boolean mask",
                               code="UB114", frames=recorder.frames_provider())
    mask = masks[0]
    count = recorder.unbacked_size("mask count", upper=_static_numel(mask.shape))
    return torch.empty((count, *tensor.shape[mask.dim():]), dtype=tensor.dtype, device=_META)


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
}


def integer_indexing(func, args) -> bool:
    """``x[i]`` with integer index tensors: the output shape is known from the index shapes
    (only boolean masks make ``aten.index`` data-dependent)."""
    if func is not aten.index.Tensor:
        return False
    indices = [i for i in args[1] if i is not None]
    return all(not (i.dtype == torch.bool or i.dtype == torch.uint8) for i in indices)
