"""Code objects decoded into the instructions the translator runs.

One pass over ``co_code`` (CPython's own bytes, read as ``dis`` reads them): ``EXTENDED_ARG``
prefixes are folded into the argument of the instruction they prefix, inline ``CACHE`` units
are skipped, each argument is resolved to the value the handlers take (a constant, a name, a
local, a ``CellVar``/``FreeVar``, a comparison or operator enum, the flag bits packed beside a
name), jumps and exception-table targets become instruction indices, and each instruction
gets the exception handler covering it (``co_exceptiontable``, as CPython's
``Objects/exception_handling_notes.txt`` lays it out).

The arguments are exactly the ``bytecode`` package's abstract ``Instr.arg`` values (its
types: ``Compare``, ``BinaryOp``, ``CellVar``...; its ``UNSET`` for an instruction without
one), and the test suite checks the two decodings equal over thousands of code objects on
every supported Python. Reading the bytes directly is what makes a code object's first trace
cheap: building ``bytecode``'s concrete and then abstract instruction lists cost about
0.7 ms per code object, a fifth of the first export of a Hugging Face model in a fresh
process; this pass is about 5.5 times faster. What differs between versions is read from
``opcodes.versions.conventions()``.
"""
from __future__ import annotations

import dataclasses
import opcode
from dataclasses import dataclass

from bytecode import BinaryOp, CellVar, Compare, FreeVar, Intrinsic1Op, Intrinsic2Op
from bytecode.instr import UNSET

from .opcodes.versions import conventions

__all__ = ["Handler", "Instruction", "decode"]


@dataclass(frozen=True, slots=True)
class Handler:
    """The exception-table entry covering an instruction: where to jump when it raises.

    target: the handler's instruction index; depth: the value-stack depth to unwind to;
    push_lasti: whether the handler expects the raising instruction's offset on the stack.
    """

    target: int
    depth: int
    push_lasti: bool


@dataclass(frozen=True, slots=True)
class Instruction:
    """One decoded instruction. ``arg``: its argument as the handlers take it (see the module
    docstring; a jump's is its ``target``); ``target``: the index a jump goes to (None if not
    a jump); ``handler``: the exception handler covering it (None outside any ``try``);
    ``position``: CPython's ``(lineno, end_lineno, col_offset, end_col_offset)`` of it
    (``co_positions``), which diagnostics read."""

    name: str
    arg: object
    lineno: int | None
    target: int | None
    handler: Handler | None = None
    position: tuple | None = None


_INSTRUCTION_SETTERS = tuple(Instruction.__dict__[field.name].__set__
                             for field in dataclasses.fields(Instruction))


def _opcodes(names) -> frozenset:
    return frozenset(opcode.opmap[n] for n in names if n in opcode.opmap)


_CONVENTIONS = conventions()
_EXTENDED_ARG = opcode.opmap["EXTENDED_ARG"]
_CACHE = opcode.opmap["CACHE"]
_NOP = opcode.opmap["NOP"]
_HAS_ARG = frozenset(opcode.hasarg) if hasattr(opcode, "hasarg") else \
    frozenset(range(opcode.HAVE_ARGUMENT, 256))
_CONST = frozenset(opcode.hasconst)
_LOCAL = frozenset(opcode.haslocal)
_NAME = frozenset(opcode.hasname)
_FREE = frozenset(opcode.hasfree)
_COMPARE = frozenset(opcode.hascompare)
_JUMP = frozenset(opcode.hasjrel) | frozenset(getattr(opcode, "hasjump", ())) | \
    frozenset(opcode.hasjabs)
_BACKWARD = frozenset(op for op in _JUMP if "BACKWARD" in opcode.opname[op])
# a name with the low bit a flag: LOAD_GLOBAL's "push NULL", LOAD_ATTR's "load a method"
_NAME_AND_FLAG = _opcodes(("LOAD_GLOBAL", "LOAD_ATTR") if _CONVENTIONS.attr_method_bit
                          else ("LOAD_GLOBAL",))
_NAME_AND_TWO_FLAGS = _opcodes(("LOAD_SUPER_ATTR",))  # (method, two-argument super, name)
_TWO_LOCALS = _opcodes(("LOAD_FAST_LOAD_FAST", "STORE_FAST_LOAD_FAST", "STORE_FAST_STORE_FAST"))
_ENUMS = {opcode.opmap[name]: kind for name, kind in (
    ("BINARY_OP", BinaryOp), ("CALL_INTRINSIC_1", Intrinsic1Op),
    ("CALL_INTRINSIC_2", Intrinsic2Op)) if name in opcode.opmap}
if "CONVERT_VALUE" in opcode.opmap:
    from bytecode.instr import FormatValue
    _ENUMS[opcode.opmap["CONVERT_VALUE"]] = FormatValue

_DECODED: dict = {}


def decode(code) -> list[Instruction]:
    """Decode ``code`` into instructions with jump targets and exception handlers as
    instruction indices (cached per code object)."""
    cached = _DECODED.get(code)
    if cached is None:
        cached = _DECODED[code] = _decode(code)
    return cached


def _decode(code) -> list[Instruction]:
    raw = code.co_code
    positions = list(code.co_positions())
    names, consts = code.co_names, code.co_consts
    cells = list(code.co_varnames) + [CellVar(n) for n in code.co_cellvars
                                      if n not in code.co_varnames]
    frees = [FreeVar(n) for n in code.co_freevars]
    local_names = cells + [f for f in frees if f.name not in code.co_varnames] \
        if _CONVENTIONS.fast_locals_cover_cells else code.co_varnames
    # one row per instruction: (name, opcode, raw argument, first code unit, own code unit,
    # jump target in code units or None)
    rows = []
    index_of: dict[int, int] = {}  # code unit (the instruction's or its first prefix's) -> index
    unit, count, extended, start = 0, len(raw) // 2, 0, None
    while unit < count:
        op, arg = raw[2 * unit], raw[2 * unit + 1]
        if op == _EXTENDED_ARG:
            extended = (extended << 8) | arg
            start = unit if start is None else start
            unit += 1
            continue
        if op == _CACHE:
            unit += 1
            continue
        first = unit if start is None else start
        arg = (extended << 8) | arg
        extended, start = 0, None
        own, unit = unit, unit + 1
        target = None
        if op in _JUMP:
            while unit < count and raw[2 * unit] == _CACHE:
                unit += 1
            target = unit - arg if op in _BACKWARD else unit + arg
        index_of[first] = len(rows)
        rows.append((op, arg, own, target))
    handlers = _handlers(code.co_exceptiontable, rows, index_of)
    opname = opcode.opname
    new = object.__new__
    set_name, set_arg, set_lineno, set_target, set_handler, set_position = _INSTRUCTION_SETTERS
    result = []
    for (op, arg, own, target), handler in zip(rows, handlers):
        if target is not None:
            target = value = index_of[target]
        elif op not in _HAS_ARG or op == _NOP:
            value = UNSET
        elif op in _CONST:
            value = consts[arg]
        elif op in _LOCAL:
            value = (local_names[arg >> 4], local_names[arg & 15]) if op in _TWO_LOCALS \
                else local_names[arg]
        elif op in _NAME:
            if op in _NAME_AND_FLAG:
                value = (bool(arg & 1), names[arg >> 1])
            elif op in _NAME_AND_TWO_FLAGS:
                value = (bool(arg & 1), bool(arg & 2), names[arg >> 2])
            else:
                value = names[arg]
        elif op in _FREE:
            if arg < len(cells):
                value = cells[arg] if isinstance(cells[arg], CellVar) else CellVar(cells[arg])
            else:
                value = frees[arg - len(cells)]
        elif op in _COMPARE:
            value = Compare(_CONVENTIONS.comparison(arg))
        elif op in _ENUMS:
            value = _ENUMS[op](arg)
        else:
            value = arg
        where = positions[own]
        instruction = new(Instruction)  # frozen: its fields set through their slots (the
        set_name(instruction, opname[op])  # dataclass's __init__ costs twice as much, and
        set_arg(instruction, value)  # a fresh process decodes thousands of instructions)
        set_lineno(instruction, where[0])
        set_target(instruction, target)
        set_handler(instruction, handler)
        set_position(instruction, where)
        result.append(instruction)
    return result


def _varints(table: bytes):
    """The unsigned numbers of an exception table: 6 bits per byte, most significant first,
    bit 6 set on every byte but a number's last (bit 7 marks an entry's first byte)."""
    value = 0
    for byte in table:
        value = (value << 6) | (byte & 63)
        if not byte & 64:
            yield value
            value = 0


def _handlers(table: bytes, rows: list, index_of: dict) -> list:
    """The handler covering each instruction: the table's entries are (start, length, target,
    depth << 1 | lasti) in code units, non-overlapping; an instruction is covered by the entry
    whose range holds its own unit."""
    if not table:
        return [None] * len(rows)
    numbers = list(_varints(table))
    entries = [(numbers[i], numbers[i] + numbers[i + 1], Handler(
        index_of[numbers[i + 2]], numbers[i + 3] >> 1, bool(numbers[i + 3] & 1)))
        for i in range(0, len(numbers), 4)]
    handlers, position = [], 0
    for _, _, own, _ in rows:  # both in code order: one sweep
        while position < len(entries) and entries[position][1] <= own:
            position += 1
        covering = entries[position] if position < len(entries) else None
        handlers.append(covering[2] if covering is not None and covering[0] <= own else None)
    return handlers
