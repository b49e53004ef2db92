"""``match`` statements: the instructions that test a subject against a pattern (CPython 3.11
semantics, ``Python/ceval.c``). Each decides from what the trace knows of the subject: its
eager type (``python_type``), its elements, its attributes. Sequence and mapping patterns then
unpack with the ordinary instructions (``GET_LEN``, ``UNPACK_SEQUENCE``, ``BINARY_SUBSCR``).
"""
from __future__ import annotations

import collections.abc

from ...symbolic.diagnostics.catalogue import TracedException
from ..equivalents import real_class
from ..protocol import read_attribute
from ..variables.constant import ConstantVariable
from ..variables.containers import TupleVariable
from .registry import opcode

# A class pattern with one positional sub-pattern matches these subjects themselves
# (``case int(n):``), as CPython's ``match_class`` does.
_SELF_MATCHING = (bool, bytearray, bytes, dict, float, frozenset, int, list, set, str, tuple)


@opcode("MATCH_SEQUENCE")
def match_sequence(tx, instruction):
    kind = real_class(tx.stack[-1].python_type())  # an equivalent deque is a sequence
    tx.push(ConstantVariable(issubclass(kind, collections.abc.Sequence)
                             and not issubclass(kind, (str, bytes, bytearray))))


@opcode("MATCH_MAPPING")
def match_mapping(tx, instruction):
    tx.push(ConstantVariable(issubclass(real_class(tx.stack[-1].python_type()),
                                        collections.abc.Mapping)))


@opcode("MATCH_KEYS")
def match_keys(tx, instruction):
    """Subject and keys stay; push the values of those keys, or None when one is missing."""
    keys, subject = tx.stack[-1], tx.stack[-2]
    values = []
    for key in keys.items(tx):
        try:
            values.append(subject.getitem(tx, key))
        except TracedException as missing:
            if not isinstance(missing.exception, KeyError):
                raise
            tx.push(ConstantVariable(None))
            return
    tx.push(TupleVariable(values))


@opcode("MATCH_CLASS")
def match_class(tx, instruction):
    """Pop subject, class and keyword names; push the matched attributes, or None."""
    names, cls_tracker, subject = tx.pop(), tx.pop(), tx.pop()
    cls, count = cls_tracker.as_constant(), instruction.arg
    if not isinstance(cls, type):
        raise tx.user_exception(TypeError("called match pattern must be a class"))
    if not issubclass(real_class(subject.python_type()), real_class(cls)):
        tx.push(ConstantVariable(None))
        return
    attributes = _positional_names(tx, cls, count) + list(names.as_constant())
    if len(set(attributes)) != len(attributes):
        raise tx.user_exception(TypeError(f"{cls.__name__}() got multiple sub-patterns for "
                                          f"one attribute"))
    values = []
    for name in attributes:
        value = subject if name == "" else read_attribute(tx, subject, name)
        if value is None:
            tx.push(ConstantVariable(None))
            return
        values.append(value)
    tx.push(TupleVariable(values))


def _positional_names(tx, cls, count: int) -> list:
    """The attribute names of ``count`` positional sub-patterns (``__match_args__``); the empty
    name stands for the subject itself (``case int(n)``)."""
    if count == 0:
        return []
    match_args = getattr(cls, "__match_args__", None)
    if match_args is None and count == 1 and cls in _SELF_MATCHING:
        return [""]
    if match_args is None:
        match_args = ()
    if not isinstance(match_args, tuple):
        raise tx.user_exception(TypeError(f"{cls.__name__}.__match_args__ must be a tuple"))
    if count > len(match_args):
        raise tx.user_exception(TypeError(
            f"{cls.__name__}() accepts {len(match_args)} positional sub-pattern"
            f"{'' if len(match_args) == 1 else 's'} ({count} given)"))
    return list(match_args[:count])
