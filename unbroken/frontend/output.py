"""The trace-wide context shared by every translator of one export.

It owns the recorder, the trace site (``trace_site.TraceSite``: the stack of running
translators, from which the user's stack is read for every recorded op, guard and error, and
the ``nn_module_stack`` scopes), the map from module objects to their qualified names, and the
leaf-call machinery.
"""
from __future__ import annotations

import contextlib
import operator
import os
import types
from dataclasses import dataclass

import torch

from ..ir.devices import PASS_THROUGH_CODE, needs_python_data_mode, traced_device_arguments
from ..ir.flat import tree_leaves
from ..symbolic.diagnostics import (
    DataDependentError,
    InternalError,
    UnbrokenError,
    UnsupportedError,
)
from ..symbolic.diagnostics.catalogue import GraphBreakError, TracedException, graph_break
from ..symbolic.functions import real_power_call
from ..symbolic.torch_compat import (
    OpOverload,
    OpOverloadPacket,
    changed_settings,
    functorch_depth,
    global_settings,
    resume_functorch,
    suspend_functorch,
)
from .budget import BudgetMeter, current_budget
from .overlay import Overlay
from .paths import PathDecisions
from .sources import AttrSource, ItemSource, ModuleSource
from .trace_site import TraceSite
from .variables.base import CREATION_ORDER
from .variables.builder import wrap
from .variables.containers import IteratorVariable, index_lists_as_tensors
from .variables.ndarray import NdarrayVariable, call_numpy
from .variables.objects import ObjectVariable
from .variables.tensor import TensorVariable

__all__ = ["TraceContext", "GradRegion"]

# Functions whose result never requires grad, whatever their inputs (eager autograd).
_NON_DIFFERENTIABLE = frozenset(
    [torch.Tensor.detach, torch.detach, torch.Tensor.new_zeros, torch.Tensor.new_ones,
     torch.Tensor.new_empty, torch.Tensor.new_full, torch.Tensor.new_tensor]
    + [getattr(torch, f"{name}_like") for name in
       ("zeros", "ones", "empty", "full", "rand", "randn", "randint")])


def _tensor_inputs(fn, values, named) -> list:
    """The tensors a leaf call reads: its tensor arguments, and the parameters and buffers
    of the modules among its receiver and arguments (``Linear.forward`` runs natively)."""
    owner = fn.__self__ if isinstance(fn, types.MethodType) else None
    leaves = tree_leaves((owner, values, named))
    # on the types: a failed isinstance would read an object's ``__class__`` through a
    # ``__getattribute__`` its class may define in Python (the user's code, run natively)
    tensors = [t for t in leaves if issubclass(type(t), torch.Tensor)]
    for module in (v for v in leaves if issubclass(type(v), torch.nn.Module)):
        tensors.extend(module.parameters())
        tensors.extend(module.buffers())
    return tensors


@dataclass(frozen=True, slots=True)
class GradRegion:
    """An open grad-mode region: the trace's mode before it (``grad_enabled``,
    ``inference_mode``) and the graph node that reads the caller's mode at run time."""

    grad_enabled: bool
    inference_mode: bool
    previous_node: object

_UNBROKEN_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep


# Exceptions PyTorch's Python code raises as ordinary Python control flow (a missing attribute
# or key), which the traced program may catch like eager code would. Errors of the operators
# themselves (RuntimeError...) are not caught: they are reported as UB120.
_PYTHON_LEVEL = (AttributeError, KeyError, IndexError, StopIteration)
# What PyTorch raises when it rejects a program (operator errors, bad arguments, a failed
# torch._check): reported at the user's line. Any other exception escaping a leaf call is a
# bug in unbroken, reported as InternalError where the instruction is executed.
_PROGRAM_ERRORS = (RuntimeError, TypeError, ValueError, ArithmeticError, LookupError,
                   AssertionError, AttributeError, StopIteration)


class _LeafErrors:
    """``TraceContext.leaf_errors``: an exception out of the block goes to
    ``raise_leaf_error`` (a class, not a generator: it is entered for every leaf call)."""

    __slots__ = ("output", "fn")

    def __init__(self, output, fn):
        self.output, self.fn = output, fn

    def __enter__(self) -> None:
        return None

    def __exit__(self, kind, exc, traceback) -> bool:
        if isinstance(exc, Exception):
            self.output.raise_leaf_error(exc, self.fn)
        return False


# Functions written in C (torch's bindings, tensor methods and slots): what they made and did
# not return, no Python code holds once they return.
_C_FUNCTIONS = (types.BuiltinFunctionType, types.MethodDescriptorType,
                types.WrapperDescriptorType, types.MethodWrapperType)


# Lazy iterators of CPython's a native function may return (torch's Python code returns
# ``zip(*chunks)``): run to a list inside the call, as a generator is.
_LAZY_ITERATORS = (types.GeneratorType, zip, map, filter, enumerate, reversed,
                   type(iter(())), type(iter([])), type(iter({}.items())))


def _call_native(fn, values, named) -> tuple:
    """``fn(*values, **named)`` and whether it returned a generator or another lazy iterator
    (then run to a list)."""
    result = fn(*values, **named)
    if issubclass(type(result), _LAZY_ITERATORS):  # (on the type: see _tensor_inputs)
        return list(result), True
    return result, False


def _raised_inside_unbroken(exc: BaseException) -> bool:
    """True when the innermost frame of ``exc``'s traceback is unbroken's own code (a bug
    in unbroken, not an error PyTorch raised for the user's program). The frames of
    ``TraceContext.call_leaf`` and ``_call_native`` are not: a native callee
    (``Tensor.__getitem__``, ``Tensor.sum``) has no Python frame, so what it raises for the
    user's arguments (``x[::-1]``,
    ``x.sum(dim="a")``) appears raised there; nor is the torch function mode's that passes
    each call through while recording (``ir.devices.PASS_THROUGH_CODE``)."""
    tb = exc.__traceback__
    while tb is not None and tb.tb_next is not None:
        tb = tb.tb_next
    return (tb is not None and tb.tb_frame.f_code.co_filename.startswith(_UNBROKEN_DIR)
            and tb.tb_frame.f_code not in (TraceContext.call_leaf.__code__,
                                           _call_native.__code__, PASS_THROUGH_CODE))


# Tensor indexing, whose list indexes become index tensors (see index_lists_as_tensors).
_INDEXING = (operator.getitem, operator.setitem, torch.Tensor.__getitem__,
             torch.Tensor.__setitem__)


class TraceContext:
    """State of one trace.

    recorder:       the ``ir.recorder.Recorder`` building the graph;
    root:           the exported module (or None when a plain function is traced);
    site:           the :class:`~unbroken.frontend.trace_site.TraceSite` the recorder and the
                    shape environment read the user's location from (running translators,
                    modules being called, eager ``requires_grad`` of the tensors);
    branch_starts:  creation stamps at which the open ``torch.cond`` branches began;
    find_all:       "find them all" mode (``find_graph_breaks``): breaks are collected in
                    ``breaks`` and tracing goes on along one path: at a decision on tensor
                    data the side ``path`` prescribes, else the example inputs' side;
    breaks:         the graph breaks collected in that mode, in program order;
    path:           in that mode, the decisions on tensor data of this trace
                    (``frontend.paths.PathDecisions``); None otherwise;
    overlay:        writes to objects outside the trace, undone when the trace ends;
    private:        module id -> qualified name (``_paths``), ids of the meta tensors standing
                    for parameters (``_parameters``); eager ``requires_grad`` (in ``site``,
                    also set for every leaf call's results), see ``mark_state`` and
                    ``note_results``;
    grad_enabled / inference_mode: the traced program's grad mode (regions are recorded in the
                    graph; the process's own mode is set only around each leaf call);
    native_contexts: context managers entered natively, exited if the trace stops inside;
    meter:          the interpreter's budget (``frontend.budget``);
    layout_read / layout_aliasing: forward() read a stride/contiguity fact / called an op
                    that views or copies depending on the layout (``ir.input_checks``);
    grad_mode_decisions: the torch.nn fast-path choices that read the caller's grad mode
                    (``ir.input_checks.GradModeDecision``), checked by ``module()``;
                    ``grad_regions_open`` counts the regions forward() is in (their mode is
                    the program's own, whatever the caller's);
    preserved_paths / preserved_calls: the submodules whose call signatures export keeps, and
                    the boundaries of their calls (graph nodes or constants, pytree specs);
    native_objects: id -> tracker of the objects created in the trace that native code was
                    given (``variables.objects.NewObjectVariable.native``): what a leaf call
                    writes to them is read back after it, and ``wrap`` of one gives its tracker.
    instance_dicts: id of an outside object's ``__dict__`` -> (the dict, its contents'
                    identities, its tracker): ``protocol.lookup`` gives repeated reads of it
                    one tracker, as CPython gives one dict.
    wrap_builders:  id of a function or class -> (it, how ``wrap`` makes its tracker),
                    decided once per trace (``variables.builder._wrap_callable``).
    """

    def __init__(self, recorder, site: TraceSite, root=None, *, find_all: bool = False,
                 preserved_paths: frozenset[str] = frozenset(),
                 path: PathDecisions | None = None):
        self.recorder = recorder
        self.site = site
        self.root = root
        self.branch_starts: list[int] = []  # creation stamps at which open branches began
        # "find them all" mode: breaks are collected here and tracing goes on along the path
        # the example inputs take (the recorder's shadow knows their real values)
        self.find_all = find_all
        self.breaks: list = []
        self.path = (path or PathDecisions()) if find_all else None
        self.overlay = Overlay()  # writes to outside objects, to be undone by the trace
        self._paths = {}
        self._owned_paths: frozenset[str] | None = None  # see model_holds
        self._parameters: set[int] = set()
        self._callers: set[int] = set()  # ids of the stand-ins of inputs, parameters, buffers
        self._examples: dict[int, torch.Tensor] = {}
        self._unmodelled: dict[int, type] = {}  # see mark_state
        # the trace's own grad mode (the process's is never changed by forward())
        self.grad_enabled = self.initial_grad_enabled = torch.is_grad_enabled()
        self.initial_settings = global_settings()  # checked when forward() returns
        self.inference_mode = False
        self.native_contexts: list = []  # context managers entered natively, innermost last
        self.context_var_tokens: list = []  # (ContextVar, token) set natively, not yet reset
        # the functorch transforms forward() opened (torch.vmap's nesting, entered by a leaf
        # call of the interpreted vmap): on the thread's stack only while a leaf call runs
        self.functorch_layers: list = []
        self.functorch_base = functorch_depth()
        self.meter = BudgetMeter(current_budget())  # instructions and time of this trace
        self.layout_read = False  # forward() read a stride or contiguity fact
        self.layout_aliasing = False  # it called an op that copies or aliases by layout
        self.grad_mode_decisions: list = []  # torch.nn fast-path choices that read grad mode
        self.grad_regions_open = 0  # regions forward() is in: their mode is not the caller's
        # preserve_module_call_signature: the submodule paths asked for, and each call of one
        # (``variables.nn_module.PreservedCall``), in call order
        self.preserved_paths: frozenset[str] = preserved_paths
        self.preserved_calls: list = []
        self.native_objects: dict = {}
        self.instance_dicts: dict = {}
        self.wrap_builders: dict = {}
        self.getattribute_reads: dict = {}  # variables.objects._custom_getattribute
        # functools.cached_property values computed by the trace: (id(instance), name) ->
        # (instance, tracker); the object's own __dict__ is never written (protocol.lookup)
        self.cached_properties: dict = {}
        if root is not None:
            for name, module in root.named_modules(remove_duplicate=False):
                self._paths.setdefault(id(module), name)

    # ----------------------------------------------------------------- bookkeeping
    def mark_state(self, meta: torch.Tensor, *, parameter: bool, requires_grad: bool,
                   example: torch.Tensor | None = None, subclass: type | None = None) -> None:
        """Remember what the eager tensor behind ``meta`` was (a Parameter? requires grad? the
        example input itself, for the functions marked ``assume_constant_result``? a tensor
        subclass the trace cannot model, ``torch_compat.unmodelled_tensor_class``: refused
        where forward() reads it)."""
        if subclass is not None:
            self._unmodelled[id(meta)] = subclass
        if parameter:
            self._parameters.add(id(meta))
        self._callers.add(id(meta))
        self.site.eager_requires_grad[id(meta)] = requires_grad
        if example is not None:
            self._examples[id(meta)] = example

    def unmodelled_class(self, meta) -> type | None:
        """The tensor subclass of the state tensor behind ``meta`` (see ``mark_state``)."""
        return self._unmodelled.get(id(meta))

    def example_value(self, meta):
        """The real tensor behind ``meta``: an example input, or any value in "find them all"
        mode; None for values computed in forward()."""
        return self._examples.get(id(meta)) if self.real_value(meta) is None else \
            self.real_value(meta)

    def is_parameter(self, meta) -> bool:
        return id(meta) in self._parameters

    def is_callers(self, meta) -> bool:
        """Whether ``meta`` stands for a tensor of the caller's: an input, a parameter or a
        buffer of the export, a constant lifted from outside forward()."""
        return id(meta) in self._callers or self.recorder.is_placeholder(meta)

    def requires_grad(self, meta) -> bool:
        return self.site.requires_grad(meta)

    def any_requires_grad(self) -> bool:
        """True when a parameter, buffer or input of the export requires grad (so a gradient
        may reach values computed from them while grad mode is on)."""
        return any(self.site.eager_requires_grad.values())

    def owns_module(self, module) -> bool:
        """True when ``module`` is the exported model or one of its submodules."""
        return id(module) in self._paths

    def owns_parameters(self, module) -> bool:
        """True when every parameter of ``module`` is one of the exported model's (by
        identity): a module made in forward() from the model's own (``self.seq[1:3]``, a
        ``Sequential`` of its layers) is the model's state, not an outside one."""
        if self.root is None:
            return False
        if not hasattr(self, "_root_parameter_ids"):
            self._root_parameter_ids = {id(p) for _, p in self.root.named_parameters(
                remove_duplicate=False)}
        return all(id(p) in self._root_parameter_ids for p in module.parameters())

    def model_holds(self, source) -> bool:
        """True when ``source`` reaches its value through the attributes and items of one of
        the exported model's own modules (``self.cache.is_updated``): the model's state."""
        while isinstance(source, (AttrSource, ItemSource)):
            source = source.base
        if not isinstance(source, ModuleSource) or self.root is None:
            return False
        if self._owned_paths is None:
            self._owned_paths = frozenset(self._paths.values())
        return source.fqn in self._owned_paths

    def module_path(self, module, source) -> str:
        if id(module) in self._paths:
            return self._paths[id(module)]
        return source.path() if source is not None else ""

    # ----------------------------------------------------------------- grad mode
    def set_grad_mode(self, enabled: bool, *, inference: bool = False) -> GradRegion:
        """Open a grad-mode region (recorded in the graph); returns what closes it."""
        region = GradRegion(self.grad_enabled, self.inference_mode,
                            self.recorder.builder.record_grad_mode(enabled, self.grad_enabled))
        self.grad_enabled, self.inference_mode = enabled, inference or (
            self.inference_mode and not enabled)
        self.grad_regions_open += 1
        return region

    def restore_grad_mode(self, region: GradRegion) -> None:
        self.recorder.builder.record_grad_mode_restore(region.previous_node)
        self.grad_enabled, self.inference_mode = region.grad_enabled, region.inference_mode
        self.grad_regions_open -= 1

    def check_settings_restored(self, frames=()) -> None:
        """forward() (defined at ``frames``) may not leave one of torch's process-wide
        settings changed (``torch_compat.GLOBAL_SETTINGS``; the calls that change one before
        they run are refused by name, at their line): a program cannot replay it (the export
        itself puts it back). Checked when forward() returns: inside a ``with`` block a setting
        may differ."""
        changed = changed_settings(self.initial_settings)
        if changed:
            raise graph_break("UB107", "forward() leaves PyTorch's global state changed: "
                              f"{', '.join(changed)}",
                              frames=frames,
                              details="An exported program cannot replay a change of the "
                                      "process's settings, and eager computes what follows "
                                      "under the changed one.",
                              hint="Set it before calling the model (and before export), or "
                                   "change it inside forward() only within a `with` block "
                                   "that restores it.")

    def check_grad_mode_restored(self) -> None:
        """forward() may not return with another grad mode than it was called in (a plain
        ``torch.set_grad_enabled(False)`` call): a program cannot replay that."""
        if self.grad_enabled != self.initial_grad_enabled:
            raise graph_break("UB107", "forward() leaves grad mode changed "
                              "(torch.set_grad_enabled(...) called without `with`)",
                              frames=self.user_frames(),
                              details="Use `with torch.no_grad():` or `with "
                                      "torch.set_grad_enabled(...):` around the code instead.")

    def result_requires_grad(self, fn, inputs, result, requires_grad=None) -> bool:
        """Whether eager autograd makes ``result`` (a tensor ``fn`` returned) require grad:
        grad mode is on, some input tensor requires grad (``requires_grad``: whether a tensor
        does; eager's by default), the result is floating point or complex, and ``fn`` is
        differentiable."""
        if not self.grad_enabled or fn in _NON_DIFFERENTIABLE:
            return False
        if not (result.dtype.is_floating_point or result.dtype.is_complex):
            return False
        if requires_grad is None:
            return any(self.site.eager_requires_grad.get(id(t), False) for t in inputs)
        return any(requires_grad(t) for t in inputs)

    def note_results(self, fn, inputs: list, result) -> None:
        """Mark what a leaf call returned with its eager ``requires_grad`` (an in-place op
        keeps what its target had and adds what its other inputs bring). A result that
        requires grad natively though no input does in eager was made to (a factory's
        ``requires_grad=True``; the stand-ins themselves require no grad natively): it
        requires grad in eager only, a program cannot make it so
        (``TraceSite.grad_made_here``); nor what requires grad only through such tensors."""
        site = self.site
        input_ids = {id(t) for t in inputs}
        for tensor in tree_leaves(result):
            if isinstance(tensor, torch.Tensor):
                key = id(tensor)
                flag = self.result_requires_grad(fn, inputs, tensor)
                if key in input_ids:
                    flag = flag or site.eager_requires_grad.get(key, False)
                made_here = None
                if flag and site.grad_made_here:
                    made_here = self._grad_made_here(fn, inputs, tensor, key in input_ids)
                elif not flag and tensor.requires_grad and key not in input_ids:
                    # the stand-ins require no grad natively: a result that does was made to
                    # by the call (``torch.zeros(..., requires_grad=True)``, or inside it)
                    flag, made_here = True, self.user_frames()
                site.eager_requires_grad[key] = flag
                if made_here is None:
                    site.grad_made_here.pop(key, None)
                else:
                    site.grad_made_here[key] = (tensor, made_here)

    def _grad_made_here(self, fn, inputs, tensor, in_place: bool):
        """The frames of a ``grad_made_here`` tensor ``tensor`` requires grad through, when the
        program's value would not require grad (the rule of eager's, with those tensors not
        requiring grad), else None."""
        made = self.site.grad_made_here

        def program_requires_grad(t):
            return self.site.eager_requires_grad.get(id(t), False) and id(t) not in made

        if self.result_requires_grad(fn, inputs, tensor, program_requires_grad) or (
                in_place and program_requires_grad(tensor)):
            return None
        return next(made[id(t)][1] for t in (*inputs, tensor) if id(t) in made)

    def make_require_grad(self, meta) -> None:
        """``meta`` (a tensor forward() made, requiring no grad) made to require grad
        (``requires_grad_()``): see ``TraceSite.grad_made_here``."""
        self.site.eager_requires_grad[id(meta)] = True
        self.site.grad_made_here[id(meta)] = (meta, self.user_frames())
        meta.requires_grad_(True)  # natively too: an in-place op on it then fails as in eager

    def check_grad_reproducible(self, outputs) -> None:
        """Refuse when a tensor that requires grad in eager only through tensors forward()
        made require grad is an output of forward() or was written into an input or the
        state: the program's would not require grad (UB116)."""
        made = self.site.grad_made_here
        reached = [(t, "is returned by forward()") for t in outputs
                   if isinstance(t, torch.Tensor) and id(t) in made]
        reached += [(meta, "is written into an input or the model's state")
                    for meta, _ in made.values() if self.is_callers(meta)]
        if reached:
            tensor, what = reached[0]
            frames = made[id(tensor)][1]
            raise graph_break(
                "UB116", "a tensor made in forward() with `requires_grad=True` (or "
                f"`.requires_grad_()`) makes a value that {what} require grad",
                frames=frames,
                details="In eager that value requires grad (and has a grad_fn) only because of "
                        "the tensor made to require grad here; an exported program's values "
                        "require grad through its inputs and parameters only, so its value "
                        "would not.",
                hint="Drop `requires_grad=True` here (a tensor made in forward() receives no "
                     "gradient the caller can read), or make the tensor a parameter of the "
                     "model (nn.Parameter in __init__).")

    # ----------------------------------------------------------------- native context managers
    def entered_natively(self, manager) -> None:
        self.native_contexts.append(manager)

    def exited_natively(self, manager) -> None:
        if manager in self.native_contexts:
            self.native_contexts.remove(manager)

    def exit_native_contexts(self) -> None:
        """Exit (innermost first) what a trace that stopped early left entered, and reset the
        context variables it left set (``variables.native.ContextVarWriteVariable``)."""
        while self.native_contexts:
            self.native_contexts.pop().__exit__(None, None, None)
        while self.context_var_tokens:
            var, token = self.context_var_tokens.pop()
            var.reset(token)

    def check_context_vars_restored(self, frames=()) -> None:
        """forward() may not return with a ``ContextVar`` it set still set: a program cannot
        replay that (UB107, at forward()'s definition)."""
        if self.context_var_tokens:
            names = ", ".join(f"`{var.name}`" for var, _ in self.context_var_tokens)
            raise graph_break("UB107", f"forward() leaves the context variable {names} set",
                              frames=frames or self.user_frames(),
                              details="A program cannot set it for its caller.",
                              hint="Reset it before forward() returns (`var.reset(token)`), "
                                   "or set it around the export call.")

    # ----------------------------------------------------------------- locations
    def user_frames(self) -> tuple:
        """The user's stack (see ``TraceSite.user_frames``)."""
        return self.site.user_frames()

    def nn_module_stack(self) -> dict:
        """The modules being called (see ``TraceSite.nn_module_stack``)."""
        return dict(self.site.nn_module_stack())

    def recover(self, error) -> bool:
        """In "find them all" mode, note ``error`` and tell the caller to go on with the real
        value; otherwise False (the caller raises)."""
        if not self.find_all:
            return False
        error.with_frames(self.user_frames())
        self.breaks.append(error)
        self.path.note(error)
        return True

    def take_branch(self, real: bool) -> bool:
        """In "find them all" mode, after :meth:`recover` of a decision on tensor data whose
        example value is ``real``: the side this trace's path takes (``frontend.paths``)."""
        return self.path.decide(self.site.translators, real)

    def real_value(self, meta):
        """The real tensor behind a meta tensor in "find them all" mode, or None."""
        shadow = self.recorder.shadow
        return None if shadow is None else shadow.value_of(meta)

    @contextlib.contextmanager
    def branch(self):
        """While a torch.cond branch is traced: state created before it is read-only (both
        branches are traced, but only one runs)."""
        self.branch_starts.append(next(CREATION_ORDER))
        try:
            yield
        finally:
            self.branch_starts.pop()

    def created_outside_branch(self, stamp: int) -> bool:
        """True when something stamped ``stamp`` predates the innermost open branch."""
        return bool(self.branch_starts) and stamp < self.branch_starts[-1]

    @contextlib.contextmanager
    def module_scope(self, module_var, suffix: str = ""):
        """While ``module_var`` is being called (``suffix``: ``@n`` for the n-th call of a
        module whose signature is preserved)."""
        self.site.module_stack.append((module_var.fqn, type(module_var.module)))
        self.site.module_suffixes.append(suffix)
        try:
            yield
        finally:
            self.site.module_stack.pop()
            self.site.module_suffixes.pop()

    # ----------------------------------------------------------------- leaf calls
    def call_leaf(self, tx, fn, args, kwargs, opaque=None):
        """Call ``fn`` natively on the unwrapped arguments while the recorder records.
        ``opaque``: () -> the result, when an argument has no native value (UB113: a traced
        function, an object holding one); without it that is the refusal."""
        if any(isinstance(a, NdarrayVariable) for a in args) or \
                any(isinstance(a, NdarrayVariable) for a in kwargs.values()):
            return call_numpy(tx, fn, args, kwargs)  # NumPy on traced tensors (ndarray)
        if fn in _INDEXING and len(args) > 1 and isinstance(args[0], TensorVariable):
            args = [args[0], index_lists_as_tensors(tx, args[1]), *args[2:]]
        for arg in [*args, *kwargs.values()]:
            if isinstance(arg, ObjectVariable):  # native code may change what it is handed
                self.overlay.mutations += 1
            if isinstance(arg, ObjectVariable) and self.overlay.written(arg.value):
                raise graph_break("UB107", f"{arg.describe()} is passed to `"
                                  f"{getattr(fn, '__qualname__', fn)}` after forward() changed "
                                  "its attributes: that native code would read the object "
                                  "itself, which the trace never changes",
                                  frames=tx.user_frames(),
                                  details="Pass the values it needs, or change the object "
                                  "before export.")
        try:
            values = [a.unwrap(tx) for a in args]
            named = {k: v.unwrap(tx) for k, v in kwargs.items()}
        except GraphBreakError as exc:
            if opaque is None or exc.code != "UB113":
                raise
            return opaque()
        # `x.to("cpu")` on the meta stand-in of a CPU tensor returns it, as eager returns x
        fn, values, named = traced_device_arguments(self.recorder, fn, values, named)
        fn, values = real_power_call(fn, values)
        # the grad mode first: the recorder takes the call's mode when recording begins
        try:
            with self.leaf_errors(fn), torch.set_grad_enabled(self.grad_enabled), \
                    self.recorder.recording(python_data=needs_python_data_mode(fn)):
                if self.recorder.size_one.active:
                    with self.recorder.leaf_scope() as scope:
                        result, generated = self._call_native(fn, values, named)
                else:  # what leaf_scope yields then, without entering it
                    scope = None
                    result, generated = self._call_native(fn, values, named)
        finally:  # what it wrote to objects of the trace's own (even when it raised)
            for obj in list(self.native_objects.values()):
                obj.sync_from_native(tx)
        if isinstance(fn, _C_FUNCTIONS) and not generated:
            self.recorder.forget_temporary_views(result)
        if scope is not None and scope[0] and not generated:
            self.recorder.size_one.settle_leaf_call(self.recorder, *scope, fn, values, named,
                                                    result, self.grad_enabled)
            for obj in self.native_objects.values():  # the re-runs at size 1 wrote them too
                obj.restore_native()
        elif scope is not None and scope[0]:
            self.recorder.size_one.mark_sensitive(scope[0])
        inputs = _tensor_inputs(fn, values, named)
        if scope is not None and self.recorder.size_one.watches_writes:
            self.recorder.size_one.leaf_called(fn, inputs, scope[1], result,
                                               self.recorder.aliases.root, self.user_frames)
        self.note_results(fn, inputs, result)
        if generated:
            return IteratorVariable([wrap(tx, v) for v in result])
        return wrap(tx, result)

    def _call_native(self, fn, values, named) -> tuple:
        """``_call_native`` inside the functorch transforms forward() has open (the batching
        rules of ``torch.vmap`` run as in eager). Outside leaf calls they are off the
        thread's stack: unbroken's own work on tensors (stand-ins, probes, checks) is never
        transformed, and a trace that stops inside ``vmap`` leaves none open."""
        layers = self.functorch_layers
        if layers:
            resume_functorch(layers)
        try:
            return _call_native(fn, values, named)
        finally:
            if layers or functorch_depth() > self.functorch_base:
                self.functorch_layers = suspend_functorch(self.functorch_base)

    def call_numpy(self, tx, fn, args, kwargs):
        """``fn`` (a NumPy function, ``torch.Tensor.numpy``) called with traced values among
        its arguments: run through torch's NumPy-on-torch (``variables.ndarray``)."""
        return call_numpy(tx, fn, args, kwargs)

    def leaf_errors(self, fn=None) -> _LeafErrors:
        """A context manager turning failures inside PyTorch into errors at the user's line
        (:meth:`raise_leaf_error`)."""
        return _LeafErrors(self, fn)

    def raise_leaf_error(self, exc: Exception, fn=None) -> None:
        """Raise the error at the user's line that ``exc``, raised inside PyTorch, is; return
        for an exception that stays as it is."""
        if isinstance(exc, GraphBreakError):
            raise exc.with_frames(self.user_frames()) from None
        if isinstance(exc, DataDependentError):
            raise graph_break("UB105", exc.message, frames=exc.frames or self.user_frames(),
                              details=exc.details, hint=exc.hint) from None
        if isinstance(exc, UnsupportedError):
            if exc.code in ("UB114", "UB117", "UB120", "UB121", "UB123"):
                # UB120 (an op eager refuses, see ir.aliasing) and UB117 (an opaque argument:
                # a generator, a process group) know the precise fix
                hint = exc.hint if exc.code in ("UB117", "UB120") and exc.hint else ""
                raise graph_break(exc.code, exc.message, frames=exc.frames or self.user_frames(),
                                  details=exc.details, hint=hint) from None
            raise exc.with_frames(self.user_frames()) from None
        if isinstance(exc, UnbrokenError):
            raise exc.with_frames(self.user_frames()) from None
        if isinstance(exc, _PROGRAM_ERRORS):
            if _raised_inside_unbroken(exc):
                raise InternalError("a leaf call failed inside unbroken",
                                    frames=self.user_frames(), cause=exc) from exc
            if isinstance(exc, _PYTHON_LEVEL):  # e.g. nn.Module.__getattr__: may be caught
                raise TracedException(exc, frames=self.user_frames()) from None
            name = f"torch.ops.{fn}" if isinstance(fn, (OpOverload, OpOverloadPacket)) \
                else getattr(fn, "__qualname__", None) or getattr(fn, "__name__", repr(fn))
            first_line = (str(exc).strip().splitlines() or [""])[0]
            raise graph_break(
                "UB120", f"`{name}` raised {type(exc).__name__}: {first_line}",
                frames=self.user_frames(),
                details=f"{type(exc).__name__}: {exc}\n\nIf the model runs eagerly on these "
                        "inputs, this is a bug in unbroken: please report it.") from exc
