"""Functionalization: replace in-place ops by their functional variants.

Input invariants (what the recorder produces):

- placeholders match ``signature.input_specs``; the output node returns one tuple matching
  ``signature.output_specs``;
- an in-place op ``op_(t, ...)`` (its schema writes its first argument and returns it) stands for
  the new value of ``t``: every later use of that tensor refers to the in-place node, never to
  ``t`` itself.

Output invariants:

- no ``call_function`` node has a mutable schema; each in-place node became the functional op
  found from the schemas (``relu_`` -> ``relu``, ``add_.Tensor`` -> ``add.Tensor``, ``normal_`` ->
  ``normal_functional``), with the same arguments and ``meta``, and its uses were rewired;
  ``copy_`` became ``slice_scatter`` over the whole target (``aten.copy``'s result, but one
  torch can differentiate: see :func:`_copy_as_scatter`);
- each mutated parameter / buffer / user input has one extra output, its final value, placed
  before the user outputs in placeholder order, with an output spec ``PARAMETER_MUTATION`` /
  ``BUFFER_MUTATION`` (target: the FQN) or ``USER_INPUT_MUTATION`` (target: the input's
  placeholder name): ``ExportedProgram.module()`` writes it back, as eager's in-place write
  (and torch.export's) leaves it;
- a value written where autograd does not see it (a ``no_grad`` region, a write through a
  ``.detach()`` alias, which the recorder puts in a ``no_grad`` region) is read by later nodes
  outside such regions as ``new.detach() - (old.detach() - old)``: the new value, whose gradient
  is the identity to ``old``, the last value autograd saw (see
  :func:`_keep_gradients_through_hidden_writes`);
- output specs name the (possibly renamed) output nodes.

Refused with :class:`UnsupportedError` at the user's line (the graph is left untouched): writes
to a view or to a tensor that has a view still used afterwards, writes to lifted constants,
``out=`` variants, ops that write arguments other than ``self`` or several arguments, in-place
ops that change storage (``resize_``, ``set_``), in-place metadata changes (``t_``,
``unsqueeze_``, ``as_strided_`` ...) of an input of forward(), and in-place ops without a
functional variant. Metadata changes of other tensors become their view op (``as_strided``,
``unsqueeze``...), as PyTorch's own kernels make them (``adaptive_avg_pool1d`` restrides its
result with ``as_strided_``).
"""
from __future__ import annotations

import copy
import operator
from dataclasses import dataclass

import torch

from unbroken.ir.ops import (
    functional_variant,
    inplace_written_index,
    is_mutating,
    is_view_op,
    op_name,
    written_arguments,
)
from unbroken.ir.signature import (
    ConstantArgument,
    InputKind,
    OutputKind,
    OutputSpec,
    TensorArgument,
)
from unbroken.symbolic.diagnostics import InternalError, UnsupportedError
from unbroken.symbolic.torch_compat import OpOverload, op_schema, set_grad_enabled

from ..ir.meta_keys import NEW_VALUE_OF_FIRST, USER_FRAMES, VIEW_WRITE

aten = torch.ops.aten

__all__ = ["functionalize", "functional_variant", "is_view_node", "inplace_written_index"]

_METADATA_INPLACE = frozenset({
    "resize_", "resize_as_", "set_", "as_strided_", "t_", "transpose_", "unsqueeze_",
    "squeeze_", "swapdims_", "swapaxes_", "detach_", "_resize_output_",
})
# In-place ops that change only the metadata (sizes, strides) of the tensor object they are
# called on: every later use already refers to the in-place node, so the view op that gives
# the same metadata replaces it (the storage and other views of it are untouched). On a
# graph input the caller would see the change: refused. (``resize_``/``set_`` change storage.)
_RESTRIDE_INPLACE = frozenset({"as_strided_", "t_", "transpose_", "unsqueeze_", "squeeze_",
                               "swapdims_", "swapaxes_", "detach_"})

_VIEW_HINT = ("compute the new value out of place instead of writing into a view: e.g. "
              "`y = torch.where(mask, value, x)`, `x = torch.cat([...])`, or "
              "`x = x.index_put(indices, values)` / `x.scatter(...)`; or call `.clone()` on the "
              "view before modifying it.")


# -- schemas (classification in unbroken.ir.ops) -------------------------------------------
def is_view_node(node: torch.fx.Node) -> bool:
    """True if ``node``'s value aliases its first argument (a view op, or an element of a
    view op's list output such as ``split``'s)."""
    if node.op != "call_function":
        return False
    if isinstance(node.target, OpOverload):
        return is_view_op(node.target)
    if node.target is operator.getitem and isinstance(node.args[0], torch.fx.Node):
        return is_view_node(node.args[0])
    return False


# -- analysis ----------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Rewrite:
    """One in-place node to replace.

    node:       the in-place node.
    functional: the functional overload that replaces it.
    root:       the tensor it writes, traced back through earlier in-place nodes.
    """

    node: torch.fx.Node
    functional: OpOverload
    root: torch.fx.Node


def _refuse(node: torch.fx.Node, message: str, hint: str) -> UnsupportedError:
    return UnsupportedError(message, code="UB121", frames=node.meta.get(USER_FRAMES, ()),
                            hint=hint)


def _describe(node: torch.fx.Node) -> str:
    return f"`{node.target}`"


def _classify(node: torch.fx.Node) -> OpOverload:
    """The functional replacement of in-place ``node``, or UnsupportedError saying why not."""
    op = node.target
    name = op_name(op)[1]
    written = written_arguments(op)
    if any(op_schema(op).arguments[i].kwarg_only for i in written):
        raise _refuse(node, f"The out= variant {_describe(node)} writes into a preallocated "
                      f"tensor, which is not supported yet.",
                      "call the op without `out=` and use its return value.")
    if inplace_written_index(op) is None:
        names = ", ".join(op_schema(op).arguments[i].name for i in written)
        raise _refuse(node, f"{_describe(node)} mutates its argument(s) {names}, which is not "
                      f"supported yet.",
                      "use the op's functional form, or compute the new values out of place.")
    functional = functional_variant(op)
    if name in _RESTRIDE_INPLACE and functional is not None:
        return functional
    if name in _METADATA_INPLACE or (functional is not None and is_view_op(functional)):
        raise _refuse(node, f"{_describe(node)} changes a tensor's shape or strides in place, "
                      f"which is not supported yet.",
                      f"use the out-of-place form and rebind the name, e.g. "
                      f"`x = x.{name[:-1]}(...)`.")
    if functional is None:
        raise _refuse(node, f"{_describe(node)} has no functional variant to replace it with.",
                      "use an out-of-place op instead of the in-place one.")
    return functional


class _Analysis:
    """Decides, before the graph is touched, how every in-place node is rewritten.

    order:    node -> position in the graph.
    inputs:   placeholder -> its InputSpec.
    rewrites: the in-place nodes in graph order, with their replacements.
    final:    mutated placeholder -> the in-place node holding its last value.
    """

    def __init__(self, graph: torch.fx.Graph, signature):
        nodes = list(graph.nodes)
        self.order = {n: i for i, n in enumerate(nodes)}
        placeholders = [n for n in nodes if n.op == "placeholder"]
        self.inputs = dict(zip(placeholders, signature.input_specs))
        self.rewrites: list[_Rewrite] = []
        self.final: dict = {}
        self._view_cache: dict = {}  # node -> its views (see _views)
        for node in nodes:
            if node.op == "call_function" and is_mutating(node.target):
                self._analyse(node)

    def root_of(self, node: torch.fx.Node) -> torch.fx.Node:
        """The tensor an in-place chain writes: follow first arguments of in-place nodes."""
        while node.op == "call_function" and inplace_written_index(node.target) == 0:
            node = node.args[0]
        return node

    def versions(self, root: torch.fx.Node, before: torch.fx.Node) -> list:
        """``root`` and the in-place nodes that wrote it, up to (excluding) ``before``."""
        found, node = [], before.args[0]
        while node is not root:
            found.append(node)
            node = node.args[0]
        return [root] + found[::-1]

    def _analyse(self, node: torch.fx.Node) -> None:
        functional = _classify(node)
        target = node.args[0]
        if not isinstance(target, torch.fx.Node):
            raise InternalError(f"in-place node {node.name} writes a non-tensor argument",
                                frames=node.meta.get(USER_FRAMES, ()))
        if node.meta.get(VIEW_WRITE):
            # A write through a view whose base the recorder already updated (scatter + copy_
            # into the base, views re-derived; see ir.aliasing): only the op itself changes.
            self.rewrites.append(_Rewrite(node, functional, target))
            return
        root = self.root_of(target)
        if op_name(node.target)[1] in _RESTRIDE_INPLACE:
            self._check_restride(node, root)
            self.rewrites.append(_Rewrite(node, functional, root))
            return
        self._check_root(node, root)
        self._check_views_and_stale_uses(node, root)
        self.rewrites.append(_Rewrite(node, functional, root))
        if root.op == "placeholder":
            self.final[root] = node

    def _check_root(self, node: torch.fx.Node, root: torch.fx.Node) -> None:
        if is_view_node(root):
            raise _refuse(node, f"{_describe(node)} writes into a view of another tensor (made "
                          f"by `{root.target}`), which is not supported yet.", _VIEW_HINT)
        spec = self.inputs.get(root)
        if spec is None:
            return
        if spec.kind not in (InputKind.BUFFER, InputKind.USER_INPUT, InputKind.PARAMETER):
            raise _refuse(node, f"{_describe(node)} modifies the constant tensor "
                          f"'{spec.target}', which is not supported.",
                          "register the tensor as a buffer if forward() modifies it, or "
                          "modify a .clone() of it.")

    def _check_restride(self, node: torch.fx.Node, root: torch.fx.Node) -> None:
        if root.op == "placeholder":
            name = op_name(node.target)[1]
            raise _refuse(node, f"{_describe(node)} changes the shape or strides of an input of "
                          f"forward() in place, which the caller would see; this is not "
                          f"supported.", f"use the out-of-place form and rebind the name, e.g. "
                          f"`x = x.{name[:-1]}(...)`.")

    def _check_views_and_stale_uses(self, node, root) -> None:
        position = self.order[node]
        for version in self.versions(root, node):
            for user in version.users:
                if user is not node and self.order[user] > position:
                    raise InternalError(
                        f"{user.name} uses the value of {version.name} from before the "
                        f"in-place write {node.name}", frames=node.meta.get(USER_FRAMES, ()))
            for view, made, last_use in self._views(version):
                if made < position < last_use:
                    raise _refuse(node, f"{_describe(node)} modifies a tensor that has a view "
                                  f"(made by `{view.target}`) which is used afterwards; this is "
                                  f"not supported yet.", _VIEW_HINT)

    def _views(self, node: torch.fx.Node) -> tuple:
        """Every view of ``node``, transitively (views of views), each with its position and
        the position of its last user (-1: none). The graph does not change while it is
        analysed: computed once per node (a loop writing a tensor chunk by chunk asks it of
        every earlier version at every write: it was most of such an export)."""
        known = self._view_cache.get(node)
        if known is None:
            found, stack = {}, [node]
            while stack:
                for user in stack.pop().users:
                    if is_view_node(user) and user not in found:
                        found[user] = None
                        stack.append(user)
            order = self.order
            known = self._view_cache[node] = tuple(
                (view, order[view], max((order[u] for u in view.users), default=-1))
                for view in found)
        return known


# -- rewrite -----------------------------------------------------------------------------------
def _replace(graph: torch.fx.Graph, rewrite: _Rewrite) -> torch.fx.Node:
    old = rewrite.node
    if rewrite.functional is aten.copy.default and _scatters(old):
        return _copy_as_scatter(graph, old)
    with graph.inserting_before(old):
        name = op_name(rewrite.functional)[1]  # torch names nodes by op: relu, add_1
        new = graph.create_node("call_function", rewrite.functional, old.args, old.kwargs,
                                name=name)
    new.meta = copy.copy(old.meta)
    if not is_view_op(rewrite.functional):  # a restride is a view, not new contents
        new.meta[NEW_VALUE_OF_FIRST] = True
    old.replace_all_uses_with(new)
    graph.erase_node(old)
    return new


def _scatters(node: torch.fx.Node) -> bool:
    """Whether the write ``copy_(target, src)`` can be :func:`_copy_as_scatter`: a target of at
    least one dim, and a source of its shape or one whose shape the graph can name (static)."""
    target, src = (arg.meta.get("val") if isinstance(arg, torch.fx.Node) else arg
                   for arg in node.args[:2])
    if not isinstance(target, torch.Tensor) or not isinstance(src, torch.Tensor):
        return False
    if target.dim() == 0 or src.dim() > target.dim():
        return False
    return src.shape == target.shape or all(isinstance(n, int) for n in target.shape)


def _copy_as_scatter(graph: torch.fx.Graph, old: torch.fx.Node) -> torch.fx.Node:
    """``target.copy_(src)`` as ``slice_scatter(target, src', 0)``: ``src`` cast to the target's
    dtype and expanded to its shape, written over all of ``target``. The result is
    ``aten.copy``'s exactly (values, dtype, the target's strides: both clone the target
    preserving its strides), but it is differentiable where ``aten.copy`` is not: torch has no
    derivative for it, so backward through a program holding it (``y[0] = v`` records one) failed
    in torch's own ``ExportedProgram.module()`` after ``torch.export.load``. ``src`` gets the
    gradient, the overwritten target zero, as eager's in-place ``copy_``."""
    target, src = old.args[:2]
    target_value, src_value = target.meta["val"], src.meta["val"]
    with graph.inserting_before(old):
        if src_value.dtype != target_value.dtype:
            src = _derived(graph, old, aten._to_copy.default, (src,), {"dtype": target_value.dtype})
        if src_value.shape != target_value.shape:
            src = _derived(graph, old, aten.expand.default, (src, list(target_value.shape)), {})
        new = graph.create_node("call_function", aten.slice_scatter.default, (target, src, 0),
                                name="slice_scatter")
    new.meta = copy.copy(old.meta)
    new.meta[NEW_VALUE_OF_FIRST] = True
    old.replace_all_uses_with(new)
    graph.erase_node(old)
    return new


def _derived(graph, old, op, args, kwargs) -> torch.fx.Node:
    """A node computing ``op(*args, **kwargs)`` for ``old``'s rewrite: ``old``'s location and
    module stack, its own meta value."""
    values = [a.meta["val"] if isinstance(a, torch.fx.Node) else a for a in args]
    node = graph.call_function(op, args, kwargs)
    node.meta = copy.copy(old.meta)
    node.meta["val"] = op(*values, **kwargs)
    return node


def _output_spec(spec: OutputSpec, value) -> OutputSpec:
    if isinstance(value, torch.fx.Node) and not isinstance(spec.arg, ConstantArgument):
        return OutputSpec(spec.kind, type(spec.arg)(value.name), spec.target)
    return spec


_STATE_MUTATIONS = {InputKind.BUFFER: OutputKind.BUFFER_MUTATION,
                    InputKind.PARAMETER: OutputKind.PARAMETER_MUTATION}


def _mutation_spec(placeholder, spec, value: torch.fx.Node) -> OutputSpec:
    if spec.kind in _STATE_MUTATIONS:
        return OutputSpec(_STATE_MUTATIONS[spec.kind], TensorArgument(value.name), spec.target)
    return OutputSpec(OutputKind.USER_INPUT_MUTATION, TensorArgument(value.name),
                      placeholder.name)


def _rewrite_outputs(graph, signature, analysis: _Analysis, replaced: dict, hidden: dict,
                     reads: dict):
    """Mutation outputs first, then the user's. A tensor whose last writes autograd did not see
    (``hidden``: value -> the value autograd saw) is written back as read by
    :func:`_straight_through` when autograd saw a write of it in forward() (its history after
    the call is that write's); when it saw none, as the plain new value (the tensor keeps its own
    history: an input or parameter that requires grad stays the leaf it was)."""
    output = next(n for n in graph.nodes if n.op == "output")
    old_values = list(output.args[0])
    mutated = [(p, s) for p, s in analysis.inputs.items() if p in analysis.final]
    new_values = []
    for placeholder, _ in mutated:
        value = replaced[analysis.final[placeholder]]
        anchor = hidden.get(value)
        if anchor is not None and anchor is not placeholder:
            returned = reads.get((value, output))  # the same node: module() returns the tensor
            if returned is None:
                with graph.inserting_before(output):
                    returned = _straight_through(graph, value, anchor)
            value = returned
        new_values.append(value)
    mutation_specs = [_mutation_spec(p, s, v) for (p, s), v in zip(mutated, new_values)]
    user_specs = [_output_spec(s, v) for s, v in zip(signature.output_specs, old_values)]
    output.args = (tuple(new_values + old_values),)
    return signature.replace(output_specs=mutation_specs + user_specs)


# -- writes autograd does not see ------------------------------------------------------------
def _keep_gradients_through_hidden_writes(graph, analysis: _Analysis,
                                          replaced: dict) -> tuple[dict, dict]:
    """Eager writes a tensor in place where autograd does not see it (a ``no_grad`` region; a
    write through a ``.detach()`` alias, which the recorder puts in one) and the tensor stays
    what later ops differentiate: their gradient flows to it as before the write, computed at
    the new value. Each use of such a value, outside a no_grad region, therefore reads
    ``new.detach() - nan_to_num(old.detach() - old, 0, 0, 0)``: the new value exactly (``x - 0.0``
    is ``x``, signed zeros included; the ``nan_to_num`` keeps an infinite or NaN old element
    from turning the value into NaN) whose gradient is the identity to ``old``, the last value
    autograd saw (a parameter or input, an intermediate, or a write made with grad enabled: a
    frozen parameter ``w.add_(x)`` passes ``x`` its gradient, read from that write's value).
    Only floating-point and complex values carry gradients; others are left as they are.
    Returns ``{new: anchor}`` of the values so read and ``{(new, user): read}`` (the mutation
    outputs read them too: :func:`_rewrite_outputs`)."""
    written = {replaced[r.node]: r.root for r in analysis.rewrites}
    disabled = _grad_disabled_nodes(graph)
    hidden, reads = {}, {}
    for new in written:
        anchor = new
        while anchor in written and anchor in disabled:  # back to the value autograd saw
            anchor = anchor.args[0]
        if anchor is new or not _differentiable(new):
            continue
        hidden[new] = anchor
        for user in list(new.users):
            if user in disabled:
                continue  # a use that records no gradient (the chain's next hidden write too)
            with graph.inserting_before(user):
                read = _straight_through(graph, new, anchor)
                for node in _ancestors_until(read, new, anchor):
                    node.meta["nn_module_stack"] = dict(user.meta.get("nn_module_stack", {}))
                user.replace_input_with(new, read)
                reads[new, user] = read
    return hidden, reads


def _differentiable(node: torch.fx.Node) -> bool:
    value = node.meta.get("val")
    return isinstance(value, torch.Tensor) and (value.dtype.is_floating_point
                                                or value.dtype.is_complex)


def _straight_through(graph, new: torch.fx.Node, anchor: torch.fx.Node) -> torch.fx.Node:
    """``new.detach() - nan_to_num(anchor.detach() - anchor, 0, 0, 0)`` (see above)."""
    leaf_value = _like(graph.call_function(aten.detach.default, (new,)), new)
    difference = _like(graph.call_function(aten.sub.Tensor, (
        _like(graph.call_function(aten.detach.default, (anchor,)), anchor), anchor)), anchor)
    zero = _like(graph.call_function(aten.nan_to_num.default, (difference, 0.0, 0.0, 0.0)),
                 anchor)
    return _like(graph.call_function(aten.sub.Tensor, (leaf_value, zero)), new)


def _ancestors_until(node: torch.fx.Node, *stops: torch.fx.Node) -> list:
    """``node`` and the nodes it reads, transitively, short of ``stops``: the nodes of one
    straight-through read, which belong to the module call of the node that reads it."""
    found, stack = [], [node]
    while stack:
        current = stack.pop()
        if current in stops or current in found:
            continue
        found.append(current)
        stack.extend(current.all_input_nodes)
    return found


def _like(node: torch.fx.Node, model: torch.fx.Node) -> torch.fx.Node:
    node.meta = {k: v for k, v in model.meta.items() if k in ("val", "tensor_meta", "custom",
                                                              USER_FRAMES, "stack_trace")}
    return node


def _grad_disabled_nodes(graph) -> set:
    """The nodes that run inside a region the graph itself puts in no_grad mode
    (``_set_grad_enabled(False)`` ... ``_set_grad_enabled(previous)``)."""
    disabled, state, outer = set(), None, []
    for node in graph.nodes:
        if node.op == "call_function" and node.target is set_grad_enabled:
            if isinstance(node.args[0], bool):
                outer.append(state)
                state = node.args[0]
            else:  # back to the mode saved before the region
                state = outer.pop() if outer else None
        elif state is False:
            disabled.add(node)
    return disabled


def functionalize(graph_module: torch.fx.GraphModule, signature, replacements=None):
    """Remove every mutation from ``graph_module``; see the module docstring for invariants.

    Args:
        graph_module: the recorded graph (rewritten in place and returned).
        signature: its ``ExportGraphSignature``.
        replacements: a dict that receives, when given, each in-place node (now erased) ->
            the functional node holding its value (for records that name recorded nodes: the
            boundaries of preserved module calls).

    Returns:
        ``(graph_module, new_signature)``; the signature gains the mutation output specs.

    Raises:
        UnsupportedError: a mutation pattern that is not supported yet (graph left untouched).
    """
    graph = graph_module.graph
    analysis = _Analysis(graph, signature)
    if not analysis.rewrites:
        return graph_module, signature
    replaced = {r.node: _replace(graph, r) for r in analysis.rewrites}
    if replacements is not None:
        replacements.update(replaced)
    hidden, reads = _keep_gradients_through_hidden_writes(graph, analysis, replaced)
    new_signature = _rewrite_outputs(graph, signature, analysis, replaced, hidden, reads)
    graph_module.recompile()
    return graph_module, new_signature
