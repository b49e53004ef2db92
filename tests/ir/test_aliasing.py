"""Writes through views (ir.aliasing): every alias sees the write, as in eager.

Each case runs eagerly and through the exported program on fresh clones of the inputs, and
compares the outputs *and* the inputs afterwards (a mutated input is written back). Runtime
inputs with other strides than the example's check that the graph is layout independent.
"""
import copy

import pytest
import torch
import torch.nn as nn

import unbroken


def _run_both(fn, *inputs, runtime=None):
    ep = unbroken.export(fn, tuple(i.clone() for i in inputs))
    for case in [inputs] + ([runtime] if runtime is not None else []):
        eager_in = [i.clone() for i in case]
        exported_in = [i.clone() for i in case]
        expected = fn(*eager_in)
        got = ep.module()(*exported_in)
        torch.testing.assert_close(got, expected)
        for a, b in zip(exported_in, eager_in):
            torch.testing.assert_close(a, b)  # input mutations written back identically
    return ep


def select_write(x):
    y = x * 1
    y[0] = 7.0
    return y


def slice_column_add(x):
    y = x + 0
    y[:, 1:3] += 1
    return y, y.sum()


def view_of_view(x):
    y = x.clone()
    row = y[1]
    row[::2].mul_(10)
    return y


def transposed_write(x):
    y = x.clone()
    y.t()[0].fill_(-1)
    return y


def live_views_see_the_write(x):
    y = x.clone()
    a, b = y[0], y[:, 0]
    a.add_(100)
    return a, b, y            # b shares y[0, 0] with a


def unbind_write(x):
    y = x.clone()
    first, second, *_ = y.unbind(0)
    second.zero_()
    return y, first


def split_write(x):
    y = x.clone()
    parts = y.split(1, dim=1)
    parts[1].copy_(torch.full_like(parts[1], 3.0))
    return y


def reshape_view_write(x):
    y = x.clone(memory_format=torch.contiguous_format)
    flat = y.view(-1)
    flat[1:4] = 0.0
    return y


def permute_write(x):
    y = x.clone().unsqueeze(0)
    y.permute(2, 0, 1)[1].add_(5)
    return y.squeeze(0)


def repeated_writes(x):
    y = x.clone()
    v = y[0]
    v.add_(1)
    v.mul_(2)
    y[1, 1] = v[0]
    return y


def detach_aliases_base(x):
    y = x * 2
    y.detach().add_(1)        # shares storage with y: eager's y changes too
    return y


@pytest.mark.parametrize("fn", [select_write, slice_column_add, view_of_view, transposed_write,
                                live_views_see_the_write, unbind_write, split_write,
                                reshape_view_write, permute_write, repeated_writes,
                                detach_aliases_base])
def test_writes_through_views_match_eager(fn):
    x = torch.randn(3, 4)
    _run_both(fn, x, runtime=[torch.randn(4, 3).t()])  # non-contiguous at run time


def input_row_assignment(x):
    x[0] = 7.0
    return x.sum()


def input_slice_update(x, y):
    x[:, :2] += y
    return x * 2


def test_user_inputs_mutated_through_views_are_written_back():
    ep = _run_both(input_row_assignment, torch.randn(3, 4), runtime=[torch.randn(4, 3).t()])
    kinds = [s.kind.name for s in ep.graph_signature.output_specs]
    assert kinds == ["USER_INPUT_MUTATION", "USER_OUTPUT"]
    _run_both(input_slice_update, torch.randn(3, 4), torch.randn(3, 2))


class KVCache(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("cache", torch.zeros(2, 8, 4))

    def forward(self, x, start: int):
        self.cache[:, start:start + x.shape[1]] = x
        return self.cache[:, : start + x.shape[1]].sum(1)


def test_buffer_slice_assignment_is_a_buffer_mutation():
    eager, exported = KVCache(), KVCache()
    ep = unbroken.export(exported, (torch.randn(2, 3, 4), 2))
    assert [s.kind.name for s in ep.graph_signature.output_specs] == \
        ["BUFFER_MUTATION", "USER_OUTPUT"]
    module = ep.module()
    x = torch.randn(2, 3, 4)
    torch.testing.assert_close(module(x, 2), eager(x, 2))
    torch.testing.assert_close(module.cache, eager.cache)


def test_graph_is_functional():
    ep = unbroken.export(live_views_see_the_write, (torch.randn(3, 4),))
    for node in ep.graph.nodes:
        if node.op == "call_function" and isinstance(node.target, torch._ops.OpOverload):
            assert not node.target._schema.is_mutable, node.format_node()


class WritesParameterView(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.randn(3))

    def forward(self, x):
        with torch.no_grad():
            self.w[0] = 0.0
        return x * self.w


def test_writing_a_parameter_through_a_view_under_no_grad():
    """As eager: the rest of forward uses the new value and differentiates the parameter, and
    the parameter is written back (it holds the new value after the call)."""
    torch.manual_seed(0)
    model, x = WritesParameterView(), torch.randn(3)
    eager = copy.deepcopy(model)  # the program shares the model's storage
    module = unbroken.export(model, (x,)).module()
    got = module(x)
    got.sum().backward()
    want = eager(x)
    want.sum().backward()
    assert torch.equal(got, want) and got.requires_grad
    assert torch.equal(module.w.detach(), eager.w.detach()) and module.w.is_leaf
    assert torch.equal(module.w.grad, eager.w.grad)


def test_writing_an_expanded_view_is_refused():
    def fn(x):
        y = x.clone()
        y.expand(2, 3)[0].add_(1)  # eager refuses this too (overlapping memory)
        return y

    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(fn, (torch.randn(3),))
    assert info.value.code in ("UB121", "UB120")
