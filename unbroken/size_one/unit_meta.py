"""Whether "is this size 1?" answers matter: a node's output metadata, or a leaf call's ops,
compared at 1.

Meta kernels ask "is this size 1?" (``Eq(s0, 1)``) or "fewer than 2 elements?" to pick a
broadcast source, skip a size-1 dim when computing strides, or take a contiguity shortcut.
With dynamic dims traced from 2 the answer is "no" for free; whether the program then also
serves size 1 (``unbroken.size_one``) depends on what the answer changed. Inside one recorded
node the op is the same either way: only its output metadata can differ. So the node's kernel
runs again on its inputs' metadata with the dims at 1 (``SizeOneAudit.dry_run``: every
question must be settled by the ranges, nothing is recorded) and the outputs are compared:
equal dtypes, ranks, sizes, and strides of every dim whose size is not 1 (the stride of a
size-1 dim is never read by PyTorch's kernels, layout checks or view rules). Equal, the
answers only shaped bookkeeping; different (a ``squeeze``, a view that becomes a copy), the
dims keep ``[2, ...]``.

Answers given during a leaf call but outside any node (torch's C++ ``reshape`` choosing a
view or a copy, indexing choosing which ops to run) may change which ops run: the whole call
is re-run at 1 with every op it dispatches logged and none recorded
(``Recorder.dry_logging``), and must dispatch the same ops on corresponding arguments, with
the same output metadata, and return the corresponding result. A layout-dependent call
(``LAYOUT_DEPENDENT_CALLS``: ``reshape``, ``flatten``, ``contiguous``...) that copies on one
side and views on the other returns the same values either way: it only needs a result of
the same sizes at 1, and the recorder then watches what could tell a view from a copy
(``SizeOneAudit.note_layout_at_one``).
"""
from __future__ import annotations

import functools
from collections.abc import Callable

import sympy
import torch
import torch.utils._pytree as pytree

from ..ir.meta_cache import TORCH_NAMESPACES, metadata_key
from ..symbolic.diagnostics import UnbrokenError
from ..symbolic.node import sym_expr
from ..symbolic.size_one_hook import DryRunUndecided
from .at_one import at_values, holds_at_one

__all__ = ["LAYOUT_DEPENDENT_CALLS", "LAYOUT_FOLLOWING", "REJECTED_AT_ONE", "VIEWS_WITH_SIZES",
           "leaf_call_key", "same_node_at", "settle_leaf_call",
           "substituted"]

# What a kernel may raise on metadata it rejects at size 1 (eager would raise too), or
# unbroken on a re-run it cannot follow: the answers then count. Anything else propagates.
# AssertionError: torch's own checks raise it (``torch._check_with(AssertionError, ...)`` in
# ``F.multi_head_attention_forward``: a key padding mask whose batch is another symbol).
_REJECTED = (DryRunUndecided, RuntimeError, ValueError, TypeError, IndexError, ArithmeticError,
             AssertionError, UnbrokenError)
REJECTED_AT_ONE = _REJECTED


def same_node_at(audit, env, rerun: Callable, args, kwargs, out, ones: dict) -> bool:
    """Whether ``rerun(args, kwargs)`` with ``ones`` (``{symbol: 1}``) put in gives ``out``'s
    metadata at 1 (a node's "is this size 1?" answers are then harmless there)."""
    return _same_at(audit, env, rerun, args, kwargs, out, ones)


def settle_leaf_call(audit, env, recorder, pending: dict, log: list, fn, args, kwargs,
                     result, grad_enabled: bool, remembered=None) -> None:
    """Mark the symbols of ``pending`` (answers given during one leaf call outside any
    node's meta computation: torch's own code choosing which ops to run, as ``reshape``
    choosing a view or a copy) size-one sensitive unless re-running the call at every
    combination of them at 1 dispatches the same ops, on the same arguments, with the same
    output metadata at 1, and returns the same thing. ``log``: the ``(op, args, kwargs,
    out)`` the call dispatched (``recorder.leaf_scope``). Called outside the recording mode
    (the comparisons run real ops); the re-run enters it with ``grad_enabled``.
    ``remembered``: ``(key, check) -> check`` answering that comparison from the outcomes of
    the process's earlier traces (``SizeOneAudit``), for a call :func:`leaf_call_key`
    states."""
    symbols = [s for s in pending if s not in audit.sensitive]
    if not symbols:
        return
    reruns: dict = {}  # the comparisons below re-run the call at the same sets: once each

    def rerun_at(values: dict):
        key = frozenset(values.items())
        if key not in reruns:
            reruns[key] = _rerun_at(audit, env, recorder, fn, args, kwargs, grad_enabled,
                                    values)
        return reruns[key]

    def same_call_at(ones: dict) -> bool:
        return _same_call_at(rerun_at, log, args, kwargs, result, ones)

    positions = _tensor_positions(args, kwargs, log)
    key = None if remembered is None else \
        leaf_call_key(recorder, fn, args, kwargs, result, log, grad_enabled, positions)
    if holds_at_one(symbols, same_call_at if key is None else remembered(key, same_call_at),
                    within=pending.flips):
        return
    layouts = []  # per set at 1: whether the result there is laid out as here
    at_one: dict = {}  # per set at 1: eager's result there
    if fn in LAYOUT_DEPENDENT_CALLS and holds_at_one(symbols, lambda ones: _same_result_at(
            rerun_at, result, ones, layouts, at_one)):
        same_layout = all(layouts)
        whole = None
        if not same_layout and fn in _RESHAPES and args and isinstance(args[0], torch.Tensor):
            whole = _whole_nodes(recorder, args[0], result)
        audit.note_layout_at_one(recorder, (args, kwargs), result, pending,
                                 same_layout=same_layout, whole=whole,
                                 grad_enabled=grad_enabled, at_one=at_one)
        return
    flips, carriers, copies = {}, {}, {}

    def same_but_reshapes(ones: dict):
        """The comparison's outcome and what it added to the three tables, by position
        (:func:`_tensor_positions`), so that another trace's run of this call can take it."""
        before = [dict(table) for table in (flips, carriers, copies)]
        outcome = _same_call_but_reshapes(rerun_at, log, args, kwargs, result, ones, flips,
                                          carriers, copies)
        added = [_placed(positions, {k: v for k, v in table.items() if k not in old})
                 for table, old in zip((flips, carriers, copies), before)]
        return outcome, None if None in added else tuple(added)

    def taken(ones: dict) -> bool:
        outcome, added = remembered_reshapes(ones)
        if added is None:  # a table holds a tensor not of the call's: compared here
            return _same_call_but_reshapes(rerun_at, log, args, kwargs, result, ones, flips,
                                           carriers, copies)
        for table, entries in zip((flips, carriers, copies), added):
            table.update(_unplaced(tensors, entries))
        return outcome

    if key is not None:
        tensors = {place: t for t, place in positions.values()}
        remembered_reshapes = remembered(("but reshapes", key), same_but_reshapes)
    if fn not in LAYOUT_DEPENDENT_CALLS and holds_at_one(
            symbols, taken if key is not None else lambda ones: _same_call_but_reshapes(
                rerun_at, log, args, kwargs, result, ones, flips, carriers, copies),
            within=pending.flips) and (flips or copies):
        for source, out in flips.values():
            audit.note_layout_at_one(recorder, (source,), out, pending, same_layout=False,
                                     whole=_whole_nodes(recorder, source, out),
                                     carriers=list(carriers.values()),
                                     grad_enabled=grad_enabled)
        for source, out in copies.values():
            audit.note_layout_at_one(recorder, (source,), out, pending, same_layout=True,
                                     grad_enabled=grad_enabled)
        return
    audit.mark_sensitive(pending)


def _tensor_positions(args, kwargs, log: list) -> dict:
    """``id(tensor) -> (tensor, position)`` for the tensors a leaf call was given and its
    ops made: ``("in", i)``, its i-th tensor argument; ``(n, i)``, the i-th tensor output of
    its n-th op (where a tensor first appears)."""
    positions: dict = {}
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    for i, t in enumerate(inputs):
        positions.setdefault(id(t), (t, ("in", i)))
    for index, entry in enumerate(log):
        outputs = [t for t in pytree.tree_leaves(entry[3]) if isinstance(t, torch.Tensor)]
        for i, t in enumerate(outputs):
            positions.setdefault(id(t), (t, (index, i)))
    return positions


def _placed(positions: dict, table: dict):
    """``table``'s entries (tensors, or tuples of them) by position, or None when one is
    not a tensor of the call's (then not shared)."""
    def place(value):
        if isinstance(value, tuple):
            return tuple(place(v) for v in value)
        found = positions.get(id(value))
        if found is None:
            raise LookupError
        return found[1]
    try:
        return tuple(place(value) for value in table.values())
    except LookupError:
        return None


def _unplaced(tensors: dict, entries) -> dict:
    """:func:`_placed`'s entries as tensors of this run, keyed as the tables key them."""
    def tensor(place):
        return tensors[place] if not isinstance(place[0], tuple) else \
            tuple(tensors[p] for p in place)
    values = [tensor(place) for place in entries]
    return {id(v[-1] if isinstance(v, tuple) else v): v for v in values}


def leaf_call_key(recorder, fn, args, kwargs, result, log: list, grad_enabled: bool,
                  positions: dict | None = None):
    """Everything the comparison of a leaf call at 1 (``_same_call_at``) reads but the
    environment's and the process's state: the function, its arguments and result and every
    op it dispatched (metadata, values, which tensor is which: torch's code compares
    identities, and the comparison pairs each op's arguments with earlier outputs), the
    devices its tensors stand for, the grad mode. None when the function is not torch's own
    (user code may read anything) or something cannot be stated exactly (an object)."""
    if not _torch_own(fn):
        return None
    if positions is None:
        positions = _tensor_positions(args, kwargs, log)

    def wired(tree):
        stated = metadata_key(tree)
        if stated is None:
            return None
        tensors = [t for t in pytree.tree_leaves(tree) if isinstance(t, torch.Tensor)]
        return stated, tuple(positions[id(t)][1] if id(t) in positions else None
                             for t in tensors)

    inputs = wired((args, kwargs))
    if inputs is None:
        return None
    tensors = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    devices = tuple(recorder.device_of(t) if recorder.is_tracked(t) else None for t in tensors)
    ops = []
    for op, op_args, op_kwargs, out in log:
        read, made = wired((op_args, op_kwargs)), metadata_key(out)
        if read is None or made is None:
            return None
        ops.append((op, read, made))
    returned = wired(result)
    if returned is None:
        return None
    return ("leaf", fn, inputs, devices, tuple(ops), returned, grad_enabled,
            recorder.default_device)


def _torch_own(fn) -> bool:
    """``fn`` is PyTorch's own code (a function of ``torch``'s modules or a method of its
    classes, an op of ``aten``/``prims``), not one a user defined or registered."""
    namespace = getattr(fn, "namespace", None)
    if namespace is not None:
        return namespace in TORCH_NAMESPACES
    module = getattr(fn, "__module__", None) or \
        getattr(getattr(fn, "__objclass__", None), "__module__", None)
    return isinstance(module, str) and (module == "torch" or module.startswith("torch.")) \
        and not module.startswith("torch.ops")


# Calls whose result has the values of ``x.contiguous().view(shape)`` whichever way torch
# goes, a view of ``x`` where its layout allows and a copy elsewhere: at size 1 (a dim of size
# 1 merges with any other) a copy of the trace may be a view in eager. Same values; only a
# write into either side, or the result returned, can tell the two apart.
LAYOUT_DEPENDENT_CALLS = frozenset({
    torch.reshape, torch.Tensor.reshape, torch.Tensor.reshape_as, torch.flatten,
    torch.Tensor.flatten, torch.Tensor.contiguous, torch.unflatten, torch.Tensor.unflatten})


# The calls whose result is ``aten.reshape(input, result's sizes)``.
_RESHAPES = frozenset(LAYOUT_DEPENDENT_CALLS - {torch.Tensor.contiguous})


def _whole_nodes(recorder, source: torch.Tensor, result: torch.Tensor):
    """``(node, input node)`` when ``result``, a reshape of ``source``, can be recorded as
    one ``aten.reshape`` of it (``SizeOneAudit.note_layout_at_one``): its node is a ``view``
    (of ``source`` or of its copy), whose sizes the reshape takes. None otherwise."""
    if not isinstance(result, torch.Tensor):
        return None
    node, input_node = recorder.builder.producer(result), recorder.builder.producer(source)
    if node is None or input_node is None or node.graph is not input_node.graph \
            or node.target not in VIEWS_WITH_SIZES:
        return None
    return node, input_node


# The views whose sizes a reshape takes: ``view``, and ``_unsafe_view`` (a reshape's view of
# its own copy).
VIEWS_WITH_SIZES = frozenset({torch.ops.aten.view.default, torch.ops.aten._unsafe_view.default})
# Copies whose output takes their input's layout (``preserve_format``), as pointwise ops' do.
LAYOUT_FOLLOWING = frozenset({torch.ops.aten.clone.default, torch.ops.aten._to_copy.default})

# BLAS-backed products (by op name): their kernels choose a path from the operands' strides,
# a size-1 dim's stride included. ``matmul`` of a (7, 1, 5) view of strides (5, 35, 1) runs
# 7 small products where a contiguous (7, 1, 5) folds into one GEMM; on AVX-512 CPUs the two
# round differently. Two layouts that differ only in a size-1 dim's stride are the same to
# every other op (TensorIterator leaves size-1 dims out).
STRIDE_READING_PRODUCTS = frozenset({
    "matmul", "linear", "mm", "bmm", "addmm", "addbmm", "baddbmm", "mv", "addmv", "dot",
    "vdot", "einsum", "tensordot", "bilinear", "_addmm_activation"})


def _same_result_at(rerun_at, result, values: dict, layouts: list, at_one: dict) -> bool:
    """Whether the call (one of ``LAYOUT_DEPENDENT_CALLS``) re-run with ``values`` put in
    (``rerun_at``: ``_rerun_at`` of the call)
    returns a tensor of ``result``'s dtype and sizes at 1, whatever ops it took to get
    there and whatever its strides. Appends to ``layouts`` whether its strides there are
    ``result``'s at 1 too (on the dims whose size is not 1: a ``contiguous()`` that returns
    its input at 1 returns a contiguous one; a ``reshape`` view of a transposed input is not)
    and puts that result in ``at_one`` under the values."""
    rerun = rerun_at(values)
    if rerun is None:
        return False
    again = rerun[2]
    if not _same_sizes(result, again, values):
        return False
    layouts.append(_same_layout(result, again, values))
    at_one[tuple(sorted(values.items(), key=lambda item: str(item[0])))] = again
    return True


def _rerun_at(audit, env, recorder, fn, args, kwargs, grad_enabled: bool, values: dict):
    """The leaf call ``fn(*args, **kwargs)`` run again with ``values`` put in (a dry run:
    nothing recorded, every op logged): ``(its arguments, its result, the ops it
    dispatched)``, or None when eager would reject it there (or the re-run cannot be
    followed)."""
    with audit.dry_run(values):
        try:
            new_args, new_kwargs = substituted_tree(env, (args, kwargs), values)
            with recorder.recording(), torch.set_grad_enabled(grad_enabled), \
                    recorder.dry_logging() as again_log:
                again = fn(*new_args, **new_kwargs)
        except _REJECTED:
            return None
    return new_args, new_kwargs, again, again_log


def _same_call_but_reshapes(rerun_at, log, args, kwargs, result, values: dict, flips: dict,
                            carriers: dict, copies: dict) -> bool:
    """Whether the call re-run with ``values`` put in dispatches the same ops but for
    reshapes inside it that copy here and view at 1 (``clone`` + ``view`` here, ``view``
    there: the same values laid out otherwise). The ops after one of them that read its
    result may have other strides at 1, never other sizes or other ops: the re-run at 1
    starts from eager's layout of the call's inputs, so its log is eager's, and a choice the
    call makes on the layout (a ``contiguous()`` that copies only at 1) shows as another
    op. Adds each such reshape to ``flips`` (``id(result) -> (its input, its result)``, of
    this run) and the tensors whose layout follows one to ``carriers``; and each
    ``contiguous()`` that copies here and returns its input at 1, laid out as the copy
    (only aliasing differs), to ``copies`` (same form). ``rerun_at``: ``_rerun_at`` of
    the call."""
    rerun = rerun_at(values)
    if rerun is None:
        return False
    new_args, new_kwargs, again, again_log = rerun
    pairs = _Pairs(values)
    if not pairs.bind((args, kwargs), (new_args, new_kwargs)):
        return False
    laid_out = {}  # id -> tensor of this run whose layout at 1 may differ
    here = there = 0
    while here < len(log) and there < len(again_log):
        op, op_args, op_kwargs, out = log[here]
        op2, op_args2, op_kwargs2, out2 = again_log[there]
        if _copy_then_view(log, here) and op2 in VIEWS_WITH_SIZES \
                and pairs.same(op_args[0], op_args2[0]):
            viewed = log[here + 1][3]
            if not _same_sizes(viewed, out2, values):
                return False
            flips[id(viewed)] = (op_args[0], viewed)
            laid_out[id(viewed)] = viewed
            pairs.bind(viewed, out2)
            here, there = here + 2, there + 1
            continue
        if op != op2 or not pairs.same((op_args, op_kwargs), (op_args2, op_kwargs2)):
            if not _copy_is_its_input(log[here], pairs, values, copies):
                return False
            here += 1
            continue
        left, left_spec = pytree.tree_flatten(out)
        right, right_spec = pytree.tree_flatten(out2)
        if left_spec != right_spec:
            return False
        follows = any(id(t) in laid_out for t in pytree.tree_leaves((op_args, op_kwargs))
                      if isinstance(t, torch.Tensor))
        for a, b in zip(left, right):
            if _same_leaf(a, b, values):
                continue
            if not (follows and isinstance(a, torch.Tensor) and _same_sizes(a, b, values)):
                return False
            laid_out[id(a)] = a
        pairs.bind(out, out2)
        here, there = here + 1, there + 1
    while here < len(log) and _copy_is_its_input(log[here], pairs, values, copies):
        here += 1  # copies ending the call
    if here != len(log) or there != len(again_log) or not pairs.same(result, again):
        return False
    carriers.update(laid_out)
    return True


def _copy_is_its_input(entry, pairs, values: dict, copies: dict) -> bool:
    """Whether ``entry`` is a ``contiguous()`` copy made here that is its input at 1 (the
    input, contiguous there, laid out as the copy): then it pairs with that input and joins
    ``copies``."""
    if not _contiguous_copy(entry):
        return False
    _, op_args, _, out = entry
    known = pairs.tensors.get(id(op_args[0]))
    if known is None or not _same_layout(out, known[1], values):
        return False
    copies[id(out)] = (op_args[0], out)
    pairs.tensors[id(out)] = (out, known[1])
    return True


def _contiguous_copy(entry) -> bool:
    op, _, op_kwargs, _ = entry
    return op is torch.ops.aten.clone.default \
        and op_kwargs.get("memory_format") in (None, torch.contiguous_format)


def _copy_then_view(log, index: int) -> bool:
    """``log[index]`` is a contiguous ``clone`` and the next op a ``view`` of it with sizes
    (a reshape that copies)."""
    if index + 1 >= len(log) or not _contiguous_copy(log[index]):
        return False
    out = log[index][3]
    op2, op_args2, _, _ = log[index + 1]
    return op2 in VIEWS_WITH_SIZES and bool(op_args2) and op_args2[0] is out


def _same_sizes(general, at_one, values: dict) -> bool:
    return (isinstance(general, torch.Tensor) and isinstance(at_one, torch.Tensor)
            and general.dtype == at_one.dtype and general.dim() == at_one.dim()
            and [_expr(x, values) for x in general.shape] == [_expr(x, {}) for x in at_one.shape])


def _same_call_at(rerun_at, log, args, kwargs, result, values: dict) -> bool:
    """Whether the call re-run with ``values`` put in (``rerun_at``: ``_rerun_at`` of the
    call) dispatches the same ops on corresponding arguments with the same output metadata
    at 1, and returns the corresponding result."""
    rerun = rerun_at(values)
    if rerun is None:
        return False
    new_args, new_kwargs, again, again_log = rerun
    pairs = _Pairs(values)
    if not pairs.bind((args, kwargs), (new_args, new_kwargs)) or len(log) != len(again_log):
        return False
    for (op, op_args, op_kwargs, out), (op2, op_args2, op_kwargs2, out2) in zip(log, again_log):
        if op != op2 or not pairs.same((op_args, op_kwargs), (op_args2, op_kwargs2)):
            return False
        left, left_spec = pytree.tree_flatten(out)
        right, right_spec = pytree.tree_flatten(out2)
        if left_spec != right_spec or not all(
                _same_leaf(a, b, values) for a, b in zip(left, right)):
            return False
        pairs.bind(out, out2)
    return pairs.same(result, again)


class _Pairs:
    """Which tensor of the re-run stands for which of the first run (inputs, then each op's
    outputs); sizes and scalars compared with the symbols at 1."""

    def __init__(self, values: dict):
        self.values = values
        self.tensors: dict = {}  # id(first run's tensor) -> (that tensor, the re-run's)

    def bind(self, first, again) -> bool:
        left, left_spec = pytree.tree_flatten(first)
        right, right_spec = pytree.tree_flatten(again)
        if left_spec != right_spec:
            return False
        for a, b in zip(left, right):
            if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
                self.tensors[id(a)] = (a, b)
        return True

    def same(self, first, again) -> bool:
        left, left_spec = pytree.tree_flatten(first)
        right, right_spec = pytree.tree_flatten(again)
        return left_spec == right_spec and all(self._same(a, b) for a, b in zip(left, right))

    def _same(self, a, b) -> bool:
        if isinstance(a, torch.Tensor) or isinstance(b, torch.Tensor):
            known = self.tensors.get(id(a))
            if known is None:  # a constant made inside the call (a wrapped Python number)
                return _same_constant(a, b)
            return known[0] is a and known[1] is b
        return _same_leaf(a, b, self.values)


def _same_constant(a, b) -> bool:
    return (isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor)
            and a.device.type != "meta" and b.device.type != "meta"
            and a.dtype == b.dtype and a.shape == b.shape and torch.equal(a, b))


def _same_at(audit, env, rerun, args, kwargs, out, values: dict) -> bool:
    with audit.dry_run(values):
        try:
            new_args, new_kwargs = substituted_tree(env, (args, kwargs), values)
            again = rerun(new_args, new_kwargs)
        except _REJECTED:
            return False
    left, left_spec = pytree.tree_flatten(out)
    right, right_spec = pytree.tree_flatten(again)
    return left_spec == right_spec and all(
        _same_leaf(a, b, values) for a, b in zip(left, right))


def substituted_tree(env, tree, values: dict):
    """``tree`` with ``values`` put in (``_substituted``), the same tensor passed twice
    standing for one re-built tensor: torch's code compares identities (``F.multi_head_
    attention_forward``'s ``query is key`` picks its packed projection)."""
    made: dict = {}

    def substitute(value):
        if not isinstance(value, torch.Tensor):
            return _substituted(env, value, values)
        if id(value) not in made:
            made[id(value)] = (value, _substituted(env, value, values))
        return made[id(value)][1]

    return pytree.tree_map(substitute, tree)


def _substituted(env, value, values: dict):
    """``value`` with ``values`` put in for its symbols: meta tensors rebuilt with the
    substituted sizes, strides and offset; symbolic scalars substituted."""
    if isinstance(value, torch.Tensor):
        sizes = [_sub(env, size, values) for size in value.shape]
        strides = [_sub(env, stride, values) for stride in value.stride()]
        offset = _sub(env, value.storage_offset(), values)
        base = torch.empty_strided(sizes, strides, dtype=value.dtype, device=value.device)
        return base if offset == 0 else base.as_strided(sizes, strides, offset)
    if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return _sub(env, value, values)
    return value


def _sub(env, value, values: dict):
    if not isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return value
    expr = at_values(value.node.expr, values)
    if isinstance(value, torch.SymBool):
        return env.symbool(expr)
    if isinstance(value, torch.SymFloat):
        return env.symfloat(expr)
    return env.symint(expr)


def _same_leaf(general, at_one, values: dict) -> bool:
    try:
        return _same_value(general, at_one, values)
    except ArithmeticError:  # the general value is undefined there: not the same
        return False


def _same_value(general, at_one, values: dict) -> bool:
    if isinstance(general, torch.Tensor) or isinstance(at_one, torch.Tensor):
        return (isinstance(general, torch.Tensor) and isinstance(at_one, torch.Tensor)
                and general.dtype == at_one.dtype and general.dim() == at_one.dim()
                and _same_layout(general, at_one, values))
    if isinstance(general, (torch.SymInt, torch.SymBool, torch.SymFloat, int, float, bool)):
        return _expr(general, values) == _expr(at_one, {})
    return type(general) is type(at_one) and general == at_one


def _same_layout(general, at_one, values: dict) -> bool:
    sizes = [_expr(size, values) for size in general.shape]
    if sizes != [_expr(size, {}) for size in at_one.shape]:
        return False
    return all(size == 1 or _expr(a, values) == _expr(b, {})
               for size, a, b in zip(sizes, general.stride(), at_one.stride()))


def _expr(value, values: dict):
    if isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
        return _expanded_at(value.node.expr, tuple(values.items()))
    return sympy.sympify(value)


@functools.lru_cache(maxsize=8192)
def _expanded_at(expr, values: tuple):
    """``expr`` with ``values`` put in, expanded (so equal sizes compare equal). Cached for
    the process: every export of a model compares the same sizes at the same points."""
    return sympy.expand(at_values(expr, dict(values)))


def substituted(env, value, values: dict):
    """A size, stride or symbolic scalar with ``values`` (``{symbol: 1}``) put in."""
    return _sub(env, value, values)


def contiguous_at(value: torch.Tensor, substitute=lambda expr: expr) -> bool:
    """Whether ``value`` is contiguous wherever ``substitute`` puts its sizes (by default,
    as they are), by comparing expressions, no question asked: every dim not of size 1 there
    has the stride of the dims after it (the symbolic sizes left may still be 1 at run time;
    their stride is then not read, so asking it too is only stricter)."""
    expected = sympy.Integer(1)
    for size, stride in reversed(list(zip(value.shape, value.stride()))):
        length = substitute(sym_expr(size))
        if length == 1:
            continue
        if sympy.expand(substitute(sym_expr(stride)) - expected) != 0:
            return False
        expected = sympy.expand(expected * length)
    return True
