"""Opcode handlers, registered by name with the Python versions they serve.

Each family of instructions lives in its own module. ``HANDLERS`` maps an opcode name to a
function ``handler(tx, instruction)``; registration asserts the opcode exists in ``dis.opmap``
of the running interpreter for the versions it claims, so a handler can never silently target
an instruction this Python does not have. ``unhandled_opcodes()`` lists what is missing (a test
prints it and checks the refused ones are intended).
"""
from __future__ import annotations

import dis
import sys

__all__ = ["HANDLERS", "opcode", "unhandled_opcodes"]

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


from . import arithmetic, calls, containers, control, loads, stack  # noqa: E402,F401
