"""Arithmetic, comparisons, identity and membership.

Constants fold natively (an exception there is the program's own, refused as UB104);
list/tuple concatenation and repetition act on the element trackers; everything else — tensors
and symbolic sizes — is a leaf call of the ``operator`` function, so PyTorch records the ops
and our SymNode records the guards.
"""
from __future__ import annotations

import operator

from ..protocol import call_special, iterate
from ..variables.base import IDENTITY_ATTRIBUTES
from ..variables.builder import wrap
from ..variables.builtin_methods import call_natively
from ..variables.constant import ConstantVariable, Identity, IdentityVariable
from ..variables.containers import (
    DictVariable,
    DictViewVariable,
    ListVariable,
    SequenceVariable,
    check_mutable,
    dict_key,
)
from ..variables.nn_module import NNModuleVariable
from ..variables.objects import NewObjectVariable, ObjectVariable
from ..variables.tensor import SymbolicVariable, TensorVariable
from .registry import guards_assert, opcode
from .versions import PY311

BINARY = {
    "ADD": ("+", operator.add), "SUBTRACT": ("-", operator.sub), "MULTIPLY": ("*", operator.mul),
    "TRUE_DIVIDE": ("/", operator.truediv), "FLOOR_DIVIDE": ("//", operator.floordiv),
    "REMAINDER": ("%", operator.mod), "POWER": ("**", operator.pow),
    "MATRIX_MULTIPLY": ("@", operator.matmul), "LSHIFT": ("<<", operator.lshift),
    "RSHIFT": (">>", operator.rshift), "AND": ("&", operator.and_), "OR": ("|", operator.or_),
    "XOR": ("^", operator.xor),
}
INPLACE = {"+": operator.iadd, "-": operator.isub, "*": operator.imul, "/": operator.itruediv,
           "//": operator.ifloordiv, "%": operator.imod, "**": operator.ipow,
           "@": operator.imatmul, "<<": operator.ilshift, ">>": operator.irshift,
           "&": operator.iand, "|": operator.ior, "^": operator.ixor}
FUNCTIONS = {symbol: fn for symbol, fn in BINARY.values()}
COMPARE = {"LT": operator.lt, "LE": operator.le, "EQ": operator.eq, "NE": operator.ne,
           "GT": operator.gt, "GE": operator.ge}


def apply_binary(tx, symbol: str, left, right, inplace: bool = False):
    """``left <symbol> right`` (``inplace``: the augmented form ``left <symbol>= right``)."""
    fn = INPLACE[symbol] if inplace else FUNCTIONS[symbol]
    if left.is_constant() and right.is_constant() and not isinstance(left, ListVariable):
        result = _fold(tx, fn, left.as_constant(), right.as_constant())
        for operand in (left, right):  # `flag + id(x)`: bool's own `+` gives a plain int
            if isinstance(operand, IdentityVariable) and type(result.as_constant()) is int:
                return IdentityVariable(Identity.of(result.as_constant(), operand.value.frames,
                                                    operand.value.origin))
        return result
    sequence = _sequence_op(tx, symbol, left, right, inplace)
    if sequence is not None:
        return sequence
    sets = _set_values(left, right)
    if sets is not None:  # sets holding tensors or objects: on the sets as they hold them
        if inplace and type(sets[0]) is set:
            check_mutable(tx, left, f"`{symbol}=`")
        result = call_natively(tx, fn, list(sets), {})
        return left if result is sets[0] else tx.wrap(result)
    return tx.call_leaf(fn, [left, right], {})


def _set_values(left, right) -> tuple | None:
    """The Python sets two operands hold (a set the trace made holds ``TrackedKey``s for its
    tensors and objects: ``constant.SetVariable``), or None when either is no set."""
    values = (getattr(left, "value", None), getattr(right, "value", None))
    if all(isinstance(v, (set, frozenset)) for v in values):
        return values
    return None


def _fold(tx, fn, a, b):
    try:
        return wrap(tx, fn(a, b))
    except Exception as exc:  # e.g. ZeroDivisionError: raised by the program itself
        raise tx.user_exception(exc) from None


def _sequence_op(tx, symbol, left, right, inplace):
    if isinstance(left, SequenceVariable):
        if inplace and isinstance(left, ListVariable):
            check_mutable(tx, left, f"`{symbol}=`")
        if symbol == "+" and isinstance(right, SequenceVariable):
            if inplace and isinstance(left, ListVariable):
                left.elements.extend(right.elements)
                return left
            return left.rebuild(left.elements + right.elements)
        if symbol == "+" and inplace and isinstance(left, ListVariable):
            left.elements.extend(iterate(tx, right))
            return left
        if symbol == "*" and right.is_constant():
            elements = _repeated(tx, left.elements, right.as_constant())
            if inplace and isinstance(left, ListVariable):
                left.elements[:] = elements
                return left
            return left.rebuild(elements)
    if symbol == "*" and isinstance(right, SequenceVariable) and left.is_constant():
        return right.rebuild(_repeated(tx, right.elements, left.as_constant()))
    return None


def _repeated(tx, elements: list, count) -> list:
    """``elements * count``; a count that is no integer is the program's TypeError."""
    if not hasattr(type(count), "__index__"):
        raise tx.user_exception(TypeError(
            f"can't multiply sequence by non-int of type '{type(count).__name__}'"))
    return elements * count


@opcode("BINARY_OP")
def binary_op(tx, instruction):
    name = instruction.arg.name
    inplace = name.startswith("INPLACE_")
    symbol = BINARY[name.removeprefix("INPLACE_")][0]
    right = tx.pop()
    left = tx.pop()
    tx.push(apply_binary(tx, symbol, left, right, inplace))


def apply_unary(tx, fn, value):
    """``fn(value)`` for a unary operator: folded on a constant, a leaf call otherwise."""
    if value.is_constant():
        return _fold(tx, lambda a, _: fn(a), value.as_constant(), None)
    return tx.call_leaf(fn, [value], {})


def _unary(fn):
    def handler(tx, instruction):
        tx.push(apply_unary(tx, fn, tx.pop()))

    return handler


opcode("UNARY_NEGATIVE")(_unary(operator.neg))
opcode("UNARY_POSITIVE", versions=(PY311,))(_unary(operator.pos))  # 3.12: an intrinsic
opcode("UNARY_INVERT")(_unary(operator.invert))


@opcode("UNARY_NOT")
def unary_not(tx, instruction):
    tx.push(ConstantVariable(not tx.pop().truth(tx)))


def compare(tx, name: str, left, right):
    fn = COMPARE[name]
    if left.is_constant() and right.is_constant():
        return _fold(tx, fn, left.as_constant(), right.as_constant())
    if name in ("EQ", "NE") and _opaque(left, right):
        return _object_equality(tx, name, left, right)
    sets = _set_values(left, right)
    if sets is not None:
        return ConstantVariable(call_natively(tx, fn, list(sets), {}))
    if name in ("EQ", "NE") and any(isinstance(v, DictViewVariable) and v.kind == "values"
                                    for v in (left, right)):
        same = is_same(left, right)  # a values view equals only itself
        return ConstantVariable(same if name == "EQ" else not same)
    return tx.call_leaf(fn, [left, right], {})


def _opaque(left, right) -> bool:
    kinds = (NNModuleVariable, ObjectVariable)
    return isinstance(left, kinds) or isinstance(right, kinds)


def _object_equality(tx, name: str, left, right):
    """``left == right`` / ``!=`` where one side is an object from outside the trace (a
    ``TreeSpec``, a config, a module), as Python's rich comparison goes: the left class's
    ``__eq__``/``__ne__`` (``__ne__`` inherited from ``object`` inverts ``__eq__``), then the
    right's reflected one, each interpreted when written in Python; identity when neither
    defines one (or both answer NotImplemented)."""
    for first, second in ((left, right), (right, left)):
        if not isinstance(first, (ObjectVariable, NNModuleVariable)):
            continue
        value = first.value if isinstance(first, ObjectVariable) else first.module
        kind = type(value)
        if name == "NE" and kind.__ne__ is not object.__ne__:
            answer = call_special(tx, first, value, "__ne__", [second])
            if answer is not None and not _not_implemented(answer):
                return answer
        if kind.__eq__ is not object.__eq__:
            answer = call_special(tx, first, value, "__eq__", [second])
            if answer is not None and not _not_implemented(answer):
                return answer if name == "EQ" else ConstantVariable(not answer.truth(tx))
    same = is_same(left, right)
    return ConstantVariable(same if name == "EQ" else not same)


def _not_implemented(answer) -> bool:
    return answer.is_constant() and answer.as_constant() is NotImplemented


@opcode("COMPARE_OP")
def compare_op(tx, instruction):
    """``left <op> right``; 3.13's ``_CAST`` forms also convert the result to bool (a
    comparison that feeds a branch), as ``TO_BOOL`` would."""
    right = tx.pop()
    left = tx.pop()
    name = instruction.arg.name
    result = compare(tx, name.removesuffix("_CAST"), left, right)
    if name.endswith("_CAST") and not (isinstance(result, (TensorVariable, SymbolicVariable))
                                       and guards_assert(tx, 1)):  # an assert checks it later
        result = ConstantVariable(result.truth(tx))
    tx.push(result)


def is_same(a, b) -> bool:
    """Python's ``a is b`` on trackers."""
    if a is b:
        return True
    if a.is_constant() and b.is_constant():
        return a.as_constant() is b.as_constant()
    for attribute in IDENTITY_ATTRIBUTES:  # fn: a function read twice
        if hasattr(a, attribute) and hasattr(b, attribute) and type(a) is type(b):
            return getattr(a, attribute) is getattr(b, attribute)
    return False


@opcode("IS_OP")
def is_op(tx, instruction):
    right = tx.pop()
    left = tx.pop()
    tx.push(ConstantVariable(is_same(left, right) != bool(instruction.arg)))


def contains(tx, item, container) -> bool:
    if isinstance(container, (ObjectVariable, NewObjectVariable)):
        result = container.special(tx, "__contains__", [item])
        if result is not None:
            return result.truth(tx)
    if isinstance(container, DictVariable):
        return dict_key(item, tx) in container.entries
    if isinstance(getattr(container, "value", None), (set, frozenset)):
        return call_natively(tx, operator.contains, [container.value, dict_key(item, tx)], {})
    if isinstance(container, NNModuleVariable):
        return item.as_constant() in container.module
    if isinstance(container, TensorVariable):
        return tx.call_leaf(operator.contains, [container, item], {}).truth(tx)
    if container.is_constant() and item.is_constant():
        return item.as_constant() in container.as_constant()
    return any(compare(tx, "EQ", element, item).truth(tx) if not is_same(element, item) else True
               for element in iterate(tx, container))


@opcode("CONTAINS_OP")
def contains_op(tx, instruction):
    container = tx.pop()
    item = tx.pop()
    tx.push(ConstantVariable(contains(tx, item, container) != bool(instruction.arg)))
