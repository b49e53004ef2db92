"""Methods of list/tuple/dict trackers (``xs.append(t)``, ``d.items()``, ...).

Methods that only read constant data run natively on the constant form; methods that move
trackers around are implemented here on the element lists, so tensors inside stay tracked.
"""
from __future__ import annotations

from ..graph_breaks import graph_break
from .base import VariableTracker
from .constant import ConstantVariable
from .containers import DictVariable, ListVariable, TupleVariable, check_mutable, dict_key

__all__ = ["call_container_method"]

_NONE = ConstantVariable(None)


def call_container_method(tx, container, name: str, args: list, kwargs: dict) -> VariableTracker:
    table = _DICT_METHODS if isinstance(container, DictVariable) else _SEQUENCE_METHODS
    handler = table.get(name)
    if handler is not None:
        return handler(tx, container, *args, **kwargs)
    if container.is_constant() and all(a.is_constant() for a in args):
        from .builder import wrap

        method = getattr(container.as_constant(), name)
        return wrap(tx, method(*(a.as_constant() for a in args),
                               **{k: v.as_constant() for k, v in kwargs.items()}))
    raise graph_break("UB117", f"the method `{name}` of {container.describe()} is not supported "
                      "on values that hold tensors")


def _mutable(tx, container, name):
    if not isinstance(container, (ListVariable, DictVariable)):
        raise tx.user_exception(AttributeError(f"'tuple' object has no attribute '{name}'"))
    check_mutable(tx, container, f"`.{name}()`")


def _append(tx, xs, value):
    _mutable(tx, xs, "append")
    xs.elements.append(value)
    return _NONE


def _extend(tx, xs, values):
    _mutable(tx, xs, "extend")
    xs.elements.extend(values.items(tx))
    return _NONE


def _insert(tx, xs, index, value):
    _mutable(tx, xs, "insert")
    xs.elements.insert(index.as_constant(), value)
    return _NONE


def _pop(tx, xs, index=None):
    _mutable(tx, xs, "pop")
    if not xs.elements:
        raise tx.user_exception(IndexError("pop from empty list"))
    return xs.elements.pop(-1 if index is None else index.as_constant())


def _clear(tx, xs):
    _mutable(tx, xs, "clear")
    xs.elements.clear() if isinstance(xs, ListVariable) else xs.entries.clear()
    return _NONE


def _reverse(tx, xs):
    _mutable(tx, xs, "reverse")
    xs.elements.reverse()
    return _NONE


def _copy(tx, xs):
    if isinstance(xs, DictVariable):
        return DictVariable(xs.entries, python_class=xs.python_class)
    return ListVariable(xs.elements)


def _index(tx, xs, value, *bounds):
    for i, element in enumerate(xs.elements):
        if _equal(tx, element, value):
            return ConstantVariable(i)
    raise tx.user_exception(ValueError("value is not in list"))


def _count(tx, xs, value):
    return ConstantVariable(sum(_equal(tx, e, value) for e in xs.elements))


def _remove(tx, xs, value):
    _mutable(tx, xs, "remove")
    index = _index(tx, xs, value).as_constant()
    del xs.elements[index]
    return _NONE


def _sort(tx, xs, key=None, reverse=None):
    _mutable(tx, xs, "sort")
    from ..builtins import sorted_trackers

    xs.elements[:] = sorted_trackers(tx, xs.elements, key, reverse)
    return _NONE


def _equal(tx, a, b) -> bool:
    if a is b:
        return True
    if a.is_constant() and b.is_constant():
        return a.as_constant() == b.as_constant()
    return tx.call_leaf(lambda x, y: x == y, [a, b], {}).truth(tx)


_SEQUENCE_METHODS = {"append": _append, "extend": _extend, "insert": _insert, "pop": _pop,
                     "clear": _clear, "reverse": _reverse, "copy": _copy, "index": _index,
                     "count": _count, "remove": _remove, "sort": _sort}


def _items(tx, d):
    return ListVariable([TupleVariable([ConstantVariable(k), v]) for k, v in d.entries.items()])


def _keys(tx, d):
    return ListVariable([ConstantVariable(k) for k in d.entries])


def _values(tx, d):
    return ListVariable(list(d.entries.values()))


def _get(tx, d, key, default=_NONE):
    return d.entries.get(dict_key(key), default)


def _dict_pop(tx, d, key, *default):
    _mutable(tx, d, "pop")
    k = dict_key(key)
    if k in d.entries:
        return d.entries.pop(k)
    if default:
        return default[0]
    raise tx.user_exception(KeyError(k))


def _setdefault(tx, d, key, default=_NONE):
    if dict_key(key) not in d.entries:
        _mutable(tx, d, "setdefault")
    return d.entries.setdefault(dict_key(key), default)


def _update(tx, d, other=None, **kwargs):
    _mutable(tx, d, "update")
    if other is not None:
        if isinstance(other, DictVariable):
            d.entries.update(other.entries)
        else:
            for pair in other.items(tx):
                k, v = pair.items(tx)
                d.entries[dict_key(k)] = v
    d.entries.update(kwargs)
    return _NONE


def _dict_setitem(tx, d, key, value):
    _mutable(tx, d, "__setitem__")
    d.entries[dict_key(key)] = value
    return _NONE


def _dict_getitem(tx, d, key):
    return d.getitem(tx, key)


def _dict_delitem(tx, d, key):
    _mutable(tx, d, "__delitem__")
    d.entries.pop(dict_key(key))
    return _NONE


def _dict_contains(tx, d, key):
    return ConstantVariable(key.is_constant() and key.as_constant() in d.entries)


def _dict_len(tx, d):
    return ConstantVariable(len(d.entries))


def _dict_iter(tx, d):
    from .containers import IteratorVariable

    return IteratorVariable([ConstantVariable(k) for k in d.entries])


_DICT_METHODS = {"__setitem__": _dict_setitem, "__getitem__": _dict_getitem,
                 "__delitem__": _dict_delitem, "__contains__": _dict_contains,
                 "__len__": _dict_len, "__iter__": _dict_iter,
                 "items": _items, "keys": _keys, "values": _values, "get": _get,
                 "pop": _dict_pop, "setdefault": _setdefault, "update": _update, "clear": _clear,
                 "copy": _copy}

assert all(hasattr(list, n) for n in _SEQUENCE_METHODS), "unknown list method in table"
assert all(hasattr(dict, n) for n in _DICT_METHODS), "unknown dict method in table"
