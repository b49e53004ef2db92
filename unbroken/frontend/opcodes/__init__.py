"""Opcode handlers, registered by name with the Python versions they serve.

Each family of instructions lives in its own module and registers its handlers in
``registry.HANDLERS`` with the ``registry.opcode`` decorator. Importing this package imports
every family, so ``HANDLERS`` is complete once it is imported; ``unhandled_opcodes()`` lists
what is missing (a test prints it and checks the refused ones are intended).
"""
from __future__ import annotations

from . import arithmetic, calls, containers, control, loads, matching, stack
from .registry import HANDLERS, NULL, opcode, unhandled_opcodes

__all__ = ["HANDLERS", "NULL", "opcode", "unhandled_opcodes", "FAMILIES"]

# The handler families: importing them registers their handlers in HANDLERS.
FAMILIES = (arithmetic, calls, containers, control, loads, matching, stack)
