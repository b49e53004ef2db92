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
from .env import ShapeEnvironment, SymbolInfo
from .guards import Guard
from .node import SymNode, is_our_symnode, sym_expr
from .ranges import ValueRange
from .solver import Decision, Solver, Violation, check_guards
from .spec import resolve_dynamic_shapes

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
