"""The saved metadata must be what the ops compute: each node is re-run on meta tensors.

A file can be well formed and still lie: a node that reads ``add`` where it read ``bias``
loads, and fails (or computes something else) only when the program runs. So after a graph is
read, every ``call_function`` node is computed again from its inputs' saved values, on meta
tensors (no data, nothing allocated: an op's ``device`` argument is forced to ``meta``), and
the result must have the saved value's kind, dtype and sizes (the sizes eager's CPU kernel
gives where the meta kernel's differ: ``ir.layouts.eager_sizes``); a ``cond``/``while_loop`` node's
operands must fit its subgraphs' placeholders and its value their outputs; every subgraph is
checked the same way. An op that fails on its inputs is reported as the file's fault.

Not re-run, documented limits of the check: ops whose results depend on tensor data
(``item``, ``nonzero``, boolean-mask indexing), and nodes whose inputs have data-dependent
(unbacked) sizes, whose decisions need facts the file does not keep. Symbolic sizes are equal
when their expressions are, or when they agree at the example sizes (hints).
"""
from __future__ import annotations

import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ...symbolic.diagnostics import RefusalError
from ...symbolic.expr import free_unbacked_symbols
from ...symbolic.node import sym_expr
from ...symbolic.torch_compat import (
    HigherOrderOperator,
    OpOverload,
    enable_python_dispatcher,
    op_schema,
)
from ..data_dependent import DATA_DEPENDENT_SIZES, SCALAR_OPS
from ..layouts import eager_sizes
from .format import fail

__all__ = ["check_values", "same_value"]

_META = torch.device("meta")
_NOT_RERUN = frozenset({*SCALAR_OPS, *DATA_DEPENDENT_SIZES})
# What an op raises when its arguments do not fit it (wrong dtype, rank, count, index).
_OP_ERRORS = (RuntimeError, TypeError, ValueError, IndexError, ZeroDivisionError,
              OverflowError, NotImplementedError)


def check_values(graph_module: fx.GraphModule, member: str) -> None:
    """Raise SerializationError at the first node whose saved value its op does not compute."""
    with enable_python_dispatcher():
        _check_graph(graph_module, member, "graph")


def _check_graph(graph_module: fx.GraphModule, member: str, where: str) -> None:
    for node in graph_module.graph.nodes:
        if node.op != "call_function":
            continue
        place = f"{where}: node {node.name} ({_name(node.target)})"
        if isinstance(node.target, HigherOrderOperator):
            _check_higher_order(graph_module, node, member, place)
        elif node.target not in _NOT_RERUN and not _has_unbacked_inputs(node):
            computed = _rerun(node, member, place)
            if not _same(computed, node.meta.get("val")):
                raise fail(member, f"{place}: the saved value {_show(node.meta.get('val'))} is "
                                   f"not what the op computes from its inputs "
                                   f"({_show(computed)})")


def _name(target) -> str:
    return str(target) if isinstance(target, OpOverload) else \
        getattr(target, "__name__", str(target))


def _value(argument):
    return argument.meta.get("val") if isinstance(argument, fx.Node) else argument


def _has_unbacked_inputs(node: fx.Node) -> bool:
    for value in pytree.tree_leaves([_value(a) for a in node._input_nodes]):
        sizes = value.shape if isinstance(value, torch.Tensor) else (value,)
        for size in sizes:
            if isinstance(size, (torch.SymInt, torch.SymBool, torch.SymFloat)) and \
                    free_unbacked_symbols(size.node.expr):
                return True
    return False


def _rerun(node: fx.Node, member: str, place: str):
    args, kwargs = pytree.tree_map(_value, (node.args, node.kwargs))
    if isinstance(node.target, OpOverload) and any(
            a.name == "device" for a in op_schema(node.target).arguments):
        kwargs = {**kwargs, "device": _META}  # factories build meta tensors, never real ones
    try:
        return eager_sizes(node.target, args, kwargs, node.target(*args, **kwargs))
    except _OP_ERRORS as error:
        raise fail(member, f"{place} fails on its saved inputs: {_first_line(error)}") from None
    except RefusalError as error:  # a size decision the file's symbols cannot make
        raise fail(member, f"{place}: {_first_line(error)}") from None


def _first_line(error: BaseException) -> str:
    text = str(error).strip().splitlines()
    return f"{type(error).__name__}: {text[0][:200] if text else ''}"


def same_value(computed, stored) -> bool:
    """Same kind, dtype and sizes (see :func:`_same_size` for symbolic sizes)."""
    return _same(computed, stored)


# -- comparing values -----------------------------------------------------------------------------
def _same(computed, stored) -> bool:
    if isinstance(stored, torch.Tensor):
        return isinstance(computed, torch.Tensor) and computed.dtype == stored.dtype and \
            computed.dim() == stored.dim() and all(
                _same_size(a, b) for a, b in zip(computed.shape, stored.shape))
    if isinstance(stored, (tuple, list)):
        return isinstance(computed, (tuple, list)) and len(computed) == len(stored) and all(
            _same(a, b) for a, b in zip(computed, stored))
    if stored is None or isinstance(stored, (torch.SymBool, bool)):
        return computed is None or isinstance(computed, (torch.SymBool, bool)) or \
            stored is None
    if isinstance(stored, (torch.SymFloat, float)):
        return isinstance(computed, (torch.SymFloat, float, torch.SymInt, int))
    if isinstance(stored, (torch.SymInt, int)):
        return isinstance(computed, (torch.SymInt, int)) and _same_size(computed, stored)
    return True


def _same_size(a, b) -> bool:
    """Equal sizes: the same int or expression; else they must agree at the example sizes
    (hints) when both have one, and are accepted otherwise (deciding would need a solver)."""
    if sym_expr(a) == sym_expr(b):
        return True
    hints = [_hint(x) for x in (a, b)]
    return None in hints or hints[0] == hints[1]


def _hint(size):
    return size.node.hint if isinstance(size, torch.SymInt) else int(size)


# -- cond / while_loop ----------------------------------------------------------------------------
def _check_higher_order(graph_module, node: fx.Node, member: str, place: str) -> None:
    name = node.target.name()
    if name == "autograd_function_apply":
        _check_autograd_function(graph_module, node, member, place)
        return
    if name == "cond":
        branches, operands = node.args[1:3], node.args[3]
        carried = None
    else:  # while_loop
        branches, carried, additional = node.args[:2], node.args[2], node.args[3]
        operands = (*carried, *additional)
    operand_values = [_value(o) for o in operands]
    for branch in branches:
        sub = getattr(graph_module, branch.target)
        _check_graph(sub, member, f"{place} / {branch.target}")
        placeholders = [n.meta.get("val") for n in sub.graph.nodes if n.op == "placeholder"]
        if len(placeholders) != len(operand_values) or not all(
                _same(v, p) for v, p in zip(operand_values, placeholders)):
            raise fail(member, f"{place}: its operands do not fit the placeholders of "
                               f"{branch.target}")
        if not (name == "while_loop" and branch is branches[0]):  # a loop's condition
            _check_branch_output(sub, node, carried, branch.target, member, place)


def _check_autograd_function(graph_module, node: fx.Node, member: str, place: str) -> None:
    """Forward takes the node's inputs and returns (its value, saved values); backward takes
    one gradient per value, then the saved values."""
    fwd, bwd = (getattr(graph_module, a.target) for a in node.args[:2])
    for label, sub in ((node.args[0].target, fwd), (node.args[1].target, bwd)):
        _check_graph(sub, member, f"{place} / {label}")
    inputs = [_value(o) for o in node.args[2:]]
    fwd_inputs = [n.meta.get("val") for n in fwd.graph.nodes if n.op == "placeholder"]
    returned = next(n for n in fwd.graph.nodes if n.op == "output").args[0]
    stored = node.meta.get("val")
    ok = len(inputs) == len(fwd_inputs) and all(_same(v, p) for v, p in zip(inputs, fwd_inputs))
    ok = ok and isinstance(returned, (tuple, list)) and len(returned) == 2 and _same(
        tuple(pytree.tree_map(_value, returned[0])), tuple(stored))
    bwd_inputs = [n.meta.get("val") for n in bwd.graph.nodes if n.op == "placeholder"]
    if not ok or len(bwd_inputs) != len(stored) + len(returned[1]):
        raise fail(member, f"{place}: its inputs or values do not fit its forward and "
                           "backward subgraphs")


def _check_branch_output(sub, node: fx.Node, carried, label: str, member: str,
                         place: str) -> None:
    """A branch (or loop body) returns what the node's value (or the carried values) are."""
    output = next(n for n in sub.graph.nodes if n.op == "output")
    values = pytree.tree_map(_value, output.args[0])
    stored = node.meta.get("val")
    expected = stored if carried is None else tuple(_value(c) for c in carried)
    if not _same(tuple(values) if isinstance(values, (list, tuple)) else (values,),
                 tuple(expected) if isinstance(expected, (list, tuple)) else (expected,)):
        raise fail(member, f"{place}: its value does not match what {label} returns")


def _show(value) -> str:
    if isinstance(value, torch.Tensor):
        return f"{value.dtype}{list(value.shape)}"
    if isinstance(value, (tuple, list)):
        return "(" + ", ".join(_show(v) for v in value) + ")"
    return type(value).__name__ if not isinstance(value, (int, float, bool)) else repr(value)

