"""Size 1 for dims whose spec says ``min=1``: admitted when the program computes what eager
computes for 1.

Tracing gives every dynamic dim the range ``[2, ...]``: kernels ask "is this dim 1?"
(broadcasting, contiguity, squeeze) and one graph cannot in general serve both answers. For a
dim declared with ``min=1`` (``Dim("batch", min=1)``, ``Dim.AUTO(min=1)``), export then traces
the model a second time with that dim fixed at 1 (the example inputs cut down to size 1, every
other dim as the spec says) and compares the two programs: when the first one, with the dim
set to 1, runs exactly the ops of the second (same ops, same arguments, same constants), it
computes what eager computes for 1 too, and its range is widened to ``[1, ...]``. With two such
symbols every combination of them at 1 is checked; beyond ``MAX_SYMBOLS`` the rest keep 2.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable

import sympy
import torch
import torch.fx as fx
import torch.utils._pytree as pytree

from .ir.program import ExportedProgram
from .symbolic.diagnostics import UnbrokenError

__all__ = ["admit_size_one", "same_program"]

MAX_SYMBOLS = 2


def admit_size_one(ep: ExportedProgram, candidates, leaf_dims: dict, hints: Callable,
                   args, kwargs, trace_at: Callable) -> ExportedProgram:
    """``ep`` with ``[1, ...]`` ranges for the ``candidates`` (symbols) whose every
    combination at size 1 gives the same program; ``ep`` itself when none does.

    leaf_dims: ``id(example tensor) -> dims`` (ints / sympy expressions) of the first trace;
    hints: expression -> value at the example inputs; trace_at(args, kwargs, forced) exports
    the resized inputs with ``forced`` (``(id(tensor), dim)`` pairs) static and returns the
    program with a renaming of its symbols to ours (by the dim they stand for), or None when
    that needs another spec.
    """
    symbols = [s for s in candidates if s in ep.range_constraints
               and int(ep.range_constraints[s].lower) == 2][:MAX_SYMBOLS]
    if not symbols:
        return ep
    for count in range(1, len(symbols) + 1):
        for subset in itertools.combinations(symbols, count):
            values = {s: sympy.Integer(1) for s in subset}
            resized = _resize((args, kwargs), leaf_dims, values, hints)
            if resized is None:
                return ep
            (new_args, new_kwargs), forced = resized
            try:
                traced = trace_at(new_args, new_kwargs, forced)
            except UnbrokenError:
                return ep  # the code refuses size 1 (or needs a different spec for it)
            if traced is None or not same_program(ep, traced[0], values, traced[1]):
                return ep
    ranges = dict(ep.range_constraints)
    for symbol in symbols:
        ranges[symbol] = type(ranges[symbol])(1, ranges[symbol].upper)
    return ExportedProgram(ep.graph_module, ep.graph_signature, ep.state_dict, ep.constants,
                           ranges, ep.in_spec, ep.out_spec, example_inputs=ep.example_inputs,
                           specializations=ep.specializations)


def _resize(inputs, leaf_dims: dict, values: dict, hints: Callable):
    """The example inputs cut down so that ``values`` hold, and the dims that then are static;
    None when a size cannot be reached by cutting."""
    forced: set = set()
    failed = []

    def cut(leaf):
        dims = leaf_dims.get(id(leaf)) if isinstance(leaf, torch.Tensor) else None
        if dims is None:
            return leaf
        new, pins = leaf, []
        for index, expr in enumerate(dims):
            if isinstance(expr, int) or not (expr.free_symbols & set(values)):
                continue
            size = hints(expr.xreplace(values))
            if size is None or not 1 <= size <= leaf.shape[index]:
                failed.append(index)
                return leaf
            new = new.narrow(index, 0, int(size))
            pins.append(index)
        new = new.clone()
        forced.update((id(new), index) for index in pins)
        return new

    resized = pytree.tree_map(cut, inputs)
    return None if failed else (resized, frozenset(forced))


def same_program(general: ExportedProgram, special: ExportedProgram, values: dict,
                 rename=None) -> bool:
    """Whether ``general`` with its symbols set to ``values`` runs exactly the ops of
    ``special``: the same tensor ops in the same order with the same arguments (sizes compared
    as numbers or expressions), the same outputs and the same constants. ``rename`` maps
    ``special``'s symbols to ``general``'s."""
    sides = _Sides(values, rename or {})
    if set(general.constants) != set(special.constants) or any(
            not _same_tensor(general.constants[k], special.constants[k])
            for k in general.constants):
        return False
    left, right = _ops(general.graph_module), _ops(special.graph_module)
    if left is None or right is None or len(left) != len(right):
        return False
    mapping: dict = {}
    for a, b in zip(left, right):
        if (a.op, a.target) != (b.op, b.target) or (a.op == "placeholder" and a.name != b.name):
            return False
        if not (_same_arg(a.args, b.args, mapping, sides)
                and _same_arg(a.kwargs, b.kwargs, mapping, sides)
                and _same_value(a.meta.get("val"), b.meta.get("val"), sides)):
            return False
        mapping[a] = b
    return True


def _ops(graph_module) -> list | None:
    """The nodes that compute tensors (size arithmetic and size assertions left out); None for
    graphs with subgraphs (``torch.cond``), which this comparison does not follow."""
    nodes = []
    for node in graph_module.graph.nodes:
        if node.op == "get_attr":
            return None
        if node.op == "call_function" and node.target is torch.ops.aten._assert_scalar.default:
            continue
        if isinstance(node.meta.get("val"), (torch.SymInt, torch.SymBool, torch.SymFloat)):
            continue
        nodes.append(node)
    return nodes


def _same_arg(a, b, mapping: dict, sides: _Sides) -> bool:
    if isinstance(a, fx.Node) and a in mapping:
        return b is mapping[a]
    if isinstance(a, fx.Node) or isinstance(b, fx.Node):
        return _same_size(a, b, sides)
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(_same_arg(x, y, mapping, sides) for x, y in zip(a, b))
    if isinstance(a, dict) and isinstance(b, dict):
        return a.keys() == b.keys() and all(_same_arg(a[k], b[k], mapping, sides) for k in a)
    return type(a) is type(b) and a == b


class _Sides:
    """The substitutions of one comparison: ``values`` on the general program's side,
    ``rename`` on the special one's."""

    def __init__(self, values: dict, rename: dict):
        self.values, self.rename = values, rename

    def general(self, expr):
        return sympy.expand(sympy.sympify(expr).xreplace(self.values))

    def special(self, expr):
        return sympy.expand(sympy.sympify(expr).xreplace(self.rename))


def _same_size(a, b, sides: _Sides) -> bool:
    left, right = _size_of(a, sides.general), _size_of(b, sides.special)
    return left is not None and left == right


def _size_of(arg, substitute):
    """A size argument as a sympy expression, substituted; None if not a size."""
    if isinstance(arg, fx.Node):
        value = arg.meta.get("val")
        if not isinstance(value, (torch.SymInt, torch.SymBool, torch.SymFloat)):
            return None
        return substitute(value.node.expr)
    if isinstance(arg, (int, float, bool)):
        return sympy.sympify(arg)
    return None


def _same_value(a, b, sides: _Sides) -> bool:
    if isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor):
        return a.dtype == b.dtype and len(a.shape) == len(b.shape) and all(
            sides.general(_expr(x)) == sides.special(_expr(y)) for x, y in zip(a.shape, b.shape))
    return type(a) is type(b)


def _expr(size):
    return size.node.expr if isinstance(size, torch.SymInt) else int(size)


def _same_tensor(a, b) -> bool:
    return isinstance(a, torch.Tensor) and isinstance(b, torch.Tensor) and a.shape == b.shape \
        and a.dtype == b.dtype and torch.equal(a, b)
