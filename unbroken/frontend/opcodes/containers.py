"""Building, unpacking, subscripting and formatting: tuples, lists, dicts, sets, slices,
strings."""
from __future__ import annotations

import operator

import torch

from ..graph_breaks import graph_break
from ..variables.constant import ConstantVariable
from ..variables.containers import (DictVariable, ListVariable, SequenceVariable, SliceVariable,
                                    TupleVariable, check_mutable, dict_key)
from ..variables.nn_module import NNModuleVariable
from ..variables.objects import NewObjectVariable, ObjectVariable
from ..variables.tensor import SymbolicVariable, TensorVariable
from ..variables.builder import wrap
from . import opcode


@opcode("BUILD_TUPLE")
def build_tuple(tx, instruction):
    tx.push(TupleVariable(tx.popn(instruction.arg)))


@opcode("BUILD_LIST")
def build_list(tx, instruction):
    tx.push(ListVariable(tx.popn(instruction.arg)))


@opcode("BUILD_SET")
def build_set(tx, instruction):
    from ..builtins import call_builtin

    tx.push(call_builtin(tx, set, [TupleVariable(tx.popn(instruction.arg))], {}))


@opcode("BUILD_MAP")
def build_map(tx, instruction):
    flat = tx.popn(2 * instruction.arg)
    tx.push(DictVariable({dict_key(flat[i]): flat[i + 1] for i in range(0, len(flat), 2)}))


@opcode("BUILD_CONST_KEY_MAP")
def build_const_key_map(tx, instruction):
    keys = tx.pop().as_constant()
    values = tx.popn(instruction.arg)
    tx.push(DictVariable(dict(zip(keys, values))))


@opcode("BUILD_STRING")
def build_string(tx, instruction):
    parts = tx.popn(instruction.arg)
    tx.push(ConstantVariable("".join(p.as_constant() for p in parts)))


@opcode("BUILD_SLICE")
def build_slice(tx, instruction):
    parts = tx.popn(instruction.arg)
    if len(parts) == 2:
        parts.append(ConstantVariable(None))
    slice_var = SliceVariable(parts)
    tx.push(ConstantVariable(slice_var.as_constant()) if slice_var.is_constant() else slice_var)


@opcode("LIST_APPEND")
def list_append(tx, instruction):
    value = tx.pop()
    tx.stack[-instruction.arg].elements.append(value)


@opcode("LIST_EXTEND")
def list_extend(tx, instruction):
    values = tx.pop()
    tx.stack[-instruction.arg].elements.extend(values.items(tx))


@opcode("LIST_TO_TUPLE")
def list_to_tuple(tx, instruction):
    tx.push(TupleVariable(tx.pop().elements))


@opcode("SET_ADD", "SET_UPDATE")
def set_add(tx, instruction):
    value = tx.pop()
    target = tx.stack[-instruction.arg]
    items = [value] if instruction.name == "SET_ADD" else value.items(tx)
    for item in items:
        target.value.add(item.as_constant())


@opcode("MAP_ADD")
def map_add(tx, instruction):
    value = tx.pop()
    key = tx.pop()
    tx.stack[-instruction.arg].entries[dict_key(key)] = value


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
    items = tx.pop().items(tx)
    if len(items) != instruction.arg:
        raise tx.user_exception(ValueError(f"expected {instruction.arg} values to unpack, got "
                                           f"{len(items)}"))
    for item in reversed(items):
        tx.push(item)


@opcode("UNPACK_EX")
def unpack_ex(tx, instruction):
    before, after = instruction.arg & 0xFF, instruction.arg >> 8
    items = tx.pop().items(tx)
    if len(items) < before + after:
        raise tx.user_exception(ValueError("not enough values to unpack"))
    middle = ListVariable(items[before:len(items) - after])
    for item in reversed(items[:before] + [middle] + items[len(items) - after:]):
        tx.push(item)


def subscript(tx, container, index):
    """``container[index]``."""
    if isinstance(container, (SequenceVariable, DictVariable, NNModuleVariable)) \
            and index.is_constant():
        return container.getitem(tx, index)
    if container.is_constant() and index.is_constant():
        try:
            return wrap(tx, container.as_constant()[index.as_constant()])
        except Exception as exc:
            raise tx.user_exception(exc)
    if isinstance(container, (ObjectVariable, NewObjectVariable)):
        from ..variables.objects import call_protocol

        result = call_protocol(tx, container, container.value, "__getitem__", [index])
        if result is not None:
            return result
    if isinstance(container, TensorVariable) and _has_symbolic(index):
        return _symbolic_tensor_index(tx, container, index)
    return tx.call_leaf(operator.getitem, [container, index], {})


def _has_symbolic(index) -> bool:
    if isinstance(index, SymbolicVariable):
        return True
    parts = index.parts if isinstance(index, SliceVariable) else getattr(index, "elements", ())
    return any(_has_symbolic(p) for p in parts)


def _symbolic_tensor_index(tx, tensor, index):
    """``x[...]`` whose index holds symbolic sizes, as explicit ``select``/``slice``/
    ``unsqueeze`` calls: Python's indexing would turn each symbolic int into a guard on its
    example value, these ops keep it symbolic."""
    parts = index.elements if isinstance(index, TupleVariable) else [index]
    if any(isinstance(p, TensorVariable) or
           (p.is_constant() and p.as_constant() is Ellipsis) for p in parts):
        return tx.call_leaf(operator.getitem, [tensor, index], {})  # advanced indexing
    result, dim = tensor, 0
    for part in parts:
        if part.is_constant() and part.as_constant() is None:
            result = tx.call_leaf(torch.unsqueeze, [result, ConstantVariable(dim)], {})
            dim += 1
        elif isinstance(part, SliceVariable) or (part.is_constant()
                                                 and isinstance(part.as_constant(), slice)):
            bounds = part.parts if isinstance(part, SliceVariable) else \
                [ConstantVariable(b) for b in (part.as_constant().start, part.as_constant().stop,
                                               part.as_constant().step)]
            start, stop, step = (None if b.is_constant() and b.as_constant() is None else b
                                 for b in bounds)
            result = tx.call_leaf(torch.ops.aten.slice.Tensor, [
                result, ConstantVariable(dim), start or ConstantVariable(None),
                stop or ConstantVariable(None), step or ConstantVariable(1)], {})
            dim += 1
        else:
            result = tx.call_leaf(torch.select, [result, ConstantVariable(dim), part], {})
    return result


@opcode("BINARY_SUBSCR")
def binary_subscr(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    tx.push(subscript(tx, container, index))


@opcode("STORE_SUBSCR")
def store_subscr(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    value = tx.pop()
    if isinstance(container, (ObjectVariable, NewObjectVariable)):
        from ..variables.objects import call_protocol

        if call_protocol(tx, container, container.value, "__setitem__", [index, value]) \
                is not None:
            return
    check_mutable(tx, container, "item assignment")
    if isinstance(container, ListVariable):
        key = index.as_constant()
        if isinstance(key, slice):
            container.elements[key] = value.items(tx)
        else:
            container.elements[key] = value
    elif isinstance(container, DictVariable):
        container.entries[dict_key(index)] = value
    elif isinstance(container, TensorVariable):
        tx.call_leaf(operator.setitem, [container, index, value], {})
    else:
        raise graph_break("UB107", f"item assignment on {container.describe()}")


@opcode("DELETE_SUBSCR")
def delete_subscr(tx, instruction):
    index = tx.pop()
    container = tx.pop()
    if isinstance(container, (ObjectVariable, NewObjectVariable)):
        from ..variables.objects import call_protocol

        if call_protocol(tx, container, container.value, "__delitem__", [index]) is not None:
            return
    check_mutable(tx, container, "item deletion")
    if isinstance(container, ListVariable):
        del container.elements[index.as_constant()]
    elif isinstance(container, DictVariable):
        container.entries.pop(dict_key(index))
    else:
        raise graph_break("UB107", f"item deletion on {container.describe()}")


_CONVERSIONS = {0: None, 1: str, 2: repr, 3: ascii}


@opcode("FORMAT_VALUE")
def format_value(tx, instruction):
    flags = instruction.arg
    spec = tx.pop().as_constant() if flags & 0x04 else ""
    value = tx.pop()
    from ..builtins import concrete

    raw = concrete(tx, value)
    convert = _CONVERSIONS[flags & 0x03]
    tx.push(ConstantVariable(format(convert(raw) if convert else raw, spec)))
