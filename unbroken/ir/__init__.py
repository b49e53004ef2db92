"""The exported-program dialect: signature, container, runtime module, printer, verifier.

``ir`` imports only ``unbroken.symbolic``; it never imports ``frontend``, ``passes`` or
``pipeline``.
"""
from unbroken.ir.program import CallSpec, ExportedProgram
from unbroken.ir.runtime import ExportedModule
from unbroken.ir.signature import (
    ArgumentSpec,
    ConstantArgument,
    ExportGraphSignature,
    InputKind,
    InputSpec,
    OutputKind,
    OutputSpec,
    SymIntArgument,
    TensorArgument,
)
from unbroken.ir.verifier import verify

__all__ = [
    "ArgumentSpec",
    "CallSpec",
    "ConstantArgument",
    "ExportGraphSignature",
    "ExportedModule",
    "ExportedProgram",
    "InputKind",
    "InputSpec",
    "OutputKind",
    "OutputSpec",
    "SymIntArgument",
    "TensorArgument",
    "verify",
]
