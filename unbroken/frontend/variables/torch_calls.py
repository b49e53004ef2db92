"""Calls into PyTorch functions: leaf calls, with the few functions that need special meaning
during export."""
from __future__ import annotations

import functools
import inspect

import torch
from torch.utils import _pytree as pytree

from ...symbolic.diagnostics.catalogue import GraphBreakError, graph_break
from ...symbolic.torch_compat import (
    FUNCTORCH_DIFFERENTIATION,
    MODE_PUSHES,
    TORCHSCRIPT_CALLABLES,
    collective_remaps,
    export_predicate,
    map_function,
    scan_function,
    set_grad_enabled,
    version_counter,
)
from .base import hashable
from .constant import ConstantVariable
from .containers import ListVariable, SequenceVariable, TupleVariable
from .nn_fast_paths import fast_path_handlers
from .tensor import LAYOUT_ALIASING, SymbolicVariable, TensorVariable, note_layout_aliasing
from .tensor_data import symbolic_data_tensor

__all__ = ["call_torch_function"]


def _constant(value):
    return lambda tx, args, kwargs: ConstantVariable(value)


def _refuse_control_flow(name):
    def handler(tx, args, kwargs):
        raise graph_break("UB113", f"`{name}` (control-flow operators are not supported yet)",
                          frames=tx.user_frames())

    return handler


def _check(tx, args, kwargs):
    """``torch._check(cond, msg)``: a constant condition is checked now; a symbolic one is
    recorded by the shape environment as a fact (``expect_true``)."""
    condition = args[0]
    if isinstance(condition, ConstantVariable):
        if not condition.as_constant():
            message = kwargs.get("message") or (args[1] if len(args) > 1 else None)
            text = "torch._check failed"
            if message is not None and hasattr(message, "call"):
                try:
                    text = message.call(tx, [], {}).as_constant()
                except GraphBreakError:  # the message itself cannot run: the generic text
                    pass
            raise tx.user_exception(RuntimeError(text))
        return ConstantVariable(None)
    return tx.call_leaf(torch._check, [condition], {})


def _a_size(value, max=None) -> None:  # noqa: A002 (torch's keyword)
    """What ``torch._check_is_size(value, max=...)`` asserts; the shape environment then
    treats an unbacked ``value`` as a size (its range starts at 0, and ends at ``max``)."""
    torch._check(value >= 0)
    if max is not None:
        torch._check(value <= max)


def _check_is_size(tx, args, kwargs):
    """``torch._check_is_size(n, message=None, *, max=None)``: ``0 <= n (<= max)``, checked
    now for constants, else facts."""
    value, upper = args[0], kwargs.get("max", ConstantVariable(None))
    if isinstance(value, ConstantVariable) and upper.is_constant():
        bound = upper.as_constant()
        if value.as_constant() < 0 or (bound is not None and value.as_constant() > bound):
            raise tx.user_exception(RuntimeError(
                f"Expected {value.as_constant()} to be a size (>= 0"
                + (f" and <= {bound})" if bound is not None else ")")))
        return ConstantVariable(None)
    return tx.call_leaf(_a_size, [value], {"max": upper})


def _contains_tensor(tracker) -> bool:
    if isinstance(tracker, TensorVariable):
        return True
    elements = getattr(tracker, "elements", None)
    return elements is not None and any(_contains_tensor(e) for e in elements)


def _tensor_from_data(name):
    def handler(tx, args, kwargs):
        if name == "as_tensor" and args and isinstance(args[0], TensorVariable):
            # a conversion of one tensor (returns it when nothing changes): no values read
            return tx.call_leaf(torch.as_tensor, args, kwargs)
        if args and _contains_tensor(args[0]):
            raise graph_break(
                "UB105", f"`{name}()` of a list that holds tensors reads their values",
                frames=tx.user_frames(),
                details="Use torch.stack([...]) (then .to(dtype) if needed) to build a tensor "
                        "from tensors without reading their values.")
        if len(args) == 1:
            built = symbolic_data_tensor(tx, args[0], kwargs)
            if built is not None:
                return built
        return tx.call_leaf(getattr(torch, name), args, kwargs)

    return handler


def _is_grad_enabled(tx, args, kwargs):
    return ConstantVariable(tx.output.grad_enabled)


def _is_inference_mode_enabled(tx, args, kwargs):
    return ConstantVariable(tx.output.inference_mode)


def _set_grad_enabled(tx, args, kwargs):
    """``torch._C._set_grad_enabled(flag)``: a region that only a later call closes."""
    tx.output.set_grad_mode(bool(args[0].as_constant()))
    return ConstantVariable(None)


def _wrap_with_set_grad_enabled(tx, args, kwargs):
    """``torch.ops.higher_order.wrap_with_set_grad_enabled(flag, body, *operands)``: torch's
    spelling of a grad-mode region (the ``module()`` of an exported program with ``no_grad``
    in it): the region recorded around an inlined call of ``body``."""
    if len(args) < 2 or kwargs or not args[0].is_constant():
        raise graph_break("UB108", "wrap_with_set_grad_enabled called with arguments other "
                          "than (a constant flag, a module, operands...)",
                          frames=tx.user_frames())
    region = tx.output.set_grad_mode(bool(args[0].as_constant()))
    result = args[1].call(tx, list(args[2:]), {})
    tx.output.restore_grad_mode(region)
    return result


def _global_state(name):
    def handler(tx, args, kwargs):
        raise graph_break("UB107", f"`{name}()` changes PyTorch's global state, which an "
                          "exported program cannot replay", frames=tx.user_frames(),
                          details="Set it before calling the model (and before export).")

    return handler


_GLOBAL_STATE_SETTERS = ("manual_seed", "seed", "set_rng_state", "set_default_dtype",
                         "set_default_device", "set_default_tensor_type",
                         "use_deterministic_algorithms", "set_num_threads",
                         "set_num_interop_threads", "set_printoptions",
                         "set_float32_matmul_precision", "set_flush_denormal")

_SPECIAL = {
    torch.tensor: _tensor_from_data("tensor"),
    torch.as_tensor: _tensor_from_data("as_tensor"),
    torch._check: _check,
    torch._check_is_size: _check_is_size,
    torch.cond: lambda tx, args, kwargs: call_cond(tx, *args, **kwargs),
    torch.is_grad_enabled: _is_grad_enabled,
    torch.is_inference_mode_enabled: _is_inference_mode_enabled,
    set_grad_enabled: _set_grad_enabled,
}
for _name in _GLOBAL_STATE_SETTERS:
    for _owner in (torch, torch.random):
        if hasattr(_owner, _name):
            _SPECIAL[getattr(_owner, _name)] = _global_state(f"torch.{_name}")
_SPECIAL[torch.ops.higher_order.cond] = _SPECIAL[torch.cond]
_SPECIAL.update(fast_path_handlers(_is_grad_enabled))  # torch.nn's fast paths, as in eager
_SPECIAL[torch.ops.higher_order.wrap_with_set_grad_enabled] = _wrap_with_set_grad_enabled
_SPECIAL[map_function] = \
    lambda tx, args, kwargs: call_map(tx, *args)
_SPECIAL[scan_function] = lambda tx, args, kwargs: call_scan(tx, *args, **kwargs)
_SPECIAL[torch.while_loop] = lambda tx, args, kwargs: call_while_loop(tx, *args, **kwargs)
_SPECIAL[torch.ops.higher_order.while_loop] = \
    lambda tx, args, kwargs: _while_loop_op(tx, *args, **kwargs)
def _refuse_differentiation(transform):
    def handler(tx, args, kwargs):
        raise graph_break("UB108", f"`{transform}` inside forward(): a transform that "
                          "differentiates (or functionalizes) the code it runs cannot be "
                          "captured in the program (torch.export refuses it too)",
                          frames=tx.user_frames(),
                          hint="Compute the derivative outside the exported model, or export "
                               "the model and apply torch.func to `ep.module()`.")

    return handler


for _fn, _transform in FUNCTORCH_DIFFERENTIATION.items():  # torch.vmap is traced
    _SPECIAL[_fn] = _refuse_differentiation(_transform)
def _refuse_mode_push(tx, args, kwargs):
    """A torch function mode or dispatch mode of the program's own entered inside forward():
    its ``__torch_function__``/``__torch_dispatch__`` would have to run, interpreted, around
    every torch call of the block; entered natively it would run unseen (and the trace's own
    modes would not see what it does). torch's own function modes are entered natively
    before any of this is reached (``ContextManagerVariable``)."""
    mode = args[0].python_type().__name__ if args else "mode"
    raise graph_break("UB110", f"the mode `{mode}` entered inside forward(): a torch function "
                      "or dispatch mode of the program's own cannot be captured",
                      frames=tx.user_frames(),
                      hint="Enter the mode around the export call (it then shapes what is "
                           "exported, as torch.export's), or call what it does explicitly "
                           "inside forward().")


for _push in MODE_PUSHES:
    _SPECIAL[_push] = _refuse_mode_push
for _name in ("scan", "associative_scan"):
    _op = getattr(torch.ops.higher_order, _name, None)
    if _op is not None:
        _SPECIAL[_op] = _refuse_control_flow(f"torch.ops.higher_order.{_name}")


def call_cond(tx, pred, true_fn, false_fn, operands=None):
    """``torch.cond(pred, true_fn, false_fn, operands)``.

    A constant predicate just calls its branch. Otherwise each branch is traced into its own
    subgraph (operands in, tensors out; values it reads from outside become extra operands)
    and one ``higher_order.cond`` node is recorded. Branches must return the same structure of
    tensors with equal shapes and dtypes, and may not change state created outside them.

    A branch may also return Python ints (constants or sizes) where the other returns one: as
    torch.export, each becomes a value the program reads from the cond's result (a 0-d tensor
    in the branch, ``.item()`` after it), bounded by the two constants when both are constants
    (run-time assertions); an int both branches return is that int.
    """
    operands = operands.items(tx) if operands is not None else []
    if pred.is_constant():
        branch = true_fn if pred.as_constant() else false_fn
        return branch.call(tx, operands, {})
    if isinstance(pred, SymbolicVariable):
        pred = tx.call_leaf(torch.scalar_tensor, [pred], {"dtype": ConstantVariable(torch.bool)})
    if not isinstance(pred, TensorVariable) or pred.meta.numel() != 1:
        raise graph_break("UB113", "the predicate of torch.cond must be a bool or a tensor with "
                          "one element", frames=tx.user_frames())
    if not all(isinstance(o, TensorVariable) for o in operands):
        raise graph_break("UB113", "the operands of torch.cond must be tensors",
                          frames=tx.user_frames())
    recorder = tx.output.recorder
    metas = [o.meta for o in operands]
    numbers_t, numbers_f = [], []
    traced = [_trace_branch(tx, fn, metas, numbers=numbers)
              for fn, numbers in ((true_fn, numbers_t), (false_fn, numbers_f))]
    (scope_t, outs_t, spec_t), (scope_f, outs_f, spec_f) = traced
    _check_branches_agree(tx, outs_t, spec_t, outs_f, spec_f)
    with tx.output.leaf_errors(torch.cond):
        results = recorder.record_cond(pred.meta, (scope_t, scope_f), metas, outs_t)
    results = _read_numbers(tx, list(results), numbers_t, numbers_f)
    return tx.wrap(pytree.tree_unflatten(results, spec_t))


def _branch_numbers(tx, flat: list, numbers: list) -> list:
    """``flat`` (a branch's flattened result) with each Python int (a constant, or a symbolic
    size) made a 0-d tensor in the branch; ``numbers`` gets, per leaf, None for a tensor or
    ``(int, the int or SymInt)``."""
    made = []
    for value in flat:
        if isinstance(value, torch.Tensor):
            numbers.append(None)
            made.append(value)
            continue
        kind = int if type(value) is torch.SymInt else type(value)
        if kind is not int:  # as eager's torch.cond (2.13-2.15): no floats, bools, objects
            raise graph_break("UB113", "a torch.cond branch must return tensors or ints "
                              f"(it returns {type(value).__name__})", frames=tx.user_frames())
        numbers.append((kind, value))
        made.append(tx.call_leaf(torch.scalar_tensor, [tx.wrap(value)],
                                 {"dtype": ConstantVariable(torch.int64)}).meta)
    return made


def _same_number(a, b) -> bool:
    """The same int, or the same size expression (``x.shape[0]`` in both branches)."""
    if type(a) is int or type(b) is int:
        return type(a) is type(b) and a == b
    return a.node.expr == b.node.expr


def _read_numbers(tx, results: list, numbers_t: list, numbers_f: list) -> list:
    """The cond's results with the numbers the branches returned read back (see
    :func:`call_cond`)."""
    for index, (a, b) in enumerate(zip(numbers_t, numbers_f)):
        if a is None and b is None:
            continue
        if a is None or b is None or a[0] is not b[0]:
            raise graph_break("UB113", "the branches of torch.cond return an int in one and a "
                              "tensor in the other",
                              frames=tx.user_frames())
        (_, t), (_, f) = a, b
        if _same_number(t, f):  # both branches return it: the number itself
            results[index] = t
            continue
        value = tx.call_leaf(torch.Tensor.item, [TensorVariable(results[index])], {}).unwrap(tx)
        if type(t) is int and type(f) is int:
            torch._check(value >= min(t, f))
            torch._check(value <= max(t, f))
        results[index] = value
    return results


def _trace_branch(tx, fn, metas, *, single: bool = False, numbers: list | None = None):
    """``fn`` traced into a subgraph: its scope, flat outputs and their spec. ``numbers``
    (a list to fill, for cond): Python numbers it returns become 0-d tensors
    (:func:`_branch_numbers`)."""
    recorder = tx.output.recorder
    with tx.output.branch():
        stand_ins = recorder.open_branch(metas)
        try:
            out = fn.call(tx, [TensorVariable(m) for m in stand_ins], {})
            flat, spec = pytree.tree_flatten(out.unwrap(tx))
            if numbers is not None:
                flat = _branch_numbers(tx, flat, numbers)
            if single and len(flat) != 1:
                raise graph_break("UB113", "while_loop's cond_fn must return one boolean "
                                  "tensor", frames=tx.user_frames())
            if single and type(flat[0]) in (bool, torch.SymBool):  # `i.item() < n`, as torch
                flat = [tx.call_leaf(torch.scalar_tensor, [tx.wrap(flat[0])],
                                     {"dtype": ConstantVariable(torch.bool)}).meta]
            if not all(isinstance(t, torch.Tensor) for t in flat):
                what = "while_loop's cond_fn" if single else "a torch.cond branch"
                raise graph_break("UB113", f"{what} must return tensors only",
                                  frames=tx.user_frames())
            return recorder.close_branch(flat, single=single), flat, spec
        except BaseException:
            recorder.abandon_branch()
            raise


def _check_branches_agree(tx, outs_t, spec_t, outs_f, spec_f):
    same = spec_t == spec_f and len(outs_t) == len(outs_f) and all(
        a.dtype == b.dtype and len(a.shape) == len(b.shape)
        and all(str(x) == str(y) for x, y in zip(a.shape, b.shape))
        for a, b in zip(outs_t, outs_f))
    if not same:
        describe = lambda outs: ", ".join(f"{t.dtype}{list(t.shape)}" for t in outs)  # noqa: E731
        raise graph_break("UB113", "the branches of torch.cond (or a while_loop body and its "
                          f"carried inputs) differ: ({describe(outs_t)}) against "
                          f"({describe(outs_f)})", frames=tx.user_frames())


def call_while_loop(tx, cond_fn, body_fn, carried):
    """``torch.while_loop(cond_fn, body_fn, carried_inputs)``: both functions are traced into
    subgraphs over the carried tensors (values they read from outside become extra inputs),
    and one ``higher_order.while_loop`` node is recorded: the number of iterations is decided
    at run time. The body must return tensors shaped like the carried ones."""
    values = carried.items(tx)
    if not values or not all(isinstance(v, TensorVariable) for v in values):
        raise graph_break("UB113", "the carried inputs of while_loop must be tensors",
                          frames=tx.user_frames())
    metas = [v.meta for v in values]
    cond_scope, (pred,), _ = _trace_branch(tx, cond_fn, metas, single=True)
    if pred.numel() != 1 or pred.dtype != torch.bool:
        raise graph_break("UB113", "while_loop's cond_fn must return a boolean tensor with one "
                          "element", frames=tx.user_frames())
    body_scope, outs, _ = _trace_branch(tx, body_fn, metas)
    _check_branches_agree(tx, outs, None, metas, None)
    with tx.output.leaf_errors(torch.while_loop):
        results = tx.output.recorder.record_while_loop((cond_scope, body_scope), metas)
    return tx.wrap(tuple(results))


def _while_loop_op(tx, cond_fn, body_fn, carried, additional_inputs=None):
    """``torch.ops.higher_order.while_loop(cond_fn, body_fn, carried, additional_inputs)``, the
    operator form: its functions also take the additional inputs, supported when there are
    none (``torch.while_loop`` never passes any)."""
    if additional_inputs is not None and additional_inputs.items(tx):
        raise graph_break("UB113", "higher_order.while_loop with additional_inputs (read the "
                          "values from the enclosing scope instead, as torch.while_loop does)",
                          frames=tx.user_frames())
    return call_while_loop(tx, cond_fn, body_fn, carried)


def call_map(tx, f, xs, *args):
    """``torch._higher_order_ops.map.map(f, xs, *args)``: ``f`` applied to each slice of ``xs``
    along its first dim, results stacked. The first dim is known at export time, so the loop
    is unrolled into the graph (each call traced like any user code); a dynamic first dim is
    refused (the number of iterations would be specialized)."""
    leaves = xs.items(tx) if not isinstance(xs, TensorVariable) else [xs]
    if not leaves or not all(isinstance(t, TensorVariable) for t in leaves):
        raise graph_break("UB113", "map() needs a tensor (or a tuple of tensors) to map over",
                          frames=tx.user_frames())
    count = leaves[0].meta.shape[0]
    if not isinstance(count, int):
        raise graph_break("UB117", "map() over a dynamic first dimension (the loop would be "
                          "unrolled for one size only)", frames=tx.user_frames())
    results = []
    for index in range(count):
        slices = [tx.call_leaf(torch.select, [t, ConstantVariable(0), ConstantVariable(index)],
                               {}) for t in leaves]
        item = slices[0] if isinstance(xs, TensorVariable) else xs.rebuild(slices)
        results.append(f.call(tx, [item, *args], {}))
    flat = [pytree.tree_flatten(r.unwrap(tx)) for r in results]
    columns = zip(*(leaves for leaves, _ in flat))
    stacked = [tx.call_leaf(torch.stack, [ListVariable([tx.wrap(v) for v in column])], {})
               for column in columns]
    return tx.wrap(pytree.tree_unflatten([s.unwrap(tx) for s in stacked], flat[0][1]))


def call_scan(tx, combine_fn, init, xs, dim=None, reverse=None, length=None):
    """``torch._higher_order_ops.scan(combine_fn, init, xs, dim=0, reverse=False)`` (and
    torch 2.14's ``length``): ``(carry, y) = combine_fn(carry, x)`` for each slice ``x`` of
    ``xs`` along ``dim`` (last to first when ``reverse``), the final carry and the ``y``s
    stacked along ``dim``. As for ``map``, the number of steps is known at export time and
    the loop is unrolled (each call traced like any user code); a dynamic scan dim is refused.
    The carry must keep its structure, shapes and dtypes from step to step (torch checks it
    too); torch's checks of the arguments raise its errors."""
    def fail(message):
        return tx.user_exception(RuntimeError(message))

    dim = 0 if dim is None else dim.as_constant()
    reverse = False if reverse is None else reverse.as_constant()
    length = None if length is None else length.as_constant()
    init_leaves, _ = pytree.tree_flatten(init.unwrap(tx))
    xs_leaves, xs_spec = pytree.tree_flatten(xs.unwrap(tx))
    has_tensors = any(isinstance(leaf, torch.Tensor) for leaf in xs_leaves)
    if length is not None and (type(length) is not int or length < 0):
        raise fail(f"scan() length must be a non-negative integer, got {length!r}")
    if not has_tensors and length is None:
        return TupleVariable([init, ListVariable([])])
    if not has_tensors and length == 0:
        raise graph_break("UB113", "scan() with length=0 and no xs tensors (torch.compile "
                          "refuses it too)", frames=tx.user_frames())
    if type(dim) is not int:
        raise fail("Dim must be an int, but got " + str(type(dim)))
    if type(reverse) is not bool:
        raise fail("Reverse must be a bool, but got " + str(type(reverse)))
    if not init_leaves:
        raise fail("scan() operator requires init leaves.")
    for leaf in init_leaves:
        if not isinstance(leaf, torch.Tensor):
            raise fail(f"All init leaves must be a Tensor but got {leaf}")
    if has_tensors:
        for leaf in xs_leaves:
            if not isinstance(leaf, torch.Tensor):
                raise fail(f"All xs leaves must be a Tensor but got {leaf}")
        dim = dim + xs_leaves[0].ndim if -xs_leaves[0].ndim <= dim < 0 else dim
        if any(leaf.ndim <= dim for leaf in xs_leaves) or any(
                isinstance(leaf.shape[dim], int) and leaf.shape[dim] == 0 for leaf in xs_leaves):
            raise fail("All xs leaves must at least have 'dim' number of dimensions and scan "
                       "dimension > 0")
        steps = xs_leaves[0].shape[dim]
        if not isinstance(steps, int):
            raise graph_break("UB117", "scan() over a dynamic dimension (the loop would be "
                              "unrolled for one size only)", frames=tx.user_frames())
        if length is not None and steps != length:
            raise fail(f"scan() length={length} does not match xs size along dim={dim}: {steps}")
    else:
        steps = length
    carry, ys = init, []
    order = range(steps - 1, -1, -1) if reverse else range(steps)
    for index in order:
        x = ConstantVariable(None)
        if has_tensors:
            slices = [tx.call_leaf(torch.select, [tx.wrap(leaf), ConstantVariable(dim),
                                                  ConstantVariable(index)], {}).unwrap(tx)
                      for leaf in xs_leaves]
            x = tx.wrap(pytree.tree_unflatten(slices, xs_spec))
        inputs = [t for t in pytree.tree_leaves((carry.unwrap(tx), x.unwrap(tx)))
                  if isinstance(t, torch.Tensor)]
        versions = [version_counter(t) for t in inputs]
        step = combine_fn.call(tx, [carry, x], {})
        pair = step.items(tx) if isinstance(step, SequenceVariable) else None
        if pair is None or len(pair) != 2:
            raise graph_break("UB113", "scan's combine_fn must return a pair (next carry, "
                              f"output), not {step.describe()}", frames=tx.user_frames())
        _check_carry_kept(tx, init, pair[0])
        _check_scan_step_pure(tx, inputs, versions, pytree.tree_leaves(step.unwrap(tx)))
        carry = pair[0]
        ys.append(pytree.tree_flatten(pair[1].unwrap(tx)))
    if reverse:
        ys.reverse()  # each output at the index of the slice it came from
    spec = ys[0][1]
    if not all(isinstance(leaf, torch.Tensor) for leaf in ys[0][0]):
        raise graph_break("UB113", "scan's combine_fn must output tensors",
                          frames=tx.user_frames())
    stacked = []
    for column in zip(*(leaves for leaves, _ in ys)):
        out = tx.call_leaf(torch.stack, [ListVariable([tx.wrap(v) for v in column])], {})
        if dim != 0 and dim < out.unwrap(tx).ndim:
            out = tx.call_leaf(torch.movedim, [out, ConstantVariable(0), ConstantVariable(dim)],
                               {})
        stacked.append(out.unwrap(tx))
    return TupleVariable([carry, tx.wrap(pytree.tree_unflatten(stacked, spec))])


def _check_scan_step_pure(tx, inputs: list, versions: list, outputs: list) -> None:
    """What torch.scan refuses of a combine_fn (eager runs it through torch.compile, which
    checks): writing to its carry or slice, or returning a tensor that shares memory with
    one of them or with another of its outputs (``return h, h``; ``.clone()`` one)."""
    if any(version_counter(t) != v for t, v in zip(inputs, versions)):
        raise graph_break("UB113", "scan's combine_fn writes to its carry or its slice of xs in "
                          "place (torch.scan refuses it)", frames=tx.user_frames(),
                          hint="Compute new tensors instead of writing in place.")
    aliases = tx.output.recorder.aliases
    taken = {id(aliases.root(t)) for t in inputs}
    for out in outputs:
        if not isinstance(out, torch.Tensor):
            continue
        root = id(aliases.root(out))
        if root in taken:
            raise graph_break("UB113", "scan's combine_fn returns a tensor that shares memory "
                              "with its carry, its slice of xs or another of its outputs "
                              "(torch.scan refuses it)", frames=tx.user_frames(),
                              hint="Return a `.clone()` of it.")
        taken.add(root)


def _check_carry_kept(tx, init, carry) -> None:
    """A scan's next carry has the structure, shapes and dtypes of its first."""
    before, before_spec = pytree.tree_flatten(init.unwrap(tx))
    after, after_spec = pytree.tree_flatten(carry.unwrap(tx))
    same = before_spec == after_spec and all(
        isinstance(b, torch.Tensor) and isinstance(a, torch.Tensor) and a.dtype == b.dtype
        and tuple(a.shape) == tuple(b.shape) for a, b in zip(after, before))
    if not same:
        raise graph_break("UB113", "scan's combine_fn must return a next carry with the "
                          "structure, shapes and dtypes of init (torch.scan requires it)",
                          frames=tx.user_frames())


def call_torch_function(tx, fn, args, kwargs, interpreted=None):
    """Call the PyTorch callable ``fn`` on trackers. ``interpreted``: for a function written
    in Python, () -> its call interpreted instead, used when an argument has no native value to
    hand over (an object made in the trace holding a traced method: a ``Transform`` subclass
    whose ``__call__`` is torch's and whose ``_call`` is the program's)."""
    handler = _special(fn)
    if handler is not None:
        return handler(tx, args, kwargs)
    if hashable(fn) and fn in _collectives()[0]:
        return _call_collective(tx, fn, args, kwargs)
    if getattr(fn, "__qualname__", "") == "Function.apply":
        raise graph_break("UB113", "a custom torch.autograd.Function", frames=tx.user_frames())
    _refuse_torchscript(tx, fn, [*args, *kwargs.values()])
    targets = _out_targets(tx, kwargs)
    result = tx.output.call_leaf(tx, fn, args, kwargs, opaque=interpreted)
    if targets:
        _check_out_written(tx, fn, targets)
    if getattr(fn, "__name__", None) in LAYOUT_ALIASING and fn in (torch.reshape, torch.flatten,
                                                                   torch.unflatten) \
            and args and isinstance(args[0], TensorVariable):
        note_layout_aliasing(tx, args[0], result)
    return result


def _out_targets(tx, kwargs) -> list:
    """``(meta tensor, its producer node)`` for each ``out=`` tensor of a call."""
    out = kwargs.get("out")
    trackers = out.items(tx) if isinstance(out, SequenceVariable) else [out]
    builder = tx.output.recorder.builder
    return [(t.meta, builder.producer(t.meta)) for t in trackers
            if isinstance(t, TensorVariable)]


def _check_out_written(tx, fn, targets) -> None:
    """Every ``out=`` tensor of the call was written where the recorder saw it. A kernel that
    writes its result below torch's dispatcher (``linalg.matrix_rank``'s ``out=`` path) would
    otherwise leave the program without the write: refused."""
    builder = tx.output.recorder.builder
    for meta, before in targets:
        if builder.producer(meta) is before:
            name = getattr(fn, "__qualname__", None) or getattr(fn, "__name__", str(fn))
            raise graph_break(
                "UB121", f"`{name}` writes its `out=` tensor inside PyTorch, where the trace "
                "cannot see the write", frames=tx.user_frames(),
                hint="Call it without `out=` and use its return value (or copy it: "
                     "`out.copy_(result)`).")


# TorchScript's compiled callables (TORCHSCRIPT_CALLABLES): run natively on traced tensors
# they would execute their compiled code with `torch.jit.is_scripting()` True, or hand the
# tensors back to their Python source (which answers False): neither is what the trace can
# record faithfully.


def _refuse_torchscript(tx, fn, trackers) -> None:
    """A TorchScript function reaching a PyTorch callable as an argument (a wrapper around its
    ``__call__``, as torch's test utilities install) is refused as a direct call is."""
    for tracker in trackers:
        value = getattr(tracker, "value", None)
        if isinstance(value, TORCHSCRIPT_CALLABLES):
            name = getattr(value, "name", None) or getattr(value, "__name__", "?")
            raise graph_break(
                "UB108", f"the TorchScript function `{name}` is called (through "
                f"`{getattr(fn, '__qualname__', fn)}`)", frames=tx.user_frames(),
                hint="Call the Python function it was scripted from instead (export traces "
                     "Python; `torch.jit.is_scripting()` answers False there, as in eager "
                     "Python).")


@functools.cache
def _collectives() -> tuple[dict, dict]:
    return collective_remaps()


def _call_collective(tx, fn, args, kwargs):
    """``dist.all_reduce(x, op, group)`` and the other in-place c10d collectives: their ops
    take the process group and the reduce op as TorchScript objects, which no graph can hold.
    As torch's tracer does, each becomes its functional counterpart (the group by name, the
    op as a string) written back into its tensor argument; ``async_op=True`` is refused (the
    work handle it returns cannot be captured)."""
    remaps, reduce_ops = _collectives()
    bound = inspect.signature(fn).bind(*args, **kwargs).arguments
    if "async_op" in bound and bound["async_op"].unwrap(tx):
        raise graph_break("UB108", f"`torch.distributed.{fn.__name__}` with async_op=True: "
                          "its work handle cannot be captured", frames=tx.user_frames(),
                          hint="Call it with async_op=False (the default).")
    if "op" in bound:
        op = bound["op"].unwrap(tx)
        if op not in reduce_ops:
            raise graph_break("UB108", f"`torch.distributed.{fn.__name__}` with the reduce op "
                              f"{op!r}", frames=tx.user_frames())
        bound["op"] = ConstantVariable(reduce_ops[op])
    with tx.output.leaf_errors(fn):
        tx.call_leaf(remaps[fn], [], dict(bound))
    return ConstantVariable(None)


def _special(fn):
    """The special handler of ``fn``, looking through wrappers: importing torch._dynamo
    replaces some functions (``torch.manual_seed``) by wrappers with ``__wrapped__``."""
    while fn is not None and hashable(fn):
        if fn in _SPECIAL:
            return _SPECIAL[fn]
        known, answer = export_predicate(fn)  # torch.compiler.is_compiling() and kin
        if known:
            return _constant(answer)
        fn = getattr(fn, "__wrapped__", None)
    return None


