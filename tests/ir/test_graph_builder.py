"""ir.graph_builder: where run-time assertions go and what they read."""
import pytest
import torch

import unbroken


class MaxOfCounts(torch.nn.Module):
    def forward(self, x, y):
        u = y.item()
        v = x.nonzero().shape[0]
        torch._check(max(u, v) // 2 >= 1)
        return torch.zeros(max(u, v) // 2)


def test_a_runtime_assertion_never_reads_a_value_computed_after_it():
    """The assertion of ``max(u, v) // 2 >= 1`` goes right after ``nonzero`` (where both
    values are known); it reused the ``max(u, v) // 2`` node cached for the later ``zeros``,
    defined after it: graph lint failed (UB999). It computes what it needs before itself."""
    ep = unbroken.export(MaxOfCounts(), (torch.ones(6), torch.tensor(3)))
    ep.graph.lint()
    for x, y in [(torch.ones(6), torch.tensor(3)),
                 (torch.tensor([0.0, 1, 0, 1, 1, 0]), torch.tensor(9))]:
        torch.testing.assert_close(ep.module()(x, y), MaxOfCounts()(x, y))
    with pytest.raises(RuntimeError, match="Runtime assertion failed"):
        ep.module()(torch.zeros(6), torch.tensor(1))


_GLOBAL_CONSTANT = torch.tensor([1.0, -2.0, 3.0])


class TwoConstantsNoInputs(torch.nn.Module):
    def forward(self):
        return torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6])


class StateAndConstantsNoInputs(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(3))
        self.register_buffer("b", torch.ones(3))

    def forward(self):
        return self.a.sin() + _GLOBAL_CONSTANT + torch.tensor([0.5, 0.5, 0.5]) + self.b


class ConstantsAfterUserInput(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.a = torch.nn.Parameter(torch.randn(3))

    def forward(self, x):
        return (x * self.a + torch.tensor([1.0, 2.0, 3.0])).cos() + _GLOBAL_CONSTANT


def _placeholders_first_in_torchs_order(ep):
    kinds = [spec.kind for spec in ep.graph_signature.input_specs]
    order = [torch.export.graph_signature.InputKind.PARAMETER,
             torch.export.graph_signature.InputKind.BUFFER,
             torch.export.graph_signature.InputKind.CONSTANT_TENSOR,
             torch.export.graph_signature.InputKind.USER_INPUT]
    assert kinds == sorted(kinds, key=order.index), kinds
    ops = [node.op for node in ep.graph.nodes]
    assert ops == sorted(ops, key=lambda op: op != "placeholder"), ops
    names = [node.name for node in ep.graph.nodes if node.op == "placeholder"]
    assert names == [spec.arg.name for spec in ep.graph_signature.input_specs]


@pytest.mark.parametrize("make, inputs", [
    (TwoConstantsNoInputs, ()),
    (StateAndConstantsNoInputs, ()),
    (ConstantsAfterUserInput, (torch.randn(3),)),
], ids=["two_constants", "state_and_constants", "after_user_input"])
def test_constants_lifted_mid_trace_are_placeholders_before_every_computation(make, inputs):
    """A constant met while tracing (``torch.tensor([...])``, a global tensor) is lifted
    when met; in a ``forward`` without user inputs its placeholder went after the nodes
    already recorded (UB999: placeholders must come before every other node). Placeholders
    come first, as ``[*parameters, *buffers, *constants, *user_inputs]``."""
    torch.manual_seed(0)
    model = make()
    ep = unbroken.export(model, inputs)
    _placeholders_first_in_torchs_order(ep)
    torch.testing.assert_close(ep.module()(*inputs), model(*inputs))
    if inputs:
        other = (-torch.randn(3),)
        torch.testing.assert_close(ep.module()(*other), model(*other))


class FloatItemSquared(torch.nn.Module):
    def forward(self, s, x):
        f = s.item()
        return x + f * f


def test_writing_a_square_into_the_graph_asserts_nothing_about_its_base():
    """``f * f`` of a float ``item`` is ``zuf0**2``: writing it into the graph computed the
    node's value with ``SymFloat.__pow__``, whose ``torch._check(base >= 0)`` became an
    assertion ``s.item() >= 0`` and the range ``[0, inf]``: module() refused ``-1.0``."""
    model = FloatItemSquared()
    x = torch.randn(3)
    ep = unbroken.export(model, (torch.tensor(2.5), x))
    assert not [n for n in ep.graph.nodes if n.target is torch.ops.aten._assert_scalar.default]
    assert all(r.lower < 0 for r in ep.range_constraints.values()), ep.range_constraints
    for value in (2.5, -1.0, -3.25, 0.0):
        s = torch.tensor(value)
        torch.testing.assert_close(ep.module()(s, x), model(s, x))
