"""NumPy on Python constants runs at trace time; on traced values, or numpy.random, refused."""
import numpy as np
import pytest
import torch
from torch import nn

import unbroken
from tests.exactness import assert_bit_exact
from tests.state_leak import ModelSnapshot


class Plan(nn.Module):
    """BigBird's pattern: a block plan computed with NumPy from sizes, made a tensor."""

    def __init__(self):
        super().__init__()
        self.lengths = np.array([4, 8])  # an outside array: read as a constant, never written

    def forward(self, x):
        blocks = self.lengths // 2
        rows = [np.zeros((3, int(np.sum(blocks[:1]))), dtype=np.int32) for _ in range(2)]
        index = torch.tensor(np.stack(rows, axis=0), device=x.device, dtype=torch.long)
        return x[index.flatten()] * blocks[1] + np.float64(0.5)


def test_numpy_on_constants_is_folded():
    model, x = Plan(), torch.randn(5)
    before = ModelSnapshot.of(model)
    ep = unbroken.export(model, (x,))
    assert before.diff(ModelSnapshot.of(model)) == []
    assert model.lengths.flags.writeable and model.lengths.tolist() == [4, 8]
    targets = {str(n.target) for n in ep.graph_module.graph.nodes if n.op == "call_function"}
    assert not any("numpy" in t for t in targets)
    assert_bit_exact(ep.module()(x), model(x))


class OnTensor(nn.Module):
    def forward(self, x):
        return torch.from_numpy(np.sin(x))


class OnSize(nn.Module):
    def forward(self, x):
        return x * int(np.prod(x.shape))


class Random(nn.Module):
    def forward(self, x):
        return x + np.random.rand()


class WriteArray(nn.Module):
    def forward(self, x):
        plan = np.zeros(3)
        plan[0] = 1.0
        return x + torch.tensor(plan)


@pytest.mark.parametrize("model, code, words", [
    (OnTensor(), "UB108", "`numpy.sin` is called on the tensor"),
    (Random(), "UB103", "numpy.random"),
])
def test_numpy_on_traced_values_or_global_rng_is_refused(model, code, words):
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(model, (torch.randn(3),))
    assert info.value.code == code and words in str(info.value)
    assert "test_numpy_values.py" in str(info.value)


def test_numpy_on_a_dynamic_size_is_refused():
    batch = torch.export.Dim("batch", min=2)
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(OnSize(), (torch.randn(3),), dynamic_shapes={"x": {0: batch}})
    assert info.value.code == "UB108" and "numpy.prod" in str(info.value)


def test_static_size_is_a_constant_for_numpy():
    x = torch.randn(3)
    assert_bit_exact(unbroken.export(OnSize(), (x,)).module()(x), OnSize()(x))


def test_writing_into_an_array_is_refused():
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(WriteArray(), (torch.randn(3),))
    assert info.value.code == "UB107" and "plan[0] = 1.0" in str(info.value)
