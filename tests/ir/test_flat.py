"""``ir.flat`` against its oracle, ``torch.utils._pytree``: the same leaves in the same order,
the same rebuilt trees (types included), on op-argument trees and on trees with nodes only
pytree knows (named tuples, ``torch.Size``, ``OrderedDict``, registered classes)."""
from __future__ import annotations

import collections

import torch
import torch.utils._pytree as pytree
from hypothesis import given, settings
from hypothesis import strategies as st

from unbroken.ir.flat import tree_flatten, tree_leaves, tree_map

Point = collections.namedtuple("Point", "x y")

class _Bag(dict):
    """A dict subclass pytree does not know: one leaf to it."""


LEAVES = st.sampled_from([0, 1.5, True, None, "s", torch.float32, torch.device("meta"),
                          torch.strided, torch.contiguous_format, torch.empty(2, device="meta"),
                          torch.nn.Parameter(torch.empty(1)), object(), slice(1, 2),
                          torch.nn.Linear(2, 2), len, _Bag(a=1), ()])


def _node(children):
    return st.one_of(
        st.lists(children, max_size=3),
        st.lists(children, max_size=3).map(tuple),
        st.dictionaries(st.sampled_from("abcd"), children, max_size=3),
        st.tuples(children, children).map(lambda t: Point(*t)),
        st.lists(st.integers(0, 4), max_size=3).map(torch.Size),
        st.dictionaries(st.sampled_from("abcd"), children, max_size=3).map(
            collections.OrderedDict))


TREES = st.recursive(LEAVES, _node, max_leaves=12)


def _shape(tree):
    """The tree with every leaf replaced by its identity: containers compared by type."""
    if isinstance(tree, (list, tuple)):
        return type(tree), [_shape(t) for t in tree]
    if isinstance(tree, dict):
        return type(tree), [(k, _shape(v)) for k, v in tree.items()]
    return id(tree)


@settings(max_examples=300, deadline=None)
@given(tree=TREES)
def test_as_pytree(tree):
    assert [id(x) for x in tree_leaves(tree)] == [id(x) for x in pytree.tree_leaves(tree)]
    seen, expected = [], []
    got = tree_map(lambda x: seen.append(x) or x, tree)
    want = pytree.tree_map(lambda x: expected.append(x) or x, tree)
    assert [id(x) for x in seen] == [id(x) for x in expected]
    assert _shape(got) == _shape(want)


def test_op_arguments():
    x = torch.empty(2, 3, device="meta")
    args, kwargs = (x, [1, 2], (x, None)), {"dtype": torch.float16, "out": [x]}
    assert tree_leaves((args, kwargs)) == [x, 1, 2, x, None, torch.float16, x]
    mapped = tree_map(lambda v: "T" if isinstance(v, torch.Tensor) else v, (args, kwargs))
    assert mapped == (("T", [1, 2], ("T", None)), {"dtype": torch.float16, "out": ["T"]})


def _is_plain(structure) -> bool:
    return isinstance(structure, tuple) and structure[:1] == ("plain",)


@settings(max_examples=300, deadline=None)
@given(first=TREES, second=TREES)
def test_structures_equal_only_as_pytree_specs(first, second):
    leaves, structure = tree_flatten(first)
    assert [id(x) for x in leaves] == [id(x) for x in pytree.tree_leaves(first)]
    hash(structure)
    same_spec = pytree.tree_structure(first) == pytree.tree_structure(second)
    other = tree_flatten(second)[1]
    same = structure == other
    assert not same or same_spec  # equal structures: equal specs
    if _is_plain(structure) and _is_plain(other):
        assert same == same_spec
    assert tree_flatten(first)[1] == structure  # deterministic
