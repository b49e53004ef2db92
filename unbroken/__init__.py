"""unbroken: strict, ahead-of-time, whole-graph capture for PyTorch.

``unbroken.export(mod, args, kwargs=None, *, dynamic_shapes=None)`` has the call shape of
``torch.export.export`` and returns an :class:`ExportedProgram`, or refuses with an error that
names your file and line and says how to fix it.

Errors: ``except unbroken.UnbrokenError`` catches everything unbroken raises. Its two branches
are ``unbroken.RefusalError`` (export refused on purpose: graph breaks, constraint violations,
usage and input errors, unreadable files; the message says what to change) and
``unbroken.InternalError`` (a bug in unbroken; please report it). Catch ``RefusalError`` to
treat "this model is not supported" differently from a crash.
"""
from torch.export import Dim  # torch's own Dim objects are the spec language (drop-in)

from .symbolic.diagnostics import (
    ConstraintViolationError,
    DataDependentError,
    ExportUsageError,
    InputMismatchError,
    InternalError,
    PathCondition,
    RefusalError,
    SerializationError,
    UnbrokenError,
    UnsupportedError,
)
from .symbolic.diagnostics.catalogue import GraphBreakError
from .symbolic.torch_compat import UntestedTorchWarning, warn_if_untested

warn_if_untested()  # once per process: the running torch is not one CI tests

__version__ = "0.1.0"

__all__ = [
    "ConstraintViolationError", "DataDependentError", "Dim", "ExportUsageError",
    "ExportedProgram", "GraphBreakError", "InputMismatchError", "InternalError",
    "PathCondition", "RefusalError", "SerializationError", "Specialization",
    "SpecializationWarning",
    "StateWriteWarning", "UnbrokenError", "UnsupportedError", "UntestedTorchWarning",
    "__version__", "budget", "case", "export", "find_graph_breaks", "load", "save",
]


def __getattr__(name):
    # export/ExportedProgram/case are imported on first use: importing the pipeline pulls in
    # z3 and the frontend, which `unbroken --version` and error handling do not need.
    if name in ("export", "find_graph_breaks"):
        from .exporter import pipeline

        return getattr(pipeline, name)
    if name in ("ExportedProgram", "save", "load"):
        from . import program

        return getattr(program, name)
    if name == "budget":
        from .frontend.budget import budget

        return budget
    if name in ("Specialization", "SpecializationWarning"):
        from .symbolic import auto

        return getattr(auto, name)
    if name == "StateWriteWarning":
        from .frontend.overlay import StateWriteWarning

        return StateWriteWarning
    if name == "case":
        from .cases import case

        return case
    if name == "testing":
        from . import testing

        return testing
    raise AttributeError(f"module 'unbroken' has no attribute '{name}'")
