"""Basic programs, outputs, constants, parameters and module() behaviour, side by side."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F

from tests.behaviours.harness import Behaviour, params, program, side_by_side


def _x(*shape):
    return lambda: (torch.randn(*shape),)


def _linear(self):
    self.lin = nn.Linear(3, 3)


def _parameter_a(self):
    self.a = nn.Parameter(torch.randn(3))


_GLOBAL_CONSTANT = torch.tensor([1.0, -2.0, 3.0])


def _colon(self):
    self.register_parameter("foo:bar", nn.Parameter(torch.ones(3, 3)))


def _constants(self):
    self.b = torch.randn(3, 2)


class _Inner(nn.Module):
    def __init__(self):
        super().__init__()
        self.b = torch.ones(3, 3)

    def forward(self, x):
        return x + self.b


class _Adder:
    def add(self, x):
        return x + x


def _external(self):
    self.external_add = _Adder().add


def _seq(self):
    self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Linear(4, 4))


def _blocks(self):
    self.blocks = nn.ModuleDict({str(i): nn.Linear(4, 4) for i in range(3)})
    self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(2)])


def _tied(self):
    self.emb = nn.Embedding(10, 4)
    self.out = nn.Linear(4, 10, bias=False)
    self.out.weight = self.emb.weight


def _bn(self):
    self.conv = nn.Conv2d(3, 4, 3)
    self.bn = nn.BatchNorm2d(4)


def _dropout(self):
    self.lin = nn.Linear(4, 4)
    self.drop = nn.Dropout(0.5)


def _mha(self):
    self.attn = nn.MultiheadAttention(8, 2, batch_first=True)


@torch.jit.script
def _scripted(x: torch.Tensor):
    if torch.jit.is_scripting():
        return x.cos()
    return x.sin()


def _eval(make):
    def build():
        return make().eval()
    return build


def _state_dict_keys(ep):
    assert set(ep.state_dict) == {"lin.weight", "lin.bias"}, sorted(ep.state_dict)


def _no_constants(ep):
    assert len(ep.constants) == 0, f"unused constants kept: {sorted(ep.constants)}"


def _nonpersistent(ep):
    assert "buf" not in ep.state_dict and "buf" in ep.constants, (
        sorted(ep.state_dict), sorted(ep.constants))


def _nonpersistent_setup(self):
    self.register_buffer("buf", torch.ones(3), persistent=False)
    self.register_buffer("kept", torch.ones(3))


def _decomposed_matches(ep):
    decomposed = ep.run_decompositions()
    x = torch.randn(2, 3)
    torch.testing.assert_close(decomposed.module()(x), ep.module()(x))


BEHAVIOURS = [
    Behaviour("list_input_indexed", program(lambda self, x, y: x[0] + y),
              lambda: ([torch.ones(1, 3)], torch.ones(1, 3))),
    Behaviour("returns_int_input", program(lambda self, x, y: y),
              lambda: ([torch.ones(1, 3)], 1)),
    Behaviour("returns_input_tensor", program(lambda self, x, y: x), lambda: (torch.randn(3), 1)),
    Behaviour("returns_constant_only", program(lambda self, x, y: 5), lambda: (2, 1)),
    Behaviour("no_inputs_constant_attr", program(lambda self: self.b, _constants), lambda: ()),
    Behaviour("no_inputs_two_tensor_constructors",
              program(lambda self: (torch.tensor([1, 2, 3]), torch.tensor([4, 5, 6]))),
              lambda: ()),
    Behaviour("no_inputs_parameter_and_global_constant",
              program(lambda self: self.a.sin() + _GLOBAL_CONSTANT, _parameter_a), lambda: ()),
    Behaviour("nested_constant_output",
              program(lambda self, x, y: {"prediction": (x + y, self.b)}, _constants),
              lambda: (torch.randn(3, 2), torch.randn(3, 2))),
    Behaviour("unused_constant_dropped",
              program(lambda self, x: (torch.tensor(3), x * x)[1]), _x(3),
              check=_no_constants),
    Behaviour("colon_parameter_name",
              program(lambda self, x: x + getattr(self, "foo:bar"), _colon), _x(3, 3)),
    Behaviour("module_built_in_forward",
              program(lambda self, x: _Inner()(x) * x), _x(3, 3)),
    Behaviour("linear_times_input", program(lambda self, x, y: self.lin(x) * y, _linear),
              lambda: (torch.randn(2, 3), torch.randn(2, 3)), check=_state_dict_keys),
    Behaviour("external_bound_method", program(lambda self, x: self.external_add(x), _external),
              _x(1, 3)),
    Behaviour("sequential_slice", program(lambda self, x: self.seq[1:](x), _seq), _x(4, 4)),
    Behaviour("module_dict_and_list",
              program(lambda self, x: sum(m(x) for m in self.blocks.values())
                      + self.layers[-1](self.layers[0](x)), _blocks), _x(2, 4)),
    Behaviour("tied_weights", program(lambda self, i: self.out(self.emb(i)), _tied),
              lambda: (torch.tensor([[1, 2, 3]]),)),
    Behaviour("non_persistent_buffer_is_constant",
              program(lambda self, x: x + self.buf + self.kept, _nonpersistent_setup), _x(3),
              check=_nonpersistent),
    Behaviour("item_int", program(lambda self, t: t.item()),
              lambda: (torch.tensor([1], dtype=torch.int),)),
    Behaviour("item_bool", program(lambda self, t: t.item()),
              lambda: (torch.tensor([True]),)),
    Behaviour("item_float", program(lambda self, t: t.item()),
              lambda: (torch.tensor([3.14]),)),
    Behaviour("batchnorm_eval", _eval(program(lambda self, x: self.bn(self.conv(x)), _bn)),
              _x(2, 3, 8, 8)),
    Behaviour("dropout_eval", _eval(program(lambda self, x: self.drop(self.lin(x)), _dropout)),
              _x(2, 4)),
    Behaviour("multihead_attention", _eval(program(
        lambda self, x: self.attn(x, x, x, need_weights=False)[0], _mha)), _x(2, 5, 8)),
    Behaviour("scripted_function_inlined", program(lambda self, x: _scripted(x)), _x(3, 4),
              torch_fails="inlines the Python source of a TorchScript function: sin where "
                          "eager runs the script (cos)"),
    Behaviour("bincount_with_weights",
              program(lambda self, x: x.bincount(torch.linspace(0, 1, steps=5))),
              lambda: (torch.randint(0, 8, (5,)),)),
    Behaviour("interpolate_int_of_size",
              program(lambda self, x: F.interpolate(
                  x, size=(int(x.shape[-2] / 1), int(x.shape[-1] / 2)), mode="bilinear")),
              _x(1, 3, 8, 8)),
    Behaviour("einsum", program(lambda self, a, b: torch.einsum("bij,bjk->bik", a, b)),
              lambda: (torch.randn(2, 3, 4), torch.randn(2, 4, 5))),
    Behaviour("sdpa", program(lambda self, q, k, v: F.scaled_dot_product_attention(
        q, k, v, is_causal=True)), lambda: tuple(torch.randn(1, 2, 4, 8) for _ in range(3))),
    Behaviour("where_one_argument", program(lambda self, x: torch.where(x > 0)), _x(2, 3)),
    Behaviour("nonzero", program(lambda self, x: torch.nonzero(x)),
              lambda: (torch.tensor([0.0, 1.0, 0.0, 2.0]),),
              more=(lambda: (torch.tensor([1.0, 1.0, 0.0, 2.0]),),)),
    Behaviour("run_decompositions_keeps_behaviour",
              program(lambda self, x: F.gelu(self.lin(x)).softmax(-1), _linear), _x(2, 3),
              check=_decomposed_matches),
    Behaviour("arange_and_full_like",
              program(lambda self, x: x + torch.arange(x.shape[-1]) + torch.full_like(x, 2.0)),
              _x(2, 5)),
    Behaviour("dtype_promotion_and_cast",
              program(lambda self, x, i: (x * i).to(torch.float64) + i.sum()),
              lambda: (torch.randn(3), torch.arange(3))),
    Behaviour("tensor_methods_chain",
              program(lambda self, x: x.transpose(0, 1).contiguous().view(-1).cumsum(0)
                      .flip(0).unsqueeze(0).expand(2, -1)), _x(3, 4)),
    Behaviour("topk_and_sort", program(lambda self, x: (x.topk(2).values, x.sort(-1)[1])),
              _x(3, 5)),
    Behaviour("complex_numbers", program(lambda self, x: torch.view_as_real(
        torch.view_as_complex(x) * (1 + 2j))), _x(3, 2)),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
