"""Tensors autograd saves for backward, then written in place: eager's backward refuses them.

Eager: ``z = (y * w).sin()`` saves ``y`` (the gradient of ``w`` needs it); a later in-place
write into ``y`` (under ``no_grad`` or not) bumps its version counter, and ``backward`` through
``z`` raises "one of the variables needed for gradient computation has been modified by an
inplace operation". The functional program reads the old ``y`` and would return a gradient
computed from it: a silent wrong answer.

At each in-place write the recorder notes every op recorded with grad enabled that read the
written value or any tensor sharing its version counter (its base, the base's views, a
``detach`` alias) and the ops that made them (which may save their own result: ``exp``), and
the writing op itself when it reads its target (``y.mul_(y)``); when the leaf call ends
(outside dispatch, where autograd records again) it asks :func:`saving_patterns` of each: the
op is re-run on fresh meta stand-ins, some of whose floating arguments require grad, and the
autograd graph it builds is searched for a saved tensor sharing memory with the written one.
Such an op's node is marked :data:`~unbroken.ir.meta_keys.SAVED_THEN_WRITTEN` with the sets
of arguments whose ``requires_grad`` makes it save; ``ExportedProgram.module()`` passes its
outputs through :func:`refuse_backward`, which is the identity forward and raises eager's
error when backward reaches it in a call where those arguments require grad — exactly when
eager's does.
"""
from __future__ import annotations

import itertools

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ..symbolic.size_one_hook import DryRunUndecided
from ..symbolic.torch_compat import OpOverload, disable_current_modes
from .ops import is_mutating, is_view_op

__all__ = ["grad_arguments", "refuse_backward", "saving_patterns"]


def saving_patterns(node: fx.Node, written: fx.Node, resize=None, cache=None) -> tuple:
    """When ``node``'s op saves for backward a tensor sharing memory with ``written`` (one of
    ``node``'s tensor arguments, or ``node`` itself: its result): the minimal sets of its
    floating-point arguments whose ``requires_grad`` makes autograd save it, each a tuple of
    positions in :func:`grad_arguments`; ``()`` when it never does. ``y * c`` saves ``y`` only
    when ``c`` requires grad (a buffer does not): eager's backward then runs after a write
    into ``y``. Asked of autograd itself, on meta stand-ins, with the sets in increasing size
    (the all-true set first: most ops save nothing written). An op with more than four
    floating arguments is answered for all of them requiring grad: ``((),)`` (always).

    resize: ``value -> value`` applied to the sizes and strides of the stand-ins (the size-1
    audit's re-run of this question with dims at 1); a question of that re-run its ranges
    leave open (``DryRunUndecided``) propagates.
    cache: a dict kept across questions of one recording: the answer depends only on the op,
    its arguments' metadata, which of them are one tensor, and the written one's place (a
    layer repeated in a model asks the same question again).

    A view op saves no tensor (its backward is the view's geometry): ``()`` unasked."""
    if node.op != "call_function" or not isinstance(node.target, OpOverload) \
            or is_view_op(node.target):
        return ()
    key = _question(node, written) if cache is not None and resize is None else None
    if key is not None and key in cache:
        return cache[key]
    answer = _saving_patterns(node, written, resize)
    if key is not None:
        cache[key] = answer
    return answer


def _question(node: fx.Node, written: fx.Node):
    """A hashable key of what :func:`saving_patterns` asks of ``node`` about ``written``
    (None when an argument cannot be keyed)."""
    leaves, spec = pytree.tree_flatten((node.args, node.kwargs))
    first: dict = {}
    key = []
    for leaf in leaves:
        if isinstance(leaf, fx.Node):
            index = first.setdefault(leaf, len(first))
            meta = leaf.meta.get("val")
            if isinstance(meta, torch.Tensor):
                key.append((index, str(meta.shape), str(meta.stride()), meta.dtype))
            else:
                key.append((index, str(meta)))
        else:
            try:
                hash(leaf)
            except TypeError:
                return None
            key.append(leaf)
    place = -1 if written is node else first.get(written, -2)
    return node.target, str(spec), tuple(key), place


def _saving_patterns(node: fx.Node, written: fx.Node, resize) -> tuple:
    candidates = [leaf for _, leaf in grad_arguments(node)]
    if not _saves(node, written, resize, set(candidates)):
        return ()
    if len(candidates) > 4:
        return ((),)
    found: list = []
    for size in range(1, len(candidates) + 1):
        for chosen in itertools.combinations(range(len(candidates)), size):
            if any(set(minimal) <= set(chosen) for minimal in found):
                continue
            if _saves(node, written, resize, {candidates[i] for i in chosen}):
                found.append(chosen)
    return tuple(found) or ((),)


def grad_arguments(node: fx.Node) -> list:
    """``(position, node)`` of ``node``'s distinct floating-point (or complex) tensor
    arguments, positions in the flat leaves of ``(node.args, node.kwargs)``."""
    found, seen = [], set()
    for position, leaf in enumerate(pytree.tree_leaves((node.args, node.kwargs))):
        if not isinstance(leaf, fx.Node) or leaf in seen:
            continue
        meta = leaf.meta.get("val")
        if isinstance(meta, torch.Tensor) and (meta.is_floating_point() or meta.is_complex()):
            seen.add(leaf)
            found.append((position, leaf))
    return found


def _saves(node: fx.Node, written: fx.Node, resize, requiring: set) -> bool:
    """Whether ``node``'s op, run with grad on stand-ins of which those of ``requiring``
    require grad, saves a tensor sharing memory with ``written``."""
    stand_ins: dict = {}
    in_place = is_mutating(node.target)

    def stand_in(value):
        if not isinstance(value, fx.Node):
            return value
        meta = value.meta.get("val")
        if not isinstance(meta, torch.Tensor):
            return meta
        if value not in stand_ins:
            shape, stride = meta.shape, meta.stride()
            if resize is not None:
                shape, stride = [resize(x) for x in shape], [resize(x) for x in stride]
            fresh = torch.empty_strided(shape, stride, dtype=meta.dtype, device="meta")
            if value in requiring:
                fresh.requires_grad_()
                if in_place:  # autograd writes no leaf in place
                    with disable_current_modes(), torch.enable_grad():
                        fresh = fresh.clone()
            stand_ins[value] = fresh
        return stand_ins[value]

    args, kwargs = pytree.tree_map(stand_in, (node.args, node.kwargs))
    try:
        with disable_current_modes(), torch.enable_grad():
            out = node.target(*args, **kwargs)
    except DryRunUndecided:
        raise
    except Exception:  # noqa: BLE001 - an op autograd cannot run on meta: nothing known saved
        return False
    outputs = [t for t in pytree.tree_leaves(out) if isinstance(t, torch.Tensor)]
    if written is node:
        memory = {_storage(t) for t in outputs}
    elif written in stand_ins:
        memory = {_storage(stand_ins[written])}
    else:
        return False
    try:
        saved = _saved_tensors(outputs)
    except RuntimeError:  # a saved tensor the op itself wrote (``y.mul_(y)``) cannot be read
        return in_place and written is node.args[0]
    return any(_storage(tensor) in memory for tensor in saved)


def _storage(tensor: torch.Tensor) -> int:
    return tensor.untyped_storage()._cdata


def _saved_tensors(outputs) -> list:
    """Every tensor saved by the autograd nodes that produced ``outputs`` (their whole graph:
    the stand-ins are fresh leaves, so it is this op's alone)."""
    seen, stack, saved = set(), [t.grad_fn for t in outputs if t.grad_fn is not None], []
    while stack:
        function = stack.pop()
        if function is None or id(function) in seen:
            continue
        seen.add(id(function))
        for name in dir(function):
            if name.startswith("_saved_"):
                value = getattr(function, name)
                values = value if isinstance(value, (tuple, list)) else (value,)
                saved.extend(v for v in values if isinstance(v, torch.Tensor))
        stack.extend(next_function for next_function, _ in function.next_functions)
    return saved


class _RefusedBackward(torch.autograd.Function):
    """Identity forward; backward raises eager's error (see the module docstring)."""

    @staticmethod
    def forward(ctx, tensor, message):
        ctx.message = message
        return tensor.clone()  # a fresh tensor, as the op's own output is

    @staticmethod
    def backward(ctx, grad):
        raise RuntimeError(ctx.message)


def refuse_backward(tensor, message: str, patterns=((),), *arguments):
    """``tensor``, whose backward raises ``message`` (eager's "modified by an inplace
    operation") when grad mode is on and, for one of ``patterns`` (tuples of positions in
    ``arguments``, the op's floating arguments: :func:`saving_patterns`), each of those
    arguments requires grad: the case in which eager's autograd saved the written tensor."""
    if not isinstance(tensor, torch.Tensor) or not tensor.requires_grad \
            or not torch.is_grad_enabled():
        return tensor
    if not any(all(isinstance(arguments[i], torch.Tensor) and arguments[i].requires_grad
                   for i in pattern) for pattern in patterns):
        return tensor
    return _RefusedBackward.apply(tensor, message)
