"""Loads and stores: locals, globals, cells, constants and attributes."""
from __future__ import annotations

from ..graph_breaks import GraphBreakError, graph_break
from ..protocol import load_attribute
from ..variables.builder import wrap
from ..variables.containers import check_mutable
from ..variables.functions import CellVariable
from .registry import NULL, opcode


@opcode("LOAD_CONST")
def load_const(tx, instruction):
    tx.push(wrap(tx, instruction.arg))


@opcode("LOAD_FAST")
def load_fast(tx, instruction):
    name = instruction.arg
    if name not in tx.locals:
        raise tx.user_exception(UnboundLocalError(f"local variable '{name}' referenced before "
                                                  "assignment"))
    tx.push(tx.locals[name])


@opcode("STORE_FAST")
def store_fast(tx, instruction):
    tx.locals[instruction.arg] = tx.pop()


@opcode("DELETE_FAST")
def delete_fast(tx, instruction):
    tx.locals.pop(instruction.arg, None)


@opcode("LOAD_GLOBAL")
def load_global(tx, instruction):
    push_null, name = instruction.arg
    if push_null:
        tx.push(NULL)
    tx.push(tx.load_global(name))


@opcode("STORE_GLOBAL", "DELETE_GLOBAL")
def store_global(tx, instruction):
    error = graph_break("UB107", f"the global variable `{instruction.arg}` is modified",
                        frames=tx.user_frames())
    if not tx.output.recover(error):
        raise error
    if instruction.name == "STORE_GLOBAL":
        tx.pop()  # find-all mode: the write is skipped


@opcode("MAKE_CELL")
def make_cell(tx, instruction):
    name = instruction.arg.name
    tx.cells[name] = CellVariable(tx.locals.pop(name, None))


@opcode("LOAD_CLOSURE")
def load_closure(tx, instruction):
    tx.push(tx.cells[instruction.arg.name])


@opcode("LOAD_DEREF", "LOAD_CLASSDEREF")
def load_deref(tx, instruction):
    name = instruction.arg.name
    cell = tx.cells.get(name)
    if cell is None or cell.contents is None:
        raise tx.user_exception(NameError(f"free variable '{name}' referenced before assignment"))
    tx.push(cell.contents)


@opcode("STORE_DEREF")
def store_deref(tx, instruction):
    cell = tx.cells[instruction.arg.name]
    check_mutable(tx, cell, f"assigning `{instruction.arg.name}`")
    cell.contents = tx.pop()


@opcode("DELETE_DEREF")
def delete_deref(tx, instruction):
    tx.cells[instruction.arg.name].contents = None


@opcode("LOAD_ATTR")
def load_attr(tx, instruction):
    tx.push(load_attribute(tx, tx.pop(), instruction.arg))


@opcode("LOAD_METHOD")
def load_method(tx, instruction):
    attribute = load_attribute(tx, tx.pop(), instruction.arg)
    tx.push(NULL)
    tx.push(attribute)


@opcode("STORE_ATTR")
def store_attr(tx, instruction):
    obj = tx.pop()
    value = tx.pop()
    try:
        obj.setattr(tx, instruction.arg, value)
    except GraphBreakError as error:
        if not tx.output.recover(error):  # find-all mode: the write is skipped
            raise


@opcode("DELETE_ATTR")
def delete_attr(tx, instruction):
    obj = tx.pop()
    if hasattr(obj, "delattr"):  # an outside object: kept in the overlay, must end restored
        obj.delattr(tx, instruction.arg)
        return
    error = graph_break("UB107", f"attribute `{instruction.arg}` is deleted",
                        frames=tx.user_frames())
    if not tx.output.recover(error):
        raise error


@opcode("LOAD_ASSERTION_ERROR")
def load_assertion_error(tx, instruction):
    tx.push(wrap(tx, AssertionError))


