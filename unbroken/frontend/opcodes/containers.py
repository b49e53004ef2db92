"""Building, unpacking, subscripting and formatting: tuples, lists, dicts, sets, slices,
strings."""
from __future__ import annotations

import operator

from ...symbolic.diagnostics.catalogue import graph_break
from ..builtins import call_builtin
from ..protocol import iterate, subscript
from ..variables.constant import ConstantVariable
from ..variables.containers import (
    DictVariable,
    ListVariable,
    SliceVariable,
    TupleVariable,
    check_mutable,
    dict_key,
)
from ..variables.ndarray import NdarrayVariable
from ..variables.objects import NewObjectVariable, ObjectVariable
from ..variables.tensor import TensorVariable
from ..variables.text import format_text, join_text
from .registry import opcode
from .versions import PY311, PY313, since, until


@opcode("BUILD_TUPLE")
def build_tuple(tx, instruction):
    tx.push(TupleVariable(tx.popn(instruction.arg)))


@opcode("BUILD_LIST")
def build_list(tx, instruction):
    tx.push(ListVariable(tx.popn(instruction.arg)))


@opcode("BUILD_SET")
def build_set(tx, instruction):
    tx.push(call_builtin(tx, set, [TupleVariable(tx.popn(instruction.arg))], {}))


@opcode("BUILD_MAP")
def build_map(tx, instruction):
    flat = tx.popn(2 * instruction.arg)
    tx.push(DictVariable({dict_key(flat[i], tx): flat[i + 1] for i in range(0, len(flat), 2)}))


@opcode("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx, instruction):
    keys = tx.pop().as_constant()
    values = tx.popn(instruction.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


@opcode("BUILD_STRING")
def build_string(tx, instruction):
    tx.push(join_text(tx, tx.popn(instruction.arg)))


def _slice(parts: list):
    """``slice(*parts)``: a constant when every part is one."""
    if len(parts) == 2:
        parts.append(ConstantVariable(None))
    slice_var = SliceVariable(parts)
    return ConstantVariable(slice_var.as_constant()) if slice_var.is_constant() else slice_var


@opcode("BUILD_SLICE")
def build_slice(tx, instruction):
    tx.push(_slice(tx.popn(instruction.arg)))


@opcode("BINARY_SLICE", versions=since((3, 12)))
def binary_slice(tx, instruction):
    """``container[start:stop]`` in one instruction (3.12)."""
    start, stop = tx.popn(2)
    tx.push(subscript(tx, tx.pop(), _slice([start, stop])))


@opcode("STORE_SLICE", versions=since((3, 12)))
def store_slice(tx, instruction):
    """``container[start:stop] = value`` in one instruction (3.12)."""
    start, stop = tx.popn(2)
    container = tx.pop()
    store_item(tx, container, _slice([start, stop]), tx.pop())


@opcode("LIST_APPEND")
def list_append(tx, instruction):
    value = tx.pop()
    tx.stack[-instruction.arg].elements.append(value)


@opcode("LIST_EXTEND")
def list_extend(tx, instruction):
    values = tx.pop()
    tx.stack[-instruction.arg].elements.extend(iterate(tx, values))


@opcode("LIST_TO_TUPLE", versions=(PY311,))
def list_to_tuple(tx, instruction):
    tx.push(TupleVariable(tx.pop().elements))


@opcode("SET_ADD", "SET_UPDATE")
def set_add(tx, instruction):
    value = tx.pop()
    target = tx.stack[-instruction.arg]
    items = [value] if instruction.name == "SET_ADD" else value.items(tx)
    for item in items:
        key = tx.key_of(item)
        try:
            target.value.add(key)
        except TypeError as error:  # unhashable: a list, a dict
            raise tx.user_exception(error) from None


@opcode("MAP_ADD")
def map_add(tx, instruction):
    value = tx.pop()
    key = tx.pop()
    tx.stack[-instruction.arg].entries[dict_key(key, tx)] = value


@opcode("DICT_UPDATE", "DICT_MERGE")
def dict_update(tx, instruction):
    other = tx.pop()
    target = tx.stack[-instruction.arg]
    if not isinstance(other, DictVariable):
        raise graph_break("UB117", f"`**` unpacking of {other.describe()}")
    if instruction.name == "DICT_MERGE":
        for key in other.entries:
            if key in target.entries:
                raise tx.user_exception(TypeError(f"got multiple values for keyword argument "
                                                  f"'{key}'"))
    target.entries.update(other.entries)


@opcode("UNPACK_SEQUENCE")
def unpack_sequence(tx, instruction):
    items = iterate(tx, tx.pop())
    if len(items) != instruction.arg:
        raise tx.user_exception(ValueError(f"expected {instruction.arg} values to unpack, got "
                                           f"{len(items)}"))
    for item in reversed(items):
        tx.push(item)


@opcode("UNPACK_EX")
def unpack_ex(tx, instruction):
    before, after = instruction.arg & 0xFF, instruction.arg >> 8
    items = iterate(tx, tx.pop())
    if len(items) < before + after:
        raise tx.user_exception(ValueError("not enough values to unpack"))
    middle = ListVariable(items[before:len(items) - after])
    for item in reversed(items[:before] + [middle] + items[len(items) - after:]):
        tx.push(item)


@opcode("BINARY_SUBSCR")
def binary_subscr(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    tx.push(subscript(tx, container, index))


@opcode("STORE_SUBSCR")
def store_subscr(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    store_item(tx, container, index, tx.pop())


def store_item(tx, container, index, value) -> None:
    """``container[index] = value``."""
    if isinstance(container, (ObjectVariable, NewObjectVariable)):
        if container.special(tx, "__setitem__", [index, value]) is not None:
            return
    if isinstance(container, TensorVariable):  # an in-place op: the recorder's (as `add_`)
        tx.call_leaf(operator.setitem, [container, index, value], {})
        return
    check_mutable(tx, container, "item assignment")
    if isinstance(container, ListVariable):
        key = index.as_constant()
        if isinstance(key, slice):
            container.elements[key] = iterate(tx, value)
        else:
            container.elements[key] = value
    elif isinstance(container, DictVariable):
        container.entries[dict_key(index, tx)] = value
    elif isinstance(container, NdarrayVariable):  # an array: refused there
        tx.call_leaf(operator.setitem, [container, index, value], {})
    else:
        raise graph_break("UB107", f"item assignment on {container.describe()}")


@opcode("DELETE_SUBSCR")
def delete_subscr(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    if isinstance(container, (ObjectVariable, NewObjectVariable)):
        if container.special(tx, "__delitem__", [index]) is not None:
            return
    check_mutable(tx, container, "item deletion")
    if isinstance(container, ListVariable):
        del container.elements[index.as_constant()]
    elif isinstance(container, DictVariable):
        key = dict_key(index, tx)
        if key not in container.entries:
            raise tx.user_exception(KeyError(key))
        container.entries.pop(key)
    else:
        raise graph_break("UB107", f"item deletion on {container.describe()}")


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


@opcode("FORMAT_VALUE", versions=until((3, 12)))
def format_value(tx, instruction):
    flags = instruction.arg
    spec = tx.pop().as_constant() if flags & 0x04 else ""
    value = tx.pop()
    tx.push(format_text(tx, value, _CONVERSIONS[flags & 0x03], spec))


@opcode("CONVERT_VALUE", versions=(PY313,))
def convert_value(tx, instruction):
    """3.13: an f-string's ``!s``/``!r``/``!a``, before its formatting."""
    tx.push(format_text(tx, tx.pop(), _CONVERSIONS[int(instruction.arg)], ""))


@opcode("FORMAT_SIMPLE", versions=(PY313,))
def format_simple(tx, instruction):
    tx.push(format_text(tx, tx.pop(), None, ""))


@opcode("FORMAT_WITH_SPEC", versions=(PY313,))
def format_with_spec(tx, instruction):
    spec = tx.pop().as_constant()
    tx.push(format_text(tx, tx.pop(), None, spec))
