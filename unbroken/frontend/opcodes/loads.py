"""Loads and stores: locals, globals, cells, constants and attributes.

Comprehensions that CPython 3.12 inlines into the caller's frame (PEP 709) save the loop
variable with ``LOAD_FAST_AND_CLEAR`` (NULL when it was unbound) and restore it with
``STORE_FAST``: storing NULL unbinds the name again. A cell variable saved that way is the
cell itself, and storing it back puts the cell back.
"""
from __future__ import annotations

from ...symbolic.diagnostics.catalogue import GraphBreakError, graph_break
from .. import protocol
from ..protocol import load_attribute
from ..variables.builder import wrap
from ..variables.containers import check_mutable
from ..variables.functions import CellVariable
from .registry import CONVENTIONS, NULL, opcode, push_callable
from .versions import PY311, PY313, since, until


@opcode("LOAD_CONST")
def load_const(tx, instruction):
    tx.push(wrap(tx, instruction.arg))


def _load_local(tx, name):
    name = getattr(name, "name", name)  # 3.13: a cell variable's LOAD_FAST names a CellVar
    value = tx.locals.get(name)
    if value is not None:
        return value
    if CONVENTIONS.closure_by_load_fast and name in tx.cells:
        return tx.cells[name]  # 3.13: LOAD_FAST of a cell or free variable loads the cell
    raise tx.user_exception(UnboundLocalError(
        f"cannot access local variable '{name}' where it is not associated with a value"))


def _store_local(tx, name, value) -> None:
    name = getattr(name, "name", name)
    if value is NULL:  # an inlined comprehension restores a name that was unbound
        tx.locals.pop(name, None)
    elif isinstance(value, CellVariable) and name in tx.code.co_cellvars:
        tx.cells[name] = value  # ... or a cell variable it had saved (the cell itself)
    else:
        tx.locals[name] = value


@opcode("LOAD_FAST")
@opcode("LOAD_FAST_CHECK", versions=since((3, 12)))
def load_fast(tx, instruction):
    tx.push(_load_local(tx, instruction.arg))


@opcode("LOAD_FAST_AND_CLEAR", versions=since((3, 12)))
def load_fast_and_clear(tx, instruction):
    """Save a name an inlined comprehension is about to use (NULL when unbound), unbind it."""
    name = getattr(instruction.arg, "name", instruction.arg)
    if name in tx.code.co_cellvars and name in tx.cells:
        tx.push(tx.cells.pop(name))
    else:
        tx.push(tx.locals.pop(name, NULL))


@opcode("LOAD_FAST_LOAD_FAST", versions=(PY313,))
def load_fast_load_fast(tx, instruction):
    for name in instruction.arg:
        tx.push(_load_local(tx, name))


@opcode("STORE_FAST")
def store_fast(tx, instruction):
    _store_local(tx, instruction.arg, tx.pop())


@opcode("STORE_FAST_LOAD_FAST", versions=(PY313,))
def store_fast_load_fast(tx, instruction):
    store, load = instruction.arg
    _store_local(tx, store, tx.pop())
    tx.push(_load_local(tx, load))


@opcode("STORE_FAST_STORE_FAST", versions=(PY313,))
def store_fast_store_fast(tx, instruction):
    for name in instruction.arg:  # the first name takes the top of the stack
        _store_local(tx, name, tx.pop())


@opcode("DELETE_FAST")
def delete_fast(tx, instruction):
    tx.locals.pop(instruction.arg, None)


@opcode("LOAD_GLOBAL")
def load_global(tx, instruction):
    push_null, name = instruction.arg
    value = tx.load_global(name)
    if push_null:
        push_callable(tx, value)
    else:
        tx.push(value)


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


@opcode("LOAD_CLOSURE", versions=until((3, 12)))
def load_closure(tx, instruction):
    tx.push(tx.cells[instruction.arg.name])


@opcode("LOAD_DEREF")
@opcode("LOAD_CLASSDEREF", versions=(PY311,))
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
    """``obj.name``; from 3.12 on the arg's low bit asks for a method to call (3.11's
    LOAD_METHOD): the attribute is then pushed bound, with its NULL."""
    method, name = instruction.arg if isinstance(instruction.arg, tuple) else (False,
                                                                               instruction.arg)
    attribute = load_attribute(tx, tx.pop(), name)
    if method:
        push_callable(tx, attribute)
    else:
        tx.push(attribute)


@opcode("LOAD_METHOD", versions=(PY311,))
def load_method(tx, instruction):
    push_callable(tx, load_attribute(tx, tx.pop(), instruction.arg))


@opcode("LOAD_SUPER_ATTR", versions=since((3, 12)))
def load_super_attr(tx, instruction):
    """``super().name`` / ``super(cls, obj).name`` in one instruction: the stack holds the
    global ``super``, the class and the receiver. The two-argument form calls ``super`` with
    them; so does the zero-argument form when ``super`` is the builtin (what its frame
    inspection would find); a ``super`` the module rebinds is called as written."""
    method, two_args, name = instruction.arg
    receiver, cls, super_fn = tx.pop(), tx.pop(), tx.pop()
    if two_args or (super_fn.is_constant() and super_fn.as_constant() is super):
        proxy = protocol.call(tx, super_fn, [cls, receiver], {})
    else:
        proxy = protocol.call(tx, super_fn, [], {})
    attribute = load_attribute(tx, proxy, name)
    if method:
        push_callable(tx, attribute)
    else:
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


