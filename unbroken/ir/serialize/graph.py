"""Rebuild graphs, their metadata and symbolic values from ``program.json``, checking every field.

A node becomes an ``fx.Node`` only after each of its strings passed the check for where fx will put
it (``format``): node names and placeholder targets are identifiers (and a placeholder's
target, the argument name fx generates, is its name or another identifier that shadows no global of
the generated code and no other node), ``get_attr`` targets name a subgraph of this graph,
keyword-argument names are argument names of the op's schema, call targets resolve only through the
allow-list, argument values are decoded from a closed set of tagged forms and may reference only
nodes defined earlier in the same graph. Symbolic sizes are read by :mod:`unbroken.symbolic.parse`
(never ``sympify``), each distinct text once, charged to one budget per file.
"""
from __future__ import annotations

import ast
import collections
import inspect
import math

import sympy
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree

from ...symbolic.env import ShapeEnvironment
from ...symbolic.parse import ExpressionBudget, ExpressionError, is_condition, parse_expression
from ...symbolic.torch_compat import HigherOrderOperator, OpOverload, op_schema, set_grad_enabled
from ..meta_keys import EAGER_REFUSES, NEW_VALUE_OF_FIRST, SAVED_THEN_WRITTEN, USER_FRAMES
from .format import (
    DTYPES,
    Limits,
    check_attribute_path,
    check_identifier,
    check_text,
    resolve_target,
)
from .json_document import Fields

__all__ = ["GraphReader"]

_OPS = ("placeholder", "call_function", "get_attr", "output")
_MAX_RANK = 64
_MAX_SIZE = 1 << 62
_ENUMS = {
    "dtype": DTYPES,
    "layout": {str(v): v for v in vars(torch).values() if isinstance(v, torch.layout)},
    "memory_format": {str(v): v for v in vars(torch).values()
                      if isinstance(v, torch.memory_format)},
}
_DEVICE_TYPES = ("cpu", "meta", "cuda", "mps", "xpu")


# C builtins without an inspectable signature: how many positional arguments each takes.
_GRAD_MODE_ARITY = {torch.is_grad_enabled: 0, set_grad_enabled: 1}

class GraphReader:
    """Reads the graphs of one document (v1 or v2 encoding).

    env:     the shape environment that owns the program's symbols.
    symbols: saved symbol name -> sympy symbol (only these may appear in expressions).
    version: the file's format version (v1 wrote maps as JSON objects, v2 as pair lists).
    """

    def __init__(self, env: ShapeEnvironment, symbols: dict, limits: Limits, version: int,
                 member: str):
        self.env, self.symbols, self.limits, self.version = env, symbols, limits, version
        self.fields = Fields(member)
        self.member = member
        self.nodes_read = 0
        self.budget = ExpressionBudget(limits.expression_operations, limits.expression_divisions)
        self._expressions: dict[str, object] = {}

    # -- graphs -----------------------------------------------------------------------------------
    def graph_module(self, data, where: str = "graph") -> fx.GraphModule:
        """The ``GraphModule`` of one saved graph (its subgraphs first)."""
        f = self.fields
        owner = torch.nn.Module()
        modules = f.get(data, "modules", "dict" if self.version == 1 else "list", where)
        for name, sub in (modules.items() if self.version == 1 else f.pairs(modules, where)):
            check_attribute_path(check_identifier(name, self.member, f"{where}: subgraph name"),
                                 self.member, f"{where}: subgraph name")
            owner.add_module(name, self.graph_module(sub, f"{where}.modules[{name!r}]"))
        graph, nodes = fx.Graph(), {}
        self._arguments: set[str] = set()
        entries = f.get(data, "nodes", "list", where)
        for index, entry in enumerate(entries):
            self._count_node()
            node = self._node(graph, entry, nodes, owner, f"{where}.nodes[{index}]")
            nodes[node.name] = node
        for node in graph.find_nodes(op="placeholder"):
            # fx assigns each argument to its node's name: an argument named like another node
            # would be read after that node overwrote it
            other = nodes.get(node.target)
            if other is not None and other is not node:
                raise f.fail(where, f"the placeholder target {node.target!r} would shadow a "
                                    "name the generated code uses (another node's name)")
        if not entries or entries[-1].get("op") != "output":
            raise f.fail(where, "the last node must be the output node")
        self._check_no_shadowed_global(graph, where)
        return fx.GraphModule(owner, graph)

    def _check_no_shadowed_global(self, graph: fx.Graph, where: str) -> None:
        """A placeholder's target that differs from its node's name is the argument fx
        generates, read once (``name = target``). Any other read of that name in the generated
        code is a global or builtin (``torch``, ``getattr``, ``slice``...) the argument would
        shadow. The code is only generated and parsed here, never run."""
        renamed = {n.target for n in graph.find_nodes(op="placeholder") if n.target != n.name}
        if not renamed:
            return
        code = ast.parse(graph.python_code(root_module="self").src)
        reads = collections.Counter(n.id for n in ast.walk(code)
                                    if isinstance(n, ast.Name) and isinstance(n.ctx, ast.Load))
        for target in sorted(renamed):
            if reads[target] > 1:
                raise self.fields.fail(where, f"the placeholder target {target!r} would shadow a "
                                              "name the generated code uses")

    def _count_node(self) -> None:
        self.nodes_read += 1
        if self.nodes_read > self.limits.nodes:
            raise self.fields.fail("graph", f"more than {self.limits.nodes} nodes")

    def _node(self, graph: fx.Graph, entry, nodes: dict, owner, where: str) -> fx.Node:
        f = self.fields
        op = f.get(entry, "op", "str", where)
        if op not in _OPS:
            raise f.fail(where, f"unknown node kind {op[:40]!r}")
        name = check_identifier(f.get(entry, "name", "str", where), self.member,
                                f"{where}: node name")
        if name in nodes:
            raise f.fail(where, f"the node name {name!r} is used twice")
        where = f"{where} ({name})"
        target = self._target(op, name, entry, owner, where)
        args = self._decode(f.get(entry, "args", "dict", where), nodes, f"{where}.args")
        if not isinstance(args, tuple):
            raise f.fail(where, "args must be a tuple")
        kwargs = self._kwargs(entry, target, nodes, where)
        self._check_arity(op, target, args, kwargs, where)
        node = graph.create_node(op, target, args, kwargs, name=name)
        if node.name != name:
            raise f.fail(where, f"{name!r} is not usable as a node name")
        self._meta(node, entry, where)
        return node

    def _target(self, op: str, name: str, entry, owner, where: str):
        f = self.fields
        target = f.get(entry, "target", "str", where)
        if op == "placeholder" and target != name:
            check_identifier(target, self.member, f"{where}: placeholder target")
            if target == "self" or target in self._arguments:
                raise f.fail(where, f"the placeholder target {target!r} would shadow a name "
                                    "the generated code uses")
        if op == "placeholder":
            self._arguments.add(target)
        if op == "get_attr" and target not in owner._modules:
            raise f.fail(where, f"get_attr target {target[:80]!r} names no subgraph")
        if op == "output" and target != "output":
            raise f.fail(where, "the output node's target must be 'output'")
        if op == "call_function":
            return resolve_target(target, self.member, where)
        return target

    def _kwargs(self, entry, target, nodes: dict, where: str) -> dict:
        f = self.fields
        raw = f.get(entry, "kwargs", "dict" if self.version == 1 else "list", where)
        if self.version == 1:
            raw = self._decode(raw, nodes, f"{where}.kwargs")
            if not isinstance(raw, dict):
                raise f.fail(where, "kwargs must be a map")
            items = list(raw.items())
        else:
            items = [(k, self._decode(v, nodes, f"{where}.kwargs[{k[:40]!r}]"))
                     for k, v in f.pairs(raw, f"{where}.kwargs")]
        allowed = _argument_names(target)
        for key, _ in items:
            check_identifier(key, self.member, f"{where}: keyword argument")
            if key not in allowed:
                raise f.fail(where, f"{key!r} is not an argument of {_describe_target(target)}")
        if len(dict(items)) != len(items):
            raise f.fail(where, "a keyword argument is given twice")
        return dict(items)

    def _check_arity(self, op: str, target, args: tuple, kwargs: dict, where: str) -> None:
        f = self.fields
        if op in ("placeholder", "get_attr") and (args or kwargs):
            raise f.fail(where, f"a {op} node takes no arguments")
        if op == "output" and (len(args) != 1 or kwargs):
            raise f.fail(where, "the output node must return one value")
        if isinstance(target, OpOverload):
            self._check_schema(target, args, kwargs, where)
        elif isinstance(target, HigherOrderOperator) and \
                target.name() == "autograd_function_apply":
            if len(args) < 2 or not all(isinstance(a, fx.Node) and a.op == "get_attr"
                                        for a in args[:2]) or set(kwargs) != _HOP_KEYWORDS[
                                            "autograd_function_apply"]:
                raise f.fail(where, "autograd_function_apply takes its forward and backward "
                                    "subgraphs, then its inputs, and two index lists")
        elif isinstance(target, HigherOrderOperator):
            if len(args) != 4 or not all(isinstance(a, fx.Node) and a.op == "get_attr"
                                         for a in args[1:3] if target.name() == "cond") \
                    or not all(isinstance(a, fx.Node) and a.op == "get_attr"
                               for a in args[:2] if target.name() == "while_loop"):
                raise f.fail(where, f"{target.name()} takes four arguments, its branches or "
                                    f"loop functions as subgraphs")
        elif target in _GRAD_MODE_ARITY:
            if len(args) != _GRAD_MODE_ARITY[target] or kwargs:
                raise f.fail(where, f"{target.__name__} takes "
                                    f"{_GRAD_MODE_ARITY[target]} argument(s)")
        elif op == "call_function":
            try:
                inspect.signature(target).bind(*args)
            except TypeError as error:
                raise f.fail(where, f"wrong arguments for {target.__name__}: {error}") from None

    def _check_schema(self, op, args: tuple, kwargs: dict, where: str) -> None:
        arguments = op_schema(op).arguments
        positional = [a for a in arguments if not a.kwarg_only]
        if len(args) > len(positional):
            raise self.fields.fail(where, f"{op} takes {len(positional)} positional arguments, "
                                          f"got {len(args)}")
        given = {a.name for a in positional[:len(args)]}
        if given & set(kwargs):
            raise self.fields.fail(where, f"{op} gets {sorted(given & set(kwargs))} twice")
        missing = [a.name for a in arguments if not a.has_default_value()
                   and a.name not in given and a.name not in kwargs]
        if missing:
            raise self.fields.fail(where, f"{op} is missing the argument(s) {missing}")

    def _meta(self, node: fx.Node, entry, where: str) -> None:
        limit = self.limits.text_chars
        if "val" in entry:
            value = self.val(entry["val"], f"{where}.val")
            if value is not None or node.op not in ("output", "get_attr"):
                node.meta["val"] = value
        node.meta["stack_trace"] = check_text(entry.get("stack_trace", ""), self.member,
                                              f"{where}.stack_trace", limit)
        node.meta["nn_module_stack"] = self._module_stack(entry.get("nn_module_stack", []),
                                                          f"{where}.nn_module_stack")
        node.meta[USER_FRAMES] = ()
        if entry.get("eager_refuses") is not None:
            node.meta[EAGER_REFUSES] = self._eager_refusal(node, entry["eager_refuses"],
                                                           f"{where}.eager_refuses")
        if entry.get("saved_then_written") is not None:
            node.meta[SAVED_THEN_WRITTEN] = self._saved_then_written(
                node, entry["saved_then_written"], f"{where}.saved_then_written")
        if entry.get("writes_first") is not None:
            self.fields.check(entry["writes_first"], "bool", f"{where}.writes_first")
            if entry["writes_first"] and not (node.op == "call_function" and node.args
                                              and isinstance(node.args[0], fx.Node)):
                raise self.fields.fail(f"{where}.writes_first", "marks a node that writes no "
                                       "tensor argument")
            if entry["writes_first"]:
                node.meta[NEW_VALUE_OF_FIRST] = True

    def _eager_refusal(self, node: fx.Node, raw, where: str) -> tuple:
        """``(message, hint, argument positions)`` of an op eager's autograd refuses in a call
        that records a gradient (``ir.aliasing.EagerRefusal``): texts, and positions of the
        node's tensor arguments."""
        f, limit = self.fields, self.limits.text_chars
        f.check(raw, "list", where)
        if len(raw) != 3:
            raise f.fail(where, "must be [message, hint, argument positions]")
        message = check_text(f.check(raw[0], "str", f"{where}[0]"), self.member, where, limit)
        hint = check_text(f.check(raw[1], "str", f"{where}[1]"), self.member, where, limit)
        positions = tuple(f.check(i, "int", f"{where}[2]") for i in f.check(raw[2], "list",
                                                                             f"{where}[2]"))
        if not all(0 <= i < len(node.args) and isinstance(node.args[i], fx.Node)
                   for i in positions):
            raise f.fail(where, "argument positions must name tensor arguments of the node")
        return message, hint, positions

    def _saved_then_written(self, node: fx.Node, raw, where: str) -> tuple:
        """``(message, positions, patterns)`` of an op whose backward eager refuses in the
        calls where the arguments of one pattern require grad (``ir.saved_tensors``): a text,
        positions of tensor arguments among the flat leaves of the node's arguments, and
        tuples of indices into those positions."""
        f, limit = self.fields, self.limits.text_chars
        f.check(raw, "list", where)
        if len(raw) != 3 or node.op != "call_function":
            raise f.fail(where, "must be [message, positions, patterns] on a call")
        message = check_text(f.check(raw[0], "str", f"{where}[0]"), self.member, where, limit)
        positions = tuple(f.check(i, "int", f"{where}[1]") for i in f.check(raw[1], "list",
                                                                             f"{where}[1]"))
        leaves = pytree.tree_leaves((node.args, node.kwargs))
        if not all(0 <= i < len(leaves) and isinstance(leaves[i], fx.Node) for i in positions):
            raise f.fail(where, "positions must name tensor arguments of the node")
        patterns = []
        for pattern in f.check(raw[2], "list", f"{where}[2]"):
            indices = tuple(f.check(i, "int", f"{where}[2]") for i in f.check(
                pattern, "list", f"{where}[2]"))
            if not all(0 <= i < len(positions) for i in indices):
                raise f.fail(where, "a pattern must index the positions")
            patterns.append(indices)
        return message, positions, tuple(patterns)

    def _module_stack(self, raw, where: str) -> dict:
        f, limit = self.fields, self.limits.text_chars
        if self.version == 1:
            f.check(raw, "dict", where)
            items = [(k, *v) if isinstance(v, list) else (k, v) for k, v in raw.items()]
        else:
            items = [tuple(item) if isinstance(item, list) else (item,)
                     for item in f.check(raw, "list", where)]
        stack = {}
        for item in items:
            if len(item) != 3:
                raise f.fail(where, "each entry must be [key, path, type]")
            key, path, kind = (check_text(x, self.member, where, limit) for x in item)
            stack[key] = (path, kind)
        return stack

    # -- arguments ------------------------------------------------------------------------------
    def _decode(self, value, nodes: dict, where: str):
        """An argument from its tagged JSON form (``nodes``: the nodes defined so far)."""
        if not isinstance(value, dict):
            if isinstance(value, (bool, int, float, str)) or value is None:
                return check_text(value, self.member, where, self.limits.text_chars) \
                    if isinstance(value, str) else value
            raise self.fields.fail(where, f"an argument cannot be a {type(value).__name__}")
        if len(value) != 1:
            raise self.fields.fail(where, "a tagged argument has exactly one tag")
        (tag, inner), = value.items()
        return self._decode_tagged(tag, inner, nodes, where)

    def _decode_tagged(self, tag: str, inner, nodes: dict, where: str):
        f = self.fields
        if tag == "node":
            if not isinstance(inner, str) or inner not in nodes:
                raise f.fail(where, f"refers to {str(inner)[:80]!r}, which is not an earlier "
                                    f"node of this graph")
            return nodes[inner]
        if tag in ("list", "tuple"):
            items = [self._decode(v, nodes, f"{where}[{i}]")
                     for i, v in enumerate(f.check(inner, "list", where))]
            return items if tag == "list" else tuple(items)
        if tag == "dict":
            pairs = inner.items() if self.version == 1 and isinstance(inner, dict) else \
                f.pairs(inner, where)
            return {check_text(k, self.member, where, 256): self._decode(v, nodes, where)
                    for k, v in pairs}
        if tag == "float":
            if inner not in ("inf", "-inf", "nan"):
                raise f.fail(where, f"{str(inner)[:40]!r} is not a special float")
            return float(inner)
        if tag in _ENUMS:
            if inner not in _ENUMS[tag]:
                raise f.fail(where, f"unknown {tag} {str(inner)[:40]!r}")
            return _ENUMS[tag][inner]
        if tag == "device":
            return self._device(inner, where)
        raise f.fail(where, f"unknown argument form {tag[:40]!r}")

    def _device(self, text, where: str) -> torch.device:
        kind, _, index = (text if isinstance(text, str) else "").partition(":")
        if kind not in _DEVICE_TYPES or (index and not (index.isdigit() and len(index) < 4)):
            raise self.fields.fail(where, f"unknown device {str(text)[:40]!r}")
        return torch.device(text)

    # -- values (node.meta["val"]) --------------------------------------------------------------
    def val(self, value, where: str):
        """A node's value: a meta tensor, a tuple of values, a symbolic value, or a constant."""
        f = self.fields
        if value is None:
            return None
        f.check(value, "dict", where)
        if "tensor" in value:
            return self._tensor_val(f.get(value, "tensor", "dict", where), where)
        if "tuple" in value:
            return tuple(self.val(v, f"{where}[{i}]")
                         for i, v in enumerate(f.get(value, "tuple", "list", where)))
        if "sym" in value:
            return self._sym_val(value, where)
        if "value" in value:
            return self._decode(value["value"], {}, where)
        raise f.fail(where, "unknown value form")

    def _tensor_val(self, spec, where: str) -> torch.Tensor:
        f = self.fields
        dtype = DTYPES.get(f.get(spec, "dtype", "str", where))
        if dtype is None:
            raise f.fail(where, f"unknown dtype {spec['dtype'][:40]!r}")
        shape = [self.size(s, f"{where}.shape") for s in f.get(spec, "shape", "list", where)]
        stride = [self.size(s, f"{where}.stride") for s in f.get(spec, "stride", "list", where)]
        if len(shape) > _MAX_RANK or len(stride) != len(shape):
            raise f.fail(where, f"shape and stride must have the same rank (at most {_MAX_RANK})")
        static = [s for s in (*shape, *stride) if isinstance(s, int)]
        if math.prod(max(s, 1) for s in static) * dtype.itemsize >= _MAX_SIZE:
            raise f.fail(where, "the tensor is too large")
        try:
            return torch.empty_strided(shape, stride, dtype=dtype, device="meta")
        except RuntimeError as error:  # sizes and strides no tensor can have
            raise f.fail(where, f"invalid shape/stride: {str(error).splitlines()[0]}") from None

    def size(self, value, where: str):
        """One size or stride: a non-negative int or an integer expression of the symbols."""
        if isinstance(value, int) and not isinstance(value, bool):
            if not 0 <= value < _MAX_SIZE:
                raise self.fields.fail(where, f"size {value} is out of range")
            return value
        if not isinstance(value, str):
            raise self.fields.fail(where, "a size must be an integer or an expression")
        expr = self.expression(value, where)
        if not isinstance(expr, sympy.Expr) or expr.is_integer is not True:
            raise self.fields.fail(where, f"size {value[:80]!r} is not an integer expression")
        return self.env.symint(expr)

    def _sym_val(self, value, where: str):
        f = self.fields
        kind = f.get(value, "type", "str", where)
        expr = self.expression(f.get(value, "sym", "str", where), where)
        is_bool = is_condition(expr)
        if kind in ("SymBool", "SymInt") and is_bool:  # unbroken records comparisons of
            # sizes with a SymInt value (``ge: Sym(u0 >= 0)``); read them as the SymBool they are
            return self.env.symbool(expr)
        if kind == "SymInt" and not is_bool and expr.is_integer is True:
            return self.env.symint(expr)
        if kind == "SymFloat" and not is_bool and expr.is_real is not False:
            return self.env.symfloat(expr)
        raise f.fail(where, f"{str(expr)[:80]!r} is not a {kind[:20]}")

    def expression(self, text: str, where: str):
        """The expression ``text`` denotes (parsed once per distinct text)."""
        if text not in self._expressions:
            try:
                self._expressions[text] = parse_expression(text, self.symbols, self.budget)
            except ExpressionError as error:
                raise self.fields.fail(where, f"bad expression {text[:80]!r}: {error}") from None
        return self._expressions[text]


# The keyword arguments of the higher-order ops that take some.
_HOP_KEYWORDS = {"autograd_function_apply": frozenset({"non_differentiable_idx",
                                                       "saved_for_backward_idx"})}


def _argument_names(target) -> frozenset:
    if isinstance(target, OpOverload):
        return frozenset(a.name for a in op_schema(target).arguments)
    if isinstance(target, HigherOrderOperator):
        return _HOP_KEYWORDS.get(target.name(), frozenset())
    return frozenset()  # placeholders, outputs, other higher-order ops and builtins take none


def _describe_target(target) -> str:
    return str(target) if isinstance(target, OpOverload) else \
        f"{getattr(target, '__name__', target)} (which takes no keyword arguments)"
