"""``ExportedProgram.module()``: the program as a callable ``torch.fx.GraphModule``.

The module is the one torch's own tools expect (AOTInductor asserts a ``GraphModule``):
torch's unlifting (``torch.export._unlift``) puts the parameters and buffers back under their
original FQNs (``lin.weight``, in a submodule hierarchy), turns mutation outputs into in-place
copies at the end of the graph (parameters, buffers, user inputs: :func:`write_back` copies
with autograd history exactly when eager's write had it) and gives ``forward`` the original
argument names and pytree structure. unbroken adds its input checks, as a forward pre-hook
:class:`~unbroken.ir.input_checks.InputGuard` (see :mod:`unbroken.ir.input_checks`).

The module's class is :class:`ExportedModule` (torch's stateful graph module, adopted): its
call gives the caller's grad mode back however the graph ends, and a kernel failure on an
input laid out unlike the example (a ``reshape`` the trace recorded as a view) is reported as
an InputMismatchError naming that input.

While the module is being traced (``torch.compile``, ``torch.export``, unbroken's own export,
fake tensors), its call is the plain module call.
"""
from __future__ import annotations

import operator

import torch
import torch.utils._pytree as pytree
from torch.fx.node import has_side_effect

from unbroken.ir.input_checks import InputGuard, is_traced, mismatch
from unbroken.ir.meta_keys import EAGER_REFUSES, SAVED_THEN_WRITTEN
from unbroken.ir.saved_tensors import refuse_backward
from unbroken.symbolic.torch_compat import StatefulGraphModule, unlift_lifted_states

__all__ = ["ExportedModule", "build_module"]


class ExportedModule(StatefulGraphModule):
    """The class of ``ExportedProgram.module()``: torch's stateful graph module (same
    attributes, hooks and code), whose call also

    - gives the caller's grad mode back however the graph ends: the graph sets grad mode in
      its ``no_grad`` regions, and an exception inside one would otherwise leave it set;
    - reports a kernel failure on an input laid out unlike the example (a ``reshape`` the
      trace recorded as a view) as an InputMismatchError naming the input.

    While traced (``torch.compile``, fake or meta inputs) the call is the plain module call.
    A module instance gets a subclass of this class of its own, as every ``GraphModule`` does
    (:func:`_adopt`), so ``recompile()`` and ``copy.deepcopy`` keep the behaviour.
    """

    def __call__(self, *args, **kwargs):
        if torch.compiler.is_compiling() or is_traced(pytree.tree_leaves((args, kwargs))):
            return super().__call__(*args, **kwargs)
        guard = self.__dict__.get("_unbroken_guard")
        with torch.set_grad_enabled(torch.is_grad_enabled()):
            try:
                return super().__call__(*args, **kwargs)
            except RuntimeError as error:
                if guard is not None:
                    guard.blame_layout(args, kwargs, error)
                raise


def _adopt(module: torch.fx.GraphModule) -> None:
    """Make torch's unlifted ``module`` an :class:`ExportedModule` (its own subclass, named as
    ``GraphModule`` names the per-instance classes it creates) and regenerate its code."""

    class GraphModuleImpl(ExportedModule):
        pass

    module.__class__ = GraphModuleImpl
    module.recompile()


def build_module(program) -> ExportedModule:
    """``ExportedProgram.module()``: see the module docstring."""
    module = unlift_lifted_states(program, check_guards=False)
    module.validate_inputs = False  # torch's own pre-hook: ours below says it in our words
    _adopt(module)
    _write_backs(module)
    _written_states_returned(module)
    _differentiable_copies(module)
    _eager_refusal_checks(module)
    _saved_then_written(module)
    guard = InputGuard(program)
    module.__dict__["_unbroken_guard"] = guard
    module.register_forward_pre_hook(guard, with_kwargs=True)
    module.check_inputs = guard.check_inputs  # AdditionalInputs: admitted without running
    return module


def _write_backs(module: torch.fx.GraphModule) -> None:
    """The ``copy_`` nodes torch's unlifting appends for mutation outputs (into ``get_attr``
    parameters and buffers, and into user-input placeholders) call :func:`write_back`, which
    copies as eager's in-place write left the tensor (with autograd history or without)."""
    graph = module.graph
    for node in list(graph.nodes):
        if node.target is not torch.ops.aten.copy_.default:
            continue
        if node.args[0].op == "get_attr":
            node.target = write_back
            _read_a_snapshot(graph, node.args[0], node)
        elif node.args[0].op == "placeholder":
            node.target = write_back
    module.recompile()


def _written_states_returned(module: torch.fx.GraphModule) -> None:
    """An output that is the final value of a parameter, buffer or input the program writes is,
    in eager, that tensor itself (an in-place op returns its argument): the module returns the
    tensor :func:`write_back` wrote. Its ``requires_grad`` is then the tensor's own (an input that
    requires grad, written under no_grad and returned from a call under no_grad, still
    requires grad) and ``out is x`` holds, as in eager. The output may read the value through
    ``passes.functionalize``'s straight-through (a write autograd did not see, gradient the
    identity to the tensor): returning the tensor computes the same."""
    graph = module.graph
    written = {node.args[1]: node for node in graph.nodes if node.target is write_back}
    if not written:
        return
    output = next(n for n in graph.nodes if n.op == "output")

    def state_of(value):
        if not isinstance(value, torch.fx.Node):
            return None
        if value in written:
            return written[value]
        parts = _straight_through_parts(value)
        if parts is not None and parts[0] in written:
            write = written[parts[0]]
            target = write.args[0]
            anchor = parts[1]
            if anchor is target or (anchor.target is torch.ops.aten.clone.default
                                    and anchor.args[0] is target):
                return write
        return None

    def returned(value):
        write = state_of(value)
        return value if write is None else write

    new_args = torch.fx.node.map_arg(output.args, returned)
    if new_args != output.args:
        output.args = new_args
        module.recompile()


def _straight_through_parts(node: torch.fx.Node):
    """``(new, anchor)`` when ``node`` is ``sub(detach(new), nan_to_num(sub(detach(anchor),
    anchor), 0, 0, 0))`` (``passes.functionalize``'s read of a value written where autograd
    did not see it), else None."""
    aten = torch.ops.aten
    if node.target is not aten.sub.Tensor or len(node.args) != 2:
        return None
    leaf, zero = node.args
    if not (isinstance(leaf, torch.fx.Node) and leaf.target is aten.detach.default
            and isinstance(zero, torch.fx.Node) and zero.target is aten.nan_to_num.default
            and tuple(zero.args[1:]) == (0.0, 0.0, 0.0)):
        return None
    difference = zero.args[0]
    if not (isinstance(difference, torch.fx.Node) and difference.target is aten.sub.Tensor
            and len(difference.args) == 2):
        return None
    frozen, anchor = difference.args
    if not (isinstance(frozen, torch.fx.Node) and frozen.target is aten.detach.default
            and frozen.args[0] is anchor):
        return None
    return leaf.args[0], anchor


def _read_a_snapshot(graph: torch.fx.Graph, buffer: torch.fx.Node, write_back) -> None:
    """The graph's reads of a buffer it writes back read a copy taken first: an op may save
    the buffer for its backward (training batch norm saves ``running_mean``), and the in-place
    write-back would then make backward fail ("modified by an inplace operation"), where
    eager's kernel updates the statistics before autograd saves them."""
    readers = [user for user in buffer.users if user is not write_back]
    if not readers:
        return
    with graph.inserting_after(buffer):
        snapshot = graph.call_function(torch.ops.aten.clone.default, (buffer,))
    for reader in readers:
        reader.replace_input_with(buffer, snapshot)


@has_side_effect  # its result is unused: fx's dead-code elimination must keep the call
def write_back(target: torch.Tensor, value: torch.Tensor) -> torch.Tensor:
    """Copy a parameter's, buffer's or input's new value into it, as eager's in-place write
    left it. A value with autograd history was written where autograd saw it: the copy keeps
    the history (a buffer written with ``copy_(x * 2)`` requires grad after the call and
    passes ``x`` its gradient, as in eager). A value without history was written where
    autograd did not see it (a ``no_grad`` region, a ``.detach()`` alias): the target keeps its
    own history (a parameter or an input that requires grad stays the leaf it was), so the copy
    is made under no_grad."""
    if value.requires_grad and torch.is_grad_enabled():
        return target.copy_(value)
    with torch.no_grad():
        return target.copy_(value)


def differentiable_copy(target: torch.Tensor, src: torch.Tensor) -> torch.Tensor:
    """``aten.copy(target, src)`` (a tensor laid out as ``target`` holding ``src`` broadcast and
    cast), computed so that autograd differentiates it as eager's in-place ``copy_``: PyTorch
    has no derivative for the functional ``aten.copy`` (functionalization makes it from
    ``y[0] = v``, ``y.copy_(v)``), and backward through it failed. ``src`` gets the gradient;
    ``target`` (its old value) gets zero, and the result requires grad when either does. A
    write autograd does not see (a ``.detach()`` alias, a no_grad region) runs under no_grad,
    where this is plain ``aten.copy``."""
    if not (torch.is_grad_enabled() and (src.requires_grad or target.requires_grad)):
        return torch.ops.aten.copy.default(target, src)
    out = torch.empty_strided(target.size(), target.stride(), dtype=target.dtype,
                              device=target.device)
    out.copy_(src)
    if not target.requires_grad:
        return out
    # the old value is overwritten: connected to the result with a zero gradient, exactly
    # (a where that always takes ``out``: no arithmetic on target's values, infinities kept)
    return torch.where(torch.ones((), dtype=torch.bool, device=out.device), out, target)


def _differentiable_copies(module: torch.fx.GraphModule) -> None:
    """Every ``aten.copy`` node of the module's graphs (grad-region and branch subgraphs too)
    calls :func:`differentiable_copy`."""
    for graph_module in module.modules():
        if not isinstance(graph_module, torch.fx.GraphModule):
            continue
        nodes = [n for n in graph_module.graph.nodes if n.target is torch.ops.aten.copy.default]
        for node in nodes:
            node.target = differentiable_copy
        if nodes:
            graph_module.recompile()


def _eager_refusal_checks(module: torch.fx.GraphModule) -> None:
    """Before each node the recorder marked :data:`EAGER_REFUSES` (an in-place write into an
    output of ``split``/``chunk``/``unbind``, or a read of one after its base was written,
    recorded where nothing required grad), a call of :func:`refuse_where_eager_does` on the
    tensors whose ``requires_grad`` decides whether eager raises."""
    graph = module.graph
    marked = [n for n in graph.nodes if n.op == "call_function" and EAGER_REFUSES in n.meta]
    for node in marked:
        message, hint, positions = node.meta[EAGER_REFUSES]
        tensors = [node.args[i] for i in positions if i < len(node.args)
                   and isinstance(node.args[i], torch.fx.Node)]
        location = _last_frame(node.meta.get("stack_trace") or "")
        with graph.inserting_before(node):
            graph.call_function(refuse_where_eager_does, (message, hint, location, *tensors))
    if marked:
        module.recompile()


def _saved_then_written(module: torch.fx.GraphModule) -> None:
    """The tensor outputs of each node marked :data:`SAVED_THEN_WRITTEN` pass through
    :func:`refuse_backward`: backward through them raises eager's error."""
    graph = module.graph
    marked = [n for n in graph.nodes if n.op == "call_function" and SAVED_THEN_WRITTEN in n.meta]
    for node in marked:
        message, positions, patterns = node.meta[SAVED_THEN_WRITTEN]
        leaves = pytree.tree_leaves((node.args, node.kwargs))
        arguments = tuple(leaves[i] for i in positions)
        values = [node] if isinstance(node.meta.get("val"), torch.Tensor) else \
            [user for user in node.users if user.target is operator.getitem]
        for value in values:
            users = list(value.users)
            with graph.inserting_after(value):
                refused = graph.call_function(refuse_backward,
                                              (value, message, patterns, *arguments))
            for user in users:
                user.replace_input_with(value, refused)
    if marked:
        module.recompile()


def _last_frame(stack_trace: str) -> str:
    """The innermost ``File "...", line N, in f`` line of a node's stack trace (and its source)."""
    lines = [line.strip() for line in stack_trace.strip().splitlines()]
    starts = [i for i, line in enumerate(lines) if line.startswith("File ")]
    return " ".join(lines[starts[-1]:starts[-1] + 2]) if starts else ""


@has_side_effect  # returns nothing: it is called for the error it may raise
def refuse_where_eager_does(message: str, hint: str, location: str, *tensors) -> None:
    """Raise InputMismatchError when eager's autograd would raise at this point of forward():
    grad mode is on and one of ``tensors`` requires grad (the program was recorded from an
    example without gradients, where eager runs)."""
    if torch.is_grad_enabled() and any(t.requires_grad for t in tensors):
        raise mismatch(f"{message} At {location}. The program was exported from inputs that "
                        f"record no gradient here; this call records one, for which eager "
                        f"raises.", hint=f"call it under torch.no_grad() or with inputs that "
                        f"do not require grad, or fix the model: {hint}",
                        torch_also=(RuntimeError,))  # eager's autograd raises RuntimeError
