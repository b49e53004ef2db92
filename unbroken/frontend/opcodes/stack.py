"""Stack manipulation: NOP, RESUME, POP_TOP, PUSH_NULL, COPY, SWAP."""
from __future__ import annotations

from .registry import NULL, opcode
from .versions import PY311


@opcode("NOP", "RESUME", "CACHE", "EXTENDED_ARG", "COPY_FREE_VARS")
@opcode("PRECALL", versions=(PY311,))
def nop(tx, instruction):
    """No effect on the symbolic state (COPY_FREE_VARS: the closure is bound at frame creation)."""


@opcode("POP_TOP")
def pop_top(tx, instruction):
    tx.pop()


@opcode("PUSH_NULL")
def push_null(tx, instruction):
    tx.push(NULL)


@opcode("COPY")
def copy(tx, instruction):
    tx.push(tx.stack[-instruction.arg])


@opcode("SWAP")
def swap(tx, instruction):
    i = instruction.arg
    tx.stack[-1], tx.stack[-i] = tx.stack[-i], tx.stack[-1]
