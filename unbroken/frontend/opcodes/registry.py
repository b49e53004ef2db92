"""The opcode handler table, and what every handler module shares.

``HANDLERS`` maps an opcode name to a function ``handler(tx, instruction)``; ``opcode``
registers one for the CPython versions it serves (``versions``, from ``opcodes.versions``),
asserting that every version it claims has that instruction, so a handler can never silently
target an instruction a Python does not have. Only the handlers serving the running version
are registered. ``NULL`` is the marker CPython pushes beside a callable; ``push_callable`` and
``pop_callable`` put it where the running version's calling convention wants it.
"""
from __future__ import annotations

import dis

from ..variables.base import VariableTracker
from .versions import ALL, CURRENT, OPCODES, conventions

__all__ = ["HANDLERS", "NULL", "opcode", "pop_callable", "push_callable", "unhandled_opcodes",
           "guards_assert"]

HANDLERS: dict = {}
CONVENTIONS = conventions()


def opcode(*names: str, versions: tuple = ALL):
    """Register the decorated function as the handler of ``names`` on ``versions``."""

    def register(fn):
        for version in versions:
            for name in names:
                assert name in OPCODES[version], \
                    f"{name} is not an opcode of Python {'.'.join(map(str, version))}"
        if CURRENT in versions:
            for name in names:
                assert name in dis.opmap, f"{name} is not an opcode of this Python"
                assert name not in HANDLERS, f"{name} registered twice"
                HANDLERS[name] = fn
        return fn

    return register


def unhandled_opcodes() -> list[str]:
    """Instructions of the running Python with no handler (they are refused as UB100)."""
    return sorted(name for name in OPCODES.get(CURRENT, ()) if name not in HANDLERS)


class _Null(VariableTracker):
    """The NULL that CPython pushes beside a callable (PUSH_NULL, LOAD_GLOBAL, LOAD_ATTR's
    method form): below it up to 3.12, above it from 3.13 on."""

    __slots__ = ()

    def describe(self) -> str:
        return "NULL"


NULL = _Null()


def push_callable(tx, callee: VariableTracker) -> None:
    """Push ``callee`` with its NULL, in the running version's order. A method is always
    pushed bound (NULL and the bound method), never as CPython's unbound method and self."""
    if CONVENTIONS.null_after_callable:
        tx.push(callee)
        tx.push(NULL)
    else:
        tx.push(NULL)
        tx.push(callee)


def pop_callable(tx) -> tuple:
    """Pop the two slots below a call's arguments: ``(callee, self_or_null)``. Up to 3.12
    they are ``NULL, callable`` or ``method, self``; from 3.13 on ``callable, NULL`` or
    ``method, self``. A ``self`` that is not NULL is the call's first argument."""
    lower, upper = tx.popn(2)
    if not CONVENTIONS.null_after_callable and lower is NULL:
        return upper, NULL
    return lower, upper


def guards_assert(tx, ahead: int = 0) -> bool:
    """The instruction ``ahead`` of the next one is an ``assert``'s branch: falling through it
    raises AssertionError (``LOAD_ASSERTION_ERROR`` follows). ``ahead`` 1 asks it of the
    instruction before a branch (3.13's ``TO_BOOL``, a comparison that casts to bool)."""
    index = tx.ip + ahead
    following = tx.instructions[index] if index < len(tx.instructions) else None
    return following is not None and following.name == "LOAD_ASSERTION_ERROR"
