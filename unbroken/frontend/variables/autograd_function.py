"""Custom ``torch.autograd.Function``: ``MyFunction.apply(*args)`` in traced code.

Eager runs the class's ``forward`` (under no_grad) and, when a gradient can flow, records its
``backward`` for the autograd pass. The export keeps both meanings:

- for inference (grad mode off, or no parameter or input of the export requires grad, so no
  gradient can reach the call) ``forward`` is inlined: its ops go into the graph like any
  user code, and ``ctx`` is a plain object whose ``save_for_backward`` and ``mark_*`` only
  record what they are given;
- when a gradient can flow, ``forward`` and ``backward`` are each traced into a subgraph and
  one ``torch.ops.higher_order.autograd_function_apply`` node is recorded (torch's own
  operator, which runs the forward subgraph and gives autograd the backward one): the program
  computes what eager computes, and training through it uses the user's ``backward``.
"""
from __future__ import annotations

import inspect

import torch
from torch.utils import _pytree as pytree

from ...symbolic.diagnostics.catalogue import graph_break
from ...symbolic.torch_compat import DEFAULT_SETUP_CONTEXT, FUNCTION_APPLY
from .constant import ConstantVariable
from .containers import TupleVariable
from .functions import TorchFunctionVariable
from .objects import construct_user_object
from .tensor import TensorVariable

__all__ = ["FunctionContext", "AutogradFunctionApplyVariable", "is_autograd_function_apply",
           "call_autograd_function"]



class FunctionContext:
    """What ``ctx`` is while a custom Function's ``forward``/``backward`` is traced (its
    methods are interpreted like user code): it keeps what forward saves, for backward."""

    def __init__(self, needs_input_grad, saved_tensors=()):
        self.needs_input_grad = needs_input_grad
        self.saved_tensors = saved_tensors
        self.non_differentiable = ()
        self.dirty = ()
        self.materialize_grads = True

    def save_for_backward(self, *tensors):
        self.saved_tensors = tensors

    def save_for_forward(self, *tensors):
        """Forward-mode AD only; nothing to keep for the exported program."""

    def mark_non_differentiable(self, *outputs):
        self.non_differentiable = outputs

    def mark_dirty(self, *tensors):
        self.dirty = tensors

    def set_materialize_grads(self, value):
        self.materialize_grads = value


# Attributes of FunctionContext that are bookkeeping, not user state carried to backward.
_CONTEXT_FIELDS = ("needs_input_grad", "saved_tensors", "non_differentiable", "dirty",
                   "materialize_grads")


def is_autograd_function_apply(fn, args) -> bool:
    """True for ``Function.apply`` called with a Function subclass as its first argument."""
    if fn is not FUNCTION_APPLY or not args:
        return False
    cls = args[0].as_constant() if args[0].is_constant() else None
    return isinstance(cls, type) and issubclass(cls, torch.autograd.Function)


def call_autograd_function(tx, fn, args, kwargs):
    """``cls.apply(*args, **kwargs)`` (``args[0]`` is the class tracker)."""
    cls, inputs = args[0].as_constant(), list(args[1:])
    if kwargs:
        inputs += _bind_keywords(tx, cls, inputs, kwargs)
    tensor_positions = [i for i, a in enumerate(inputs) if isinstance(a, TensorVariable)]
    if not (tx.output.grad_enabled and tx.output.any_requires_grad()):
        ctx = _context(tx, [ConstantVariable(False)] * len(inputs))
        return _run_forward(tx, cls, ctx, inputs)
    return _record_apply(tx, cls, inputs, tensor_positions)


def _bind_keywords(tx, cls, inputs, kwargs) -> list:
    """Keyword arguments of ``apply`` in the order of ``forward``'s parameters."""
    names = list(inspect.signature(cls.forward).parameters)[len(inputs) + _takes_ctx(cls):]
    unknown = set(kwargs) - set(names)
    if unknown:
        raise tx.user_exception(TypeError(f"{cls.__name__}.apply() got unexpected keyword "
                                          f"arguments {sorted(unknown)}"))
    return [kwargs[n] for n in names if n in kwargs]


def _takes_ctx(cls) -> bool:
    """Old-style ``forward(ctx, ...)``, or new style ``forward(...)`` + ``setup_context``."""
    return cls.setup_context is DEFAULT_SETUP_CONTEXT


def _context(tx, needs_input_grad: list, saved=()):
    """A traced ``FunctionContext`` (a user object: its methods are interpreted)."""
    return construct_user_object(
        tx, FunctionContext, [TupleVariable(needs_input_grad), TupleVariable(list(saved))], {})


def _run_forward(tx, cls, ctx, inputs):
    """Trace ``cls.forward`` (and ``setup_context``) with ``ctx``; its result tracker."""
    forward = tx.wrap(cls.forward)
    if _takes_ctx(cls):
        return forward.call(tx, [ctx, *inputs], {})
    output = forward.call(tx, list(inputs), {})
    tx.wrap(cls.setup_context).call(tx, [ctx, TupleVariable(list(inputs)), output], {})
    return output


def _record_apply(tx, cls, inputs, tensor_positions):
    """Trace forward and backward into subgraphs; one ``autograd_function_apply`` node."""
    recorder = tx.output.recorder
    operands = [inputs[i].meta for i in tensor_positions]
    needs = [ConstantVariable(i in tensor_positions and _differentiable(inputs[i].meta))
             for i in range(len(inputs))]
    with tx.output.branch():
        fwd = _trace_forward(tx, cls, inputs, tensor_positions, operands, needs)
    fwd_scope, outputs, spec, saved, saved_count, state, non_diff = fwd
    with tx.output.branch():
        bwd_scope = _trace_backward(tx, cls, outputs, saved, state, needs, tensor_positions)
    with tx.output.leaf_errors(cls.apply):
        results = recorder.record_autograd_function(
            (fwd_scope, bwd_scope), operands, outputs,
            non_differentiable_idx=non_diff, saved_for_backward_idx=list(range(saved_count)))
    return tx.wrap(pytree.tree_unflatten(results, spec))


def _differentiable(meta) -> bool:
    return meta.is_floating_point() or meta.is_complex()


def _trace_forward(tx, cls, inputs, tensor_positions, operands, needs):
    """The forward subgraph: tensor inputs in; (outputs, values backward reads) out."""
    recorder = tx.output.recorder
    stand_ins = recorder.open_branch(operands)
    try:
        inner = list(inputs)
        for position, meta in zip(tensor_positions, stand_ins):
            inner[position] = TensorVariable(meta)
        ctx = _context(tx, needs)
        output = _run_forward(tx, cls, ctx, inner)
        flat, spec = pytree.tree_flatten(output.unwrap(tx))
        if not flat or not all(isinstance(t, torch.Tensor) for t in flat):
            raise graph_break("UB113", f"the forward of the custom autograd.Function "
                              f"`{cls.__qualname__}` must return tensors only",
                              frames=tx.user_frames())
        saved_list = [t.unwrap(tx) for t in ctx.attributes["saved_tensors"].items(tx)]
        state = {n: v for n, v in ctx.attributes.items() if n not in _CONTEXT_FIELDS}
        stashed = [t.meta for t in state.values() if isinstance(t, TensorVariable)]
        non_diff = _indices(flat, ctx.attributes["non_differentiable"].items(tx), tx)
        if ctx.attributes["dirty"].items(tx):
            raise graph_break("UB121", f"the custom autograd.Function `{cls.__qualname__}` "
                              "modifies an input in place (ctx.mark_dirty)",
                              frames=tx.user_frames(),
                              details="Return a new tensor instead of changing the input.")
        saved = [*saved_list, *stashed]
        scope = recorder.close_branch([*flat, *saved], split=len(flat))
    except BaseException:
        recorder.abandon_branch()
        raise
    return scope, flat, spec, saved, len(saved_list), state, non_diff


def _indices(flat, chosen, tx) -> list[int]:
    metas = [c.unwrap(tx) for c in chosen]
    return [i for i, t in enumerate(flat) if any(t is m for m in metas)]


def _trace_backward(tx, cls, outputs, saved, state, needs, tensor_positions):
    """The backward subgraph: one gradient per forward output, then the saved values, in;
    one gradient per tensor input of ``apply`` out."""
    recorder = tx.output.recorder
    stand_ins = recorder.open_branch([*outputs, *saved])
    try:
        grads, inner_saved = stand_ins[:len(outputs)], stand_ins[len(outputs):]
        by_id = {id(outer): inner for outer, inner in zip(saved, inner_saved)}
        ctx = _context(tx, needs, [TensorVariable(m) for m in inner_saved[:len(saved)
                                                                         - _stashed(state)]])
        for name, value in state.items():
            if isinstance(value, TensorVariable):
                value = TensorVariable(by_id[id(value.meta)])
            ctx.raw_setattr(tx, name, value)
        result = tx.wrap(cls.backward).call(tx, [ctx, *[TensorVariable(g) for g in grads]], {})
        returned = result.items(tx) if isinstance(result.unwrap(tx), (tuple, list)) else [result]
        chosen = [returned[i] if i < len(returned) else ConstantVariable(None)
                  for i in tensor_positions]
        values = [None if c.is_constant() and c.as_constant() is None else c.unwrap(tx)
                  for c in chosen]
        if not all(v is None or isinstance(v, torch.Tensor) for v in values):
            raise graph_break("UB113", f"the backward of the custom autograd.Function "
                              f"`{cls.__qualname__}` must return tensors or None",
                              frames=tx.user_frames())
        return recorder.close_branch(values)
    except BaseException:
        recorder.abandon_branch()
        raise


def _stashed(state) -> int:

    return sum(isinstance(v, TensorVariable) for v in state.values())


class AutogradFunctionApplyVariable(TorchFunctionVariable):
    """``Function.apply`` (bound to a custom Function class by the class-method lookup): the
    class's forward/backward are traced (see the module docstring); called any other way it is
    an ordinary PyTorch call."""

    __slots__ = ()

    def call(self, tx, args, kwargs):
        if is_autograd_function_apply(self.fn, args):
            return call_autograd_function(tx, self.fn, args, kwargs)
        return super().call(tx, args, kwargs)
