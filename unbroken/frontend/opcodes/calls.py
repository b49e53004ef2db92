"""Calls and function creation: CALL (KW_NAMES before it up to 3.12, CALL_KW from 3.13),
CALL_FUNCTION_EX, MAKE_FUNCTION (SET_FUNCTION_ATTRIBUTE from 3.13), and the intrinsic
functions 3.12 moved small operations into (CALL_INTRINSIC_1/2)."""
from __future__ import annotations

import operator

from ...symbolic.diagnostics.catalogue import graph_break
from .. import protocol
from ..variables.containers import DictVariable, TupleVariable
from ..variables.functions import NestedFunctionVariable
from .arithmetic import apply_unary
from .control import exception_of
from .registry import CONVENTIONS, NULL, opcode, pop_callable
from .versions import PY313, since, until


@opcode("KW_NAMES", versions=until((3, 12)))
def kw_names(tx, instruction):
    tx.kw_names = tuple(instruction.arg)


def _call(tx, argc: int, names: tuple) -> None:
    """Pop ``argc`` arguments (the last ``len(names)`` of them keyword arguments) and the
    callee with its NULL or self; push the result."""
    values = tx.popn(argc)
    callee, self_or_null = pop_callable(tx)
    positional = values if self_or_null is NULL else [self_or_null, *values]
    split = len(positional) - len(names)
    kwargs = dict(zip(names, positional[split:]))
    tx.push(protocol.call(tx, callee, positional[:split], kwargs))


@opcode("CALL")
def call(tx, instruction):
    names, tx.kw_names = tx.kw_names, ()
    _call(tx, instruction.arg, names)


@opcode("CALL_KW", versions=(PY313,))
def call_kw(tx, instruction):
    """3.13: the keyword names are a constant tuple on top of the arguments."""
    names = tuple(tx.pop().as_constant())
    _call(tx, instruction.arg, names)


@opcode("CALL_FUNCTION_EX")
def call_function_ex(tx, instruction):
    kwargs = tx.pop() if instruction.arg & 1 else DictVariable({})
    args = tx.pop()
    callee = tx.pop()
    if CONVENTIONS.null_after_callable and callee is NULL:
        callee = tx.pop()  # 3.13: callable, NULL, args[, kwargs]
    elif tx.stack and tx.stack[-1] is NULL:
        tx.pop()  # up to 3.12: NULL, callable, args[, kwargs]
    if not isinstance(kwargs, DictVariable):
        raise graph_break("UB117", f"`**` unpacking of {kwargs.describe()}")
    keyword = kwargs.entries
    tx.push(protocol.call(tx, callee, protocol.iterate(tx, args), keyword))


@opcode("MAKE_FUNCTION")
def make_function(tx, instruction):
    """From 3.13 on the flags are always 0: SET_FUNCTION_ATTRIBUTE sets each part after."""
    flags = instruction.arg
    code = tx.pop().as_constant()
    function = NestedFunctionVariable(code, tx.f_globals, [], {}, (), code.co_qualname)
    for flag in (0x08, 0x04, 0x02, 0x01):  # the order the parts lie on the stack, top first
        if flags & flag:
            _set_function_attribute(function, flag, tx.pop(), tx)
    tx.push(function)


def _set_function_attribute(function, flag: int, value, tx) -> None:
    if flag == 0x08:
        function.closure = tuple(value.items(tx))
    elif flag == 0x02:
        function.kwdefaults = value.entries
    elif flag == 0x04:  # (name, annotation, ...) pairs: read back by `f.__annotations__`
        function.annotations = value.items(tx)
    elif flag == 0x01:
        function.defaults = value.items(tx)


@opcode("SET_FUNCTION_ATTRIBUTE", versions=(PY313,))
def set_function_attribute(tx, instruction):
    function = tx.pop()
    _set_function_attribute(function, instruction.arg, tx.pop(), tx)
    tx.push(function)


def _stop_iteration_error(tx, value):
    """A ``StopIteration`` escaping a generator's body becomes a ``RuntimeError`` (PEP 479);
    any other exception passes unchanged."""
    raw = exception_of(tx, value)
    if isinstance(raw, StopIteration):
        error = RuntimeError("generator raised StopIteration")
        error.__cause__ = raw
        return tx.wrap(error)
    return value


def _refuse(code: str, what: str):
    def handler(tx, value):
        raise graph_break(code, what)

    return handler


# CALL_INTRINSIC_1's functions by number (CPython's Include/internal/pycore_intrinsics.h).
INTRINSICS_1 = {
    1: _refuse("UB100", "interactive printing (INTRINSIC_PRINT)"),
    2: _refuse("UB111", "`from ... import *` inside a function"),
    3: _stop_iteration_error,
    4: _refuse("UB106", "async_gen_wrap (generators and coroutines)"),
    5: lambda tx, value: apply_unary(tx, operator.pos, value),
    6: lambda tx, value: TupleVariable(list(value.elements)),
}
_GENERIC_SYNTAX = "type parameters (`def f[T](...)`, `type X = ...`: PEP 695)"


@opcode("CALL_INTRINSIC_1", versions=since((3, 12)))
def call_intrinsic_1(tx, instruction):
    handler = INTRINSICS_1.get(int(instruction.arg), _refuse("UB112", _GENERIC_SYNTAX))
    tx.push(handler(tx, tx.pop()))


@opcode("CALL_INTRINSIC_2", versions=since((3, 12)))
def call_intrinsic_2(tx, instruction):
    if int(instruction.arg) == 1:  # INTRINSIC_PREPARE_RERAISE_STAR
        raise graph_break("UB104", "`except*` (exception groups) is not supported")
    raise graph_break("UB112", _GENERIC_SYNTAX)
