"""``export()`` and ``find_graph_breaks()``: the stages of ``docs/architecture.md``, in order.

1. validate the call (``input_trees.check_call``, ``preserved_calls.checked_paths``);
2. :class:`~unbroken.exporter.trace.Trace`: bind the inputs, make the symbols and meta
   tensors, interpret ``mod(*args, **kwargs)`` while ``ir.recorder`` records ATen ops;
3. :func:`~unbroken.exporter.shapes.settle_shapes`: decide every guard against the spec; a
   violation gets a fix, verified here by running the stages again with it (:func:`run_stages`)
   and rendered by ``fix_rendering``;
4. :func:`~unbroken.exporter.build.build_program`: passes, then the ``ExportedProgram``.

Around them: the ``Dim.AUTO`` rounds (an adoption that changes symbols traces again), the
size-1 admission (``unbroken.size_one``), ``AdditionalInputs``. Each stage takes the
:class:`~unbroken.exporter.options.ExportCall` and immutable
:class:`~unbroken.exporter.options.ExportOptions`; a variant is a new options value. An
uncaught exception of the traced program is checked against eager (``uncaught``).
"""
from __future__ import annotations

import dataclasses
import warnings

from torch.export.dynamic_shapes import AdditionalInputs, ShapesCollection

from ..frontend.translator import check_python_version
from ..program import ExportedProgram
from ..size_one import Retrace, admit_size_one
from ..symbolic.auto import SpecializationWarning, plan_adoption
from ..symbolic.diagnostics import (
    ConstraintViolationError,
    ExportUsageError,
    InputMismatchError,
    InternalError,
    RefusalError,
    UnbrokenError,
)
from ..symbolic.diagnostics.catalogue import TracedException
from ..symbolic.diagnostics.drop_in import torch_compatible, torch_compatible_errors
from .build import build_program
from .fix_rendering import constraint_error, render_fix
from .input_trees import check_call, check_outputs
from .options import ExportCall, ExportOptions
from .paths import GraphBreaks, explore
from .preserved_calls import checked_paths
from .process_state import isolated
from .shapes import AdoptAuto, ShapeViolation, settle_shapes
from .trace import Trace
from .uncaught import checked_against_eager

__all__ = ["export", "find_graph_breaks"]


@torch_compatible_errors
def export(mod, args, kwargs=None, *, dynamic_shapes=None, strict: bool = True,
           preserve_module_call_signature=(),
           prefer_deferred_runtime_asserts_over_guards: bool = False) -> ExportedProgram:
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
        prefer_deferred_runtime_asserts_over_guards: as for ``torch.export.export``: a
            condition the code puts on dims declared with named ``Dim``s that a ``Dim``
            cannot state directly (``n % 4 == 0``, ``3 * n // 4 != n``: anything but a bound
            or value of one size, or two sizes equal) becomes a run-time assertion of the
            program instead of a refusal; the declared ranges are kept. Bounds, values and
            equalities are still refused with the suggested ``Dim`` (as torch).

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
        return _export(mod, args, kwargs, dynamic_shapes, preserve,
                       bool(prefer_deferred_runtime_asserts_over_guards))


def _export(mod, args, kwargs, dynamic_shapes, preserve=frozenset(),
            defer_unstated=False) -> ExportedProgram:
    helper, dynamic_shapes = dynamic_shapes, _from_helper(mod, args, kwargs, dynamic_shapes)
    call = ExportCall(mod, args, kwargs)
    refinements: dict = {}
    specializations: list = []
    try:
        for round_ in range(_MAX_AUTO_ROUNDS):
            # the first round stops at a guard another trace adopts; later ones trace to the
            # end and adopt all they find at once: stopping in every round would trace the
            # start again for each guard met further on (a decoder layer's memory dims)
            options = ExportOptions(dynamic_shapes=dynamic_shapes, preserve=preserve,
                                    auto_refinements=refinements,
                                    specializations=tuple(specializations),
                                    adopt_early=round_ < _EARLY_ROUNDS,
                                    defer_unstated=defer_unstated)
            try:
                ep, trace, settled = run_stages(call, options)
            except AdoptAuto as adopt:  # Dim.AUTO dims take what the code requires: retrace
                refinements.update(adopt.auto_refinements)  # with those adopted in place
                refinements.update(adopt.adoption.refinements)
                specializations.extend(adopt.adoption.specializations)
                continue
            options = dataclasses.replace(options, auto_refinements=settled)
            ep = _admit_size_one(call, options, trace, ep)
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
_EARLY_ROUNDS = 1  # rounds that stop at the first guard needing another trace (adopt_early)


def run_stages(call: ExportCall, options: ExportOptions) -> tuple[ExportedProgram, Trace, dict]:
    """Trace, settle the shapes, build the program: ``(program, trace, refinements)``, the
    ``Dim.AUTO`` refinements in effect at the end (the program's ``ProgramParts`` with
    ``options.graph_only``). A shape violation is raised as the
    constraint error, with the suggested fix once it is verified (``options.suggest_fixes``).
    Raises :class:`~unbroken.exporter.shapes.AdoptAuto` when the trace must be done again."""
    trace = Trace(call, options)
    try:
        flat_outputs, out_spec = trace.run()
    except Exception:
        if trace.stopped_for is None:
            raise
        # stopped (options.adopt_early), or failed after the stop was asked: what follows
        # that guard is traced again under its adoption, which meets that failure too
        adoption = plan_adoption(trace.env, trace.stopped_for)
        if adoption is None or not adoption.refinements:  # not adopted by a trace after all
            return run_stages(call, dataclasses.replace(options, adopt_early=False))
        raise AdoptAuto(adoption, options.auto_refinements) from None
    check_outputs(flat_outputs, trace.output.user_frames() or ())
    try:
        refinements = settle_shapes(trace, options)
    except ShapeViolation as refused:
        suggestion = _verified_fix(call, refused.fix, trace) if options.suggest_fixes else None
        raise constraint_error(trace.env, refused.violations, suggestion) from None
    return build_program(trace, flat_outputs, out_spec, options.specializations,
                         options.graph_only), trace, refinements


def _verified_fix(call: ExportCall, fix, trace: Trace):
    """``fix`` as (notes, code, spec) when it renders as a ``dynamic_shapes`` spec and the
    stages succeed with that spec; else None. A bug met while re-exporting is raised
    (InternalError), never taken for "the fix does not work"."""
    rendered = render_fix(fix, trace.top_dims, trace.env) if fix is not None else None
    if rendered is None:
        return None
    spec, code = rendered
    try:
        run_stages(call, ExportOptions(dynamic_shapes=spec, suggest_fixes=False,
                                       graph_only=True))
    except RefusalError:
        return None
    return fix.notes, code, spec


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


def _admit_size_one(call: ExportCall, options: ExportOptions, trace: Trace,
                    ep: ExportedProgram) -> ExportedProgram:
    """Dims whose spec admits 1 get ``[1, ...]`` when no decision of the trace depends on
    them being >= 2, or a trace at size 1 gives the same program (see ``unbroken.size_one``)."""
    env, audit = trace.env, trace.size_one
    if not audit.admits_one:
        return ep
    # a narrower range is another spec too: no narrowing in place at size 1
    at_one = dataclasses.replace(options, suggest_fixes=False, narrow_in_place=False,
                                 graph_only=True)

    def trace_at(args, kwargs, forced):
        try:
            other, retrace, _ = run_stages(ExportCall(call.mod, args, kwargs),
                                           dataclasses.replace(at_one, forced_static=forced))
        except AdoptAuto:  # size 1 needs another spec: not the same program
            return None
        ours = {info.source: s for s, info in env.symbols.items()}
        rename = {s: ours[info.source] for s, info in retrace.env.symbols.items()
                  if info.source in ours}
        retrace.size_one.settle(retrace.env)
        # a dim the retrace refuses at 1 in some pattern is not free there either
        touched = set(retrace.size_one.sensitive).union(
            *(pattern.ones for pattern in retrace.size_one.refused_sets))
        sensitive = frozenset(rename[s] for s in touched if s in rename)
        return Retrace(other, rename, sensitive)

    return admit_size_one(ep, audit, env, trace.leaf_dims, call.args, call.kwargs, trace_at)


def _warn_specializations(specializations) -> None:
    """One warning per ``Dim.AUTO`` dim the code pinned, naming the dim and the line."""
    for specialization in specializations:
        warnings.warn(specialization.describe(), SpecializationWarning, stacklevel=3)


@torch_compatible_errors
def find_graph_breaks(mod, args, kwargs=None, *, dynamic_shapes=None) -> GraphBreaks:
    """Every graph break in ``mod(*args, **kwargs)``, on every path, found in one call.

    Where :func:`export` stops at the first construct it cannot capture, this goes on (running
    the model on a copy of its state beside the trace, to know which way the example inputs
    go) and explores both sides of every decision on tensor data (``if x.sum() > 0``, a
    ternary, ``while`` on a tensor, ``assert`` on data, ``bool(t)``, ``t.item()`` compared),
    within ``unbroken.budget(paths=..., unroll=..., path_instructions=...)``
    (``exporter.paths``). It returns every ``GraphBreakError``: the example's path first, in
    program order, then those only other paths meet; each carries ``path_conditions``, the
    decisions on tensor data that lead to it (``PathCondition``: ``source_text``, ``taken``,
    ``file``, ``line``). A failure that cannot be stepped over ends its path. The list's
    ``exploration`` says how many paths were explored and what the budget cut. An empty list
    means no graph break: ``export`` may still refuse for other reasons (shapes, usage).
    ``dynamic_shapes`` is accepted for the same call shape as ``export`` and not used: breaks
    are about code.

    Example::

        breaks = unbroken.find_graph_breaks(model, (x,))
        for error in breaks:
            print(error.code, error.location.short(), error.reason,
                  [(c.source_text, c.taken) for c in error.path_conditions])
        print(breaks.exploration.describe())
    """
    args, kwargs = check_call(mod, args, kwargs)
    check_python_version()
    with isolated():
        try:
            breaks = explore(ExportCall(mod, args, kwargs), ExportOptions(find_all=True))
        except RefusalError as error:
            breaks = GraphBreaks([error])
        # listed, not raised: what they are once raised (torch's classes too, drop_in)
        return GraphBreaks([torch_compatible(_checked(error, mod, args, kwargs))
                            for error in breaks], breaks.exploration)


def _checked(error, mod, args, kwargs):
    """A break that is an uncaught exception, checked against eager; an InternalError (the
    exception is unbroken's) is raised, never listed as a graph break."""
    if not isinstance(error, TracedException):
        return error
    checked = checked_against_eager(error, mod, args, kwargs)
    if isinstance(checked, InternalError):
        raise checked
    return checked
