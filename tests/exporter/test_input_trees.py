"""Inputs of pytree-registered classes: rebuilt inside the trace by interpreting the class's
unflatten function, so what its constructor does is recorded; the caller's object is never
changed (as torch.export)."""
import collections
import copy

import pytest
import torch
import torch.utils._pytree as pytree
from torch import nn
from torch.testing._internal.two_tensor import TwoTensor

import unbroken
from tests.exactness import assert_bit_exact


class Window:
    """A cache-like input: its constructor concatenates what it is given, forward() appends.
    Its flatten function returns the tensors it holds (as transformers' caches do)."""

    def __init__(self, parts, scale):
        self.parts = list(parts)
        self.values = torch.cat(self.parts)
        self.scale = scale

    def append(self, x):
        self.parts.append(x)
        self.values = torch.cat([self.values, x])
        return self.values


def _flatten(window):
    return window.parts, window.scale


def _unflatten(children, scale):
    return Window(list(children), scale)


@pytest.fixture(scope="module", autouse=True)
def registered():
    pytree.register_pytree_node(Window, _flatten, _unflatten)
    yield
    pytree._deregister_pytree_node(Window)


class Step(nn.Module):
    def forward(self, x, window):
        values = window.append(x * window.scale)
        return values.sum(), window


def test_registered_input_is_rebuilt_in_the_trace():
    x, window = torch.randn(2), Window([torch.randn(2), torch.randn(3)], 3.0)
    kept = window.values.clone()
    ep = unbroken.export(Step(), (x, window))
    assert torch.equal(window.values, kept) and len(window.parts) == 2  # the caller's: unchanged
    assert [n.op for n in ep.graph_module.graph.nodes].count("placeholder") == 3
    got = ep.module()(x, copy.deepcopy(window))
    want = Step()(x, copy.deepcopy(window))
    assert_bit_exact(got[0], want[0])
    assert type(got[1]) is Window and got[1].scale == 3.0
    assert_bit_exact(got[1].values, want[1].values)


def test_dynamic_shapes_of_a_registered_input_follow_its_children():
    x, window = torch.randn(2), Window([torch.randn(2), torch.randn(3)], 3.0)
    rest = torch.export.Dim("rest", min=2)
    spec = {"x": None, "window": [None, {0: rest}]}
    ep = unbroken.export(Step(), (x, window), dynamic_shapes=spec)
    longer = Window([torch.randn(2), torch.randn(6)], 3.0)
    assert_bit_exact(ep.module()(x, copy.deepcopy(longer))[0], Step()(x, copy.deepcopy(longer))[0])


class _AddsOnMul(torch.Tensor):
    @classmethod
    def __torch_function__(cls, func, types, args=(), kwargs=None):
        result = super().__torch_function__(func, types, args, kwargs or {})
        return result + 100 if func is torch.Tensor.mul else result


class _Branches(torch.nn.Module):
    def forward(self, x):
        return x.to_dense() * 2 if x.is_sparse else x * 3


@pytest.mark.parametrize("example, what", [
    (torch.randn(3, 3).to_sparse(), "layout torch.sparse_coo"),
    (torch.randn(3, 3).to_sparse_csr(), "layout torch.sparse_csr"),
    (torch.randn(3).as_subclass(_AddsOnMul), "a _AddsOnMul, a tensor subclass"),
    (TwoTensor(torch.ones(3), torch.ones(3)), "a TwoTensor, a tensor subclass"),  # torch's own
])
def test_example_tensors_the_trace_would_misread_are_refused(example, what):
    """A sparse example was traced as a dense tensor (x.is_sparse read as False: the program
    took the other branch); a CSR or nested one crashed with UB999; a subclass's own
    __torch_function__ was silently dropped."""
    with pytest.raises(unbroken.ExportUsageError, match="unsupported example input") as info:
        unbroken.export(_Branches(), (example,))
    assert what in str(info.value)


def test_a_generator_input_is_refused_with_what_to_do_instead():
    class Noise(nn.Module):
        def forward(self, x, g):
            return x + torch.rand(x.shape, generator=g)

    with pytest.raises(unbroken.ExportUsageError) as info:
        unbroken.export(Noise(), (torch.randn(3), torch.Generator()))
    assert "Generator" in str(info.value) and "torch.manual_seed" in info.value.hint


class _CallsGiven(nn.Module):
    def forward(self, x, head):
        return head(x) + 1


class _CallsWithParams(nn.Module):
    """The workaround the refusal names: the module's tensors as inputs."""

    def __init__(self):
        super().__init__()
        self.head = nn.Linear(3, 3)

    def forward(self, x, params):
        return torch.func.functional_call(self.head, params, (x,)) + 1


def test_a_module_input_is_refused_with_a_workaround_that_exports():
    x, head = torch.randn(2, 3), nn.Linear(3, 3)
    with pytest.raises(unbroken.ExportUsageError) as info:
        unbroken.export(_CallsGiven(), (x, head))
    assert "Linear" in str(info.value) and "functional_call" in info.value.hint
    model, params = _CallsWithParams(), dict(head.named_parameters())
    program = unbroken.export(model, (x, params))
    other = dict(nn.Linear(3, 3).named_parameters())  # another module's tensors, same program
    for given in (params, other):
        assert_bit_exact(program.module()(x, given), model(x, given))


_Pair = collections.namedtuple("_Pair", "x y")


class _AddPair(nn.Module):
    def forward(self, x, y):
        return x + y


class _AddFields(nn.Module):
    def forward(self, pair):
        return pair.x * pair.y


@pytest.mark.parametrize("model, args", [
    (_AddPair, lambda: _Pair(torch.randn(3), torch.randn(3))),  # the whole args
    (_AddFields, lambda: (_Pair(torch.randn(3), torch.randn(3)),)),  # one argument
], ids=["namedtuple_as_args", "namedtuple_as_one_argument"])
def test_args_are_a_plain_tuple_of_the_positional_inputs(model, args):
    # torch.export's in_spec: the args tuple's own type never reaches it; a namedtuple
    # passed as one argument stays one
    example = args()
    ep = unbroken.export(model(), example)
    assert ep.call_spec.in_spec == torch.export.export(model(), example,
                                                       strict=False).call_spec.in_spec
    fresh = args()
    torch.testing.assert_close(ep.module()(*fresh), model()(*fresh))
