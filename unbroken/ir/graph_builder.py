"""Build the torch.fx graph of one export: placeholders, op nodes, size arithmetic, branches.

The builder knows nothing of dispatch: ``ir.recorder`` computes each op on meta tensors and
asks the builder to write the node. The builder keeps the map from each meta tensor to the node
that currently holds its value (an in-place op rebinds its target), the user's location on
every node, and the graphs being built (the root graph and the open ``torch.cond`` /
``while_loop`` subgraphs, innermost last).

Conventions (relied on by ``passes.functionalize``):
- placeholders come first: parameters, buffers, lifted constants, user inputs;
- ops with several outputs get one ``operator.getitem`` node per output;
- every node has ``meta["val"]``, ``meta[USER_FRAMES]``, ``meta["stack_trace"]`` and
  ``meta["nn_module_stack"]`` (empty for size arithmetic, which belongs to no user line).
"""
from __future__ import annotations

import contextlib
import operator
import re
from collections.abc import Callable

import sympy
import torch
import torch.fx as fx
from torch.fx.node import map_aggregate

from ..symbolic.diagnostics import UnsupportedError, format_stack
from ..symbolic.functions import function_of
from ..symbolic.torch_compat import LazyGraphModule, set_grad_enabled
from .meta_keys import USER_FRAMES

__all__ = ["GraphBuilder", "meta_like"]

aten = torch.ops.aten
_META = torch.device("meta")
_CPU = torch.device("cpu")
_SYMBOLIC = (torch.SymInt, torch.SymFloat, torch.SymBool)


def meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the same size, stride, dtype (and no autograd history)."""
    return torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=_META)


def _sanitize(name: str) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    return name if name and not name[0].isdigit() else f"_{name}"


def node_name(func) -> str:
    """``add`` for ``aten.add.Tensor``: the op's name, as torch.export names its nodes."""
    packet = getattr(func, "overloadpacket", None)
    return _sanitize(packet.__name__ if packet is not None else getattr(func, "__name__", "op"))


class GraphBuilder:
    """The graphs of one export and the tensor -> node bindings.

    sym_value: expr -> ``torch.SymInt`` or ``torch.SymFloat`` (the shape environment's
        ``sym_value``), for the values of size arithmetic nodes; None when sizes are static.
    frames_provider: zero-arg callable returning the current user stack (tuple of UserFrame).
    module_stack_provider: zero-arg callable returning the current ``nn_module_stack`` dict.
    custom_provider: zero-arg callable returning the user's annotations in force
        (``torch.fx.traceback.annotate``: a node's ``meta["custom"]``), or None.
    """

    def __init__(self, *, sym_value=None, frames_provider=tuple, module_stack_provider=dict,
                 custom_provider=lambda: None):
        self.sym_value = sym_value
        self.frames_provider = frames_provider
        self.module_stack_provider = module_stack_provider
        self.custom_provider = custom_provider
        self._scopes: list[_Scope] = [_Scope(fx.Graph())]  # [root, open subgraphs...]
        self._nodes: dict[int, fx.Node] = {}           # id(meta tensor) -> node holding its value
        self._devices: dict[int, torch.device] = {}    # id(meta tensor) -> user-visible device
        self._alive: list[torch.Tensor] = []           # keeps ids stable during the trace
        # symbol -> (node, dim, a, b, tensor): the size of `tensor` (made by `node`) at `dim` is
        # a*symbol + b; inside a branch the tensor becomes an input of the subgraph
        self._symbol_sources: dict[sympy.Symbol, tuple] = {}
        self._values: dict[sympy.Symbol, fx.Node] = {}  # symbol -> its item node, any graph
        self._input_values: dict[sympy.Symbol, fx.Node] = {}  # symbol -> its int placeholder
        self._subgraph_asserts: dict[fx.Node, fx.Node] = {}  # anchor -> last assert after it
        self._first_user_input: fx.Node | None = None
        self._names: set[str] = set()
        self._reserved: set[str] = set()  # names kept for user inputs (reserve_names)
        self._stack_traces: dict[tuple, str] = {}  # user frames -> "stack_trace" (annotate)
        # id(meta tensor) -> a callable binding its current value, run when the tensor is first
        # read (``defer``); every entry belongs to the innermost open graph
        self._deferred: dict[int, Callable[[], None]] = {}

    # ----------------------------------------------------------------- graphs
    @property
    def graph(self) -> fx.Graph:
        """The graph being built: the root graph, or the innermost open subgraph."""
        return self._scopes[-1].graph

    @property
    def root_graph(self) -> fx.Graph:
        return self._scopes[0].graph

    def graph_module(self) -> fx.GraphModule:
        """The root graph as a GraphModule that owns the subgraphs it references. Its code is
        generated lazily (``LazyGraphModule``): the passes after the capture ``recompile()``
        it several times, and the program's module is made from its graph anyway."""
        return self._scopes[0].module(lazy=True)

    def unique_name(self, base: str, *, reserved: bool = False) -> str:
        """``base`` made a valid identifier, suffixed ``_1``, ``_2``... until no other node has
        it, nor (unless ``reserved``: the user input it is kept for) a reserved name."""
        base = _sanitize(base)
        name, i = base, 1
        while name in self._names or (name in self._reserved and not reserved):
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        self._reserved.discard(name)
        return name

    def reserve_names(self, names) -> None:
        """Keep ``names`` for the user inputs' placeholders, made later: as in torch.export,
        a user input keeps its name and a parameter, buffer or constant that would take it
        is suffixed (``forward(self, p_x)`` with a parameter ``x``: ``p_x`` and ``p_x_1``)."""
        self._reserved |= {_sanitize(n) for n in names} - self._names

    # ----------------------------------------------------------------- inputs and bindings
    def add_placeholder(self, name: str, value, *, user_input: bool, device=_CPU) -> fx.Node:
        """A graph input. ``value`` is a meta tensor, a SymInt/int, or another constant.
        Inputs that are not user inputs (state, constants) go before the first user input,
        or, with none, before the first node that is not a placeholder: a constant lifted
        mid-trace (``torch.tensor([...])`` in a ``forward`` without inputs) must still come
        before every computation, in the order ``[*state, *constants, *user_inputs]``."""
        name = self.unique_name(name, reserved=user_input)
        root = self.root_graph
        anchor = None if user_input else self._first_user_input or _first_computation(root)
        if anchor is None:
            node = root.placeholder(name)
        else:
            with root.inserting_before(anchor):
                node = root.placeholder(name)
        if user_input and self._first_user_input is None:
            self._first_user_input = node
        node.meta["val"] = value
        if isinstance(value, torch.Tensor):
            self.bind(value, node, device)
        return node

    def bind(self, tensor: torch.Tensor, node: fx.Node, device=None) -> None:
        """Make ``node`` the current producer of ``tensor``'s value."""
        if self._deferred:
            self._deferred.pop(id(tensor), None)
        self._nodes[id(tensor)] = node
        self._alive.append(tensor)
        if device is not None:
            self._devices[id(tensor)] = device

    def forget(self, tensor: torch.Tensor) -> fx.Node:
        """Unbind ``tensor``; returns the node that held its value."""
        return self._nodes.pop(id(tensor))

    def is_tracked(self, tensor: torch.Tensor) -> bool:
        return id(tensor) in self._nodes

    def bound_node(self, tensor: torch.Tensor) -> fx.Node | None:
        """The node last bound to ``tensor`` (None when untracked), its deferred binding left
        to run: the value ops recorded so far read."""
        return self._nodes.get(id(tensor))

    def producer(self, tensor: torch.Tensor) -> fx.Node | None:
        """The node holding ``tensor``'s value in whichever graph made it, or None."""
        if self._deferred:
            self._settle_one(tensor)
        return self._nodes.get(id(tensor))

    def defer(self, tensor: torch.Tensor, binder: Callable[[], None]) -> None:
        """``tensor``'s binding is out of date; ``binder()`` records the nodes computing its
        current value and binds them, when the tensor is first read (``node_of``,
        ``producer``), or before a subgraph opens or closes. A write through a view makes
        every other view of its base stale (``Aliases``): most are never read again, and
        re-deriving each at each write was quadratic in a loop writing one tensor piece by
        piece. ``bind`` supersedes it."""
        self._deferred[id(tensor)] = binder

    def cancel(self, tensor: torch.Tensor) -> None:
        """Forget ``tensor``'s deferred binding (no code can read it any more)."""
        self._deferred.pop(id(tensor), None)

    def _settle_one(self, tensor: torch.Tensor) -> None:
        """Run ``tensor``'s deferred binding, if it has one (before it is read)."""
        binder = self._deferred.pop(id(tensor), None)
        if binder is not None:
            binder()

    def settle(self) -> None:
        """Run every deferred binding, in the order deferred."""
        while self._deferred:
            self._deferred.pop(next(iter(self._deferred)))()

    def node_of(self, tensor: torch.Tensor) -> fx.Node:
        """The node holding ``tensor``'s value, usable in the graph being built: a value of
        an enclosing graph becomes an extra input of the open subgraph."""
        if self._deferred:
            self._settle_one(tensor)
        node = self._nodes[id(tensor)]
        scope = self._scopes[-1]
        if node.graph is scope.graph:
            return node
        return scope.capture(tensor, node)

    def device_of(self, tensor: torch.Tensor) -> torch.device:
        return self._devices.get(id(tensor), _CPU)

    def is_placeholder(self, tensor: torch.Tensor) -> bool:
        """Whether ``tensor`` is an input of the graph (a user input, a parameter, a buffer, a
        lifted constant)."""
        node = self._nodes.get(id(tensor))
        return node is not None and node.op == "placeholder"

    # ----------------------------------------------------------------- symbols
    def bind_symbol(self, expr, node: fx.Node, dim: int, tensor=None) -> None:
        """Record that ``node``'s size at ``dim`` is ``expr``: a symbol, or ``a*s + b``
        (a derived dim), from which the graph can compute ``s = (size - b) // a``."""
        symbols = expr.free_symbols
        if len(symbols) != 1:
            return
        (symbol,) = symbols
        a, b = expr.coeff(symbol), expr.subs(symbol, 0)
        if a.is_Integer and b.is_Integer and int(a) > 0 and expr == a * symbol + b:
            current = self._symbol_sources.get(symbol)
            if current is None or (current[2], current[3]) != (1, 0):  # prefer a plain dim
                self._symbol_sources[symbol] = (node, dim, int(a), int(b),
                                                tensor if tensor is not None else
                                                node.meta.get("val"))

    def bind_input_value(self, symbol, node: fx.Node) -> None:
        """``node``, a placeholder of the root graph (a Python ``int`` input declared
        dynamic), is ``symbol``'s value."""
        self._input_values[symbol] = node

    def bind_value(self, symbol, node: fx.Node) -> None:
        """``node`` (e.g. an ``item``) computes ``symbol`` in the graph being built."""
        self._scopes[-1].sym_nodes[symbol] = node
        self._values.setdefault(symbol, node)

    def assert_in_subgraph(self, fact, message: str, frames) -> fx.Node | None:
        """An ``aten._assert_scalar(fact, message)`` inside the subgraph (a torch.cond branch,
        a loop body) whose ``item`` nodes define all of ``fact``'s symbols, after the last of
        them: it runs when that subgraph runs, as eager's check does. None when the symbols
        are not all values read in one subgraph."""
        nodes = [self._values.get(symbol) for symbol in fact.free_symbols]
        if not nodes or any(n is None for n in nodes):
            return None
        graphs = {n.graph for n in nodes}
        if len(graphs) != 1 or self._scopes[0].graph in graphs:
            return None
        (graph,) = graphs
        order = {n: i for i, n in enumerate(graph.nodes)}
        scope = _Scope(graph)
        scope.sym_nodes = {symbol: self._values[symbol] for symbol in fact.free_symbols}
        self._scopes.append(scope)
        anchor = max(nodes, key=order.__getitem__)
        try:  # after the asserts already placed there, in the program's order
            node = self.assert_after(self._subgraph_asserts.get(anchor, anchor), fact, message,
                                     frames)
        finally:
            self._scopes.pop()
        self._subgraph_asserts[anchor] = node
        owner = getattr(graph, "owning_module", None)
        if owner is not None:
            owner.recompile()
        return node

    def definition_of(self, symbol) -> fx.Node | None:
        """The node after which a data-dependent symbol is known (``item`` / the op whose output
        size it is), or None for input sizes."""
        root = self._scopes[0].sym_nodes
        if symbol in root and root[symbol].target is aten.item.default:
            return root[symbol]
        source = self._symbol_sources.get(symbol)
        return source[0] if source is not None and source[0].op != "placeholder" else None

    def sym_node(self, value) -> fx.Node | int | float | bool:
        """The node computing a SymInt/SymFloat/SymBool argument (built from its expression)."""
        return self.expr_node(value.node.expr)

    def expr_node(self, expr):
        """The node computing ``expr`` in the graph being built (a number stays a number)."""
        if expr.is_Integer:
            return int(expr)
        if expr.is_Number:
            return float(expr)
        if expr is sympy.true or expr is sympy.false:
            return bool(expr)
        sym_nodes = self._scopes[-1].sym_nodes
        if expr in sym_nodes:
            return sym_nodes[expr]
        node = self._build_expr(expr)
        sym_nodes[expr] = node
        return node

    def _build_expr(self, expr) -> fx.Node:
        if isinstance(expr, sympy.Symbol):
            node = self._read_symbol(expr)
        else:
            node = self._build_compound(expr)
        if isinstance(expr, sympy.Expr):  # a condition (Eq, Or...) keeps the SymBool it computed
            node.meta["val"] = self.sym_value(expr) if self.sym_value else None
        _no_location(node)
        return node

    def _read_symbol(self, symbol) -> fx.Node:
        """``sym_size`` of the input the symbol was bound to (``(size - b) // a`` when it is a
        derived dim ``a*s + b``)."""
        if symbol in self._input_values and self.graph is self.root_graph:
            return self._input_values[symbol]
        outer = self._input_values.get(symbol, self._values.get(symbol))
        if outer is not None and outer.graph is not self.graph and \
                any(s.graph is outer.graph for s in self._scopes[:-1]):
            # an int input, or an item read before the subgraph: an extra input of it
            return self._scopes[-1].capture_symbol(symbol, outer)
        if symbol not in self._symbol_sources:
            raise UnsupportedError(
                f"the size `{symbol}` has no input it can be read from"
                + (" inside this branch" if len(self._scopes) > 1 else ""), code="UB117",
                frames=self.frames_provider(),
                hint="Derive sizes from input tensors (inside a torch.cond branch, from "
                     "tensors the branch receives or reads).")
        source, dim, a, b, tensor = self._symbol_sources[symbol]
        if source.graph is not self.graph and isinstance(tensor, torch.Tensor):
            source = self.node_of(tensor)  # a branch reads the size from its own input
        node = self.graph.call_function(aten.sym_size.int, (source, dim))
        if (a, b) != (1, 0):
            node.meta["val"] = self.sym_value(a * symbol + b) if self.sym_value else None
            if b:
                node = self._sym_call(operator.sub, (node, b))
            if a != 1:
                node = self._sym_call(operator.floordiv, (node, a))
        return node

    def _build_compound(self, expr) -> fx.Node:
        """Nodes computing a sympy expression over input sizes, with the same Python
        semantics as the expression (the ``graph`` rule of ``symbolic.functions``)."""
        entry = function_of(expr)
        if entry is None or entry.graph is None:
            raise UnsupportedError(f"cannot compute the size expression `{expr}` in the graph",
                                   code="UB117", frames=self.frames_provider(),
                                   hint="Compute this value from tensors (e.g. with torch ops "
                                        "on a tensor of sizes) or make the dimension static.")
        pairs = [(self.expr_node(a), a) for a in expr.args]
        if entry.cls in (sympy.Add, sympy.Mul):  # sympy puts the constant first: symbols first
            pairs = sorted(pairs, key=lambda p: not isinstance(p[0], fx.Node))
        if not entry.nary:
            return self._sym_call(entry.graph, tuple(p for p, _ in pairs), expr)
        result, so_far = pairs[0]
        for part, arg in pairs[1:]:
            so_far = entry.cls(so_far, arg)
            result = self._sym_call(entry.graph, (result, part), so_far)
        return result

    def _sym_call(self, target, args, expr=None) -> fx.Node:
        """A node ``target(*args)`` of size arithmetic. Its value is ``expr``'s (the sympy
        expression it computes) when known: calling ``target`` on the arguments' symbolic
        values would run torch's own checks as if the program made them (``SymFloat``'s
        ``__pow__`` does ``torch._check(base >= 0)``), turning ``f * f`` of a float ``item``
        into an assertion ``f >= 0`` the program never made. A condition (``Eq``, ``And``)
        keeps the ``SymBool`` its operator computes."""
        node = self.graph.call_function(target, args)
        if isinstance(expr, sympy.Expr) and self.sym_value is not None:
            node.meta["val"] = self.sym_value(expr)
        else:
            values = [a.meta["val"] if isinstance(a, fx.Node) else a for a in args]
            node.meta["val"] = target(*values)
        _no_location(node)
        return node

    # ----------------------------------------------------------------- op nodes
    def call(self, func, args, kwargs, out) -> fx.Node:
        """Append ``func(*args, **kwargs)`` whose value is ``out``: tensor arguments become
        the nodes holding them, symbolic values the nodes computing them."""
        node = self.graph.create_node(
            "call_function", func, map_aggregate(tuple(args), self._as_arg),
            map_aggregate(dict(kwargs), self._as_arg), name=node_name(func))
        self.annotate(node, out)
        return node

    # ----------------------------------------------------------------- grad mode
    def record_grad_mode(self, enabled: bool, previous_value: bool) -> fx.Node:
        """Record the start of a grad-mode region (``no_grad``, ``enable_grad``...):
        ``previous = torch.is_grad_enabled()`` then ``torch._C._set_grad_enabled(enabled)``.
        Returns the ``previous`` node, which :meth:`record_grad_mode_restore` sets back: at run
        time the region ends in the caller's mode, not in the mode of the export.
        ``previous_value`` is that mode during tracing (the node's ``val``)."""
        previous = self.graph.call_function(torch.is_grad_enabled, ())
        self.annotate(previous, previous_value)
        self.annotate(self.graph.call_function(set_grad_enabled, (enabled,)), None)
        return previous

    def record_grad_mode_restore(self, previous: fx.Node) -> None:
        """End the region :meth:`record_grad_mode` started; a region that recorded no op
        leaves nothing in the graph."""
        setter = previous.next
        if setter.next.op == "root" and not previous.users:
            self.graph.erase_node(setter)
            self.graph.erase_node(previous)
            return
        self.annotate(self.graph.call_function(set_grad_enabled, (previous,)), None)

    def record_grad_mode_call(self, target, args, val) -> fx.Node:
        """Copy one grad-mode call (``torch.is_grad_enabled()`` / ``_set_grad_enabled(x)``)
        into the graph; returns its node (which later copies take as their argument)."""
        node = self.graph.call_function(target, tuple(args))
        self.annotate(node, val)
        return node

    def annotate(self, node: fx.Node, val) -> None:
        """``val``, the current user location (stack, module path) and the user's annotations
        in force on ``node``."""
        frames = tuple(self.frames_provider())
        node.meta["val"] = val
        node.meta[USER_FRAMES] = frames
        node.meta["stack_trace"] = self._stack_trace(frames)
        node.meta["nn_module_stack"] = dict(self.module_stack_provider())
        custom = self.custom_provider()
        if custom:
            node.meta["custom"] = dict(custom)

    def _stack_trace(self, frames: tuple) -> str:
        """``frames`` formatted as a node's ``stack_trace`` (once per distinct stack: the
        nodes of one line of the user's code share it)."""
        text = self._stack_traces.get(frames)
        if text is None:
            text = self._stack_traces[frames] = format_stack(frames) + "\n" if frames else ""
        return text

    def bind_outputs(self, node: fx.Node, out, device) -> None:
        """Bind ``out`` to ``node`` (a tensor), or each tensor of a tuple to a ``getitem``."""
        if isinstance(out, torch.Tensor):
            self.bind(out, node, device)
        elif isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    getter = self.graph.call_function(operator.getitem, (node, i))
                    self.annotate(getter, item)
                    self.bind(item, getter, device)

    def assert_after(self, anchor: fx.Node, fact, message: str, frames) -> fx.Node:
        """An ``aten._assert_scalar(fact, message)`` right after ``anchor`` (the program
        raises when a run breaks ``fact``), located at ``frames``. ``fact`` is computed with
        the cached nodes defined before that point only: one cached for a part of it
        (``max(u0, u1) // 2`` for a later ``zeros``) may come later in the graph than the
        values the assertion needs; such parts are computed again, before it."""
        graph = self.graph
        with graph.inserting_after(anchor):
            node = graph.call_function(aten._assert_scalar.default, (None, message))
        scope = self._scopes[-1]
        cached = scope.sym_nodes
        scope.sym_nodes = _defined_before(graph, node, cached)
        try:
            with graph.inserting_before(node):
                node.args = (self.expr_node(fact), message)
        finally:
            scope.sym_nodes = cached
        self.annotate(node, None)
        node.meta.update(user_frames=frames, stack_trace=format_stack(frames) + "\n")
        return node

    def assert_at_inputs(self, fact, message: str, frames) -> fx.Node:
        """An ``aten._assert_scalar(fact, message)`` right after the placeholders of the root
        graph, computing ``fact`` (over input sizes only) with size nodes of its own: a node
        cached for an expression may be defined later in the graph than this point."""
        graph = self.root_graph
        last = [n for n in graph.nodes if n.op == "placeholder"][-1]
        with graph.inserting_after(last):
            node = graph.call_function(aten._assert_scalar.default, (None, message))
        scope = self._scopes[0]
        cached, scope.sym_nodes = scope.sym_nodes, {}
        try:
            with graph.inserting_before(node):
                node.args = (self.expr_node(fact), message)
        finally:
            scope.sym_nodes = cached
        self.annotate(node, None)
        node.meta.update(user_frames=frames, stack_trace=format_stack(frames) + "\n")
        return node

    def set_output(self, values) -> fx.Node:
        """The output node: a tuple of nodes (tensors, sizes) and constants."""
        self.settle()  # nothing is recorded after the output
        return self.graph.output(tuple(self._as_arg(v) for v in values))

    def _as_arg(self, value):
        """A graph argument for ``value``: the node holding a tensor, the node computing a
        symbolic value, anything else as it is."""
        if isinstance(value, torch.Tensor):
            return self.node_of(value)
        if isinstance(value, _SYMBOLIC):
            return self.sym_node(value)
        return value

    # ----------------------------------------------------------------- subgraphs
    def open_subgraph(self, operands: list) -> list:
        """Start a subgraph whose inputs are the ``operands`` (meta tensors); returns the meta
        tensors that stand for them inside."""
        self.settle()  # a value of this graph read inside is computed here, not in the subgraph
        scope = _Scope(fx.Graph())
        self._scopes.append(scope)
        stand_ins = []
        for index, operand in enumerate(operands):
            stand_in = meta_like(operand)
            node = scope.graph.placeholder(f"arg{index}")
            node.meta["val"] = stand_in
            self.bind(stand_in, node, self.device_of(operand))
            stand_ins.append(stand_in)
            scope.operands.append(node)
        return stand_ins

    def close_subgraph(self, outputs: list, *, single: bool = False,
                       split: int | None = None) -> _Scope:
        """Finish the open subgraph, returning ``outputs`` (meta tensors, or None for no value;
        ``single``: the one output itself rather than a tuple, as while_loop's cond_fn must;
        ``split``: two tuples, ``outputs[:split]`` and the rest, as autograd_function_apply's
        forward returns its outputs and its saved values); returns its scope."""
        self.settle()
        scope = self._scopes[-1]
        nodes = tuple(None if t is None else self.node_of(t) for t in outputs)
        if split is not None:
            nodes = (nodes[:split], nodes[split:])
        scope.graph.output(nodes[0] if single else nodes)
        self._scopes.pop()
        return scope

    def abandon_subgraph(self) -> None:
        """Drop an open subgraph after a failure inside it."""
        if len(self._scopes) > 1:
            self._deferred.clear()  # bindings of the dropped graph
            self._scopes.pop()

    def higher_order(self, hop, name, scopes, labels, operands, outputs, arguments,
                     options=None) -> list:
        """One higher-order node over closed subgraph scopes. Values of the enclosing graphs
        that a subgraph read become extra inputs of every subgraph (after the operands).
        ``arguments(modules, inputs, extra)`` builds the node's arguments; returns fresh meta
        tensors for the results; ``options``: its keyword arguments."""
        captured: dict = {}
        for scope in scopes:
            captured.update(scope.captured_tensors)
        extra = list(captured.values())
        modules = []
        for scope, label in zip(scopes, labels):
            scope.order_inputs(extra, self)
            attribute = self._scopes[-1].add_module(label, scope.module())
            modules.append(self.graph.get_attr(attribute))
        results = [meta_like(t) for t in outputs]
        node = self.graph.create_node(
            "call_function", hop,
            arguments(modules, [self.node_of(t) for t in operands],
                      [self._outer_value(t) for t in extra]), options or {}, name=name)
        self.annotate(node, tuple(results))
        self.bind_outputs(node, tuple(results), self.device_of(operands[0]) if operands else _CPU)
        return results


    def _outer_value(self, value) -> fx.Node:
        """The node of a value a subgraph captured, in the graph being built: a tensor's, or
        a symbol's (read, or captured again by an enclosing subgraph)."""
        if isinstance(value, _CapturedSymbol):
            return self.expr_node(value.symbol)
        return self.node_of(value)

    def autograd_apply(self, hop, fwd: _Scope, bwd: _Scope, operands, outputs, options) -> list:
        """``autograd_function_apply`` over a custom Function's forward and backward scopes.

        Values of the enclosing graphs that either body read (a constant made in the body, a
        tensor reached through a closure) are passed as extra inputs after the operands, as
        torch.cond's are. The operator's backward takes only (gradients, saved values) and
        returns one gradient per input: values the backward read are threaded through the
        forward's saved values, and the extra inputs get no gradient (None), as in eager, where
        a Function's forward runs without recording autograd history."""
        for scope in (fwd, bwd):
            symbol = next((v.symbol for v in scope.captured_tensors.values()
                           if isinstance(v, _CapturedSymbol)), None)
            if symbol is not None:
                raise UnsupportedError(
                    f"an autograd.Function reads the size `{symbol}` from outside its own "
                    "inputs", code="UB117", frames=self.frames_provider(),
                    hint="Pass the value to the Function as a tensor argument.")
        bwd_only = [t for key, t in bwd.captured_tensors.items()
                    if key not in fwd.captured_tensors]
        extra = [*fwd.captured_tensors.values(), *bwd_only]
        fwd.order_inputs(extra, self)
        from_bwd = list(bwd.captured_tensors.values())
        if from_bwd:
            out = next(n for n in fwd.graph.nodes if n.op == "output")
            results, saved = out.args[0]
            out.args = ((results, (*saved, *(fwd.captured[id(t)] for t in from_bwd))),)
            bwd.order_inputs([], self)
            placeholders = [n for n in bwd.graph.nodes if n.op == "placeholder"]
            captured_nodes = {bwd.captured[id(t)] for t in from_bwd}
            last = [n for n in placeholders if n not in captured_nodes][-1]
            for tensor in from_bwd:  # after the gradients and the saved values, in this order
                node = bwd.captured[id(tensor)]
                last.append(node)
                last = node
        if extra:
            out = next(n for n in bwd.graph.nodes if n.op == "output")
            grads = out.args[0] if isinstance(out.args[0], tuple) else (out.args[0],)
            out.args = ((*grads, *(None for _ in extra)),)
        modules = [self.graph.get_attr(self._scopes[-1].add_module(label, scope.module()))
                   for scope, label in ((fwd, "fwd"), (bwd, "bwd"))]
        results = [meta_like(t) for t in outputs]
        node = self.graph.create_node(
            "call_function", hop, (*modules, *(self.node_of(t) for t in operands),
                                   *(self._detached(t) for t in extra)),
            options, name="autograd_function_apply")
        self.annotate(node, tuple(results))
        self.bind_outputs(node, tuple(results), self.device_of(operands[0]) if operands else _CPU)
        return results


    def _detached(self, tensor: torch.Tensor) -> fx.Node:
        """``tensor``'s node, detached when it may require grad at run time (a floating value:
        a parameter, or computed from one): an extra input of a Function's body must not make
        the Function's outputs require grad (in eager only ``apply``'s own arguments do)."""
        node = self.node_of(tensor)
        if not (tensor.is_floating_point() or tensor.is_complex()):
            return node
        detached = self.graph.create_node("call_function", torch.ops.aten.detach.default,
                                          (node,), name="detach")
        self.annotate(detached, meta_like(tensor).detach())
        return detached


def _first_computation(graph: fx.Graph) -> fx.Node | None:
    """The first node of ``graph`` that is not a placeholder, or None."""
    return next((node for node in graph.nodes if node.op != "placeholder"), None)


def _no_location(node: fx.Node) -> None:
    node.meta[USER_FRAMES] = ()
    node.meta["stack_trace"] = ""
    node.meta["nn_module_stack"] = {}


class _CapturedSymbol:
    """A symbol a subgraph reads from an enclosing graph (``outer``: its node there)."""

    __slots__ = ("symbol", "outer")

    def __init__(self, symbol, outer: fx.Node):
        self.symbol, self.outer = symbol, outer


class _Scope:
    """One graph being built: the root graph, or the body of a subgraph.

    graph: the fx graph; operands: a subgraph's inputs for its declared operands (first);
    captured: id(outer tensor) -> this graph's input standing for it (values the subgraph read
    from enclosing graphs); modules: name -> GraphModule of the subgraphs it references;
    sym_nodes: expr -> the node computing it in this graph.
    """

    def __init__(self, graph: fx.Graph):
        self.graph = graph
        self.operands: list[fx.Node] = []
        self.captured: dict[int, fx.Node] = {}
        self.captured_tensors: dict[int, torch.Tensor] = {}
        self.modules: dict[str, fx.GraphModule] = {}
        self.sym_nodes: dict = {}

    def capture(self, tensor: torch.Tensor, outer: fx.Node) -> fx.Node:
        return self._capture(id(tensor), tensor, outer)

    def capture_symbol(self, symbol, outer: fx.Node) -> fx.Node:
        """The input standing for ``symbol`` (an int input, an item of an enclosing graph,
        whose node there is ``outer``)."""
        node = self._capture(("symbol", symbol), _CapturedSymbol(symbol, outer), outer)
        self.sym_nodes[symbol] = node
        return node

    def _capture(self, key, value, outer: fx.Node) -> fx.Node:
        """The input standing for ``value`` (a tensor, a symbol) of an enclosing graph, made
        before the graph's first node the first time it is read."""
        node = self.captured.get(key)
        if node is None:
            first = next(iter(self.graph.nodes), None)
            with self.graph.inserting_before(first) if first is not None else \
                    contextlib.nullcontext():
                node = self.graph.placeholder(f"captured_{len(self.captured)}")
            node.meta.update(val=outer.meta.get("val"), user_frames=(), stack_trace="",
                             nn_module_stack={})
            self.captured[key] = node
            self.captured_tensors[key] = value
        return node

    def order_inputs(self, extra: list, builder: GraphBuilder) -> None:
        """Make the inputs: the declared operands, then one per value of ``extra`` (tensors
        and symbols; creating unused inputs for values only the other subgraph read), in that
        order."""
        ordered = list(self.operands)
        for value in extra:
            if isinstance(value, _CapturedSymbol):
                ordered.append(self.capture_symbol(value.symbol, value.outer))
                continue
            if id(value) not in self.captured:
                self.capture(value, builder.producer(value))
            ordered.append(self.captured[id(value)])
        first_other = next(n for n in self.graph.nodes if n.op != "placeholder")
        for node in ordered:
            first_other.prepend(node)

    def add_module(self, label: str, module: fx.GraphModule) -> str:
        index = sum(n.startswith(f"{label}_graph_") for n in self.modules)
        name = f"{label}_graph_{index}"
        self.modules[name] = module
        return name

    def module(self, lazy: bool = False) -> fx.GraphModule:
        owner = torch.nn.Module()
        for name, module in self.modules.items():
            owner.add_module(name, module)
        return (LazyGraphModule if lazy else fx.GraphModule)(owner, self.graph)


def _defined_before(graph: fx.Graph, point: fx.Node, sym_nodes: dict) -> dict:
    """The entries of ``sym_nodes`` (expr -> node) whose node comes before ``point``."""
    position = {n: i for i, n in enumerate(graph.nodes)}
    limit = position[point]
    return {expr: n for expr, n in sym_nodes.items()
            if not isinstance(n, fx.Node) or position.get(n, limit) < limit}
