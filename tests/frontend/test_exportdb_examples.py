"""ExportDB's examples ship inside the torch package but are user programs: they are traced
(their torch.cond, autograd.Function, attribute writes...), not called as PyTorch leaves."""
import importlib

import pytest
import torch

import unbroken
from unbroken.frontend.variables.functions import is_pytorch_module_name

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

TRACED = ["autograd_function", "assume_constant_result", "cond_operands",
          "cond_closed_over_variable", "dynamic_shape_map"]


def test_examples_are_not_pytorch_library_code():
    assert is_pytorch_module_name("torch.nn.functional")
    assert not is_pytorch_module_name("torch._export.db.examples.cond_operands")


@pytest.mark.parametrize("name", TRACED)
def test_example_is_traced_and_matches_eager(name):
    example = importlib.import_module(f"torch._export.db.examples.{name}")
    args = example.example_args
    kwargs = getattr(example, "example_kwargs", {})
    ep = unbroken.export(example.model, args, kwargs,
                         dynamic_shapes=getattr(example, "dynamic_shapes", None))
    with torch.no_grad():
        got, expected = ep.module()(*args, **kwargs), example.model(*args, **kwargs)
    leaves = torch.utils._pytree.tree_leaves
    for a, b in zip(leaves(got), leaves(expected)):
        assert torch.equal(a, b)
