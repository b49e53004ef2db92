"""Calls and function creation: KW_NAMES, CALL, CALL_FUNCTION_EX, MAKE_FUNCTION."""
from __future__ import annotations

from .. import protocol
from ..graph_breaks import graph_break
from ..variables.containers import DictVariable
from ..variables.functions import NestedFunctionVariable
from .registry import NULL, opcode


@opcode("KW_NAMES")
def kw_names(tx, instruction):
    tx.kw_names = tuple(instruction.arg)


@opcode("CALL")
def call(tx, instruction):
    argc = instruction.arg
    names, tx.kw_names = tx.kw_names, ()
    values = tx.popn(argc)
    first, second = tx.popn(2)
    if first is NULL:
        callee, positional = second, values
    else:
        callee, positional = first, [second, *values]
    split = len(positional) - len(names)
    kwargs = dict(zip(names, positional[split:]))
    tx.push(protocol.call(tx, callee, positional[:split], kwargs))


@opcode("CALL_FUNCTION_EX")
def call_function_ex(tx, instruction):
    kwargs = tx.pop() if instruction.arg & 1 else DictVariable({})
    args = tx.pop()
    callee = tx.pop()
    if tx.stack and tx.stack[-1] is NULL:
        tx.pop()
    if not isinstance(kwargs, DictVariable):
        raise graph_break("UB117", f"`**` unpacking of {kwargs.describe()}")
    keyword = kwargs.entries
    tx.push(protocol.call(tx, callee, protocol.iterate(tx, args), keyword))


@opcode("MAKE_FUNCTION")
def make_function(tx, instruction):
    flags = instruction.arg
    code = tx.pop().as_constant()
    closure = tx.pop().items(tx) if flags & 0x08 else []
    if flags & 0x04:
        tx.pop()  # annotations: not needed to run the function
    kwdefaults = tx.pop().entries if flags & 0x02 else {}
    defaults = tx.pop().items(tx) if flags & 0x01 else []
    tx.push(NestedFunctionVariable(code, tx.f_globals, defaults, kwdefaults, tuple(closure),
                                   code.co_qualname))


