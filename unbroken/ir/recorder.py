"""Record the ATen operators that leaf calls dispatch to, on meta tensors, into a torch.fx.Graph.

The recorder is a ``TorchDispatchMode``. While it is active (``with recorder.recording():``),
every ATen operator that reaches the Python dispatch key on our meta tensors is

1. computed on meta tensors (factories that asked for a real device are computed on ``meta``;
   real tensors that show up — constants built inside forward(), tensor attributes that are not
   buffers — are *lifted* to placeholders and replaced by meta copies), and
2. written by its :class:`~unbroken.ir.graph_builder.GraphBuilder` (``recorder.builder``) as
   ``call_function(op_overload, args, kwargs)`` whose tensor arguments are the nodes that
   produced them, with the user's location (see the builder's conventions).

An in-place op returns the tensor it mutated, so that tensor now maps to the in-place node:
later uses see the new value (``passes.functionalize`` relies on it); writes through views
are carried to their base by ``ir.aliasing``.

Values only tensor data decides (``item``, ops with data-dependent output sizes) get unbacked
symbols of the shape environment (``ir.data_dependent``); without one they are refused with a
``DataDependentError`` / ``UnsupportedError``, to which the frontend adds the user's stack.
"""
from __future__ import annotations

import contextlib

import sympy
import torch
import torch.fx as fx
from torch.fx.node import map_aggregate
from torch.utils import _pytree as pytree

from ..symbolic.diagnostics import DataDependentError, UnsupportedError
from ..symbolic.ranges import ValueRange
from ..symbolic.size_one_hook import NO_SIZE_ONE
from ..symbolic.torch_compat import (
    CreationMeta,
    OpOverload,
    TorchDispatchMode,
    disable_current_modes,
    is_view,
    op_schema,
    pop_mode_temporarily,
    view_base,
)
from .aliasing import Aliases, inplace_refusal, overlap_refusal
from .autocast import autocast_casts, decomposes_under_autocast, enabled_devices
from .custom_ops import (
    custom_meta_kernel,
    is_mutable_custom,
    record_custom_dynamic,
    record_mutable_custom,
)
from .data_dependent import (
    DATA_DEPENDENT_SIZES,
    SCALAR_OPS,
    UNBACKED_INDEX_VIEWS,
    has_unbacked_argument,
    integer_indexing,
)
from .devices import (
    composite_layout,
    devices_of,
    has_composite_layout,
    python_data_on_user_device,
)
from .flat import tree_leaves, tree_map
from .graph_builder import GraphBuilder, meta_like
from .layouts import kernel_layout, relayout_reads_trace
from .layouts import on_cpu as layout_on_cpu
from .meta_cache import TORCH_NAMESPACES, MetaCache
from .meta_keys import EAGER_REFUSES, SAVED_THEN_WRITTEN
from .ops import (
    has_dynamic_output_shape,
    is_functional,
    is_inplace_op,
    is_mutating,
    is_view_op,
    op_text,
    out_variant,
    takes_argument,
    written_arguments,
)
from .out_variants import record_out_variant
from .saved_tensors import grad_arguments, saving_patterns

__all__ = ["Recorder", "meta_like"]

aten = torch.ops.aten

_VALUE_OPS = {aten.item.default, aten._local_scalar_dense.default, aten.is_nonzero.default,
              aten.equal.default}
# Ops that write arguments they do not return, and the functional op that returns the new
# values of those arguments after its own outputs. They are recorded as the functional op plus
# one in-place `copy_` per written argument (the convention `passes.functionalize` expects).
_FUNCTIONAL_WRITERS = {
    aten._native_batch_norm_legit.default: aten._native_batch_norm_legit_functional.default,
}
# Composites whose output size tensor data decides (``torch.where(mask)`` is ``nonzero`` then
# ``unbind``): their Python reference would run ``nonzero``'s meta kernel, which refuses; their
# decomposition reaches ``nonzero`` as an op of its own (see ``data_dependent``).
_DATA_DEPENDENT_COMPOSITES = frozenset({aten.where.default, aten.nonzero_numpy.default})
# Composites whose Python reference, which torch registers as their meta kernel, reads the
# ATen schema's arguments as the Python API's: ``aten.nll_loss``'s reduction is an int
# (0 = none), the reference compares it with "none" and "sum" and reduces to a scalar (eager:
# one loss per sample); ``margin_ranking_loss``'s and ``hinge_embedding_loss``'s refuse the
# int. Their C++ decomposition reaches ops whose meta kernels are right.
_MISREAD_COMPOSITES = frozenset({aten.nll_loss.default, aten.margin_ranking_loss.default,
                                 aten.hinge_embedding_loss.default})
_META = torch.device("meta")
_CPU = torch.device("cpu")


class Recorder(TorchDispatchMode):
    """Records the ATen ops of one trace (or of one ``run_decompositions``).

    Args:
        env: the ``ShapeEnvironment`` of the symbolic sizes, or None when every size is static;
            with one, ``.item()`` and ``nonzero()`` get unbacked symbols instead of refusals,
            and size arithmetic nodes carry its SymInts.
        frames_provider: zero-arg callable returning the current user stack (UserFrame tuple).
        module_stack_provider: zero-arg callable returning the current ``nn_module_stack``.
        custom_provider: zero-arg callable returning the ``torch.fx.traceback.annotate``
            annotations in force (a node's ``meta["custom"]``), or None.
        allow_meta_constants: untracked meta tensors may be lifted as constants (the model
            itself lives on the meta device, so there are no values to keep).
        shadow: an ``ir.shadow.Shadow`` in "find them all" mode: real values beside the meta.
        decompositions: op -> decomposition applied as ops arrive (``run_decompositions``).
        decompose_composites: ``True`` lowers every composite op; ``"aliasing"`` only those
            returning views (``to.dtype``...), which a decomposition table never preserves.
        requires_grad_provider: one-arg callable, whether eager's tensor behind a traced meta
            tensor requires grad (meta tensors carry no autograd state); with it, an op eager's
            autograd refuses (``ir.aliasing.EagerRefusal``) is refused or marked, and an op a
            leaf call dispatches in another grad mode than the call's own (PyTorch code that
            enters ``torch.no_grad()`` itself, as ``nn.init.zeros_``) is recorded in a
            grad-mode region of that mode.
    """

    def __init__(self, *, env=None, frames_provider=tuple, module_stack_provider=dict,
                 custom_provider=lambda: None, allow_meta_constants: bool = False,
                 shadow=None, decompositions=None, decompose_composites: bool | str = False,
                 requires_grad_provider=None):
        super().__init__()
        self.env = env
        # the size-1 audit, the recorder's one hook into it (the environment's: the null
        # audit without one): node metadata, leaf calls and writes are reported to it
        self.size_one = env.size_one if env is not None else NO_SIZE_ONE
        self.frames_provider = frames_provider
        self.requires_grad_provider = requires_grad_provider
        self.export_grad_enabled = torch.is_grad_enabled()  # the mode export was called in
        self._leaf_grad_mode = True  # the grad mode the current leaf call was made in
        self._inner_region = None  # (previous node, mode) of a region opened inside a leaf call
        self.builder = GraphBuilder(sym_value=env.sym_value if env is not None else None,
                                    frames_provider=frames_provider,
                                    module_stack_provider=module_stack_provider,
                                    custom_provider=custom_provider)
        self.allow_meta_constants = allow_meta_constants
        self.shadow = shadow
        self.decompositions: dict = dict(decompositions or {})
        self.decompose_composites = decompose_composites
        # Native PyTorch code reads `.device` off our meta tensors and asks for `meta`; such
        # requests mean "the device of the traced tensors", recorded as this device.
        self.default_device = _CPU
        self.constants: dict[str, torch.Tensor] = {}   # lifted placeholder name -> real tensor
        self.constant_targets: dict[str, str] = {}     # placeholder name -> constant name
        self.aliases = Aliases(self)  # views and their bases, for writes through views
        # the memory (alias roots) of what layout-dependent ops (reshape, contiguous...) returned:
        # a copy in this trace may be a view on another layout, and a view a copy; True once
        # such memory is written in place
        self._layout_dependent: list[torch.Tensor] = []
        self.wrote_layout_dependent = False
        self._lifted: dict[int, torch.Tensor] = {}     # id(real tensor) -> its meta copy
        self._anonymous_constants = 0                  # lifted_tensor_<n> names given
        self._alive: list[torch.Tensor] = []           # keeps the lifted ids stable
        self._this_call: set[int] = set()  # ids of tensors made during the current leaf call
        self._recording = 0   # depth of recording() contexts
        self._suspended = 0   # depth of composite ops being computed without recording
        # outputs laid out by ATen's backend selection for their device (``ir.devices``), which
        # reads the process's settings: what is computed from one is not shared between traces
        self.device_layouts = 0
        # size-1 checks of leaf calls (size_one.unit_meta): the ops each open leaf scope dispatched,
        # and, while a leaf call is re-run at size 1, the ops it dispatches (nothing recorded)
        self._leaf_logs: list[list] = []
        self._dry_log: list | None = None
        self._autocast_excluded = 0  # depth of ops whose autocast casts are already recorded
        self._leaf_autocast: tuple[str, ...] = ()  # device types autocast was on for, at the
        # start of the current leaf call
        self.meta_cache = MetaCache(env)  # meta outputs of functional ops, per trace
        self._no_grad_nodes: set[fx.Node] = set()  # in a no_grad region of forward()
        self._pending_writes: list = []  # (reader, written node, message): see saved_tensors
        self._saves_asked: set = set()  # (reader, written node) pairs noted once: same answer
        self._saves_answers: dict = {}  # saved_tensors.saving_patterns' cache

    # ----------------------------------------------------------------- tensors
    def is_tracked(self, tensor: torch.Tensor) -> bool:
        return self.builder.is_tracked(tensor)

    def is_lifted(self, real: torch.Tensor) -> bool:
        """True when the eager tensor ``real`` already stands for a placeholder: a parameter
        or buffer of the exported module met as the object itself (:meth:`alias_state`), or a
        constant lifted before."""
        return id(real) in self._lifted

    def node_of(self, tensor: torch.Tensor) -> fx.Node:
        return self.builder.node_of(tensor)

    def bind(self, tensor: torch.Tensor, node: fx.Node, device=None) -> None:
        self.builder.bind(tensor, node, device)

    def device_of(self, tensor: torch.Tensor) -> torch.device:
        return self.builder.device_of(tensor)

    def is_placeholder(self, tensor: torch.Tensor) -> bool:
        return self.builder.is_placeholder(tensor)

    def forget_temporary_views(self, result) -> None:
        """After a leaf call of a C function of torch that returned ``result``: the views it
        made for itself are no longer re-derived at writes (``Aliases.forget_temporaries``)."""
        self.aliases.forget_temporaries(
            self._this_call, [t for t in tree_leaves(result) if isinstance(t, torch.Tensor)])

    def lift_constant(self, real: torch.Tensor, name_hint: str | None = None) -> torch.Tensor:
        """Turn a tensor that is not a parameter, buffer or input into a constant placeholder
        (``c_<name>``); returns the meta tensor that stands for it during tracing. A tensor
        without a name (made in ``forward``) is ``lifted_tensor_0``, ``lifted_tensor_1``...
        in the order met, as torch.export names them."""
        if id(real) in self._lifted:
            return self._lifted[id(real)]
        if name_hint is None:
            name_hint = f"lifted_tensor_{self._anonymous_constants}"
            self._anonymous_constants += 1
        if real.device.type == "meta" and not self.allow_meta_constants:
            raise UnsupportedError(
                "a tensor was created on the meta device while tracing, so its values are "
                "unknown (typically `torch.tensor(data, device=t.device)` inside PyTorch code)",
                code="UB117", frames=self.frames_provider(),
                hint="Create the tensor outside forward() and register it as a buffer.")
        if real.requires_grad:
            raise UnsupportedError(
                "a tensor that requires grad and is not a parameter, buffer or input of the "
                "exported model is used: as a constant its gradient would be lost",
                code="UB123", frames=self.frames_provider(),
                hint="Register the module that owns it as a submodule of the model (or the "
                     "tensor as an nn.Parameter).")
        meta = meta_like(real)
        name = self.builder.add_placeholder(f"c_{name_hint}", meta, user_input=False,
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

    def alias_state(self, real: torch.Tensor, meta: torch.Tensor) -> None:
        """``real``, a parameter or buffer of the exported module, stands for its placeholder's
        ``meta`` wherever the trace meets the object itself rather than the module attribute
        (a cache object holding the tensor the module registered as a buffer): reads see the
        trace's writes and writes are state mutations, as torch.export lifts it by identity,
        instead of a constant copy of it."""
        self._lifted[id(real)] = meta
        self._alive.append(real)

    # ----------------------------------------------------------------- recording
    def recording(self, python_data: bool = True) -> _Recording:
        """Activate the mode for the duration of one leaf call (``python_data``: with
        ``ir.devices.python_data_on_user_device``, which a torch C function does not need:
        ``ir.devices.needs_python_data_mode``)."""
        return _Recording(self, python_data)

    @contextlib.contextmanager
    def leaf_scope(self):
        """Around one leaf call: yields ``(pending, log)`` — the sensitive size answers given
        outside any node's meta computation (``size_one.unit_scope``) and the ops dispatched,
        as ``(op, args, kwargs, out)`` — or None when no dim admits 1."""
        if not self.size_one.active:
            yield None
            return
        log: list = []
        self._leaf_logs.append(log)
        try:
            with self.size_one.unit_scope() as pending:
                yield pending, log
        finally:
            self._leaf_logs.pop()

    @contextlib.contextmanager
    def dry_logging(self):
        """Ops dispatched inside are computed on meta tensors and logged in the yielded list,
        never recorded (a leaf call re-run at size 1, ``size_one.unit_meta``)."""
        outer, self._dry_log = self._dry_log, []
        try:
            yield self._dry_log
        finally:
            self._dry_log = outer

    def is_recording(self) -> bool:
        """True inside a leaf call, outside a composite op being kept whole."""
        return self._recording > 0 and self._suspended == 0

    def record_composite(self, op, args, kwargs, decompose, path: str = "composite"):
        """Record the composite ``op`` as one node; its meta output comes from ``decompose``
        run with recording suspended (see ``ir.composites``); ``path`` names that way of
        computing it in the meta cache's key."""
        if self._leaf_autocast and not self._autocast_excluded:
            device = self._autocast_device(args, kwargs)
            if device is not None:
                return self._autocast_composite(op, args, kwargs, decompose, device)
        if self._dry_log is not None:
            self._suspended += 1
            try:
                with pop_mode_temporarily():
                    out = decompose(op, args, kwargs)
            finally:
                self._suspended -= 1
            self._dry_log.append((op, args, kwargs, out))
            return out
        self._follow_grad_mode()
        compute_args, compute_kwargs, device = self._prepare(op, args, kwargs)
        key = self.meta_cache.key(path, op, compute_args, compute_kwargs,
                                  layout_on_cpu(self, compute_args))
        self._suspended += 1
        try:
            with pop_mode_temporarily():  # the cache's fresh tensors are not ops to record
                out = self.meta_cache.get(key)
                if out is None:
                    symbols = self.meta_cache.symbol_count()
                    device_layouts = self.device_layouts
                    relayout = kernel_layout(op)
                    # shared with its questions when nothing after the decomposition asks
                    shared = self.meta_cache.shared_computation(key) \
                        if relayout is None and not has_composite_layout(op) else None
                    kernel = lambda a, k: decompose(op, a, k)  # noqa: E731
                    out = self._meta_of(kernel if shared is None else shared.wrap(kernel),
                                        compute_args, compute_kwargs,
                                        computation=("composite", op))
                    out = composite_layout(self, op, compute_args, compute_kwargs, out)
                    if relayout is not None and layout_on_cpu(self, compute_args):
                        out = relayout(self, op, compute_args, compute_kwargs, out)
                    self.meta_cache.put(key, out, symbols, share=relayout is None
                                        and self.device_layouts == device_layouts,
                                        computation=shared)
        finally:
            self._suspended -= 1
        node = self._record(op, args, kwargs, out)
        self._bind_outputs(node, out, device)
        if self._leaf_logs:
            self._leaf_logs[-1].append((op, args, kwargs, out))
        return out

    def reshape_whole(self, result: torch.Tensor, node: fx.Node, source: fx.Node) -> None:
        """Make ``node`` (a ``view`` with sizes, which gave ``result``, of the tensor whose
        node is ``source`` or of its copy) one ``aten.reshape`` of ``source``: the program
        then chooses a view or a copy at run time on the input it is given, as eager's
        ``reshape`` does. The copy, if any, is left to dead-code elimination."""
        graph = node.graph
        with graph.inserting_after(node):
            whole = graph.create_node("call_function", aten.reshape.default,
                                      (source, node.args[1]), name="reshape")
        whole.meta.update(node.meta)
        node.replace_all_uses_with(whole)
        self.builder.bind(result, whole)

    def record_opaque(self, op, args, kwargs):
        """Record ``op`` whole, whatever it is: its meta output is computed with recording
        suspended (``run_decompositions`` keeps the ops its table does not name this way)."""
        return self.record_composite(op, args, kwargs, lambda f, a, k: f(*a, **k), "opaque")

    def record_data_dependent(self, func, args, kwargs, value, device=None):
        """Record ``func`` (``item``, ``nonzero``...) whose result ``value`` only tensor data
        decides: an unbacked SymInt/SymFloat/SymBool, a meta tensor whose leading size is
        one (or given by the caller), or a tuple of meta tensors whose sizes include one
        (``unique``). Later sizes and arguments computed from that symbol read it from this
        node.
        ``run_decompositions`` passes the value the exported program already has, so the
        symbol (and the facts ``torch._check`` proved about it) stays the same."""
        if isinstance(value, torch.Tensor):
            node = self._record(func, args, kwargs, value)
            self._bind_outputs(node, value, device or self.device_of(args[0]))
            if isinstance(value.shape[0], torch.SymInt):  # not when the caller gave the size
                self.builder.bind_symbol(value.shape[0].node.expr, node, 0, value)
            return value
        if isinstance(value, tuple):  # ``unique``: its count is the size of its outputs
            node = self._record(func, args, kwargs, value)
            self._bind_outputs(node, value, device or self.device_of(args[0]))
            for tensor in value:
                for dim, size in enumerate(tensor.shape):
                    if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol:
                        self.builder.bind_symbol(size.node.expr, self.node_of(tensor), dim,
                                                 tensor)
            return value
        node = self._record(aten.item.default, args[:1], {}, value)
        for symbol in value.node.expr.free_symbols:  # a bool item is Eq(u, 1): u is read here
            self.builder.bind_value(symbol, node)
        return value

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in self.decompositions:  # run_decompositions: record what it calls instead
            with self:
                return self.decompositions[func](*args, **kwargs)
        out_form = out_variant(func)
        if out_form is not None:  # torch.add(x, y, out=z): the functional op, then z.copy_
            return record_out_variant(self, func, out_form, args, kwargs)
        if self.env is not None and is_mutable_custom(func):  # auto_functionalized, copy_
            return record_mutable_custom(self, func, args, kwargs)
        if self._leaf_autocast and not self._autocast_excluded:
            device = self._autocast_device(args, kwargs)
            if device is not None:
                return self._autocast_dispatch(func, types, args, kwargs, device)
        if func in _DATA_DEPENDENT_COMPOSITES or func in _MISREAD_COMPOSITES or \
                self.decompose_composites and \
                func._can_decompose() and (
                    self.decompose_composites is True or not is_functional(func)):
            # Inside a mode, CompositeImplicitAutograd kernels are skipped; run them here.
            with self:
                return func.decompose(*args, **kwargs)
        if self.env is None:
            return self._dispatch(func, args, kwargs)
        with self.env.op_context(op_text(func)), self.size_one.aligned_broadcast(func, args):
            return self._dispatch(func, args, kwargs)

    def _autocast_device(self, args, kwargs) -> str | None:
        """The device type of ``args``' tensors that autocast was on for when the leaf call
        began; refused unless it is the CPU (whose dispatcher :mod:`ir.autocast` asks)."""
        device = next((t_device for t_device in
                       {self.device_of(t).type for t in pytree.tree_leaves((args, kwargs))
                        if isinstance(t, torch.Tensor)} if t_device in self._leaf_autocast),
                      None)
        if device not in (None, "cpu"):
            raise UnsupportedError(
                f"a `torch.autocast('{device}')` region over tensors on {device}: its casts are "
                "learned from the CPU dispatcher here", code="UB110",
                frames=self.frames_provider(),
                hint="Export on CPU tensors, or cast explicitly with .to(dtype) in forward().")
        return device

    def _autocast_casts(self, func, args, kwargs, device: str) -> dict:
        """:func:`ir.autocast.autocast_casts`, with recording suspended: the probe's call on
        stand-ins must not reach the kernels that keep composites whole."""
        self._suspended += 1
        try:
            return autocast_casts(func, args, kwargs, device)
        finally:
            self._suspended -= 1

    def _autocast_cast(self, args, kwargs, casts, cast):
        """``args``/``kwargs`` with the flat tensor arguments in ``casts`` (index -> dtype)
        replaced by ``cast(tensor, dtype)``."""
        if not casts:
            return args, kwargs
        flat, spec = pytree.tree_flatten((args, kwargs))
        for index, dtype in casts.items():
            flat[index] = cast(flat[index], dtype)
        return pytree.tree_unflatten(flat, spec)

    def _autocast_dispatch(self, func, types, args, kwargs, device: str):
        """``func`` inside a ``torch.autocast`` region (``ir.autocast``): a composite op
        without an autocast kernel is decomposed, so that the ops it calls are cast; otherwise
        the casts eager's autocast kernel makes are recorded, then ``func`` on the cast values
        (the ops it calls are not cast again, as autocast excludes itself while they run)."""
        if decomposes_under_autocast(func, device):
            with self:
                return func.decompose(*args, **kwargs)
        casts = self._autocast_casts(func, args, kwargs, device)
        self._autocast_excluded += 1
        try:
            args, kwargs = self._autocast_cast(
                args, kwargs, casts, lambda t, dtype: self.__torch_dispatch__(
                    aten._to_copy.default, (), (t,), {"dtype": dtype}))
            return self.__torch_dispatch__(func, types, args, kwargs)
        finally:
            self._autocast_excluded -= 1

    def _autocast_composite(self, op, args, kwargs, decompose, device: str):
        """:meth:`record_composite` inside a ``torch.autocast`` region, as
        :meth:`_autocast_dispatch` (the mode is active here: casts are plain calls)."""
        if decomposes_under_autocast(op, device):
            return decompose(op, args, kwargs)  # its ops reach the mode and are cast there
        casts = self._autocast_casts(op, args, kwargs, device)
        self._autocast_excluded += 1
        try:
            args, kwargs = self._autocast_cast(
                args, kwargs, casts, lambda t, dtype: aten._to_copy.default(t, dtype=dtype))
            return self.record_composite(op, args, kwargs, decompose)
        finally:
            self._autocast_excluded -= 1

    def _dispatch(self, func, args, kwargs):
        """Compute ``func`` on meta tensors and record it (``__torch_dispatch__`` once the
        decomposition choices are made); log it for the open leaf scope (``leaf_scope``), or
        only compute and log it while a leaf call is re-run (``dry_logging``)."""
        if self._dry_log is not None:
            out = func(*args, **kwargs)
            self._dry_log.append((func, args, kwargs, out))
            return out
        out = self._dispatch_and_record(func, args, kwargs)
        if self._leaf_logs:
            self._leaf_logs[-1].append((func, args, kwargs, out))
        return out

    def _dispatch_and_record(self, func, args, kwargs):
        self._refuse_value_dependent(func, args)
        self._refuse_opaque_arguments(func, args, kwargs)
        self._follow_grad_mode()
        compute_args, compute_kwargs, device = self._prepare(func, args, kwargs)
        if func is aten.detach.default and self._is_unused_factory_output(args[0]):
            return self._elide_detach(func, args[0], compute_args, device)
        if func in _FUNCTIONAL_WRITERS:
            return self._record_writer(func, args, kwargs, compute_args, compute_kwargs, device)
        if func is aten.lift_fresh.default:  # a tensor built from Python data: its own copy
            func = aten.lift_fresh_copy.default
        if self.env is not None and func in SCALAR_OPS:
            return self._record_scalar(args, compute_args)
        if self.env is not None and getattr(func, "namespace", "aten") != "aten":
            out = record_custom_dynamic(self, func, args, kwargs, compute_args, compute_kwargs,
                                        device)
            if out is not None:  # its fake kernel made sizes only data decides
                return out
        if self.env is not None and func in DATA_DEPENDENT_SIZES \
                and not integer_indexing(func, compute_args):
            out = DATA_DEPENDENT_SIZES[func](self, *compute_args, **compute_kwargs)
            return self.record_data_dependent(func, args, kwargs, out, device)
        refusal = self._inplace_refusal(func, args)
        target = None
        if is_inplace_op(func) and isinstance(args[0], torch.Tensor):
            overlap = overlap_refusal(func, compute_args, compute_kwargs)
            if overlap is not None:
                raise UnsupportedError(
                    f"`{func}` writes a tensor that another of its arguments partly overlaps "
                    f"in memory (or that overlaps itself); eager raises: {overlap}",
                    code="UB120", frames=self.frames_provider(),
                    hint="write into a clone: `y = y.clone()` before the in-place op, or use "
                         "the out-of-place op (`y = y.add(v)` for `y.add_(v)`)")
            self._mark_saved_then_written(args[0])
            target = self._aliases_read(args, kwargs)
        out = self._compute(func, compute_args, compute_kwargs)
        refusal = refusal or self._stale_read_refusal(func, args, kwargs, out)
        node = self._record(func, args, kwargs, out)
        if target:
            self._mark_saves_its_target(node, target)
        if refusal is not None:
            node.meta[EAGER_REFUSES] = (refusal.message, refusal.hint, refusal.arguments)
        self._bind_outputs(node, out, device)
        if self._positioned_by_unbacked(func, compute_args):
            self._bind_fresh_sizes(node, out)
        self._track_aliasing(func, compute_args, compute_kwargs, out, node)
        return out

    # ----------------------------------------------------------------- grad mode inside a call
    def _follow_grad_mode(self) -> None:
        """Record the op about to be recorded in the grad mode it runs in: PyTorch code called
        as one leaf (``nn.init.zeros_``, ``F.embedding(max_norm=...)``) may enter
        ``torch.no_grad()`` itself, and its writes are then invisible to autograd in eager
        (a parameter it zeroes stays the leaf later ops differentiate)."""
        if self.requires_grad_provider is None or self._recording == 0:
            return
        mode = torch.is_grad_enabled()
        if self._inner_region is not None and self._inner_region[1] == mode:
            return
        self._close_inner_region()
        if mode != self._leaf_grad_mode:
            self._inner_region = (self.builder.record_grad_mode(mode, self._leaf_grad_mode), mode)

    def _close_inner_region(self) -> None:
        if self._inner_region is not None:
            self.builder.record_grad_mode_restore(self._inner_region[0])
            self._inner_region = None

    @contextlib.contextmanager
    def recorded_in_grad_mode(self, enabled: bool):
        """Run and record what runs inside in a region of grad mode ``enabled``, which the
        program restores to the mode before it. Inside a leaf
        call (a stale view re-derived when the call reads it, a write hidden from autograd),
        the call's own inner region is closed first and none is opened for the mode set here:
        regions nest, as ``ir.grad_regions`` requires."""
        self._close_inner_region()
        previous = self.builder.record_grad_mode(enabled, torch.is_grad_enabled())
        leaf_mode, self._leaf_grad_mode = self._leaf_grad_mode, enabled
        try:
            with torch.set_grad_enabled(enabled):
                yield
        finally:
            self._close_inner_region()
            self._leaf_grad_mode = leaf_mode
            self.builder.record_grad_mode_restore(previous)

    # ----------------------------------------------------------------- autograd's refusals
    def _inplace_refusal(self, func, args):
        """See :meth:`_refused`, for an in-place op (checked before it runs)."""
        if self.requires_grad_provider is None or not is_inplace_op(func):
            return None
        return self._refused(inplace_refusal(func, args), args)

    def _stale_read_refusal(self, func, args, kwargs, out):
        if self.requires_grad_provider is None:
            return None
        return self._refused(self.aliases.stale_read_refusal(func, args, kwargs, out), args)

    def _refused(self, refusal, args):
        """Raise the refusal (UnsupportedError UB120 at the user's line) when eager's autograd
        raises on the example: grad mode is on and one of its tensors requires grad (eager's
        flag, a view's is its base's). Otherwise return it when it holds whatever grad mode the
        program runs in (the node is marked :data:`EAGER_REFUSES`, checked when the program
        runs): a view ``split`` returned, or one made in a no_grad region of forward()); else
        None."""
        if refusal is None:
            return None
        if torch.is_grad_enabled() and any(self._eager_requires_grad(args[i])
                                           for i in refusal.arguments):
            raise refusal.error(self.frames_provider())
        # a view made under no_grad when export itself ran under no_grad may be an ordinary
        # view when the program runs with grad: only a region of forward() makes it one there
        made_under_no_grad = refusal.creation == CreationMeta.NO_GRAD_MODE
        if refusal.creation == CreationMeta.MULTI_OUTPUT_NODE or (
                made_under_no_grad and self.export_grad_enabled):
            return refusal
        return None

    def _mark_saved_then_written(self, tensor) -> None:
        """``tensor`` is about to be written in place: mark the ops recorded with grad enabled
        that saved it, its base or any view of its base for backward (``ir.saved_tensors``):
        they share one version counter, and eager refuses backward through such an op."""
        tensor = self._lifted.get(id(tensor), tensor)
        if not self.is_tracked(tensor):
            return
        written = self.node_of(tensor)
        members = {written}
        for alias in self.aliases.family(tensor):
            node = self.builder.bound_node(self._lifted.get(id(alias), alias))
            if node is not None:
                members.add(node)
        message, asked = self._saved_then_written_message(), self._saves_asked
        for member in members:
            for reader in (member, *member.users):
                if reader in self._no_grad_nodes or (reader, member) in asked:
                    continue  # a pair's answer depends on the two nodes only: asked once
                asked.add((reader, member))
                self._pending_writes.append((reader, member, message))

    def _aliases_read(self, args, kwargs) -> list:
        """The nodes of the arguments of an in-place op (after the written ``args[0]``) that
        share its memory: the written tensor itself (``y.mul_(y)``) or an alias of it
        (``y.mul_(y.detach())``)."""
        root = self.aliases.root(args[0])
        found = []
        for value in pytree.tree_leaves((args[1:], kwargs)):
            if isinstance(value, torch.Tensor) and (
                    value is args[0] or self.aliases.root(value) is root):
                node = self.builder.bound_node(self._lifted.get(id(value), value))
                if node is not None:
                    found.append(node)
        return found

    def _mark_saves_its_target(self, node: fx.Node, aliases: list) -> None:
        """The in-place op ``node`` also reads the memory it writes (``y.mul_(y)``,
        ``y.mul_(y.detach())``: ``aliases``): when it saves such an argument for backward, the
        write itself changes it, and eager refuses backward through ``node``."""
        if node in self._no_grad_nodes:
            return
        message = self._saved_then_written_message()
        for alias in dict.fromkeys(aliases):
            self._pending_writes.append((node, alias, message))

    def _saved_then_written_message(self) -> str:
        return ("one of the variables needed for gradient computation has been modified by "
                f"an inplace operation (unbroken: the write at {_location(self)} changed a "
                "tensor saved for backward before it)")

    def _settle_saved_then_written(self) -> None:
        """Decide the writes :meth:`_mark_saved_then_written` noted (autograd records nothing
        inside dispatch, so this runs when the leaf call ends)."""
        pending, self._pending_writes = self._pending_writes, []
        for reader, written, message in pending:
            patterns = self.size_one.same_answer_at_one(
                self.env, lambda resize, r=reader, w=written: saving_patterns(
                    r, w, resize, self._saves_answers))
            if not patterns:
                continue
            if SAVED_THEN_WRITTEN in reader.meta:  # saved in more cases than one write shows
                message, positions, known = reader.meta[SAVED_THEN_WRITTEN]
                patterns = tuple(dict.fromkeys((*known, *patterns)))
            else:
                positions = tuple(position for position, _ in grad_arguments(reader))
            reader.meta[SAVED_THEN_WRITTEN] = (message, positions, patterns)

    def _eager_requires_grad(self, tensor) -> bool:
        provider = self.requires_grad_provider
        return provider(tensor) or (is_view(tensor) and provider(view_base(tensor)))

    def _compute(self, func, args, kwargs):
        """The meta output of ``func``; a functional op's (under symbolic sizes a view op's
        too) from the cache when the trace has computed it on the same metadata
        (``ir.meta_cache``). Recording is suspended while it
        runs: a meta kernel written in Python (``_euclidean_dist``'s, which ``cdist`` reaches)
        may call a composite that ``ir.composites`` keeps whole, on its own intermediate
        tensors, which are no ops of the program."""
        if self._positioned_by_unbacked(func, args):
            return self._meta_of(lambda a, k: UNBACKED_INDEX_VIEWS[func](self, *a, **k),
                                 args, kwargs)
        key, base = None, None
        if is_functional(func):
            key = self.meta_cache.key("kernel", func, args, kwargs, layout_on_cpu(self, args))
        elif self.env is not None and is_view_op(func) and args and \
                isinstance(args[0], torch.Tensor):
            # a view's metadata under symbolic sizes is a Python reference's work (``view``:
            # ~0.5 ms); repeated in every block of a model, it is rebuilt as a view of its base
            key = self.meta_cache.key("view", func, args, kwargs)
            base = args[0]
        out = self.meta_cache.get(key, base)
        if out is None:
            symbols = self.meta_cache.symbol_count()
            device_layouts = self.device_layouts
            # shared with its questions unless the relayout reads the trace (the kernel's
            # relayout from the arguments' metadata is part of the computation replayed)
            reads_trace = relayout_reads_trace(func)
            shared = self.meta_cache.shared_computation(key, base) \
                if not reads_trace else None
            kernel = self._kernel_of(func)
            self._suspended += 1
            try:
                out = self._meta_of(kernel if shared is None else shared.wrap(kernel), args,
                                    kwargs, func)
            finally:
                self._suspended -= 1
            self.meta_cache.put(key, out, symbols, base,
                                share=not reads_trace and self.device_layouts == device_layouts,
                                computation=shared)
        return out

    def _positioned_by_unbacked(self, func, args) -> bool:
        """``func`` is a view an unbacked index positions (``ir.data_dependent``)."""
        return func in UNBACKED_INDEX_VIEWS and self.env is not None and \
            has_unbacked_argument(self.env, args)

    def _unbacked_view(self, func, args, kwargs):
        """The meta output of a view an unbacked index positions, or None for any other."""
        if self._positioned_by_unbacked(func, args):
            return UNBACKED_INDEX_VIEWS[func](self, *args, **kwargs)
        return None

    def _bind_fresh_sizes(self, node: fx.Node, out) -> None:
        """A view an unbacked bound positions may have a fresh length (a slice of unknown
        bounds: ``ir.data_dependent``): later sizes computed from it read it from ``node``."""
        for dim, size in enumerate(out.shape):
            if isinstance(size, torch.SymInt) and size.node.expr.is_Symbol and \
                    self.env.is_unbacked(size.node.expr):
                self.builder.bind_symbol(size.node.expr, node, dim, out)

    def _kernel_of(self, func):
        """``(args, kwargs) -> meta output`` of ``func``: its meta kernel, and for the ops
        whose meta kernel lays the output out unlike eager's CPU kernel, that output relaid
        out as eager's (``ir.layouts``)."""
        relayout = kernel_layout(func)
        if relayout is None:
            custom = custom_meta_kernel(func)
            return custom if custom is not None else lambda a, k: func(*a, **k)

        def kernel(a, k):
            out = func(*a, **k)
            return relayout(self, func, a, k, out) if layout_on_cpu(self, a) else out
        return kernel

    def _meta_of(self, kernel, args, kwargs, func=None, computation=None):
        """``kernel(args, kwargs)``: the meta output of one recorded node (its "is this size
        1?" answers are the size-1 audit's: ``SizeOneHook.node_meta``; ``func``, the op when
        the kernel is its own; ``computation``, what the kernel computes otherwise, when one
        value says it: two nodes of the same computation on the same metadata are checked at
        1 once)."""
        op = func if func is not None else \
            computation[1] if isinstance(computation, tuple) and computation[0] == "composite" \
            else None
        # a kernel of torch's own (the user may register theirs anew): its output, and the
        # size-1 check re-running it, depend on the metadata, the process's state and
        # whether the tensors stand for CPU ones (the relayout) alone
        shared = (layout_on_cpu(self, args),) \
            if getattr(op, "namespace", None) in TORCH_NAMESPACES else None
        return self.size_one.node_meta(self.env, kernel, args, kwargs, func, computation,
                                       shared)

    def _record_scalar(self, args, compute_args):
        """``t.item()``: a fresh unbacked symbol (value unknown at export time)."""
        tensor = compute_args[0]
        kind = "float" if tensor.dtype.is_floating_point else "int"
        source = f"{self.node_of(tensor).name}.item()"
        symbol = self.env.create_unbacked_symbol(kind, source=source)
        if tensor.dtype == torch.bool:  # the symbol is 1 for True, 0 for False
            self.env.set_range(symbol, ValueRange(0, 1))
        value = self.env.symfloat(symbol) if kind == "float" else (
            self.env.symbool(sympy.Eq(symbol, 1)) if tensor.dtype == torch.bool
            else self.env.symint(symbol))
        self.record_data_dependent(aten.item.default, args, {}, value)
        if self.shadow is not None and self.shadow.value_of(tensor) is not None:
            self.shadow.symbols[symbol] = self.shadow.value_of(tensor).item()
        return value

    def unbacked_size(self, source: str, upper=None):
        """A fresh size (>= 0, at most ``upper``) that only tensor values decide."""
        symbol = self.env.create_unbacked_symbol("size", source=source)
        if upper is not None:
            self.env.set_range(symbol, ValueRange(0, upper), spec=True)
        return self.env.symint(symbol)

    def note_layout_dependent(self, tensor: torch.Tensor) -> None:
        """``tensor`` is what a layout-dependent op (``x.T.contiguous()``, ``reshape``) returned:
        a copy on the example's layout may be a view of the op's input on another (a write into
        it would change that input), a view may be a copy (a write into it or its base would
        no longer reach the other). See ``wrote_layout_dependent``."""
        self._layout_dependent.append(self.aliases.root(tensor))

    def _track_aliasing(self, func, args, kwargs, out, node) -> None:
        if self.size_one.watches_writes and is_mutating(func):
            for tensor in _written_tensors(func, args, kwargs):
                self.size_one.written(self.aliases.root(tensor), self.frames_provider())
        if is_view_op(func) or func is aten._unsafe_view.default:
            # _unsafe_view shares its input's memory without saying so in its schema (kron's
            # out= kernel writes through one into the caller's tensor): a view here
            self.aliases.note_view(func, args, kwargs, out)
        elif is_inplace_op(func) and isinstance(args[0], torch.Tensor):
            root = self.aliases.root(args[0])
            if any(root is noted for noted in self._layout_dependent):
                self.wrote_layout_dependent = True
            if self.aliases.is_aliased(args[0]):
                self.aliases.after_write(args[0], node)

    def emit(self, func, args, kwargs=None):
        """Compute ``func`` on tracked meta tensors and record it (used while recording
        another op, when the mode is already off): returns the meta output."""
        kwargs = kwargs or {}
        out = self._unbacked_view(func, args, kwargs)
        if out is None:
            out = func(*args, **kwargs)
        node = self._record(func, args, kwargs, out)
        self._bind_outputs(node, out, self.device_of(args[0]))
        if self._positioned_by_unbacked(func, args):
            self._bind_fresh_sizes(node, out)
        return out

    def _is_unused_factory_output(self, tensor) -> bool:
        """True for a tensor made by an op returning fresh memory (``zeros``, ``zeros_like``,
        ``full``... not a view) earlier in this same leaf call, that nothing has used yet: the
        user's program cannot hold it (PyTorch's factory bindings detach their result). A
        tensor that requires grad is not one: autograd detaches an op's output to save it for
        the backward (``relu`` under symbolic sizes) and hands the original to the program."""
        if tensor.requires_grad:
            return False
        tensor = self._lifted.get(id(tensor), tensor)
        node = self.builder.producer(tensor)
        return (node is not None and id(tensor) in self._this_call
                and node.op == "call_function" and not node.users
                and isinstance(node.target, OpOverload)
                and is_functional(node.target))

    def _elide_detach(self, func, tensor, compute_args, device):
        """PyTorch's factory bindings (``torch.zeros_like``...) detach the tensor they just
        made. Recording that detach would make the result a view of an invisible tensor, and
        every later in-place update of it a write through a view. The result stands for the
        factory node itself; the undetached original is forgotten (a later use of it would be
        an untracked tensor, which is refused)."""
        out = func(*compute_args)
        self.bind(out, self.builder.forget(tensor), device)
        if self.shadow is not None and self.shadow.value_of(tensor) is not None:
            self.shadow.set(out, self.shadow.value_of(tensor).detach())
        return out

    def _record_writer(self, func, args, kwargs, compute_args, compute_kwargs, device):
        """Record an op that writes arguments it does not return (see _FUNCTIONAL_WRITERS)."""
        functional = _FUNCTIONAL_WRITERS[func]
        out = self._kernel_of(functional)(compute_args, compute_kwargs)
        node = self._record(functional, args, kwargs, out)
        self._bind_outputs(node, out, device)
        returned = len(op_schema(func).returns)
        for index, new_value in zip(written_arguments(func), out[returned:]):
            target = self._lifted.get(id(args[index]), args[index])
            copy = self.builder.call(aten.copy_.default, (target, new_value), {}, target)
            self.bind(target, copy)
            if self.size_one.watches_writes:
                self.size_one.written(self.aliases.root(args[index]), self.frames_provider())
        return tuple(out[:returned])

    def _refuse_value_dependent(self, func, args) -> None:
        if func in _VALUE_OPS and not (self.env is not None and func in SCALAR_OPS):
            raise DataDependentError(
                f"`{func.overloadpacket.__name__}` needs the value stored in a tensor, which is "
                "unknown at export time", code="UB105", frames=self.frames_provider(),
                hint="Keep the value as a tensor instead of converting it to a Python number.")
        if has_dynamic_output_shape(func) and not integer_indexing(func, args) \
                and not (self.env is not None and func in DATA_DEPENDENT_SIZES):
            raise UnsupportedError(
                f"`{func.overloadpacket.__name__}` returns a tensor whose size depends on tensor "
                "values", code="UB114", frames=self.frames_provider(),
                hint="Use a fixed-size formulation such as torch.where(mask, x, 0).")

    def _refuse_opaque_arguments(self, func, args, kwargs) -> None:
        """A graph holds tensors, symbolic and Python scalars, strings, dtypes, devices and
        layouts; an argument of any other type (a ``torch.Generator``, a TorchScript object
        such as a c10d process group or reduce op) has no value the program could carry, and
        printing it into the graph's code would not even compile: refused here, at the
        user's line, naming the argument."""
        for value in tree_leaves((args, kwargs)):
            if not isinstance(value, _GRAPH_VALUE_TYPES):
                kind = _OPAQUE_KINDS.get(type(value), f"a `{type(value).__name__}` object")
                raise UnsupportedError(
                    f"`{func.overloadpacket.__name__}` takes {kind} as an argument, which an "
                    "exported program cannot hold", code="UB117", frames=self.frames_provider(),
                    hint=_OPAQUE_HINTS.get(type(value), "Pass tensors, numbers or strings to "
                                           "the operator instead."))

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

        c_args, c_kwargs = tree_map(to_meta, (args, kwargs))
        requested = c_kwargs.get("device")
        if requested is not None:
            device = self._user_device(requested)
            c_kwargs = dict(c_kwargs, device=_META)
        elif device is None and takes_argument(func, "device"):
            c_kwargs = dict(c_kwargs, device=_META)
        return c_args, c_kwargs, device or _CPU

    def _user_device(self, requested) -> torch.device:
        device = torch.device(requested)
        return self.default_device if device.type == "meta" else device

    def _record(self, func, args, kwargs, out) -> fx.Node:
        """The node of ``func``, with lifted constants replaced by their stand-ins, the user's
        device, and the default dtype made explicit; the shadow runs it on real values."""
        # fx's own argument mapper (C++): an op's arguments are tuples, lists and dicts of
        # leaves, the structures fx nodes hold; pytree's registry lookups cost 30x more
        args = tuple(map_aggregate(tuple(args), self._lifted_meta))
        kwargs = dict(map_aggregate(dict(kwargs), self._lifted_meta))
        if kwargs.get("device") is not None:
            kwargs["device"] = self._user_device(kwargs["device"])
        if _takes_default_dtype(func, args, kwargs) and isinstance(out, torch.Tensor):
            kwargs["dtype"] = out.dtype  # the default dtype at export time, made explicit
        node = self.builder.call(func, args, kwargs, out)
        if self.size_one.watches_writes and not is_mutating(func):
            self.size_one.read(func, [t for t in tree_leaves((args, kwargs))
                                      if isinstance(t, torch.Tensor)],
                               out, self.aliases.root, self.frames_provider,
                               self.aliases.view_chain)
        if not torch.is_grad_enabled() and self.export_grad_enabled:
            # a no_grad region of forward(): autograd saves nothing for it in any call (under
            # an export made in no_grad, the program runs in its caller's mode: not known)
            self._no_grad_nodes.add(node)
        if self.shadow is not None and func is not aten.item.default:
            self._run_shadow(func, args, kwargs, out)
        return node

    def _run_shadow(self, func, args, kwargs, out) -> None:
        """The real computation beside the recorded one: no mode, no recording kernels."""
        self._suspended += 1
        try:
            with disable_current_modes():
                self.shadow.run(func, list(args), kwargs, out)
        finally:
            self._suspended -= 1

    def _lifted_meta(self, value):
        return self._lifted.get(id(value), value) if isinstance(value, torch.Tensor) else value

    def _bind_outputs(self, node: fx.Node, out, device) -> None:
        if isinstance(out, torch.Tensor):
            self._this_call.add(id(out))
        self.builder.bind_outputs(node, out, device)

    # ----------------------------------------------------------------- branches
    def open_branch(self, operands: list) -> list:
        """Start recording a ``torch.cond`` branch (or ``while_loop`` function) into a new
        subgraph whose inputs are the ``operands`` (meta tensors); returns the meta tensors
        that stand for them inside."""
        stand_ins = self.builder.open_subgraph(operands)
        if self.shadow is not None:
            for operand, stand_in in zip(operands, stand_ins):
                if self.shadow.value_of(operand) is not None:
                    self.shadow.set(stand_in, self.shadow.value_of(operand))
        return stand_ins

    def close_branch(self, outputs: list, *, single: bool = False, split: int | None = None):
        """Finish the open branch returning ``outputs``; returns its scope (see
        ``GraphBuilder.close_subgraph`` for ``single`` and ``split``)."""
        return self.builder.close_subgraph(outputs, single=single, split=split)

    def abandon_branch(self) -> None:
        """Drop an open branch after a failure inside it."""
        self.builder.abandon_subgraph()

    def record_cond(self, pred, branches, operands: list, outputs: list) -> list:
        """Record ``torch.ops.higher_order.cond`` over two closed branches.

        pred: a meta tensor (one element) or a bool; operands: the outer meta tensors passed in;
        outputs: the meta values one branch returned (both agree). Returns fresh meta tensors
        for the results, bound to the cond node's outputs.
        """
        pred_arg = self.node_of(pred) if isinstance(pred, torch.Tensor) else pred
        return self.builder.higher_order(
            torch.ops.higher_order.cond, "cond", branches, ("true", "false"), operands, outputs,
            lambda modules, inputs, extra: (pred_arg, *modules, (*inputs, *extra)))

    def record_autograd_function(self, scopes, operands: list, outputs: list,
                                 **options) -> list:
        """Record ``torch.ops.higher_order.autograd_function_apply`` over a custom Function's
        forward and backward subgraphs (values of the enclosing graph they read become extra
        inputs);
        ``options``: its ``non_differentiable_idx`` and ``saved_for_backward_idx``. Returns
        fresh meta tensors for the forward's outputs."""
        return self.builder.autograd_apply(
            torch.ops.higher_order.autograd_function_apply, *scopes, operands, outputs, options)

    def record_while_loop(self, scopes, carried: list) -> list:
        """Record ``torch.ops.higher_order.while_loop`` (cond and body subgraphs over the
        carried values); returns fresh meta tensors for the final carried values."""
        return self.builder.higher_order(
            torch.ops.higher_order.while_loop, "while_loop", scopes, ("cond", "body"), carried,
            carried, lambda modules, inputs, extra: (*modules, tuple(inputs), tuple(extra)))


# What a node's arguments may hold (besides nested lists and tuples, which pytree flattens).
_GRAPH_VALUE_TYPES = (torch.Tensor, torch.SymInt, torch.SymFloat, torch.SymBool, bool, int,
                      float, complex, str, type(None), torch.dtype, torch.device, torch.layout,
                      torch.memory_format, torch.qscheme, torch.Size, slice, type(Ellipsis),
                      fx.Node)
_OPAQUE_KINDS = {torch.Generator: "a `torch.Generator`",
                 torch.ScriptObject: "a TorchScript object (a c10d process group or reduce op, "
                                     "a custom class instance)"}
_OPAQUE_HINTS = {
    torch.Generator: "Draw from the default generator (seed it with torch.manual_seed outside "
                     "the model) or pass the random tensor in as an input.",
    torch.ScriptObject: "For collectives use torch.distributed._functional_collectives "
                        "(funcol.all_reduce(x, 'sum', group)), whose ops take the group by name.",
}


def _location(recorder) -> str:
    """``file:line`` of the innermost user frame, for a message."""
    frames = recorder.frames_provider()
    return f"{frames[-1].filename}:{frames[-1].lineno}" if frames else "forward()"


def _takes_default_dtype(func, args, kwargs) -> bool:
    """A factory (no tensor inputs) whose dtype comes from torch's global default: recording
    that dtype keeps the program independent of the default in force when it runs."""
    return (kwargs.get("dtype") is None and isinstance(func, OpOverload)
            and takes_argument(func, "dtype")
            and not any(isinstance(a, torch.Tensor) for a in tree_leaves(args)))


def _written_tensors(func, args, kwargs) -> list:
    """The tensors a mutating op writes (``Tensor(a!)`` arguments, positional or keyword)."""
    arguments = op_schema(func).arguments
    written = []
    for index in written_arguments(func):
        value = args[index] if index < len(args) else kwargs.get(arguments[index].name)
        written.extend(t for t in pytree.tree_leaves(value) if isinstance(t, torch.Tensor))
    return written


class _Recording:
    """``Recorder.recording()``: while inside, the recorder's dispatch mode is pushed, meta
    kernels see its devices (``devices_of``) and, for the outermost leaf call, Python data
    made a tensor lands on the user's device. Entered once per leaf call, so a class that
    enters and exits them as the nested ``with`` statement it stands for would (innermost
    exit first, each seeing the exception the inner ones left), instead of a generator-based
    context manager around that statement."""

    __slots__ = ("recorder", "python_data", "entered")

    def __init__(self, recorder: Recorder, python_data: bool):
        self.recorder, self.python_data = recorder, python_data
        self.entered: list = []

    def __enter__(self) -> None:
        recorder = self.recorder
        outermost = recorder._recording == 0
        if outermost:
            recorder._this_call.clear()
            recorder._leaf_grad_mode = torch.is_grad_enabled()
            recorder._leaf_autocast = enabled_devices()
        # meta kernels lay out as the traced device's do; Python data made a tensor "on
        # the device of" a traced tensor is built on the device it stands for
        managers = [recorder, devices_of(recorder)]
        if outermost and self.python_data:
            managers.append(python_data_on_user_device(recorder))
        recorder._recording += 1
        entered = self.entered = []
        try:
            for manager in managers:
                manager.__enter__()
                entered.append(manager)
        except BaseException as exc:
            left = self._exit_entered(exc)
            if left is not None and left is not exc:  # an exit's own error, as `with` raises it
                raise left  # noqa: B904
            raise

    def __exit__(self, kind, exc, traceback) -> bool:
        left = self._exit_entered(exc)
        if left is not None and left is not exc:
            raise left
        return exc is not None and left is None  # an inner exit suppressed it

    def _exit_entered(self, exc: BaseException | None) -> BaseException | None:
        """Exit what was entered, innermost first; then leave the recording. Returns the
        exception left (``exc``, one an exit raised, or None when one suppressed it)."""
        recorder = self.recorder
        try:
            while self.entered:
                manager = self.entered.pop()
                try:
                    if manager.__exit__(type(exc) if exc is not None else None, exc,
                                        exc.__traceback__ if exc is not None else None):
                        exc = None
                except BaseException as raised:  # replaces the one it was handed
                    exc = raised
        finally:
            recorder._recording -= 1
            if recorder._recording == 0:
                recorder._close_inner_region()
                if recorder._pending_writes:
                    recorder._settle_saved_then_written()
        return exc
