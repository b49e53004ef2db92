"""Symbolic sizes: nodes backing ``torch.SymInt``, the shape environment, guards, value
ranges, the ``dynamic_shapes`` parser and the z3 solver.

This package is the lowest layer of unbroken: it imports nothing from ``ir``, ``frontend``,
``passes`` or the packages above them. At its bottom, ``diagnostics`` holds every error type
and the graph-break catalogue (every layer raises them); ``size_one_hook`` is the interface
through which the environment and the recorder reach the size-1 audit (``unbroken.size_one``).
"""
from .diagnostics import (
    ConstraintViolationError,
    DataDependentError,
    ExportUsageError,
    InternalError,
    RefusalError,
    UnbrokenError,
    UserFrame,
)

# The rest is imported on first use: the environment and the solver import sympy and z3
# (~1 s together), which ``import unbroken`` and its error types do not need.
_SUBMODULE_OF = {
    "ShapeEnvironment": "env", "SymbolInfo": "env", "Guard": "guards", "SymNode": "node",
    "is_our_symnode": "node", "sym_expr": "node", "ValueRange": "ranges", "Decision": "solver",
    "Solver": "solver", "Violation": "solver", "check_guards": "solver",
    "resolve_dynamic_shapes": "spec",
}


def __getattr__(name):
    if name in _SUBMODULE_OF:
        import importlib

        return getattr(importlib.import_module(f"{__name__}.{_SUBMODULE_OF[name]}"), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "ConstraintViolationError",
    "DataDependentError",
    "Decision",
    "ExportUsageError",
    "Guard",
    "InternalError",
    "RefusalError",
    "ShapeEnvironment",
    "Solver",
    "SymNode",
    "SymbolInfo",
    "UnbrokenError",
    "UserFrame",
    "ValueRange",
    "Violation",
    "check_guards",
    "is_our_symnode",
    "resolve_dynamic_shapes",
    "sym_expr",
]
