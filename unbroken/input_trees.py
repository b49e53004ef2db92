"""The pytree structure of forward()'s inputs, as the trace sees it.

Plain containers (tuples, lists, dicts, namedtuples: the nodes PyTorch itself registers) hold
the input trackers directly. An object of a class registered by the program or a library
(``transformers``' ``DynamicCache`` as ``past_key_values``) is rebuilt *inside* the trace: its
unflatten function is interpreted on the input trackers, so what its constructor does (a cache
initialises layers, concatenates its tensors) is recorded, and the object is one of the trace's
own. As with ``torch.export``, the caller's object is never changed: a cache forward() updates
is returned (if forward() returns it) as a new object.

Example tensors must be plain dense tensors (:func:`check_traceable_tensor`).
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass

import torch
from torch.utils import _pytree as pytree

from .fix_rendering import TensorDims
from .frontend.tracer import trace_call
from .symbolic.diagnostics import ExportUsageError

__all__ = ["Rebuild", "check_traceable_tensor", "dims_of", "leaf_entries", "materialize",
           "unflatten_inputs"]


def _is_plain(spec) -> bool:
    """A node PyTorch registers (builtins, collections, torch's own structs)."""
    module = getattr(spec.type, "__module__", "") or ""
    return module.split(".")[0] in ("builtins", "collections", "torch")


def leaf_entries(spec, mirrored) -> list:
    """The entries of ``mirrored`` (a tree shaped as ``spec``, registered classes as the list
    of their children: ``symbolic.spec``'s resolved dims) at the leaves of ``spec``, in
    order."""
    if spec.is_leaf():
        return [mirrored]
    if _is_plain(spec):
        mirrored = pytree.SUPPORTED_NODES[spec.type].flatten_fn(mirrored)[0]
    return [entry for child, part in zip(spec.children(), mirrored, strict=True)
            for entry in leaf_entries(child, part)]


@dataclass(frozen=True, slots=True)
class Rebuild:
    """An input object of a registered class, to rebuild inside the trace: ``unflatten``
    (the class's pytree unflatten function) called on ``children`` (trackers, plain containers
    of them, or other Rebuilds) and ``context``."""

    unflatten: Callable
    context: object
    children: tuple


def unflatten_inputs(leaves: list, spec):
    """``spec`` unflattened over the input trackers ``leaves``: plain containers natively,
    registered classes as :class:`Rebuild` (see :func:`materialize`)."""
    return _unflatten(iter(leaves), spec)


def _unflatten(leaves, spec):
    if spec.is_leaf():
        return next(leaves)
    children = [_unflatten(leaves, child) for child in spec.children()]
    node = pytree.SUPPORTED_NODES[spec.type]
    if _is_plain(spec):
        return node.unflatten_fn(children, spec.context)
    return Rebuild(node.unflatten_fn, spec.context, tuple(children))


def materialize(output, value):
    """``value`` with each :class:`Rebuild` replaced by the tracker its unflatten function
    returns, interpreted in the trace ``output`` (inside the trace's context managers)."""
    def build(leaf):
        if not isinstance(leaf, Rebuild):
            return leaf
        children = [materialize(output, child) for child in leaf.children]
        result, _ = trace_call(output, leaf.unflatten, [children, leaf.context], {},
                               inputs_are_external=False)
        return result

    return pytree.tree_map(build, value, is_leaf=lambda v: isinstance(v, Rebuild))


def dims_of(value, spec, trackers: list):
    """The dims of an argument for rendering fixes: a tuple for a tensor, the container with a
    ``TensorDims`` per tensor, or None when it holds no tensor. ``spec``: its pytree spec;
    ``trackers``: the tracker of each leaf, in order (None for a leaf that is no tensor)."""
    if isinstance(value, torch.Tensor):
        return _tensor_dims(trackers[0])
    if all(t is None for t in trackers):
        return None
    return _dims_tree(spec, iter(trackers))


def _dims_tree(spec, trackers):
    """The dims tree of ``spec``: a ``TensorDims`` per tensor, None for other leaves. A
    registered class becomes the list of its children, as ``dynamic_shapes`` states it (it is
    never rebuilt here: its constructor may read its tensors)."""
    if spec.is_leaf():
        tracker = next(trackers)
        return None if tracker is None else TensorDims(_tensor_dims(tracker))
    dims = [_dims_tree(child, trackers) for child in spec.children()]
    if _is_plain(spec):
        return pytree.SUPPORTED_NODES[spec.type].unflatten_fn(dims, spec.context)
    return dims


def _tensor_dims(tracker) -> tuple:
    return tuple(s.node.expr if isinstance(s, torch.SymInt) else int(s)
                 for s in tracker.meta.shape)


_TENSOR_HOOKS = ("__torch_function__", "__torch_dispatch__")


def check_traceable_tensor(tensor: torch.Tensor) -> None:
    """The trace sees every example tensor as a dense (strided) tensor of its dtype and sizes:
    refuse one whose behaviour that would drop (a sparse or nested tensor, a tensor subclass
    with its own ``__torch_function__``/``__torch_dispatch__``), since the program would
    compute something else than eager (``x.is_sparse`` read as False)."""
    if tensor.is_nested:
        what, fix = "a nested tensor", "pass dense (padded) tensors"
    elif tensor.layout != torch.strided:
        what, fix = f"a tensor of layout {tensor.layout}", "pass a dense tensor (`x.to_dense()`)"
    else:
        cls = type(tensor)
        if cls.__module__.split(".")[0] == "torch" or all(
                inspect.getattr_static(cls, hook, None)
                is inspect.getattr_static(torch.Tensor, hook, None) for hook in _TENSOR_HOOKS):
            return
        what = f"a {cls.__name__}, a tensor subclass with its own {' / '.join(_TENSOR_HOOKS)}"
        fix = "pass a plain tensor (`x.as_subclass(torch.Tensor)`)"
    raise ExportUsageError(
        f"unsupported example input: {what}; the trace would see a plain dense tensor, and "
        f"the program would not compute what eager computes on it",
        hint=f"Export with plain dense tensors: {fix}.")
