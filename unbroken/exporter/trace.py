"""Stage 1 of an export: trace the call (see ``docs/architecture.md``).

:class:`Trace` is built from an :class:`~unbroken.exporter.options.ExportCall` and its
:class:`~unbroken.exporter.options.ExportOptions`, in the order the objects need each other:
the trace site first (``frontend.trace_site``: where the user's code is) and the size-1 audit
(``size_one.audit``), then the shape environment and the recorder, which read the user's
location from the one and report to the other, then the trace context that holds the
recorder. :meth:`Trace.run` binds the call to ``forward``'s parameters, turns
``dynamic_shapes`` into symbols (``symbolic.spec``), lifts parameters, buffers and inputs to
placeholders with meta stand-ins, and interprets the call while the recorder records ATen ops.
What the later stages read stays on the object: ``env``, ``builder``, ``recorder``,
``output``, ``input_specs``, ``state_dict``, ``constants``, ``leaf_dims``, ``top_dims``.
"""
from __future__ import annotations

import contextlib

import torch
from torch.utils import _pytree as pytree

from ..frontend.budget import current_budget
from ..frontend.output import TraceContext
from ..frontend.paths import PathDecisions
from ..frontend.sources import LocalSource
from ..frontend.trace_site import TraceSite
from ..frontend.tracer import trace_call
from ..frontend.variables.builder import SUBCLASS_HINT
from ..frontend.variables.constant import ConstantVariable
from ..frontend.variables.tensor import SymbolicVariable, TensorVariable
from ..ir.composites import preserving
from ..ir.devices import trace_wide
from ..ir.meta_keys import USER_FRAMES
from ..ir.recorder import Recorder, meta_like
from ..ir.shadow import Shadow
from ..ir.signature import (
    ConstantArgument,
    InputKind,
    InputSpec,
    SymIntArgument,
    TensorArgument,
)
from ..size_one import SizeOneAudit
from ..symbolic.auto import may_need_retrace, needs_retrace
from ..symbolic.diagnostics import ExportUsageError, RefusalError
from ..symbolic.diagnostics.catalogue import graph_break
from ..symbolic.env import ShapeEnvironment
from ..symbolic.spec import resolve_dynamic_shapes
from ..symbolic.torch_compat import enable_python_dispatcher, unmodelled_tensor_class
from .input_trees import (
    bind_inputs,
    dims_of,
    leaf_entries,
    leaves_with_paths,
    materialize,
    path_suffix,
    signature_of,
    top_level_names,
    unflatten_inputs,
    user_pytree_leaves,
)
from .options import ExportCall, ExportOptions

__all__ = ["Trace"]

_NO_LEAF = object()  # an input with no leaves (an empty list): named, no placeholder


class Trace:
    """One trace of ``call`` under ``options``, and what it produced.

    site / size_one / env / recorder / builder / output: the trace site, the size-1 audit,
        the shape environment (which reads the first two), the recorder and its graph builder
        (which read them through the environment), the trace context (built in that order);
    input_specs: the placeholders' input specs, parameters and buffers first;
    state_dict / constants: the parameters and persistent buffers / the other buffers, by FQN;
    leaf_dims: ``id(example tensor) -> its dims`` (ints / sympy expressions), once traced;
    int_values: ``(top-level name, leaf index) -> expression`` of the Python ``int`` inputs
        declared ``Dim.AUTO``/``Dim.DYNAMIC`` (a symbol; an int when ``Dim.AUTO`` pinned it);
    top_dims: top-level argument name -> its dims, None when it holds no tensor, or the
        container with a ``TensorDims`` per tensor (to render suggested fixes).
    """

    def __init__(self, call: ExportCall, options: ExportOptions):
        self.call, self.options = call, options
        self.site = TraceSite()
        self.size_one = SizeOneAudit()
        self.env = ShapeEnvironment(location_provider=self.site.user_frames,
                                    size_one=self.size_one)
        self.recorder = Recorder(
            env=self.env, frames_provider=self.site.user_frames,
            module_stack_provider=self.site.nn_module_stack,
            custom_provider=self.site.custom_meta,
            allow_meta_constants=_on_meta_device(call.root, call.args, call.kwargs),
            shadow=Shadow() if options.find_all else None,
            requires_grad_provider=self.site.requires_grad)
        recorder = self.recorder
        self.size_one.layout_events = lambda: recorder.device_layouts
        self.builder = self.recorder.builder
        path = PathDecisions(options.forced_path, current_budget().unroll) \
            if options.find_all else None
        self.output = TraceContext(self.recorder, self.site, call.root,
                                   find_all=options.find_all, preserved_paths=options.preserve,
                                   path=path)
        self.ended_by = None  # find_breaks: the failure that ended the trace, if any
        # options.adopt_early: the guards the trace was stopped for (needs_retrace), if any
        self.stopped_for = None
        if options.adopt_early:
            self.env.on_guard = self._stop_for_adoption
        self.input_specs: list[InputSpec] = []
        self.state_dict: dict = {}
        self.constants: dict = {}
        self.leaf_dims: dict = {}
        self.int_values: dict = {}
        self.top_dims: dict[str, object] = {}
        self._metas: dict[str, torch.Tensor] = {}  # FQN -> meta stand-in while tracing
        self._subclass_state: list = []  # (placeholder, FQN, class): see _refuse_subclass_state

    def run(self) -> tuple[list, pytree.TreeSpec]:
        """Trace the call: the flattened outputs of ``forward()`` and their spec."""
        call, root = self.call, self.call.root
        forward = root.forward if root is not None else call.mod
        signature = signature_of(forward)
        combined = bind_inputs(signature, forward, call.args, call.kwargs)
        dims = self.leaf_dims = self._resolve_dims(combined)
        self.builder.reserve_names(name for name, _, _ in self._input_leaves(signature))
        self._lift_state()
        arg_trackers, kwarg_trackers = self._lift_inputs(signature, dims)
        try:
            with _tracing(root, self._metas), preserving(self.recorder), trace_wide():
                arg_trackers, kwarg_trackers = materialize(self.output, (arg_trackers,
                                                                         kwarg_trackers))
                result, tx = trace_call(self.output, call.mod, arg_trackers, kwarg_trackers)
                outputs = result.unwrap(tx)
                self.builder.settle()  # views a write left stale, while their sizes compute
        finally:
            self.env.on_guard = None  # a guard decided later is settled with the others
        self._refuse_subclass_state()
        user_pytree_leaves(outputs, "forward()'s result")  # the user's flatten functions run
        flat = pytree.tree_flatten(outputs)
        self.output.check_grad_reproducible(flat[0])
        return flat

    def _stop_for_adoption(self, guard) -> None:
        """``env.on_guard`` under ``options.adopt_early``: a guard that may need another trace
        stops this one at the interpreter's next instruction, if it does need one then (the
        ``torch._check`` of the same operation known: ``symbolic.auto.needs_retrace``); the
        trace stops for every such guard recorded by then (an addition relates every dim)."""
        env = self.env
        if self.stopped_for is None and may_need_retrace(env, guard):
            def confirm() -> bool:
                found = tuple(g for g in env.guards if needs_retrace(env, g))
                self.stopped_for = found or None
                return bool(found)

            self.output.meter.request_stop(confirm)

    def find_breaks(self) -> list:
        """Trace in "find them all" mode: every graph break on this trace's path (the example
        inputs' unless ``options.forced_path`` prescribes sides), in order; a failure that
        cannot be stepped over ends the list (and is ``ended_by``)."""
        try:
            self.run()
        except RefusalError as error:  # an InternalError is ours: raised, never listed
            if not self.output.recover(error):  # noted with its path in find-all mode
                self.output.breaks.append(error.with_frames(self.output.user_frames()))
            self.ended_by = error
        return _unique(self.output.breaks)

    # ----------------------------------------------------------------- inputs
    def _resolve_dims(self, combined) -> dict:
        """id(tensor) -> tuple of dim entries (int or sympy expr), for dynamic inputs."""
        options = self.options
        if options.dynamic_shapes is None:
            return {}
        resolved = resolve_dynamic_shapes(combined, options.dynamic_shapes, self.env,
                                          options.auto_refinements, options.forced_static)
        if options.narrow_in_place and self.env.auto_symbols:
            self.env.watch_ranges()  # what narrowing them in place must answer alike
        dims = {}
        for name, value in combined.items():
            leaves, spec = pytree.tree_flatten(value)
            for index, (leaf, entry) in enumerate(zip(leaves, leaf_entries(spec, resolved[name]),
                                                      strict=True)):
                if isinstance(leaf, torch.Tensor):
                    dims[id(leaf)] = entry
                elif type(leaf) is int and entry is not leaf:  # declared dynamic
                    self.int_values[name, index] = entry
        return dims

    def _lift_state(self) -> None:
        """Placeholders for parameters then buffers, one per FQN (as torch.export), with meta
        stand-ins while tracing. Names that alias one tensor (tied weights, a buffer registered
        twice) share one stand-in, so a write through one name is seen through the other; the
        recorder binds the stand-in to the last of their placeholders."""
        root = self.call.root
        if root is None:
            return
        stand_ins: dict[int, torch.Tensor] = {}
        for fqn, param in root.named_parameters(remove_duplicate=False):
            name = self._lift_tensor(f"p_{fqn}", param, stand_ins, parameter=True)
            self.input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(name), fqn))
            self.state_dict[fqn] = param
            self._metas[fqn] = stand_ins[id(param)]
        for fqn, buffer in root.named_buffers(remove_duplicate=False):
            persistent = _is_persistent(root, fqn)
            name = self._lift_tensor(f"b_{fqn}", buffer, stand_ins, parameter=False)
            self.input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(name), fqn,
                                              persistent=persistent))
            (self.state_dict if persistent else self.constants)[fqn] = buffer
            self._metas[fqn] = stand_ins[id(buffer)]

    def _refuse_subclass_state(self) -> None:
        """A parameter or buffer of a tensor subclass the trace cannot model that the graph
        uses without forward() reading it (a leaf module's native forward reads its weight;
        a read by forward() is refused where it is, ``builder._wrap_tensor``): refused at the
        line of its first use."""
        for node, fqn, subclass in self._subclass_state:
            if node.users:
                user = next(iter(node.users))
                raise graph_break("UB117", f"`{fqn}` is a {subclass.__name__}, a tensor "
                                  "subclass that unbroken cannot trace", frames=user.meta.get(
                                      USER_FRAMES, ()), hint=SUBCLASS_HINT)

    def _lift_tensor(self, name, tensor, stand_ins, *, parameter) -> str:
        meta = stand_ins.get(id(tensor))
        if meta is None:
            _check_initialized(name[2:], tensor, parameter)
            meta = meta_like(tensor)
            if parameter:  # native code checks isinstance(p, nn.Parameter) (get_parameter...)
                meta = torch.nn.Parameter(meta, requires_grad=False)
            stand_ins[id(tensor)] = meta
            self.recorder.alias_state(tensor, meta)
            self._shadow(meta, tensor)
            self.output.mark_state(meta, parameter=parameter, requires_grad=tensor.requires_grad,
                                   subclass=unmodelled_tensor_class(tensor))
        node = self.builder.add_placeholder(name, meta, user_input=False, device=tensor.device)
        subclass = unmodelled_tensor_class(tensor)
        if subclass is not None:
            self._subclass_state.append((node, name.partition("_")[2], subclass))
        if isinstance(meta, torch.nn.Parameter):
            node.meta["val"] = meta_like(meta)  # the graph's value is a plain tensor
        return node.name

    def _lift_inputs(self, signature, dims):
        """Placeholders for the flattened user inputs, in the order of ``(args, kwargs)``."""
        # one placeholder per position, even when the example passes one tensor twice
        # (export(m, (x, x))): the program is traced for separate inputs; module() refuses a
        # call whose inputs share memory with one the program writes (ir.input_checks)
        args = self.call.args
        bound, leaves = {}, {}
        for name, top_name, leaf in self._input_leaves(signature):
            leaves.setdefault(top_name, [])
            if leaf is not _NO_LEAF:
                key = (top_name, len(leaves[top_name]))
                tracker = self._int_input(name, self.int_values[key]) \
                    if key in self.int_values else self._user_input(name, leaf, dims.get(id(leaf)))
                leaves[top_name].append((leaf, tracker))
        for top_name, value in top_level_names(signature, args, self.call.kwargs):
            spec = pytree.tree_structure(value)
            trackers = {id(leaf): tracker for leaf, tracker in leaves[top_name]}
            self.top_dims[top_name] = dims_of(value, spec, [
                trackers[id(leaf)] if isinstance(leaf, torch.Tensor) else None
                for _, leaf in leaves_with_paths(value)])
            bound[top_name] = unflatten_inputs([t for _, t in leaves[top_name]], spec)
        names = list(bound)
        positional = [bound[n] for n in names[:len(args)]]
        return positional, {k: bound[k] for k in names[len(args):]}

    def _input_leaves(self, signature):
        """``(placeholder name, top-level name, leaf)`` for every leaf of the user inputs, in
        the order of ``(args, kwargs)`` (``ys_0``, ``d_key``...); an input without leaves
        yields one ``_NO_LEAF`` entry so that its top-level name is still seen."""
        for top_name, value in top_level_names(signature, self.call.args, self.call.kwargs):
            leaves = leaves_with_paths(value)
            for path, leaf in leaves:
                yield top_name + "".join(path_suffix(k) for k in path), top_name, leaf
            if not leaves:
                yield top_name, top_name, _NO_LEAF

    def _user_input(self, name, leaf, dims):
        if not isinstance(leaf, torch.Tensor):
            node = self.builder.add_placeholder(name, leaf, user_input=True)
            self.input_specs.append(InputSpec(InputKind.USER_INPUT,
                                              ConstantArgument(node.name, leaf), None))
            return ConstantVariable(leaf, LocalSource(name))
        meta = self.env.make_meta_tensor(leaf, dims) if dims is not None else meta_like(leaf)
        node = self.builder.add_placeholder(name, meta, user_input=True, device=leaf.device)
        self._shadow(meta, leaf)
        for index, size in enumerate(meta.shape):
            if isinstance(size, torch.SymInt):
                self.builder.bind_symbol(size.node.expr, node, index)  # s, or a*s + b
        self.output.mark_state(meta, parameter=False, requires_grad=leaf.requires_grad,
                               example=leaf)
        self.input_specs.append(InputSpec(InputKind.USER_INPUT, TensorArgument(node.name), None))
        return TensorVariable(meta, LocalSource(name), requires_grad=leaf.requires_grad)

    def _int_input(self, name, expr):
        """A Python ``int`` input declared ``Dim.AUTO``/``Dim.DYNAMIC``: a ``SymInt``
        placeholder (its symbol, or the expression of other dims ``Dim.AUTO`` made it)."""
        value = self.env.symint(expr)
        node = self.builder.add_placeholder(name, value, user_input=True)
        if isinstance(value, torch.SymInt) and value.node.expr.is_Symbol:
            self.builder.bind_input_value(value.node.expr, node)
        elif not isinstance(value, torch.SymInt):  # Dim.AUTO made it static
            self.input_specs.append(InputSpec(InputKind.USER_INPUT,
                                              ConstantArgument(node.name, value), None))
            return ConstantVariable(value, LocalSource(name))
        self.input_specs.append(InputSpec(InputKind.USER_INPUT, SymIntArgument(node.name), None))
        return SymbolicVariable(value, LocalSource(name))

    def _shadow(self, meta, real) -> None:
        """In find-all mode: a private copy of the real value (nothing the user owns changes)."""
        if self.recorder.shadow is not None and real.device.type != "meta":
            self.recorder.shadow.set(meta, real.detach().clone())


def _unique(errors) -> list:
    """Drop repeats of the same break at the same place (a loop reports it once)."""
    seen, unique = set(), []
    for error in errors:
        key = (error.code, error.location.filename if error.location else None,
               error.location.lineno if error.location else None)
        if key not in seen:
            seen.add(key)
            unique.append(error)
    return unique


def _on_meta_device(root, args, kwargs) -> bool:
    """True when the model's state or inputs live on the meta device (no values anywhere)."""
    state = [*root.parameters(), *root.buffers()] if root is not None else []
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    return any(t.device.type == "meta" for t in [*state, *inputs])


def _check_initialized(fqn: str, tensor, parameter: bool) -> None:
    """A lazy module's parameter or buffer has no shape before its first call: refused, with
    the fix (as eager, which infers it on the first call; the export never calls the model)."""
    if torch.nn.parameter.is_lazy(tensor):
        kind = "parameter" if parameter else "buffer"
        raise ExportUsageError(
            f"the model's {kind} `{fqn}` is not initialized yet (a lazy module such as "
            "`nn.LazyLinear` infers its shape on the first call)",
            hint="Call the model once on an example input before exporting it.")


def _is_persistent(root, fqn: str) -> bool:
    owner_name, _, name = fqn.rpartition(".")
    owner = root.get_submodule(owner_name) if owner_name else root
    return name not in owner._non_persistent_buffers_set


@contextlib.contextmanager
def _tracing(root, metas):
    """Python dispatcher on (symbolic sizes need it); parameters and buffers swapped for their
    meta stand-ins for the duration of the trace."""
    with contextlib.ExitStack() as stack:
        # forward() may flip grad mode with a plain call (torch.set_grad_enabled(False)):
        # restore the caller's mode when tracing ends, as eager scoping would not.
        stack.enter_context(torch.set_grad_enabled(torch.is_grad_enabled()))
        stack.enter_context(enable_python_dispatcher())
        if root is not None and metas:
            stack.enter_context(_swapped_state(root, metas))
        yield


@contextlib.contextmanager
def _swapped_state(root, metas):
    """Parameters and buffers of ``root`` replaced by their meta stand-ins (by FQN) for the
    duration, and put back however the body ends. A module reachable by two paths (``self.tail
    = self.seq[1:]``) is one owner: its original tensor is saved once, before either path
    swaps it, so the user's model never keeps a meta tensor. PyTorch's own modules may cache
    what they saw (``RNNBase._flat_weights`` is rebuilt when the weights look changed): every
    module's attributes are put back as they were too."""
    saved: dict = {}  # (id(owner), kind, name) -> (owner's dict, name, original tensor)
    attributes = [(vars(m), dict(vars(m))) for m in root.modules()]
    owners: dict = {"": root}  # path -> module (a module owns several tensors)
    try:
        for fqn, meta in metas.items():
            owner_path, _, name = fqn.rpartition(".")
            owner = owners.get(owner_path)
            if owner is None:
                owner = owners[owner_path] = root.get_submodule(owner_path)
            kind = "_parameters" if name in owner._parameters else "_buffers"
            table = getattr(owner, kind)
            saved.setdefault((id(owner), kind, name), (table, name, table[name]))
            table[name] = meta
        yield
    finally:
        for table, name, original in saved.values():
            table[name] = original
        for current, before in attributes:
            for name in current.keys() - before.keys():
                del current[name]
            current.update((k, v) for k, v in before.items() if current.get(k) is not v)
