"""The exported-program dialect: signature, program parts, runtime module and its input checks,
the recorder, printer, verifier, ``meta_keys`` (the ``meta`` keys unbroken writes), files
(``serialize``).

The product class, ``unbroken.ExportedProgram``, is in :mod:`unbroken.program` (it runs passes).

``ir`` imports only ``unbroken.symbolic``; it never imports ``frontend``, ``passes`` or the
packages above them.
"""
from unbroken.ir.parts import ProgramParts
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
    "ConstantArgument",
    "ExportGraphSignature",
    "ProgramParts",
    "InputKind",
    "InputSpec",
    "OutputKind",
    "OutputSpec",
    "SymIntArgument",
    "TensorArgument",
    "build_module",
    "verify",
]


def __getattr__(name):
    # the runtime module is imported on first use: torch's unlifting, which it builds on,
    # imports torch._dynamo (~1.4 s), which an export does not need
    if name == "build_module":
        from unbroken.ir.runtime import build_module

        return build_module
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
