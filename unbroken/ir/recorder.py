"""Record the ATen operators that leaf calls dispatch to, on meta tensors, into a torch.fx.Graph.

The recorder is a ``TorchDispatchMode``. While it is active (``with recorder.recording():``),
every ATen operator that reaches the Python dispatch key on our meta tensors is

1. computed on meta tensors (factories that asked for a real device are computed on ``meta``;
   real tensors that show up — constants built inside forward(), tensor attributes that are not
   buffers — are *lifted* to placeholders and replaced by meta copies), and
2. appended to the graph as ``call_function(op_overload, args, kwargs)`` whose tensor arguments
   are the nodes that produced them, with ``meta["val"]``, ``meta["stack_trace"]``,
   ``meta["nn_module_stack"]`` and ``meta["user_frames"]``.

Conventions (relied on by ``passes.functionalize``):
- placeholders come first: parameters, buffers, lifted constants, user inputs;
- an in-place op returns the tensor it mutated, so that tensor now maps to the in-place node:
  later uses see the new value;
- ops with several outputs get one ``operator.getitem`` node per output.

Decisions that need tensor *values* (``item``, ops with data-dependent output shapes) are
refused here with a ``DataDependentError`` / ``UnsupportedError``; the frontend adds the
user's stack and turns them into graph breaks.
"""
from __future__ import annotations

import contextlib
import math
import operator
import re

import sympy
import torch
import torch.fx as fx
from torch.utils import _pytree as pytree
from torch.utils._python_dispatch import (TorchDispatchMode, _disable_current_modes,
                                          _pop_mode_temporarily)

from ..symbolic.diagnostics import DataDependentError, UnsupportedError, format_stack
from .aliasing import Aliases, is_inplace_op, is_view_op
from .data_dependent import DATA_DEPENDENT_SIZES as _DATA_DEPENDENT_SIZES
from .data_dependent import SCALAR_OPS as _SCALAR_OPS
from .data_dependent import integer_indexing as _integer_indexing

__all__ = ["Recorder"]

aten = torch.ops.aten

_VALUE_OPS = {aten.item.default, aten._local_scalar_dense.default, aten.is_nonzero.default,
              aten.equal.default}
# Ops that write arguments they do not return, and the functional op that returns the new
# values of those arguments after its own outputs. They are recorded as the functional op plus
# one in-place `copy_` per written argument (the convention `passes.functionalize` expects).
_FUNCTIONAL_WRITERS = {
    aten._native_batch_norm_legit.default: aten._native_batch_norm_legit_functional.default,
}
_META = torch.device("meta")
_CPU = torch.device("cpu")


def meta_like(tensor: torch.Tensor) -> torch.Tensor:
    """A meta tensor with the same size, stride, dtype (and no autograd history)."""
    return torch.empty_strided(tensor.size(), tensor.stride(), dtype=tensor.dtype, device=_META)


def _sanitize(name: str) -> str:
    name = re.sub(r"[^0-9a-zA-Z_]", "_", name)
    return name if name and not name[0].isdigit() else f"_{name}"


class Recorder(TorchDispatchMode):
    """Builds the graph of one export. See the module docstring for the conventions.

    frames_provider: zero-arg callable returning the current user stack (tuple of UserFrame).
    module_stack_provider: zero-arg callable returning the current ``nn_module_stack`` dict.
    """

    def __init__(self, frames_provider=tuple, module_stack_provider=dict):
        super().__init__()
        self._scopes: list[_Scope] = [_Scope(fx.Graph())]  # [root, branch subgraphs...]
        self.frames_provider = frames_provider
        self.module_stack_provider = module_stack_provider
        self.constants: dict[str, torch.Tensor] = {}   # lifted placeholder name -> real tensor
        self.constant_targets: dict[str, str] = {}     # placeholder name -> constant name
        self._nodes: dict[int, fx.Node] = {}           # id(meta tensor) -> node holding its value
        self._devices: dict[int, torch.device] = {}    # id(meta tensor) -> user-visible device
        self._alive: list[torch.Tensor] = []           # keeps ids stable during the trace
        self._lifted: dict[int, torch.Tensor] = {}     # id(real tensor) -> its meta copy
        # symbol -> (node, dim, a, b, tensor): the size of `tensor` (made by `node`) at `dim` is
        # a*symbol + b; inside a branch the tensor becomes an input of the subgraph
        self._symbol_sources: dict[sympy.Symbol, tuple] = {}
        self._first_user_input: fx.Node | None = None
        self._names: set[str] = set()
        # Native PyTorch code reads `.device` off our meta tensors and asks for `meta`; such
        # requests mean "the device of the traced tensors", recorded as this device.
        self.default_device = _CPU
        # Meta tensors that are not tracked may be lifted as constants only when the model
        # itself lives on the meta device (no values to keep); otherwise their data was lost.
        self.allow_meta_constants = False
        self.symint_factory = None
        self.env = None  # the ShapeEnvironment: with one, .item() and nonzero() get symbols
        self.shadow = None  # ir.shadow.Shadow in "find them all" mode: real values beside
        self.aliases = Aliases(self)  # views and their bases, for writes through views
        self.decompositions: dict = {}  # op -> decomposition applied as ops arrive
        # run_decompositions(): True lowers every composite; "aliasing" only those that return
        # views (to.dtype, tensor_split...), which a decomposition table never preserves
        self.decompose_composites = False
        self._this_call: set[int] = set()  # ids of tensors made during the current leaf call
        self._recording = 0   # depth of recording() contexts
        self._suspended = 0   # depth of composite ops being computed without recording  # expr -> SymInt; set by the pipeline when sizes are symbolic

    @property
    def graph(self) -> fx.Graph:
        """The graph being recorded into: the root graph, or the innermost open branch."""
        return self._scopes[-1].graph

    @property
    def root_graph(self) -> fx.Graph:
        return self._scopes[0].graph

    def graph_module(self) -> fx.GraphModule:
        """The root graph as a GraphModule that owns the branch subgraphs it references."""
        return self._scopes[0].module()

    # ----------------------------------------------------------------- inputs and constants
    def unique_name(self, base: str) -> str:
        base = _sanitize(base)
        name, i = base, 1
        while name in self._names:
            name, i = f"{base}_{i}", i + 1
        self._names.add(name)
        return name

    def add_placeholder(self, name: str, value, *, user_input: bool, device=_CPU) -> fx.Node:
        """A graph input. ``value`` is a meta tensor, a SymInt/int, or another constant."""
        name = self.unique_name(name)
        root = self.root_graph
        if user_input or self._first_user_input is None:
            node = root.placeholder(name)
        else:
            with root.inserting_before(self._first_user_input):
                node = root.placeholder(name)
        if user_input and self._first_user_input is None:
            self._first_user_input = node
        node.meta["val"] = value
        if isinstance(value, torch.Tensor):
            self.bind(value, node, device)
        return node

    @property
    def _sym_nodes(self) -> dict:
        """expr -> the node computing it, in the graph being recorded."""
        return self._scopes[-1].sym_nodes

    def bind_symbol(self, expr, node: fx.Node, dim: int, tensor=None) -> None:
        """Record that input ``node``'s size at ``dim`` is ``expr``: a symbol, or ``a*s + b``
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

    def bind(self, tensor: torch.Tensor, node: fx.Node, device=None) -> None:
        """Make ``node`` the current producer of ``tensor``'s value."""
        self._nodes[id(tensor)] = node
        self._alive.append(tensor)
        if device is not None:
            self._devices[id(tensor)] = device

    def lift_constant(self, real: torch.Tensor, name_hint: str = "lifted_tensor") -> torch.Tensor:
        """Turn a tensor that is not a parameter, buffer or input into a constant placeholder
        (``c_<name>``); returns the meta tensor that stands for it during tracing."""
        if id(real) in self._lifted:
            return self._lifted[id(real)]
        if real.device.type == "meta" and not self.allow_meta_constants:
            raise UnsupportedError(
                "a tensor was created on the meta device while tracing, so its values are "
                "unknown (typically `torch.tensor(data, device=t.device)` inside PyTorch code)",
                code="UB117", frames=self.frames_provider(),
                hint="Create the tensor outside forward() and register it as a buffer.")
        meta = meta_like(real)
        name = self.add_placeholder(f"c_{name_hint}", meta, user_input=False,
                                    device=real.device).name
        self.constants[name] = real
        # the state name is the placeholder's, whose uniqueness fx guarantees: two constants
        # with one hint (every torch.tensor(...) made in forward) must not share a slot
        self.constant_targets[name] = name.removeprefix("c_")
        self._lifted[id(real)] = meta
        if self.shadow is not None and real.device.type != "meta":
            self.shadow.set(meta, real)
        self._alive.append(real)
        return meta

    def is_tracked(self, tensor: torch.Tensor) -> bool:
        return id(tensor) in self._nodes

    def node_of(self, tensor: torch.Tensor) -> fx.Node:
        """The node holding ``tensor``'s value, usable in the graph being recorded: a value of
        an enclosing graph becomes an extra input of the open branch."""
        node = self._nodes[id(tensor)]
        scope = self._scopes[-1]
        if node.graph is scope.graph:
            return node
        return scope.capture(tensor, node)

    def device_of(self, tensor: torch.Tensor) -> torch.device:
        return self._devices.get(id(tensor), _CPU)

    # ----------------------------------------------------------------- recording
    @contextlib.contextmanager
    def recording(self):
        """Activate the mode for the duration of one leaf call."""
        if self._recording == 0:
            self._this_call.clear()
        self._recording += 1
        try:
            with self:
                yield
        finally:
            self._recording -= 1

    def is_recording(self) -> bool:
        """True inside a leaf call, outside a composite op being kept whole."""
        return self._recording > 0 and self._suspended == 0

    def record_composite(self, op, args, kwargs, decompose):
        """Record the composite ``op`` as one node; its meta output comes from ``decompose``
        run with recording suspended (see ``ir.composites``)."""
        compute_args, compute_kwargs, device = self._prepare(op, args, kwargs)
        self._suspended += 1
        try:
            with _pop_mode_temporarily():
                out = decompose(op, compute_args, compute_kwargs)
        finally:
            self._suspended -= 1
        node = self._record(op, args, kwargs, out)
        self._bind_outputs(node, out, device)
        return out

    def record_opaque(self, op, args, kwargs):
        """Record ``op`` whole, whatever it is: its meta output is computed with recording
        suspended (``run_decompositions`` keeps the ops its table does not name this way)."""
        return self.record_composite(op, args, kwargs, lambda f, a, k: f(*a, **k))

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.decompositions:  # run_decompositions: record what it calls instead
            with self:
                return self.decompositions[func](*args, **kwargs)
        if self.decompose_composites and func._can_decompose() and (
                self.decompose_composites is True or not _functional(func)):
            # Inside a mode, CompositeImplicitAutograd kernels are skipped; run them here.
            with self:
                return func.decompose(*args, **kwargs)
        self._refuse_value_dependent(func, args)
        compute_args, compute_kwargs, device = self._prepare(func, args, kwargs)
        if func is aten.detach.default and self._is_unused_factory_output(args[0]):
            return self._elide_detach(func, args[0], compute_args, device)
        if func in _FUNCTIONAL_WRITERS:
            return self._record_writer(func, args, kwargs, compute_args, compute_kwargs, device)
        if func is aten.lift_fresh.default:  # a tensor built from Python data: its own copy
            func = aten.lift_fresh_copy.default
        if self.env is not None and func in _SCALAR_OPS:
            return self._record_scalar(func, args, compute_args)
        data_dependent = self.env is not None and func in _DATA_DEPENDENT_SIZES \
            and not _integer_indexing(func, compute_args)
        if data_dependent:
            out = _DATA_DEPENDENT_SIZES[func](self, *compute_args, **compute_kwargs)
        else:
            out = func(*compute_args, **compute_kwargs)
        node = self._record(func, args, kwargs, out)
        self._bind_outputs(node, out, device)
        self._track_aliasing(func, compute_args, compute_kwargs, out, node)
        if data_dependent:  # later code can read the count back with sym_size
            self.bind_symbol(out.shape[0].node.expr, node, 0, out)
        return out

    def _record_scalar(self, func, args, compute_args):
        """``t.item()``: a fresh unbacked symbol (value unknown at export time), recorded as
        the node that reads it, so later sizes and arguments can be computed from it."""
        tensor = compute_args[0]
        kind = "float" if tensor.dtype.is_floating_point else "int"
        symbol = self.env.create_unbacked_symbol(kind, source=f"{self.node_of(tensor).name}.item()")
        value = self.env.symfloat(symbol) if kind == "float" else (
            self.env.symbool(sympy.Eq(symbol, 1)) if tensor.dtype == torch.bool
            else self.env.symint(symbol))
        node = self._record(aten.item.default, args, {}, value)
        self._sym_nodes[symbol] = node
        if self.shadow is not None and self.shadow.value_of(tensor) is not None:
            self.shadow.symbols[symbol] = self.shadow.value_of(tensor).item()
        return value

    def definition_of(self, symbol) -> fx.Node | None:
        """The node after which a data-dependent symbol is known (``item`` / the op whose output
        size it is), or None for input sizes."""
        root = self._scopes[0].sym_nodes
        if symbol in root and root[symbol].target is aten.item.default:
            return root[symbol]
        source = self._symbol_sources.get(symbol)
        return source[0] if source is not None and source[0].op != "placeholder" else None

    def unbacked_size(self, source: str, upper=None):
        """A fresh size (>= 0, at most ``upper``) that only tensor values decide."""
        symbol = self.env.create_unbacked_symbol("size", source=source)
        if upper is not None:
            from ..symbolic.ranges import ValueRange

            self.env.set_range(symbol, ValueRange(0, upper), spec=True)
        return self.env.symint(symbol)

    def _track_aliasing(self, func, args, kwargs, out, node) -> None:
        if is_view_op(func):
            self.aliases.note_view(func, args, kwargs, out)
        elif is_inplace_op(func) and isinstance(args[0], torch.Tensor) \
                and self.aliases.is_aliased(args[0]):
            self.aliases.after_write(args[0], node)

    def emit(self, func, args, kwargs=None):
        """Compute ``func`` on tracked meta tensors and record it (used while recording
        another op, when the mode is already off): returns the meta output."""
        kwargs = kwargs or {}
        out = func(*args, **kwargs)
        node = self._record(func, args, kwargs, out)
        self._bind_outputs(node, out, self.device_of(args[0]))
        return out

    # ----------------------------------------------------------------- grad mode
    def record_grad_mode(self, enabled: bool, previous_value: bool) -> fx.Node:
        """Record the start of a grad-mode region (``no_grad``, ``enable_grad``...):
        ``previous = torch.is_grad_enabled()`` then ``torch._C._set_grad_enabled(enabled)``.
        Returns the ``previous`` node, which :meth:`record_grad_mode_restore` sets back: at run
        time the region ends in the caller's mode, not in the mode of the export.
        ``previous_value`` is that mode during tracing (the node's ``val``)."""
        previous = self.graph.call_function(torch.is_grad_enabled, ())
        self._annotate(previous, previous_value)
        self._annotate(self.graph.call_function(torch._C._set_grad_enabled, (enabled,)), None)
        return previous

    def record_grad_mode_restore(self, previous: fx.Node) -> None:
        """End the region :meth:`record_grad_mode` started; a region that recorded no op
        leaves nothing in the graph."""
        setter = previous.next
        if setter.next.op == "root" and not previous.users:
            self.graph.erase_node(setter)
            self.graph.erase_node(previous)
            return
        self._annotate(self.graph.call_function(torch._C._set_grad_enabled, (previous,)), None)

    def record_grad_mode_call(self, target, args, val) -> fx.Node:
        """Copy one grad-mode call (``torch.is_grad_enabled()`` / ``_set_grad_enabled(x)``)
        into the graph; returns its node (which later copies take as their argument)."""
        node = self.graph.call_function(target, tuple(args))
        self._annotate(node, val)
        return node

    def _is_unused_factory_output(self, tensor) -> bool:
        """True for a tensor made by an op returning fresh memory (``zeros``, ``zeros_like``,
        ``full``... not a view) earlier in this same leaf call, that nothing has used yet: the
        user's program cannot hold it (PyTorch's factory bindings detach their result)."""
        tensor = self._lifted.get(id(tensor), tensor)
        node = self._nodes.get(id(tensor))
        return (node is not None and id(tensor) in self._this_call
                and node.op == "call_function" and not node.users
                and isinstance(node.target, torch._ops.OpOverload)
                and not node.target._schema.is_mutable
                and all(r.alias_info is None for r in node.target._schema.returns))

    def _elide_detach(self, func, tensor, compute_args, device):
        """PyTorch's factory bindings (``torch.zeros_like``...) detach the tensor they just
        made. Recording that detach would make the result a view of an invisible tensor, and
        every later in-place update of it a write through a view. The result stands for the
        factory node itself; the undetached original is forgotten (a later use of it would be
        an untracked tensor, which is refused)."""
        out = func(*compute_args)
        node = self._nodes.pop(id(tensor))
        self.bind(out, node, device)
        if self.shadow is not None and self.shadow.value_of(tensor) is not None:
            self.shadow.set(out, self.shadow.value_of(tensor).detach())
        return out

    def _record_writer(self, func, args, kwargs, compute_args, compute_kwargs, device):
        """Record an op that writes arguments it does not return (see _FUNCTIONAL_WRITERS)."""
        functional = _FUNCTIONAL_WRITERS[func]
        out = functional(*compute_args, **compute_kwargs)
        node = self._record(functional, args, kwargs, out)
        self._bind_outputs(node, out, device)
        returned = len(func._schema.returns)
        written = [i for i, a in enumerate(func._schema.arguments)
                   if a.alias_info is not None and a.alias_info.is_write]
        for index, new_value in zip(written, out[returned:]):
            target = self._lifted.get(id(args[index]), args[index])
            copy = self.graph.create_node(
                "call_function", aten.copy_.default,
                (self.node_of(target), self.node_of(new_value)), {}, name="copy_")
            self._annotate(copy, target)
            self.bind(target, copy)
        return tuple(out[:returned])

    def _refuse_value_dependent(self, func, args) -> None:
        if func in _VALUE_OPS and not (self.env is not None and func in _SCALAR_OPS):
            raise DataDependentError(
                f"`{func.overloadpacket.__name__}` needs the value stored in a tensor, which is "
                "unknown at export time", code="UB105", frames=self.frames_provider(),
                hint="Keep the value as a tensor instead of converting it to a Python number.")
        if torch.Tag.dynamic_output_shape in func.tags and not _integer_indexing(func, args) \
                and not (self.env is not None and func in _DATA_DEPENDENT_SIZES):
            raise UnsupportedError(
                f"`{func.overloadpacket.__name__}` returns a tensor whose size depends on tensor "
                "values", code="UB114", frames=self.frames_provider(),
                hint="Use a fixed-size formulation such as torch.where(mask, x, 0).")

    def _prepare(self, func, args, kwargs):
        """Meta versions of the arguments, and the user-visible device of the outputs."""
        device = None

        def to_meta(value):
            nonlocal device
            if isinstance(value, torch.Tensor):
                if value.device.type != "meta" or not self.is_tracked(value):
                    if not self.is_tracked(value) and id(value) not in self._lifted:
                        self.lift_constant(value)
                    value = self._lifted.get(id(value), value)
                if device is None:
                    device = self.device_of(value)
            return value

        flat, spec = pytree.tree_flatten((args, kwargs))
        c_args, c_kwargs = pytree.tree_unflatten([to_meta(v) for v in flat], spec)
        requested = c_kwargs.get("device")
        if requested is not None:
            device = self._user_device(requested)
            c_kwargs = dict(c_kwargs, device=_META)
        elif device is None and _has_device_argument(func):
            c_kwargs = dict(c_kwargs, device=_META)
        return c_args, c_kwargs, device or _CPU

    def _user_device(self, requested) -> torch.device:
        device = torch.device(requested)
        return self.default_device if device.type == "meta" else device

    def _record(self, func, args, kwargs, out) -> fx.Node:
        def to_arg(value):
            if isinstance(value, torch.Tensor):
                value = self._lifted.get(id(value), value)
                return self.node_of(value)
            if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
                return self.sym_node(value)
            return value

        kwargs = dict(kwargs)
        if kwargs.get("device") is not None:
            kwargs["device"] = self._user_device(kwargs["device"])
        if _takes_default_dtype(func, args, kwargs) and isinstance(out, torch.Tensor):
            kwargs["dtype"] = out.dtype  # the default dtype at export time, made explicit
        node = self.graph.create_node(
            "call_function", func, pytree.tree_map(to_arg, tuple(args)),
            pytree.tree_map(to_arg, kwargs), name=_node_name(func))
        self._annotate(node, out)
        if self.shadow is not None and func is not aten.item.default:
            self._run_shadow(func, args, kwargs, out)
        return node

    def _run_shadow(self, func, args, kwargs, out) -> None:
        """The real computation beside the recorded one: no mode, no recording kernels."""
        self._suspended += 1
        try:
            with _disable_current_modes():
                self.shadow.run(func, [self._lifted_meta(a) for a in args], kwargs, out)
        finally:
            self._suspended -= 1

    def _lifted_meta(self, value):
        return self._lifted.get(id(value), value) if isinstance(value, torch.Tensor) else value

    def _annotate(self, node: fx.Node, val) -> None:
        frames = tuple(self.frames_provider())
        node.meta["val"] = val
        node.meta["user_frames"] = frames
        node.meta["stack_trace"] = format_stack(frames) + "\n" if frames else ""
        node.meta["nn_module_stack"] = dict(self.module_stack_provider())

    def _bind_outputs(self, node: fx.Node, out, device) -> None:
        if isinstance(out, torch.Tensor):
            self._this_call.add(id(out))
            self.bind(out, node, device)
        elif isinstance(out, (tuple, list)):
            for i, item in enumerate(out):
                if isinstance(item, torch.Tensor):
                    getter = self.graph.call_function(operator.getitem, (node, i))
                    self._annotate(getter, item)
                    self.bind(item, getter, device)

    # ----------------------------------------------------------------- branches (torch.cond)
    def open_branch(self, operands: list) -> list:
        """Start recording a ``torch.cond`` branch into a new subgraph whose inputs are the
        ``operands`` (meta tensors); returns the meta tensors that stand for them inside."""
        scope = _Scope(fx.Graph())
        self._scopes.append(scope)
        stand_ins = []
        for index, operand in enumerate(operands):
            stand_in = meta_like(operand)
            node = scope.graph.placeholder(f"arg{index}")
            node.meta["val"] = stand_in
            self.bind(stand_in, node, self.device_of(operand))
            if self.shadow is not None and self.shadow.value_of(operand) is not None:
                self.shadow.set(stand_in, self.shadow.value_of(operand))
            stand_ins.append(stand_in)
            scope.operands.append(node)
        return stand_ins

    def close_branch(self, outputs: list, *, single: bool = False) -> "_Scope":
        """Finish the open branch, returning ``outputs`` (meta tensors; ``single``: the one
        output itself rather than a tuple, as while_loop's cond_fn must); returns its scope."""
        scope = self._scopes[-1]
        nodes = tuple(self.node_of(t) for t in outputs)
        scope.graph.output(nodes[0] if single else nodes)
        self._scopes.pop()
        return scope

    def abandon_branch(self) -> None:
        """Drop an open branch after a failure inside it."""
        if len(self._scopes) > 1:
            self._scopes.pop()

    def record_cond(self, pred, branches, operands: list, outputs: list) -> list:
        """Record ``torch.ops.higher_order.cond`` over two closed branches.

        pred: a meta tensor (one element) or a bool; operands: the outer meta tensors passed in;
        outputs: the meta values one branch returned (both agree). Returns fresh meta tensors
        for the results, bound to the cond node's outputs.
        """
        pred_arg = self.node_of(pred) if isinstance(pred, torch.Tensor) else pred
        return self._record_subgraphs(
            torch.ops.higher_order.cond, "cond", branches, ("true", "false"), operands, outputs,
            lambda modules, inputs, extra: (pred_arg, *modules, (*inputs, *extra)))

    def record_while_loop(self, scopes, carried: list) -> list:
        """Record ``torch.ops.higher_order.while_loop`` (cond and body subgraphs over the
        carried values); returns fresh meta tensors for the final carried values."""
        return self._record_subgraphs(
            torch.ops.higher_order.while_loop, "while_loop", scopes, ("cond", "body"), carried,
            carried, lambda modules, inputs, extra: (*modules, tuple(inputs), tuple(extra)))

    def _record_subgraphs(self, hop, name, scopes, labels, operands, outputs, arguments) -> list:
        """One higher-order node over closed subgraph scopes. Values of the enclosing graphs
        that a subgraph read become extra inputs of every subgraph (after the operands)."""
        captured: dict[int, torch.Tensor] = {}
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
                      [self.node_of(t) for t in extra]), {}, name=name)
        self._annotate(node, tuple(results))
        self._bind_outputs(node, tuple(results), self.device_of(operands[0]) if operands else _CPU)
        return results

    # ----------------------------------------------------------------- symbolic sizes
    def sym_node(self, value) -> fx.Node | int | float | bool:
        """The node computing a SymInt/SymFloat/SymBool argument (built from its expression)."""
        expr = value.node.expr
        return self._expr_node(expr)

    def _expr_node(self, expr):
        if expr.is_Integer:
            return int(expr)
        if expr.is_Number:
            return float(expr)
        if expr is sympy.true or expr is sympy.false:
            return bool(expr)
        if expr in self._sym_nodes:
            return self._sym_nodes[expr]
        node = self._build_expr(expr)
        self._sym_nodes[expr] = node
        return node

    def _build_expr(self, expr) -> fx.Node:
        if isinstance(expr, sympy.Symbol):
            if expr not in self._symbol_sources:
                raise UnsupportedError(
                    f"the size `{expr}` has no input it can be read from"
                    + (" inside this branch" if len(self._scopes) > 1 else ""), code="UB117",
                    frames=self.frames_provider(),
                    hint="Derive sizes from input tensors (inside a torch.cond branch, from "
                         "tensors the branch receives or reads).")
            source, dim, a, b, tensor = self._symbol_sources[expr]
            if source.graph is not self.graph and isinstance(tensor, torch.Tensor):
                source = self.node_of(tensor)  # a branch reads the size from its own input
            node = self.graph.call_function(aten.sym_size.int, (source, dim))
            if (a, b) != (1, 0):
                node.meta["val"] = self.symint_factory(a * expr + b) if self.symint_factory else None
                if b:
                    node = self._sym_call(operator.sub, (node, b))
                if a != 1:
                    node = self._sym_call(operator.floordiv, (node, a))
                return node
        else:
            node = self._build_compound(expr)
        node.meta["val"] = self.symint_factory(expr) if self.symint_factory else None
        node.meta["user_frames"] = ()
        node.meta["stack_trace"] = ""
        node.meta["nn_module_stack"] = {}
        return node

    def _build_compound(self, expr) -> fx.Node:
        """Nodes computing a sympy expression over input sizes, with the same Python
        semantics as the expression (``//`` floors, ``ToFloat`` is ``sym_float``, ...)."""
        name = type(expr).__name__
        if name in _NARY:
            parts = [self._expr_node(a) for a in expr.args]
            if name in ("Add", "Mul"):  # sympy puts the constant first: keep symbols first
                parts = sorted(parts, key=lambda p: not isinstance(p, fx.Node))
            acc = parts[0]
            for part in parts[1:]:
                acc = self._sym_call(_NARY[name], (acc, part))
            return acc
        if name in _UNARY:
            return self._sym_call(_UNARY[name], (self._expr_node(expr.args[0]),))
        if name == "Pow" and expr.args[1].is_Integer and int(expr.args[1]) == -1:
            return self._sym_call(operator.truediv, (1.0, self._expr_node(expr.args[0])))
        raise UnsupportedError(f"cannot compute the size expression `{expr}` in the graph",
                               code="UB117", frames=self.frames_provider(),
                               hint="Compute this value from tensors (e.g. with torch ops on a "
                                    "tensor of sizes) or make the dimension static.")

    def _sym_call(self, target, args) -> fx.Node:
        node = self.graph.call_function(target, args)
        values = [a.meta["val"] if isinstance(a, fx.Node) else a for a in args]
        node.meta["val"] = target(*values)
        node.meta["user_frames"] = ()
        node.meta["stack_trace"] = ""
        node.meta["nn_module_stack"] = {}
        return node

    # ----------------------------------------------------------------- outputs
    def set_output(self, values) -> fx.Node:
        """The output node: a tuple of nodes (tensors) and constants."""
        def to_arg(value):
            if isinstance(value, torch.Tensor):
                return self.node_of(value)
            if isinstance(value, torch.SymInt | torch.SymFloat | torch.SymBool):
                return self.sym_node(value)
            return value

        return self.graph.output(tuple(to_arg(v) for v in values))


# sympy function name -> the Python callable that computes it on SymInts/SymFloats in a graph.
_NARY = {"Add": operator.add, "Mul": operator.mul, "FloorDiv": operator.floordiv,
         "PythonMod": operator.mod, "Mod": operator.mod, "Max": torch.sym_max,
         "Min": torch.sym_min, "FloatTrueDiv": operator.truediv, "IntTrueDiv": operator.truediv,
         "FloatPow": operator.pow, "PowByNatural": operator.pow, "Pow": operator.pow,
         "StrictGreaterThan": operator.gt, "GreaterThan": operator.ge,
         "StrictLessThan": operator.lt, "LessThan": operator.le, "Equality": operator.eq,
         "Unequality": operator.ne, "And": operator.and_, "Or": operator.or_}
_UNARY = {"ToFloat": torch.sym_float, "TruncToInt": math.trunc, "FloorToInt": math.floor,
          "CeilToInt": math.ceil, "RoundToInt": round, "OpaqueUnaryFn_sqrt": torch._sym_sqrt,
          "Not": torch.sym_not}


def _node_name(func) -> str:
    """``add`` for ``aten.add.Tensor``: the op's name, as torch.export names its nodes."""
    packet = getattr(func, "overloadpacket", None)
    return _sanitize(packet.__name__ if packet is not None else getattr(func, "__name__", "op"))


class _Scope:
    """One graph being recorded: the root graph, or the body of a ``torch.cond`` branch.

    graph: the fx graph; operands: a branch's inputs for its declared operands (first);
    captured: id(outer tensor) -> this graph's input standing for it (values the branch read
    from enclosing graphs); modules: name -> GraphModule of the branches it calls.
    """

    def __init__(self, graph: fx.Graph):
        self.graph = graph
        self.operands: list[fx.Node] = []
        self.captured: dict[int, fx.Node] = {}
        self.captured_tensors: dict[int, torch.Tensor] = {}
        self.modules: dict[str, fx.GraphModule] = {}
        self.sym_nodes: dict = {}  # expr -> node computing it in this graph

    def capture(self, tensor: torch.Tensor, outer: fx.Node) -> fx.Node:
        node = self.captured.get(id(tensor))
        if node is None:
            first = next(iter(self.graph.nodes), None)
            with self.graph.inserting_before(first) if first is not None else \
                    contextlib.nullcontext():
                node = self.graph.placeholder(f"captured_{len(self.captured)}")
            node.meta.update(val=outer.meta.get("val"), user_frames=(), stack_trace="",
                             nn_module_stack={})
            self.captured[id(tensor)] = node
            self.captured_tensors[id(tensor)] = tensor
        return node

    def order_inputs(self, extra: list[torch.Tensor], recorder) -> None:
        """Make the inputs: the declared operands, then one per tensor of ``extra`` (creating
        unused inputs for values only the other branch read), in that order."""
        ordered = list(self.operands)
        for tensor in extra:
            if id(tensor) not in self.captured:
                self.capture(tensor, recorder._nodes[id(tensor)])
            ordered.append(self.captured[id(tensor)])
        first_other = next(n for n in self.graph.nodes if n.op != "placeholder")
        for node in ordered:
            first_other.prepend(node)

    def add_module(self, label: str, module: fx.GraphModule) -> str:
        index = sum(n.startswith(f"{label}_graph_") for n in self.modules)
        name = f"{label}_graph_{index}"
        self.modules[name] = module
        return name

    def module(self) -> fx.GraphModule:
        owner = torch.nn.Module()
        for name, module in self.modules.items():
            owner.add_module(name, module)
        return fx.GraphModule(owner, self.graph)


def _functional(func) -> bool:
    schema = func._schema
    return not schema.is_mutable and all(r.alias_info is None for r in schema.returns)


def _takes_default_dtype(func, args, kwargs) -> bool:
    """A factory (no tensor inputs) whose dtype comes from torch's global default: recording
    that dtype keeps the program independent of the default in force when it runs."""
    return (kwargs.get("dtype") is None
            and any(a.name == "dtype" for a in func._schema.arguments)
            and not any(isinstance(a, torch.Tensor) for a in pytree.tree_leaves(args)))


def _has_device_argument(func) -> bool:
    return any(arg.name == "device" for arg in func._schema.arguments)
