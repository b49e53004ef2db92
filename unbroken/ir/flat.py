"""``tree_leaves`` and ``tree_map`` as ``torch.utils._pytree``'s, fast for an op's arguments.

Every op the recorder records, and every leaf call, walks its arguments several times (meta
versions, opaque-argument refusal, the devices the call's tensors stand for, the tensors it
reads). pytree's generic walk asks its registry about every node; an op's arguments are
tuples, lists and dicts of tensors, numbers, strings and torch's enum-like values. For such a
tree the walk here visits the same leaves in the same order (pytree's: a dict's values in
insertion order) and ``tree_map`` rebuilds the same containers; any other node (a named
tuple, a registered class, an object pytree may treat either way) sends the whole tree to
pytree itself, so the answer is always pytree's.
"""
from __future__ import annotations

from collections.abc import Callable

import torch
import torch.utils._pytree as pytree

__all__ = ["tree_flatten", "tree_leaves", "tree_map"]

_LEAF_TYPES = frozenset([int, float, bool, complex, str, type(None), torch.dtype, torch.device,
                         torch.layout, torch.memory_format, torch.SymInt, torch.SymFloat,
                         torch.SymBool])
_CONTAINERS = (tuple, list, dict)
# Tests are on the type, as pytree's are: ``isinstance`` on a value of another class reads its
# ``__class__`` through its class's ``__getattribute__`` (user code, when written in Python).
_TENSOR = torch.Tensor


def _plain_leaves(tree, out: list) -> bool:
    """Append ``tree``'s leaves to ``out``; False at the first node that is neither a plain
    container nor a known leaf (``out`` is then incomplete). Loops, not ``all()`` over a
    generator: this runs several times per recorded op."""
    kind = type(tree)
    if kind in _LEAF_TYPES or kind is _TENSOR or issubclass(kind, _TENSOR):
        out.append(tree)
        return True
    if kind is dict:
        tree = tree.values()
    elif kind is not tuple and kind is not list:
        if kind in pytree.SUPPORTED_NODES or issubclass(kind, tuple):
            return False  # a registered container, a namedtuple, a structseq: pytree's
        out.append(tree)  # any other object is one leaf to pytree (a module, a function)
        return True
    for item in tree:
        item_kind = type(item)
        if item_kind in _LEAF_TYPES or item_kind is _TENSOR or issubclass(item_kind, _TENSOR):
            out.append(item)
        elif not _plain_leaves(item, out):
            return False
    return True


def tree_leaves(tree) -> list:
    """``pytree.tree_leaves(tree)``."""
    leaves: list = []
    if _plain_leaves(tree, leaves):
        return leaves
    return pytree.tree_leaves(tree)


_NOT_PLAIN = object()


def _plain_structure(tree, out: list):
    """``tree``'s leaves appended to ``out`` and its structure as a hashable value (None for
    a leaf; the container's type, a dict's keys and the children's structures), or
    ``_NOT_PLAIN``."""
    kind = type(tree)
    if kind in _LEAF_TYPES or isinstance(tree, torch.Tensor):
        out.append(tree)
        return None
    if kind is tuple or kind is list:
        children = []
        for item in tree:
            child = _plain_structure(item, out)
            if child is _NOT_PLAIN:
                return _NOT_PLAIN
            children.append(child)
        return kind, tuple(children)
    if kind is dict:
        children = []
        for item in tree.values():
            child = _plain_structure(item, out)
            if child is _NOT_PLAIN:
                return _NOT_PLAIN
            children.append(child)
        return dict, tuple(tree), tuple(children)
    return _NOT_PLAIN


def tree_flatten(tree) -> tuple[list, object]:
    """``(leaves, structure)``: pytree's leaves, in its order, and a hashable value (a plain
    tree's own structure, tagged; pytree's ``TreeSpec`` for any other). Two structures are
    equal only when pytree's specs are, and for two plain trees exactly then (a plain and
    another tree never compare equal: a cache keyed on it may miss, never confuse). For
    keys, not for ``tree_unflatten``."""
    leaves: list = []
    structure = _plain_structure(tree, leaves)
    if structure is not _NOT_PLAIN:
        return leaves, ("plain", structure)
    return pytree.tree_flatten(tree)


def _plain_map(fn: Callable, tree):
    kind = type(tree)
    if kind is tuple:
        return tuple(_plain_map(fn, item) for item in tree)
    if kind is list:
        return [_plain_map(fn, item) for item in tree]
    if kind is dict:
        return {key: _plain_map(fn, value) for key, value in tree.items()}
    return fn(tree)


def tree_map(fn: Callable, tree):
    """``pytree.tree_map(fn, tree)``: ``fn`` called on the leaves in pytree's order."""
    if _plain_leaves(tree, []):
        return _plain_map(fn, tree)
    return pytree.tree_map(fn, tree)
