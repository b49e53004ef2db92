"""The graph signature: what each placeholder and each output of an exported graph means.

An exported graph is a flat function. Its inputs are, in this order::

    [*parameters, *buffers, *lifted_tensor_constants, *flattened_user_inputs]

and its outputs are::

    [*mutated_buffers_and_user_inputs, *flattened_user_outputs]

The types are torch's own (``torch.export.graph_signature``): an unbroken program's signature
*is* a torch ``ExportGraphSignature``, so ``spec.kind == torch.export.graph_signature
.InputKind.PARAMETER`` holds and every tool written for torch reads it. This module re-exports
them, and adds what unbroken's passes need on top:

- :class:`ExportGraphSignature`, a subclass of torch's with :attr:`~ExportGraphSignature
  .mutation_specs` and :meth:`~ExportGraphSignature.replace`;
- the same two as functions (:func:`mutation_specs`, :func:`replace_specs`) for signatures
  built by torch (``torch.export.load``, torch's passes), which are torch's base class.
"""
from __future__ import annotations

import torch.export.graph_signature as _torch
import torch.fx as fx

ArgumentSpec = _torch.ArgumentSpec
ConstantArgument = _torch.ConstantArgument
CustomObjArgument = _torch.CustomObjArgument
InputKind = _torch.InputKind
InputSpec = _torch.InputSpec
OutputKind = _torch.OutputKind
OutputSpec = _torch.OutputSpec
SymBoolArgument = _torch.SymBoolArgument
SymFloatArgument = _torch.SymFloatArgument
SymIntArgument = _torch.SymIntArgument
TensorArgument = _torch.TensorArgument
TokenArgument = _torch.TokenArgument

__all__ = [
    "with_output_names",
    "ArgumentSpec",
    "ConstantArgument",
    "CustomObjArgument",
    "ExportGraphSignature",
    "InputKind",
    "InputSpec",
    "OutputKind",
    "OutputSpec",
    "SymBoolArgument",
    "SymFloatArgument",
    "SymIntArgument",
    "TensorArgument",
    "TokenArgument",
    "MUTATION_KINDS",
    "mutation_specs",
    "replace_specs",
]

#: Output kinds that carry the new value of a piece of state or of a user input.
MUTATION_KINDS = (OutputKind.BUFFER_MUTATION, OutputKind.USER_INPUT_MUTATION,
                  OutputKind.PARAMETER_MUTATION)


def mutation_specs(signature: _torch.ExportGraphSignature) -> list:
    """The mutation output specs (buffer, user input, parameter), in output order."""
    return [s for s in signature.output_specs if s.kind in MUTATION_KINDS]


def replace_specs(signature: _torch.ExportGraphSignature, *, input_specs=None,
                  output_specs=None) -> ExportGraphSignature:
    """A new signature with the given spec lists replaced (the others kept)."""
    return ExportGraphSignature(
        list(signature.input_specs if input_specs is None else input_specs),
        list(signature.output_specs if output_specs is None else output_specs),
    )


def with_output_names(signature: _torch.ExportGraphSignature,
                      graph: fx.Graph) -> ExportGraphSignature:
    """The signature with its output specs naming ``graph``'s output nodes, in order (after a
    pass rebuilt the graph: the outputs are new nodes); constant outputs keep their value."""
    output = graph.output_node()
    specs = []
    for spec, value in zip(signature.output_specs, output.args[0]):
        if isinstance(value, fx.Node) and not isinstance(spec.arg, ConstantArgument):
            spec = OutputSpec(spec.kind, type(spec.arg)(value.name), spec.target)
        specs.append(spec)
    return replace_specs(signature, output_specs=specs)


class ExportGraphSignature(_torch.ExportGraphSignature):
    """torch's ``ExportGraphSignature`` (same fields, views and printed form) with the two
    helpers unbroken's passes use. ``isinstance(sig, torch.export.graph_signature
    .ExportGraphSignature)`` holds.

    Example::

        sig = ExportGraphSignature([InputSpec(InputKind.USER_INPUT, TensorArgument("x"), None)],
                                   [OutputSpec(OutputKind.USER_OUTPUT, TensorArgument("y"),
                                               None)])
    """

    @property
    def mutation_specs(self) -> list:
        """See :func:`mutation_specs`."""
        return mutation_specs(self)

    def replace(self, *, input_specs=None, output_specs=None) -> ExportGraphSignature:
        """See :func:`replace_specs`."""
        return replace_specs(self, input_specs=input_specs, output_specs=output_specs)
