"""``export()`` and ``find_graph_breaks()``: the stages of ``docs/architecture.md``, in order.

1. validate the call and bind the inputs to ``forward``'s parameters;
2. ``symbolic.spec`` turns ``dynamic_shapes`` into one symbol or constant per input dim, and
   ``symbolic.env`` makes the meta tensors that stand for the inputs, parameters and buffers;
3. the frontend interprets ``mod(*args, **kwargs)`` while ``ir.recorder`` records ATen ops;
4. ``symbolic.solver`` decides every guard against the spec; violated guards get a fix
   (``symbolic.fixes``), verified by exporting again, rendered by ``fix_rendering``;
5. passes: subgraph and root functionalization, dead-code elimination;
6. ``unbroken.program`` builds the ``ExportedProgram`` (which runs the verifiers).

An uncaught exception of the traced program is checked against eager (``uncaught``).
"""
from __future__ import annotations

import contextlib
import warnings

import sympy
import torch
import torch.fx as fx
from torch.export.dynamic_shapes import AdditionalInputs, ShapesCollection
from torch.utils import _pytree as pytree

from ..frontend.graph_breaks import TracedException
from ..frontend.output import TraceContext
from ..frontend.sources import LocalSource
from ..frontend.tracer import trace_call
from ..frontend.translator import check_python_version
from ..frontend.variables.constant import ConstantVariable
from ..frontend.variables.tensor import TensorVariable
from ..ir.composites import preserving
from ..ir.parts import ProgramParts
from ..ir.recorder import Recorder, meta_like
from ..ir.shadow import Shadow
from ..ir.signature import (
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from ..passes.dce import dead_code_elimination
from ..passes.functionalize import functionalize
from ..passes.subgraphs import functionalize_subgraphs
from ..program import ExportedProgram
from ..size_one import Retrace, admit_size_one
from ..symbolic import guard_log
from ..symbolic.auto import (
    Adoption,
    Specialization,
    SpecializationWarning,
    narrow_in_place,
    plan_adoption,
)
from ..symbolic.diagnostics import (
    ConstraintViolationError,
    ExportUsageError,
    InputMismatchError,
    InternalError,
    RefusalError,
    UnbrokenError,
    UnsupportedError,
)
from ..symbolic.env import ShapeEnvironment
from ..symbolic.fixes import suggest_fix
from ..symbolic.ranges import ValueRange
from ..symbolic.solver import Solver, Violation, check_guards
from ..symbolic.spec import resolve_dynamic_shapes
from ..symbolic.torch_compat import enable_python_dispatcher
from .fix_rendering import constraint_error, render_fix
from .input_trees import (
    bind_inputs,
    check_call,
    check_outputs,
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
from .preserved_calls import checked_paths, preserved_signatures
from .process_state import isolated
from .uncaught import checked_against_eager

__all__ = ["export", "find_graph_breaks"]


def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict: bool = True,
           preserve_module_call_signature=()) -> ExportedProgram:
    """Capture ``mod(*args, **kwargs)`` as one functional ATen graph, or refuse.

    Args:
        mod: an ``nn.Module`` (or a plain function) whose ``forward`` is traced.
        args: tuple of example positional inputs (pytrees of tensors and Python constants).
        kwargs: dict of example keyword inputs.
        dynamic_shapes: which input dims are dynamic, as for ``torch.export.export`` (a dict
            keyed by argument name or a tuple in argument order; ``torch.export.Dim`` objects).
        strict: accepted for drop-in compatibility; unbroken always traces strictly.
        preserve_module_call_signature: paths of submodules (``("encoder.layer.0",)``)
            whose call signature the program keeps, as torch.export does: the
            ``module_call_graph`` entry of each holds the call's inputs, outputs and pytree
            specs, so ``torch.export.unflatten(ep)`` gives back a submodule called like the
            original (and swappable for it); the n-th call (n >= 1) of one is ``path@n``, as
            in torch. Each call must take tensors and constants only, happen outside
            ``torch.cond`` branches and pass on nothing but its outputs; otherwise
            UnsupportedError.

    Returns:
        an :class:`ExportedProgram`.

    Raises:
        GraphBreakError: the model has a construct that cannot be captured (id ``UB1xx``).
        ConstraintViolationError: the code constrains a dim declared dynamic.
        ExportUsageError: the call itself is malformed.

    Example::

        ep = unbroken.export(model, (torch.randn(8, 100), torch.randn(8, 100)))
        print(ep)
        out = ep.module()(x, y)
    """
    args, kwargs = check_call(mod, args, kwargs)
    preserve = checked_paths(mod, preserve_module_call_signature)
    check_python_version()
    with isolated():
        return _export(mod, args, kwargs, dynamic_shapes, preserve)


def _export(mod, args, kwargs, dynamic_shapes, preserve=frozenset()) -> ExportedProgram:
    helper, dynamic_shapes = dynamic_shapes, _from_helper(mod, args, kwargs, dynamic_shapes)
    refinements: dict = {}
    specializations: list[Specialization] = []
    try:
        for _ in range(_MAX_AUTO_ROUNDS):
            exporter = _Export(mod, args, kwargs, dynamic_shapes, refinements,
                               specializations=tuple(specializations), preserve=preserve)
            try:
                ep = exporter.run()
            except _AdoptAuto as adopt:  # Dim.AUTO dims take what the code requires: retrace
                refinements.update(exporter.auto_refinements)  # with those adopted in place
                refinements.update(adopt.adoption.refinements)
                specializations.extend(adopt.adoption.specializations)
                continue
            ep = _admit_size_one(exporter, ep)
            _warn_specializations(ep.specializations)
            if isinstance(helper, AdditionalInputs):
                _verify_additional_inputs(ep, helper)
            return ep
        raise InternalError(f"Dim.AUTO refinements did not settle in {_MAX_AUTO_ROUNDS} traces")
    except TracedException as error:  # "eager fails too" is claimed only once checked
        raise checked_against_eager(error, mod, args, kwargs) from None
    except UnbrokenError:
        raise
    except Exception as exc:  # a bug in unbroken: say so, with what we know
        raise InternalError(f"export failed unexpectedly ({type(exc).__name__})",
                            cause=exc) from exc


_MAX_AUTO_ROUNDS = 8


class _AdoptAuto(Exception):
    """The trace found what the code requires of ``Dim.AUTO``/``Dim.DYNAMIC`` dims, and it
    changes their symbols (``adoption.refinements``): adopt it and trace again."""

    def __init__(self, adoption: Adoption):
        super().__init__(adoption.refinements)
        self.adoption = adoption


def _from_helper(mod, args, kwargs, dynamic_shapes):
    """torch's spec builders (``ShapesCollection``, ``AdditionalInputs``) as the plain
    ``dynamic_shapes`` they stand for; anything else as given."""
    if not isinstance(dynamic_shapes, (ShapesCollection, AdditionalInputs)):
        return dynamic_shapes
    try:
        return dynamic_shapes.dynamic_shapes(mod, args, kwargs)
    except (ValueError, AssertionError, TypeError) as error:  # what torch's builders raise
        raise ExportUsageError(f"{type(dynamic_shapes).__name__} could not build dynamic_shapes "
                               f"for these inputs: {error}",
                               hint="Give shapes only for tensors that are among the inputs, and "
                                    "additional inputs with the same structure and types.") \
            from None


def _verify_additional_inputs(ep, helper: AdditionalInputs) -> None:
    """Every additional input of ``AdditionalInputs`` must be admitted by the program (what
    ``AdditionalInputs.verify`` does for torch.export)."""
    module = ep.module()
    for index, (args, kwargs) in enumerate(helper._examples):  # noqa: SLF001 (torch's store)
        try:
            module.check_inputs(*args, **(kwargs or {}))
        except InputMismatchError as error:
            raise ConstraintViolationError(
                f"additional input #{index + 1} of AdditionalInputs is not admitted by the "
                f"exported program: {error.message}",
                hint="The model's code specializes on a size these inputs vary; see the "
                     "specialization warnings, or export with a Dim for that dimension.") \
                from None


def _admit_size_one(exporter: _Export, ep: ExportedProgram) -> ExportedProgram:
    """Dims whose spec admits 1 get ``[1, ...]`` when no decision of the trace depends on
    them being >= 2, or a trace at size 1 gives the same program (see ``unbroken.size_one``)."""
    if not exporter.env.admits_one:
        return ep

    def trace_at(args, kwargs, forced):
        retry = _Export(exporter.mod, args, kwargs, exporter.dynamic_shapes,
                        exporter.auto_refinements, specializations=exporter.specializations,
                        forced_static=forced, preserve=exporter.preserve)
        retry.suggest_fixes = False
        retry.narrow_in_place = False  # a narrower range is another spec too
        try:
            other = retry.run()
        except _AdoptAuto:  # size 1 needs another spec: not the same program
            return None
        ours = {info.source: s for s, info in exporter.env.symbols.items()}
        rename = {s: ours[info.source] for s, info in retry.env.symbols.items()
                  if info.source in ours}
        retry.env.settle_size_one()
        sensitive = frozenset(rename[s] for s in retry.env.one_sensitive if s in rename)
        return Retrace(other, rename, sensitive)

    return admit_size_one(ep, exporter.env, exporter.env.one_requested, exporter.leaf_dims,
                          exporter.args, exporter.kwargs, trace_at)


def _warn_specializations(specializations) -> None:
    """One warning per ``Dim.AUTO`` dim the code pinned, naming the dim and the line."""
    for specialization in specializations:
        warnings.warn(specialization.describe(), SpecializationWarning, stacklevel=3)


class _Export:
    """One export: the state shared by the stages."""

    def __init__(self, mod, args, kwargs, dynamic_shapes, auto_refinements=None, *,
                 find_all: bool = False, specializations=(), forced_static=frozenset(),
                 preserve=frozenset()):
        self.mod = mod
        self.preserve = preserve  # preserve_module_call_signature paths
        self.root = mod if isinstance(mod, torch.nn.Module) else None
        self.args, self.kwargs = args, kwargs
        self.dynamic_shapes = dynamic_shapes
        self.auto_refinements = auto_refinements or {}
        self.specializations = tuple(specializations)  # Dim.AUTO dims earlier traces pinned
        self.forced_static = forced_static  # (id(tensor), dim) static whatever the spec says
        self.leaf_dims: dict = {}  # id(example tensor) -> its dims, once traced
        # The environment and the recorder read the user's location from the trace context,
        # which holds the recorder: the closures look it up once both exist.
        self.env = ShapeEnvironment(location_provider=lambda: self.output.user_frames())
        self.recorder = Recorder(
            env=self.env, frames_provider=lambda: self.output.user_frames(),
            module_stack_provider=lambda: self.output.nn_module_stack(),
            allow_meta_constants=_on_meta_device(self.root, args, kwargs),
            shadow=Shadow() if find_all else None,
            requires_grad_provider=lambda tensor: self.output.requires_grad(tensor))
        self.builder = self.recorder.builder
        self.output = TraceContext(self.recorder, self.root)
        self.output.find_all = find_all
        self.output.preserved_paths = preserve
        self.input_specs: list[InputSpec] = []
        self.state_dict: dict = {}
        self.constants: dict = {}
        self.metas: dict[str, torch.Tensor] = {}
        # top-level argument name -> its dims (ints / sympy exprs), None when it holds no
        # tensor, or the container with a TensorDims per tensor (to render suggested fixes)
        self.top_dims: dict[str, object] = {}
        self.suggest_fixes = True
        # Dim.AUTO adoptions that only narrow ranges are applied to this trace's environment
        # (symbolic.auto.narrow_in_place) instead of tracing again
        self.narrow_in_place = True
        self._asserts_after: dict = {}  # node -> the last runtime assert placed after it

    def run(self) -> ExportedProgram:
        flat_outputs, out_spec = self._trace()
        check_outputs(flat_outputs, self.output.user_frames() or ())
        self._check_guards()
        return self._build(flat_outputs, out_spec)

    def find_breaks(self) -> list:
        """Trace in "find them all" mode: every graph break on the path the example inputs
        take, in order; a failure that cannot be stepped over ends the list."""
        try:
            self._trace()
        except RefusalError as error:  # an InternalError is ours: raised, never listed
            self.output.breaks.append(error.with_frames(self.output.user_frames()))
        return _unique(self.output.breaks)

    def _trace(self):
        forward = self.root.forward if self.root is not None else self.mod
        signature = signature_of(forward)
        combined = bind_inputs(signature, forward, self.args, self.kwargs)
        dims = self.leaf_dims = self._resolve_dims(combined)
        self._lift_state()
        arg_trackers, kwarg_trackers = self._lift_inputs(signature, dims)
        with _tracing(self.root, self.metas), preserving(self.recorder):
            arg_trackers, kwarg_trackers = materialize(self.output, (arg_trackers,
                                                                     kwarg_trackers))
            result, tx = trace_call(self.output, self.mod, arg_trackers, kwarg_trackers)
            outputs = result.unwrap(tx)
        user_pytree_leaves(outputs, "forward()'s result")  # the user's flatten functions run
        return pytree.tree_flatten(outputs)

    # ----------------------------------------------------------------- inputs
    def _resolve_dims(self, combined) -> dict:
        """id(tensor) -> tuple of dim entries (int or sympy expr), for dynamic inputs."""
        if self.dynamic_shapes is None:
            return {}
        resolved = resolve_dynamic_shapes(combined, self.dynamic_shapes, self.env,
                                          self.auto_refinements, self.forced_static)
        dims = {}
        for name, value in combined.items():
            leaves, spec = pytree.tree_flatten(value)
            for leaf, entry in zip(leaves, leaf_entries(spec, resolved[name]), strict=True):
                if isinstance(leaf, torch.Tensor):
                    dims[id(leaf)] = entry
        return dims

    def _lift_state(self) -> None:
        """Placeholders for parameters then buffers, one per FQN (as torch.export), with meta
        stand-ins while tracing. Names that alias one tensor (tied weights, a buffer registered
        twice) share one stand-in, so a write through one name is seen through the other; the
        recorder binds the stand-in to the last of their placeholders."""
        if self.root is None:
            return
        stand_ins: dict[int, torch.Tensor] = {}
        for fqn, param in self.root.named_parameters(remove_duplicate=False):
            name = self._lift_tensor(f"p_{fqn}", param, stand_ins, parameter=True)
            self.input_specs.append(InputSpec(InputKind.PARAMETER, TensorArgument(name), fqn))
            self.state_dict[fqn] = param
            self.metas[fqn] = stand_ins[id(param)]
        for fqn, buffer in self.root.named_buffers(remove_duplicate=False):
            persistent = _is_persistent(self.root, fqn)
            name = self._lift_tensor(f"b_{fqn}", buffer, stand_ins, parameter=False)
            self.input_specs.append(InputSpec(InputKind.BUFFER, TensorArgument(name), fqn,
                                              persistent=persistent))
            (self.state_dict if persistent else self.constants)[fqn] = buffer
            self.metas[fqn] = stand_ins[id(buffer)]

    def _lift_tensor(self, name, tensor, stand_ins, *, parameter) -> str:
        meta = stand_ins.get(id(tensor))
        if meta is None:
            meta = meta_like(tensor)
            if parameter:  # native code checks isinstance(p, nn.Parameter) (get_parameter...)
                meta = torch.nn.Parameter(meta, requires_grad=False)
            stand_ins[id(tensor)] = meta
            self._shadow(meta, tensor)
            self.output.mark_state(meta, parameter=parameter, requires_grad=tensor.requires_grad)
        node = self.builder.add_placeholder(name, meta, user_input=False, device=tensor.device)
        if isinstance(meta, torch.nn.Parameter):
            node.meta["val"] = meta_like(meta)  # the graph's value is a plain tensor
        return node.name

    def _lift_inputs(self, signature, dims):
        """Placeholders for the flattened user inputs, in the order of ``(args, kwargs)``."""
        # one placeholder per position, even when the example passes one tensor twice
        # (export(m, (x, x))): the program is traced for separate inputs; module() refuses a
        # call whose inputs share memory with one the program writes (ir.runtime)
        bound = {}
        for top_name, value in top_level_names(signature, self.args, self.kwargs):
            leaves = leaves_with_paths(value)
            spec = pytree.tree_structure(value)
            trackers = {}
            for path, leaf in leaves:
                name = top_name + "".join(path_suffix(k) for k in path)
                trackers[id(leaf)] = self._user_input(name, leaf, dims.get(id(leaf)))
                bound.setdefault(top_name, []).append(trackers[id(leaf)])
            self.top_dims[top_name] = dims_of(value, spec, [
                trackers[id(leaf)] if isinstance(leaf, torch.Tensor) else None
                for _, leaf in leaves])
            bound[top_name] = unflatten_inputs(bound.get(top_name, []), spec)
        names = list(bound)
        positional = [bound[n] for n in names[:len(self.args)]]
        return positional, {k: bound[k] for k in names[len(self.args):]}

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

    def _shadow(self, meta, real) -> None:
        """In find-all mode: a private copy of the real value (nothing the user owns changes)."""
        if self.recorder.shadow is not None and real.device.type != "meta":
            self.recorder.shadow.set(meta, real.detach().clone())

    # ----------------------------------------------------------------- guards
    def _check_guards(self, undecided=None) -> None:
        """Every guard must be implied by the spec (assuming the program's torch._check facts);
        a torch._check on data-dependent values becomes a runtime assert, one on input sizes
        must be implied by the spec too.

        undecided: after ranges narrowed in place, the guards the wider ranges did not imply;
        every other guard still holds (a fact true on a range is true on any part of it)."""
        if not self.env.guards:
            self._log_guards(())
            return
        guards = self.env.guards if undecided is None else undecided
        # counterexamples are only shown when export refuses: minimized then (_shown)
        violations = check_guards(
            self.env, Solver(self.env, assume_checks=True, smallest=False), guards)
        strict = Solver(self.env, assume_checks=False, smallest=False)
        for guard in guards:
            if guard.kind != "expect_true":
                continue
            if _mentions_unbacked(guard.expr, self.env):
                self._runtime_assert(guard)
            else:
                decision = strict.decide(guard.as_fact())
                if decision.verdict != "true":
                    violations.append(Violation(guard, decision, decision.counterexample))
        if violations:
            adoption = plan_adoption(self.env, violations)
            if adoption is not None and adoption.refinements:
                if self.narrow_in_place and narrow_in_place(self.env, adoption):
                    self.auto_refinements = {**self.auto_refinements, **adoption.refinements}
                    # each call narrows a range: it terminates
                    return self._check_guards([v.guard for v in violations])
                raise _AdoptAuto(adoption)
            if adoption is not None:  # the symbols have settled: what is left is asserted
                for guard in adoption.asserted:
                    self._input_assert(guard)
                self._log_guards(adoption.asserted)
                return
            violations = self._shown(violations)
            fix = _suggest_fix(self.env, violations)
            suggestion = self._verified_fix(fix) if self.suggest_fixes else None
            raise constraint_error(self.env, violations, suggestion)
        self._log_guards(())

    def _shown(self, violations: list) -> list:
        """``violations`` decided again with the smallest counterexamples (deterministic,
        what the refusal shows)."""
        solvers = {kind: Solver(self.env, assume_checks=kind) for kind in (True, False)}
        shown = []
        for violation in violations:
            guard = violation.guard
            decision = solvers[guard.kind != "expect_true"].decide(guard.as_fact())
            shown.append(Violation(guard, decision, decision.counterexample))
        return shown

    def _log_guards(self, asserted) -> None:
        """The guard log (``UNBROKEN_LOG=guards``): each guard and how it was decided."""
        if not guard_log.enabled():
            return
        solver = Solver(self.env)
        run_time = {g.as_fact() for g in asserted}
        decided = []
        for guard in self.env.guards:
            fact = guard.as_fact()
            if guard.kind == "expect_true" and _mentions_unbacked(guard.expr, self.env):
                how = "run-time assert (torch._check on data-dependent values)"
            elif fact in run_time or set(sympy.And.make_args(fact)) & run_time:
                how = "checked at run time (a relation no dynamic_shapes can state)"
            else:
                decision = solver.decide(fact)
                how = f"proven by {decision.reason}" if decision.verdict == "true" \
                    else f"assumed ({guard.kind})"
            decided.append((guard, how))
        guard_log.log_guards(decided, self.specializations, self.env.source_of,
                             self.auto_refinements)

    def _input_assert(self, guard) -> None:
        """``aten._assert_scalar`` of a fact over input sizes that no spec can state, right
        after the placeholders: the program refuses, before computing anything, the inputs
        for which the graph would not compute what eager does."""
        self.env.input_facts.append(guard.as_fact())
        text = (f"the exported program requires {guard.describe(self.env.source_of)}"
                + (f" (from {guard.frames[-1].short()})" if guard.frames else ""))
        self.builder.assert_at_inputs(guard.as_fact(), text, guard.frames)

    def _runtime_assert(self, guard) -> None:
        """``aten._assert_scalar`` of a torch._check fact on data-dependent values: the
        program raises, like eager, when a run breaks it."""
        builder = self.builder
        fact = guard.as_fact()
        order = {n: i for i, n in enumerate(builder.graph.nodes)}
        defined = [d for d in map(builder.definition_of, fact.free_symbols) if d is not None]
        known = max(defined, key=order.__getitem__)  # as early as its values are known,
        after = self._asserts_after.get(known, known)  # after earlier asserts there
        text = f"Runtime assertion failed for expression {guard.describe(self.env.source_of)}"
        node = builder.assert_after(after, fact, text, guard.frames)
        self._asserts_after[known] = node

    def _verified_fix(self, fix):
        """``fix`` as (notes, code, spec) when it renders as a ``dynamic_shapes`` spec and a
        re-export with that spec succeeds; else None. A bug met while re-exporting is raised
        (InternalError), never taken for "the fix does not work"."""
        rendered = render_fix(fix, self.top_dims, self.env) if fix is not None else None
        if rendered is None:
            return None
        spec, code = rendered
        retry = _Export(self.mod, self.args, self.kwargs, spec)
        retry.suggest_fixes = False
        try:
            retry.run()
        except RefusalError:
            return None
        return fix.notes, code, spec

    # ----------------------------------------------------------------- program
    def _build(self, flat_outputs, out_spec) -> ExportedProgram:
        self._lift_constant_specs()
        self._settle_size_one(flat_outputs)
        self.builder.set_output(flat_outputs)
        graph_module = functionalize_subgraphs(self.builder.graph_module())
        signature = ExportGraphSignature(self._ordered_input_specs(), self._output_specs())
        graph_module, signature = functionalize(graph_module, signature)
        self._refuse_written_overlapping_state(signature)
        writes_inputs = any(s.kind == OutputKind.USER_INPUT_MUTATION
                            for s in signature.mutation_specs)
        strict_layout = self.output.layout_read or self.recorder.wrote_layout_dependent or (
            writes_inputs and self.output.layout_aliasing)
        graph_module = dead_code_elimination(graph_module)
        module_calls = preserved_signatures(graph_module, signature,
                                            self.output.preserved_calls)
        _, in_spec = pytree.tree_flatten((self.args, self.kwargs))
        return ExportedProgram.from_parts(ProgramParts(
            graph_module, signature, self.state_dict, self.constants,
            self._range_constraints(), in_spec, out_spec,
            example_inputs=(self.args, self.kwargs),
            hints={s: self.env.hint_of(s) for s, i in self.env.symbols.items()
                   if i.hint is not None},
            forward_arg_names=tuple(self.top_dims), module_types=self._module_types(),
            env=self.env, specializations=self.specializations,
            strict_layout=bool(strict_layout), module_calls=module_calls))

    def _settle_size_one(self, flat_outputs) -> None:
        """Which dims admit 1 (``symbolic.settle_one``), once the guards have given the input
        facts: a reshape that copies here and views at 1 counts if the program reads layout
        or returns its result; each set of sizes at 1 refused by pattern becomes an
        assertion at the inputs."""
        self.recorder.layout_observed_at_one(flat_outputs, self.output.layout_read)
        with enable_python_dispatcher():  # the checks re-run meta kernels
            self.env.settle_size_one()
        for refused in self.env.one_refused_sets:
            self._refuse_at_one(refused)

    def _refuse_at_one(self, refused) -> None:
        source = self.env.source_of
        guard = refused.guard
        ones = " and ".join(f"{source(s)} = 1" for s in sorted(refused.ones, key=str))
        others = sorted(refused.others, key=str)
        needed = (f"{source(others[0])} must be 1 too" if len(others) == 1 else
                  f"one of {', '.join(map(source, others))} must be 1 too")
        where = f" at {guard.frames[-1].short()}" if guard.frames else ""
        text = (f"with {ones}, {needed}: otherwise the program relies on "
                f"{guard.describe(source)}{where}, which does not hold there (those sizes need "
                f"a program of their own)")
        self.builder.assert_at_inputs(refused.fact, text, guard.frames)

    def _module_types(self) -> dict:
        """Submodule FQN -> class, for the program's module call graph and node metadata."""
        if self.root is None:
            return {}
        return {fqn: type(module) for fqn, module in self.root.named_modules()}

    def _refuse_written_overlapping_state(self, signature) -> None:
        """A buffer written in place that shares memory with another buffer or parameter (a
        buffer registered as a view of another) would be read stale through the other name:
        the program treats state tensors as separate. Refused (UB121)."""
        state = {**self.state_dict, **self.constants}
        for spec in signature.mutation_specs:
            written = state.get(spec.target)
            if not isinstance(written, torch.Tensor):
                continue
            for fqn, other in state.items():
                if other is not written and isinstance(other, torch.Tensor) \
                        and _shares_memory(written, other):
                    raise UnsupportedError(
                        f"forward() writes the buffer `{spec.target}` in place, and it shares "
                        f"memory with `{fqn}` (one is a view of the other)", code="UB121",
                        hint=f"Register `{fqn}` as its own tensor (e.g. a clone), or compute it "
                             f"from `{spec.target}` inside forward().")

    def _lift_constant_specs(self) -> None:
        for name, tensor in self.recorder.constants.items():
            target = self.recorder.constant_targets[name]
            if isinstance(tensor, torch.nn.Parameter):
                # a parameter of a module outside the model: a constant like any tensor there
                # (as torch's non-strict export); an nn.Parameter would be registered as a
                # parameter by fx, where torch's unlifting looks constants up as buffers
                tensor = tensor.detach().requires_grad_(tensor.requires_grad)
            self.constants[target] = tensor
            self.input_specs.append(InputSpec(InputKind.CONSTANT_TENSOR, TensorArgument(name),
                                              target))

    def _ordered_input_specs(self) -> list[InputSpec]:
        by_name = {spec.arg.name: spec for spec in self.input_specs}
        return [by_name[node.name] for node in self.builder.graph.nodes
                if node.op == "placeholder"]

    def _output_specs(self) -> list[OutputSpec]:
        specs = []
        for value in next(n for n in self.builder.graph.nodes if n.op == "output").args[0]:
            if isinstance(value, fx.Node):
                is_sym = isinstance(value.meta.get("val"), torch.SymInt)
                arg = SymIntArgument(value.name) if is_sym else TensorArgument(value.name)
            else:
                arg = ConstantArgument("", value)
            specs.append(OutputSpec(OutputKind.USER_OUTPUT, arg, None))
        return specs

    def _range_constraints(self) -> dict:
        """Input sizes: the spec's ranges, from 1 for the dims no decision of the trace needs
        >= 2 (``unbroken.size_one``); data-dependent values: what torch._check proved."""
        ranges = {symbol: self.env.spec_ranges[symbol] if info.hint is not None
                  else self.env.var_ranges[symbol] for symbol, info in self.env.symbols.items()}
        with enable_python_dispatcher():  # the size-1 checks re-run meta kernels
            free = self.env.settle_size_one()
        for symbol in free:
            if ranges[symbol].lower == 2:
                ranges[symbol] = ValueRange(1, ranges[symbol].upper)
        return ranges


def _shares_memory(a: torch.Tensor, b: torch.Tensor) -> bool:
    if a.device.type == "meta" or b.device.type == "meta":
        return False
    return a.untyped_storage().data_ptr() == b.untyped_storage().data_ptr() \
        and a.untyped_storage().nbytes() > 0


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
    try:
        for fqn, meta in metas.items():
            owner_path, _, name = fqn.rpartition(".")
            owner = root.get_submodule(owner_path) if owner_path else root
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


def find_graph_breaks(mod, args, kwargs=None, *, dynamic_shapes=None) -> list:
    """Every graph break in ``mod(*args, **kwargs)``, found in one run.

    Where :func:`export` stops at the first construct it cannot capture, this goes on along
    the path the example inputs take (running the model on a copy of its state beside the
    trace, to know which branch an ``if`` on a tensor takes), and returns every
    ``GraphBreakError`` in program order; a failure that cannot be stepped over (an uncaught
    exception, an unsupported call) ends the list. An empty list means no graph break:
    ``export`` may still refuse for other reasons (shapes, usage). ``dynamic_shapes`` is
    accepted for the same call shape as ``export`` and not used: breaks are about code.

    Example::

        for error in unbroken.find_graph_breaks(model, (x,)):
            print(error.code, error.location.short(), error.reason)
    """
    args, kwargs = check_call(mod, args, kwargs)
    check_python_version()
    with isolated():
        try:
            breaks = _Export(mod, args, kwargs, None, find_all=True).find_breaks()
        except RefusalError as error:
            breaks = [error]
        return [_checked(error, mod, args, kwargs) for error in breaks]


def _checked(error, mod, args, kwargs):
    """A break that is an uncaught exception, checked against eager; an InternalError (the
    exception is unbroken's) is raised, never listed as a graph break."""
    if not isinstance(error, TracedException):
        return error
    checked = checked_against_eager(error, mod, args, kwargs)
    if isinstance(checked, InternalError):
        raise checked
    return checked


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


def _suggest_fix(env, violations):
    """The solver's fix for the violated guards over the input sizes (``symbolic.fixes``), or
    None when there is none."""
    backed = [s for s, info in env.symbols.items() if info.hint is not None]
    return suggest_fix([v.guard.as_fact() for v in violations],
                       {s: (env.spec_ranges[s].lower, _upper(env.spec_ranges[s])) for s in backed},
                       {s: env.hint_of(s) for s in backed}, env.source_of)


def _on_meta_device(root, args, kwargs) -> bool:
    """True when the model's state or inputs live on the meta device (no values anywhere)."""
    state = [*root.parameters(), *root.buffers()] if root is not None else []
    inputs = [t for t in pytree.tree_leaves((args, kwargs)) if isinstance(t, torch.Tensor)]
    return any(t.device.type == "meta" for t in [*state, *inputs])


def _mentions_unbacked(expr, env) -> bool:
    return any(env.symbols[s].hint is None for s in expr.free_symbols if s in env.symbols)


def _upper(value_range):
    upper = value_range.upper
    try:
        number = int(upper)
    except (TypeError, ValueError, OverflowError):
        return None
    return number if number < 2 ** 62 else None
