"""``unbroken.ExportedProgram``: the result of ``unbroken.export``, a torch ``ExportedProgram``.

The class is a subclass of ``torch.export.ExportedProgram``, built through torch's public
constructor with torch's signature types, ``ValueRanges``, module call graph, verifiers and
fake-tensor values (:func:`unbroken.ir.parts.torch_program_args`), so every tool that takes
torch's program takes it: ``torch.export.save``/``load``, ``torch.export.unflatten``,
AOTInductor, ``torch.onnx.export``, ``move_to_device_pass``. What unbroken adds or overrides:

- :meth:`~ExportedProgram.module` checks its inputs with unbroken's messages
  (:mod:`unbroken.ir.runtime`, :mod:`unbroken.ir.input_checks`);
- :meth:`~ExportedProgram.run_decompositions` is unbroken's own (:mod:`unbroken.passes
  .decompose`, on unbroken's recorder, no tracing by torch);
- :meth:`~ExportedProgram.validate` runs torch's verifier and unbroken's dialect check;
- ``str(ep)`` prints the ranges sorted; ``in_spec``/``out_spec``/``symbol_hints`` are views.

It lives at the package root because it uses a pass; :mod:`unbroken.ir` keeps the lower pieces
(parts, runtime, verifier, printer, serialization). :func:`save`/:func:`load` are unbroken's safe
file format (``unbroken.save``/``unbroken.load``).
"""
from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch
import torch.export

from unbroken.ir import printer, verifier
from unbroken.ir.fake import hints_of
from unbroken.ir.grad_regions import to_flat_regions
from unbroken.ir.meta_keys import LAYOUT_READ
from unbroken.ir.parts import ProgramParts, module_calls_of, torch_program_args
from unbroken.ir.verifier import DialectViolation
from unbroken.passes.decompose import decompose
from unbroken.symbolic.diagnostics import ExportUsageError
from unbroken.symbolic.diagnostics.drop_in import torch_compatible, torch_compatible_errors
from unbroken.symbolic.torch_compat import SpecViolationError, new_exported_program

if TYPE_CHECKING:
    from unbroken.ir import serialize

__all__ = ["ExportedProgram", "load", "save"]


class ExportedProgram(torch.export.ExportedProgram):
    """A captured program: a functional ATen graph, its signature, state and constraints.

    ``isinstance(ep, torch.export.ExportedProgram)`` holds; see the module docstring for what
    unbroken adds. Build one with :meth:`from_parts` (the constructor is torch's).

    Example::

        ep = unbroken.export(model, (x,))
        print(ep)                          # graph, signature, range constraints
        out = ep.module()(x)               # run it, inputs checked
        torch.export.save(ep, "model.pt2") # torch's tools take it as it is
    """

    @classmethod
    def from_parts(cls, parts: ProgramParts) -> ExportedProgram:
        """The program of ``parts`` (see :class:`unbroken.ir.parts.ProgramParts`); verified."""
        program = new_exported_program(cls, **torch_program_args(parts))
        program._unbroken_env = parts.env  # the symbols' facts, for run_decompositions
        program._specializations = tuple(parts.specializations)
        program._module_types = dict(parts.module_types)
        return program

    # -- views unbroken adds ----------------------------------------------------------------------
    @property
    def in_spec(self):
        """Pytree spec of the user's ``(args, kwargs)``."""
        return self.call_spec.in_spec

    @property
    def out_spec(self):
        """Pytree spec of the user outputs."""
        return self.call_spec.out_spec

    @property
    def symbol_hints(self) -> dict:
        """symbol -> example value of every symbol of ``range_constraints`` (None for
        data-dependent ones)."""
        return hints_of(self.graph, self.range_constraints)

    @property
    def specializations(self) -> tuple:
        """The ``Dim.AUTO`` dims export made static, each with the fact and the line that pin
        it (``Specialization.describe()``); empty when every AUTO dim stayed dynamic."""
        return getattr(self, "_specializations", ())

    @property
    def strict_layout(self) -> bool:
        """True when the program holds for the example inputs' strides only (the trace read
        ``x.stride()`` or ``is_contiguous()``, or the program writes an input after an op that
        copies or aliases by layout): ``module()`` then checks every input's strides."""
        return bool(self.graph_module.meta.get(LAYOUT_READ, False))

    def parts(self) -> ProgramParts:
        """This program as :class:`ProgramParts` (the graph is shared, not copied)."""
        signature = self.module_call_graph[0].signature
        names = signature.forward_arg_names if signature is not None else None
        graph_module, graph_signature, renames = to_flat_regions(self.graph_module,
                                                                 self.graph_signature)
        calls = tuple(c.renamed(renames) for c in module_calls_of(self.module_call_graph))
        return ProgramParts(
            graph_module, graph_signature, self.state_dict, self.constants,
            self.range_constraints, self.in_spec, self.out_spec, self.example_inputs,
            self.symbol_hints, tuple(names) if names is not None else None,
            getattr(self, "_module_types", {}), self.dialect,
            getattr(self, "_unbroken_env", None), self.specializations, self.strict_layout,
            calls)

    # -- behaviour unbroken overrides -------------------------------------------------------------
    @torch_compatible_errors
    def module(self, check_guards: bool = True) -> torch.fx.GraphModule:
        """A callable ``torch.fx.GraphModule`` with the original FQNs that checks its inputs
        (unbroken's messages), runs the graph and writes mutations back.
        ``check_guards`` is accepted for torch's callers; the checks are a pre-hook either way.
        See :mod:`unbroken.ir.runtime`."""
        from unbroken.ir import runtime  # torch's unlifting imports torch._dynamo (~1.4 s)

        return runtime.build_module(self)

    @torch_compatible_errors
    def run_decompositions(self, decomp_table=None, decompose_custom_triton_ops=False):
        """A new program whose ops are lowered through ``decomp_table``.

        With no table, lower to the core ATen operator set (every composite decomposes). With a
        table (e.g. ``torch.export.default_decompositions()`` with entries added or removed),
        the ops in it are replaced by their decompositions and other ops are kept whole; an
        empty table keeps the graph as it is. ``decompose_custom_triton_ops`` is accepted for
        compatibility (there are no Triton ops on CPU). The result's dialect is ``ATEN``.

        Example::

            core = ep.run_decompositions()          # conv2d -> convolution, linear -> addmm...
        """
        return type(self).from_parts(decompose(self.parts(), decomp_table))

    def validate(self) -> None:
        """unbroken's dialect check (:mod:`unbroken.ir.verifier`: an ``InternalError`` naming
        the node and the user's line), then torch's verifiers."""
        verifier.verify(self)
        try:
            super().validate()
        except SpecViolationError as error:  # unbroken's dialect check passed: our bug
            raise DialectViolation(f"torch's verifier refuses the program: {error}",
                                   cause=error) from error

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        raise torch_compatible(ExportUsageError(
            "An ExportedProgram cannot be called directly.",
            hint="call `ep.module()(...)` instead: it returns an nn.Module that checks the "
                 "inputs, runs the graph and writes buffer/input mutations back."))

    def __str__(self) -> str:
        return printer.format_program(self)

    def __repr__(self) -> str:
        return (f"<ExportedProgram: {len(self.graph.nodes)} nodes, "
                f"{len(self.graph_signature.input_specs)} inputs, "
                f"{len(self.graph_signature.output_specs)} outputs>")


@torch_compatible_errors
def save(ep: ExportedProgram, f, *, extra_files: dict[str, str] | None = None,
         opset_version: dict[str, int] | None = None, pickle_protocol: int = 2) -> None:
    """Write the program ``ep`` to ``f`` (a path, ``os.PathLike`` or a binary file object) in
    unbroken's format; the arguments of ``torch.export.save``.

    ``extra_files`` (file name -> text) are stored with the program, as torch stores them;
    :func:`load` gives them back. ``opset_version`` and ``pickle_protocol`` are torch's
    format's: unbroken's records ops by qualified name, resolved in the torch that loads the
    file, and pickles nothing, so they are checked for type and change nothing.

    Example::

        unbroken.save(ep, "model.ubp", extra_files={"labels.txt": "cat\ndog"})
    """
    from unbroken.ir import serialize  # on first use: an export does not need the format

    _check_save_arguments(extra_files, opset_version, pickle_protocol)
    serialize.save(ep.parts(), f, dict(extra_files) if extra_files else None)


@torch_compatible_errors
def load(f, *, extra_files: dict | None = None,
         expected_opset_version: dict[str, int] | None = None,
         limits: serialize.Limits | None = None) -> ExportedProgram:
    """Read a program written by :func:`save` (never runs code from the file; see
    :func:`unbroken.ir.serialize.load` for ``limits`` and the guarantees); the arguments of
    ``torch.export.load``: ``extra_files``, a dict, receives every extra file of the archive
    (name -> text), as torch fills it; ``expected_opset_version`` is accepted (see
    :func:`save`: unbroken's files carry no operator-set version).

    Example::

        extra = {}
        ep = unbroken.load("model.ubp", extra_files=extra)
        labels = extra["labels.txt"]
    """
    if extra_files is not None and not isinstance(extra_files, dict):
        raise ExportUsageError(f"extra_files= must be a dict to fill in, got "
                               f"{type(extra_files).__name__}")
    _check_opset(expected_opset_version, "expected_opset_version")
    from unbroken.ir import serialize

    return serialize.load(f, ExportedProgram.from_parts, limits=limits, extra_files=extra_files)


def _check_save_arguments(extra_files, opset_version, pickle_protocol) -> None:
    if extra_files is not None:
        if not hasattr(extra_files, "items"):
            raise ExportUsageError(f"extra_files= must map file names to text, got "
                                   f"{type(extra_files).__name__}")
        for name, text in extra_files.items():
            if not isinstance(name, str) or not name or not isinstance(text, str):
                raise ExportUsageError(
                    f"extra_files= must map file names to text (str), got "
                    f"{name!r}: {type(text).__name__}",
                    hint="decode bytes first (torch.export.save stores text too), e.g. "
                         "data.decode('utf-8'), or base64 for binary data.")
    _check_opset(opset_version, "opset_version")
    if type(pickle_protocol) is not int:
        raise ExportUsageError(f"pickle_protocol= must be an int, got "
                               f"{type(pickle_protocol).__name__}")


def _check_opset(versions, name: str) -> None:
    if versions is not None and not (isinstance(versions, dict) and all(
            isinstance(k, str) and type(v) is int for k, v in versions.items())):
        raise ExportUsageError(f"{name}= must map operator-set names to int versions, got "
                               f"{versions!r}")
