"""Control flow: jumps and branches, iteration, return, with-blocks, exceptions, generators,
and the instructions that are refused (imports, class bodies, async)."""
from __future__ import annotations

import importlib.util
import sys

import torch

from ...symbolic.diagnostics.catalogue import GraphBreakError, graph_break
from ..protocol import special_method
from ..variables.base import VariableTracker
from ..variables.builder import wrap
from ..variables.constant import ConstantVariable
from ..variables.grad_mode import GradModeVariable
from ..variables.objects import (
    ContextManagerVariable,
    IgnoredContextVariable,
    NewObjectVariable,
    iterator_of,
    next_of,
    send_to,
    yield_from_iterator,
)
from ..variables.tensor import SymbolicVariable, TensorVariable
from .arithmetic import is_same
from .registry import CONVENTIONS, guards_assert, opcode
from .versions import PY311, PY313, since


@opcode("JUMP_FORWARD", "JUMP_BACKWARD", "JUMP_BACKWARD_NO_INTERRUPT")
def jump(tx, instruction):
    tx.jump(instruction)


def _branch(jump_if: bool):
    def handler(tx, instruction):
        condition = tx.pop()
        if guards_assert(tx) and _assert_at_run_time(tx, condition, jump_if):
            tx.jump(instruction)  # the assertion holds from here on, checked by the program
        elif _truth(tx, condition) is jump_if:
            tx.jump(instruction)

    return handler


def _truth(tx, condition) -> bool:
    """``condition.truth(tx)``; when it is a size question deciding which operand an
    ``and``/``or`` gives (``is_causal = q_len > 1 and mask is None``), the size-1 audit
    learns of the answer only if the other pick could give another value (``_picks_agree``):
    ``q_len == 1`` then changes nothing, and needs no trace at 1."""
    if not isinstance(condition, SymbolicVariable) or \
            not isinstance(condition.value, torch.SymBool):
        return condition.truth(tx)  # most branches: a constant, nothing to hold
    audit = tx.output.recorder.size_one
    site = _value_pick(tx) if audit.active else None
    if site is None:
        return condition.truth(tx)
    with audit.held() as notes:
        outcome = condition.truth(tx)
    if notes:
        join, start, jump_if = site
        if _picks_agree(tx, join, start, jump_if):
            audit.drop(notes)
            if outcome is jump_if and tx.stack and tx.stack[-1] is condition:
                # the value is the question itself, ``jump_if`` at every admitted size (the
                # trace's by its guard, 1 by the other pick): the bool eager computes, so
                # later reads do not ask the question again
                tx.stack[-1] = ConstantVariable(jump_if)
        else:
            audit.release(notes)
    return outcome


def _value_pick(tx) -> tuple[int, int, bool] | None:
    """``(join, start, jump_if)`` when the instruction being run decides an ``and``/``or``
    that computes a value: the condition itself is the value when the branch jumps to
    ``join`` (when its truth is ``jump_if``); otherwise the operands from ``start`` give it.
    3.11: ``JUMP_IF_FALSE_OR_POP``; 3.12: ``COPY 1; POP_JUMP_IF_FALSE; POP_TOP``; 3.13:
    ``COPY 1; TO_BOOL; POP_JUMP_IF_FALSE; POP_TOP`` (``TRUE`` for ``or``). None otherwise
    (an ``if``'s branch, an ``assert``: decisions of the program)."""
    code, index = tx.instructions, tx.ip - 1
    here = code[index]

    def named(offset, *names):
        at = index + offset
        return 0 <= at < len(code) and code[at].name in names

    copied = named(-1, "COPY") and code[index - 1].arg == 1
    if here.name in ("JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP"):
        return here.target, index + 1, here.name == "JUMP_IF_TRUE_OR_POP"
    if here.name in _POP_JUMPS and copied and named(1, "POP_TOP"):
        return here.target, index + 2, here.name == "POP_JUMP_IF_TRUE"
    if here.name == "TO_BOOL" and copied and named(1, *_POP_JUMPS) and named(2, "POP_TOP"):
        return code[index + 1].target, index + 3, code[index + 1].name == "POP_JUMP_IF_TRUE"
    return None


_POP_JUMPS = ("POP_JUMP_IF_FALSE", "POP_JUMP_IF_TRUE")


def _picks_agree(tx, join: int, start: int, jump_if: bool) -> bool:
    """Whether the operands from ``start`` to ``join`` give the value ``jump_if`` (the bool
    the condition is, where it jumps) without doing anything: only reading locals and
    constants, ``is`` tests, truth tests of constants and the chain's own jumps to ``join``.
    Both picks then leave the same bool at ``join`` with nothing else changed."""
    stack: list = []
    index = start
    while index < join:
        instruction = tx.instructions[index]
        name = instruction.name
        if name in ("LOAD_FAST", "LOAD_FAST_CHECK", "LOAD_FAST_LOAD_FAST"):
            names = instruction.arg if name == "LOAD_FAST_LOAD_FAST" else (instruction.arg,)
            for local in names:
                value = tx.locals.get(getattr(local, "name", local))
                if value is None:
                    return False
                stack.append(value)
        elif name == "LOAD_CONST":
            if type(instruction.arg) not in _PLAIN_CONSTANTS:
                return False
            stack.append(ConstantVariable(instruction.arg))
        elif name == "IS_OP" and len(stack) >= 2:
            right, left = stack.pop(), stack.pop()
            stack.append(ConstantVariable(is_same(left, right) != bool(instruction.arg)))
        elif name == "COPY" and instruction.arg == 1 and stack:
            stack.append(stack[-1])
        elif name == "POP_TOP" and stack:
            stack.pop()
        elif name in ("TO_BOOL", "UNARY_NOT") and stack:
            truth = _constant_truth(stack.pop())
            if truth is None:
                return False
            stack.append(ConstantVariable(truth if name == "TO_BOOL" else not truth))
        elif name in _POP_JUMPS + ("JUMP_IF_FALSE_OR_POP", "JUMP_IF_TRUE_OR_POP") and stack:
            truth = _constant_truth(stack[-1])
            if truth is None or instruction.target != join:
                return False
            if truth is name.startswith(("POP_JUMP_IF_TRUE", "JUMP_IF_TRUE")):
                if name in _POP_JUMPS:
                    stack.pop()  # the copy tested; the value stays
                break
            stack.pop()  # goes on: the tested value (or its copy) is dropped
        elif name not in ("NOP", "EXTENDED_ARG", "CACHE"):
            return False
        index += 1
    return len(stack) == 1 and stack[0].is_constant() and stack[0].as_constant() is jump_if


_PLAIN_CONSTANTS = (bool, int, float, str, type(None))


def _constant_truth(value) -> bool | None:
    if value.is_constant() and type(value.as_constant()) in _PLAIN_CONSTANTS:
        return bool(value.as_constant())
    return None


def _assert_at_run_time(tx, condition, holds_if: bool) -> bool:
    """``assert`` on tensor data becomes a check the program makes when it runs, as
    torch.export makes it: a one-element tensor condition an ``aten._assert_async`` node, a
    condition on a value read from a tensor (``.item()``) an ``aten._assert_scalar`` (through
    ``torch._check``, which also teaches the shape environment the fact). False (nothing
    recorded) for a condition known now, which the branch then decides."""
    if isinstance(condition, TensorVariable):
        if condition.meta.numel() != 1:  # eager's bool() refuses it: the branch reports it
            return False
        if not holds_if:
            condition = tx.call_leaf(torch.logical_not, [condition], {})
        tx.call_leaf(torch.ops.aten._assert_async.msg, [condition, ConstantVariable(
            _assert_message(tx))], {})
        return True
    if isinstance(condition, SymbolicVariable) and isinstance(condition.value, torch.SymBool) \
            and _data_dependent(tx, condition):
        if not holds_if:
            condition = tx.call_leaf(torch.sym_not, [condition], {})
        tx.call_leaf(torch._check, [condition], {})
        return True
    return False


def _assert_message(tx) -> str:
    """The assert's own message when it is a constant string (``assert c, "negative"``: the
    instruction after ``LOAD_ASSERTION_ERROR`` loads it), as eager's AssertionError says it;
    else ``"assertion error"`` (a message computed at run time is not part of the program)."""
    index = tx.ip + 1
    if index < len(tx.instructions):
        following = tx.instructions[index]
        if following.name == "LOAD_CONST" and isinstance(following.arg, str):
            return following.arg
    return "assertion error"


def _data_dependent(tx, condition) -> bool:
    """The truth of ``condition`` cannot be decided from the sizes (it reads tensor data)."""
    try:
        with tx.output.leaf_errors():
            bool(condition.value)
    except GraphBreakError as error:
        if error.code == "UB105":
            return True
        raise
    return False


opcode("POP_JUMP_FORWARD_IF_TRUE", "POP_JUMP_BACKWARD_IF_TRUE", versions=(PY311,))(
    _branch(True))
opcode("POP_JUMP_FORWARD_IF_FALSE", "POP_JUMP_BACKWARD_IF_FALSE", versions=(PY311,))(
    _branch(False))
opcode("POP_JUMP_IF_TRUE", versions=since((3, 12)))(_branch(True))
opcode("POP_JUMP_IF_FALSE", versions=since((3, 12)))(_branch(False))


def _is_none(value) -> bool:
    return value.is_constant() and value.as_constant() is None


def _none_branch(jump_if_none: bool):
    def handler(tx, instruction):
        if _is_none(tx.pop()) is jump_if_none:
            tx.jump(instruction)

    return handler


opcode("POP_JUMP_FORWARD_IF_NONE", "POP_JUMP_BACKWARD_IF_NONE", versions=(PY311,))(
    _none_branch(True))
opcode("POP_JUMP_FORWARD_IF_NOT_NONE", "POP_JUMP_BACKWARD_IF_NOT_NONE", versions=(PY311,))(
    _none_branch(False))
opcode("POP_JUMP_IF_NONE", versions=since((3, 12)))(_none_branch(True))
opcode("POP_JUMP_IF_NOT_NONE", versions=since((3, 12)))(_none_branch(False))


@opcode("TO_BOOL", versions=(PY313,))
def to_bool(tx, instruction):
    """3.13: the truth test before a branch or ``not`` is its own instruction. Before an
    ``assert``'s branch a tensor or symbolic condition stays as it is (checked at run time)."""
    value = tx.pop()
    if isinstance(value, (TensorVariable, SymbolicVariable)) and guards_assert(tx, 1):
        tx.push(value)
        return
    tx.push(ConstantVariable(_truth(tx, value)))


def _jump_or_pop(jump_if: bool):
    def handler(tx, instruction):
        if _truth(tx, tx.stack[-1]) is jump_if:
            tx.jump(instruction)
        else:
            tx.pop()

    return handler


opcode("JUMP_IF_TRUE_OR_POP", versions=(PY311,))(_jump_or_pop(True))
opcode("JUMP_IF_FALSE_OR_POP", versions=(PY311,))(_jump_or_pop(False))


@opcode("GET_ITER")
def get_iter(tx, instruction):
    tx.push(iterator_of(tx, tx.pop()))


@opcode("FOR_ITER")
def for_iter(tx, instruction):
    """An exhausted iterator is popped and the loop left past its cleanup instructions (the
    version's ``for_loop_cleanup``: END_FOR from 3.12, and a POP_TOP after it from 3.13)."""
    item = next_of(tx, tx.stack[-1])
    if item is None:
        tx.pop()
        tx.ip = instruction.target + CONVENTIONS.for_loop_cleanup
    else:
        tx.push(item)


@opcode("END_FOR", versions=since((3, 12)))
def end_for(tx, instruction):
    tx.popn(CONVENTIONS.end_for_pops)


@opcode("GET_LEN")
def get_len(tx, instruction):
    """``len()`` of the match subject: an int, or a tracker (an object's ``__len__``)."""
    length = tx.stack[-1].length(tx)
    tx.push(length if isinstance(length, VariableTracker) else ConstantVariable(length))


@opcode("RETURN_VALUE")
def return_value(tx, instruction):
    tx.returned = tx.pop()


@opcode("RETURN_CONST", versions=since((3, 12)))
def return_const(tx, instruction):
    tx.returned = wrap(tx, instruction.arg)


@opcode("RETURN_GENERATOR")
def return_generator(tx, instruction):
    # The call of a generator function returns here; its body runs on each next().
    tx.paused = True


@opcode("YIELD_VALUE")
def yield_value(tx, instruction):
    tx.yielded = tx.pop()
    tx.paused = True


@opcode("BEFORE_WITH")
def before_with(tx, instruction):
    manager = tx.pop()
    if isinstance(manager, (ContextManagerVariable, GradModeVariable, IgnoredContextVariable)):
        exit_fn, entered = manager.enter(tx)
    elif isinstance(manager, NewObjectVariable):  # a user context manager: inline its methods
        cls = type(manager.value)
        enter = special_method(tx, manager, cls, "__enter__")
        exit_fn = special_method(tx, manager, cls, "__exit__")
        if enter is None or exit_fn is None:
            raise tx.user_exception(TypeError(
                f"'{cls.__name__}' object does not support the context manager protocol"))
        entered = enter.call(tx, [], {})
    else:
        raise graph_break("UB110", f"`with` on {manager.describe()}")
    tx.push(exit_fn)
    tx.push(entered)


def exception_of(tx, value) -> BaseException:
    """The exception object that ``raise value`` raises (a class is instantiated)."""
    raw = value.unwrap(tx) if hasattr(value, "unwrap") else None
    if isinstance(raw, type) and issubclass(raw, BaseException):
        return raw()
    if isinstance(raw, BaseException):
        return raw
    return TypeError("exceptions must derive from BaseException")


@opcode("RAISE_VARARGS")
def raise_varargs(tx, instruction):
    values = tx.popn(instruction.arg)
    if not values:  # a bare `raise` re-raises the exception being handled
        if tx.current_exception is None:
            raise tx.user_exception(RuntimeError("No active exception to reraise"))
        raise tx.user_exception(exception_of(tx, tx.current_exception))
    exception = exception_of(tx, values[0])
    if len(values) == 2:  # raise ... from cause
        cause = values[1]
        exception.__cause__ = None if cause.is_constant() and cause.as_constant() is None \
            else exception_of(tx, cause)
        exception.__suppress_context__ = True
    if tx.current_exception is not None:  # raised while handling another: chained, as eager
        context = exception_of(tx, tx.current_exception)
        if context is not exception:
            exception.__context__ = context
    raise tx.user_exception(exception)


@opcode("RERAISE")
def reraise(tx, instruction):
    raise tx.user_exception(exception_of(tx, tx.pop()))


@opcode("PUSH_EXC_INFO")
def push_exc_info(tx, instruction):
    exception = tx.pop()
    tx.push(tx.current_exception or ConstantVariable(None))
    tx.current_exception = exception
    tx.push(exception)


@opcode("POP_EXCEPT")
def pop_except(tx, instruction):
    previous = tx.pop()
    tx.current_exception = None if previous.is_constant() and previous.as_constant() is None \
        else previous


@opcode("CHECK_EXC_MATCH")
def check_exc_match(tx, instruction):
    expected = tx.pop().as_constant()
    raised = exception_of(tx, tx.stack[-1])
    tx.push(ConstantVariable(isinstance(raised, expected)))


@opcode("WITH_EXCEPT_START")
def with_except_start(tx, instruction):
    exit_fn, raised = tx.stack[-4], exception_of(tx, tx.stack[-1])
    tx.push(exit_fn.call(tx, [wrap(tx, type(raised)), tx.stack[-1], ConstantVariable(None)], {}))


@opcode("CHECK_EG_MATCH")
@opcode("PREP_RERAISE_STAR", versions=(PY311,))
def exception_groups(tx, instruction):
    raise graph_break("UB104", "`except*` (exception groups) is not supported")


@opcode("GET_YIELD_FROM_ITER")
def get_yield_from_iter(tx, instruction):
    tx.push(yield_from_iterator(tx, tx.pop()))


@opcode("SEND")
def send(tx, instruction):
    """A step of ``yield from``: the value under the iterator is sent on; what the iterator
    yields replaces it (the YIELD_VALUE that follows yields it on), and once it is done the
    loop is left with what it returned: in place of the iterator in 3.11, above it from
    3.12 (END_SEND, the jump's target, takes the iterator off)."""
    sent = tx.pop()
    yielded, returned = send_to(tx, tx.stack[-1], sent)
    if returned is None:
        tx.push(yielded)
        return
    if tx.instructions[instruction.target].name != "END_SEND":
        tx.pop()
    tx.push(returned)
    tx.jump(instruction)


@opcode("END_SEND", versions=since((3, 12)))
def end_send(tx, instruction):
    del tx.stack[-2]


@opcode("CLEANUP_THROW", versions=since((3, 12)))
def cleanup_throw(tx, instruction):
    """An exception raised at a ``yield from``'s yield (a ``throw()`` the iterator did not
    take): a StopIteration ends the ``yield from`` with its value, anything else is
    raised on."""
    raised = exception_of(tx, tx.stack[-1])
    if not isinstance(raised, StopIteration):
        raise tx.user_exception(raised)
    del tx.stack[-3:]
    tx.push(ConstantVariable(None))
    tx.push(wrap(tx, raised.value))


@opcode("GET_AWAITABLE", "GET_AITER", "GET_ANEXT", "BEFORE_ASYNC_WITH", "END_ASYNC_FOR")
@opcode("ASYNC_GEN_WRAP", versions=(PY311,))
def coroutines(tx, instruction):
    raise graph_break("UB106", f"{instruction.name.lower()} (coroutines)")


@opcode("IMPORT_NAME")
def import_name(tx, instruction):
    """``import x`` of a module that is already imported runs no code: it is a lookup in
    ``sys.modules``. Importing a module for the first time would run it: refused."""
    fromlist = tx.pop().as_constant()
    level = tx.pop().as_constant()
    name = instruction.arg
    if level:
        name = importlib.util.resolve_name("." * level + name, tx.f_globals.get("__package__"))
    if name not in sys.modules:
        raise graph_break("UB111", f"`import {name}` (not imported yet: importing runs its code)")
    module = sys.modules[name] if fromlist else sys.modules[name.partition(".")[0]]
    tx.push(wrap(tx, module))


@opcode("IMPORT_FROM")
def import_from(tx, instruction):
    module = tx.stack[-1].as_constant()
    name = instruction.arg
    if hasattr(module, name):
        tx.push(wrap(tx, getattr(module, name)))
    elif f"{module.__name__}.{name}" in sys.modules:
        tx.push(wrap(tx, sys.modules[f"{module.__name__}.{name}"]))
    else:
        raise graph_break("UB111", f"`from {module.__name__} import {name}` (not imported yet)")


@opcode("IMPORT_STAR", versions=(PY311,))
def import_star(tx, instruction):
    raise graph_break("UB111", "`from ... import *` inside a function")


@opcode("LOAD_BUILD_CLASS")
@opcode("LOAD_LOCALS", "LOAD_FROM_DICT_OR_DEREF", "LOAD_FROM_DICT_OR_GLOBALS",
        versions=since((3, 12)))
def build_class(tx, instruction):
    """A class body (the 3.12 loads run only in class bodies and annotation scopes)."""
    raise graph_break("UB112", "a `class` statement")
