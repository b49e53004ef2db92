"""The opcode handler table, and what every handler module shares.

``HANDLERS`` maps an opcode name to a function ``handler(tx, instruction)``; ``opcode``
registers one, asserting the opcode exists in ``dis.opmap`` of the running interpreter for the
versions it claims, so a handler can never silently target an instruction this Python does not
have. ``NULL`` is the marker CPython 3.11 pushes below a callable.
"""
from __future__ import annotations

import dis
import sys

from ..variables.base import VariableTracker

__all__ = ["HANDLERS", "NULL", "opcode", "unhandled_opcodes"]

HANDLERS: dict = {}


def opcode(*names: str, versions=((3, 11),)):
    """Register the decorated function as the handler of ``names`` on ``versions``."""

    def register(fn):
        if sys.version_info[:2] in versions:
            for name in names:
                assert name in dis.opmap, f"{name} is not an opcode of this Python"
                assert name not in HANDLERS, f"{name} registered twice"
                HANDLERS[name] = fn
        return fn

    return register


def unhandled_opcodes() -> list[str]:
    """Opcodes of the running Python with no handler (they are refused as UB100)."""
    return sorted(name for name in dis.opmap if name not in HANDLERS)


class _Null(VariableTracker):
    """The NULL that CPython 3.11 pushes below a callable (PUSH_NULL, LOAD_GLOBAL, LOAD_METHOD)."""

    __slots__ = ()

    def describe(self) -> str:
        return "NULL"


NULL = _Null()
