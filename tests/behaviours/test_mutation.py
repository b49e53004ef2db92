"""Mutation: buffers and inputs written in place, state across calls, aliasing of outputs."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn

from tests.behaviours.harness import Behaviour, params, program, side_by_side


def _r(*shapes):
    return lambda: tuple(torch.randn(*s) for s in shapes)


def _counter(self):
    self.register_buffer("count", torch.zeros(()))


def _count_forward(self, x):
    self.count.add_(1)
    return x * self.count


def _buffers_to_mutate(names):
    def check(ep):
        got = set(ep.run_decompositions({}).graph_signature.buffers_to_mutate.values())
        assert got == set(names), f"buffers_to_mutate {got} != {set(names)}"
    return check


def _user_inputs_to_mutate(names):
    def check(ep):
        got = set(ep.run_decompositions({}).graph_signature.user_inputs_to_mutate.values())
        assert got == set(names), f"user_inputs_to_mutate {got} != {set(names)}"
    return check


def _slice_assign(self, x):
    x[0] = 0
    return x.sum()


def _view_inplace(self, x):
    x[:, 0].mul_(2)
    return x + 1


def _copy_from(self, x, y):
    x.copy_(y)
    return x * 2


def _return_mutated(self, x):
    return x.add_(1)


def _list_input_mutated(self, xs):
    xs[0].add_(1)
    return xs[0] + xs[1]


def _kw_mutated(self, x, *, out):
    out.mul_(2)
    return x + out


def _bn(self):
    self.bn = nn.BatchNorm1d(4)


def _cache(self):
    self.register_buffer("cache", torch.zeros(2, 6, 3))


def _cache_write(self, x, pos):
    self.cache[:, pos] = x
    return self.cache.sum(1)


def _intermediate_inplace(self, x):
    y = x * 2
    y.relu_()
    y += 1
    return y


class _Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.tensor(10.0))

    def forward(self, x):
        self.buf.add_(1)
        return x + 2


def _child_setup(self):
    self.child = _Child()


def _child_thrice(self, x):
    y = self.child(x)
    x = y + self.child.buf
    y = self.child(x)
    x = y + self.child.buf
    y = self.child(x)
    return y + self.child.buf


def _param(self):
    self.parameter = nn.Parameter(torch.ones(4, 4))


def _no_grad_param_div(self, x):
    with torch.no_grad():
        self.parameter.div_(2)
    return x + self.parameter


def _buffer_reassigned(self):
    self.register_buffer("buf", torch.ones(2, 3), persistent=False)


def _buffer_reassign_forward(self, x):
    y = self.buf
    self.buf = self.buf + 3
    z = self.buf
    return x + y + z


def _mutate_then_read(self, x):
    self.count.add_(x.sum())
    return self.count * 2


def _aliases(self, x):
    y = x.view(-1)
    return x, y, x.t()


def _same_twice(self, x):
    y = x + 1
    return y, y


def _index_put(self, x, idx, v):
    x.index_put_((idx,), v, accumulate=True)
    return x.clone()


def _in_place_on_input_view_chain(self, x):
    x.unsqueeze(0).transpose(1, 2)[0, 0].fill_(7)
    return x * 1


def _resize_cat_state(self):
    self.register_buffer("hist", torch.zeros(3))


def _roll_state(self, x):
    self.hist.copy_(torch.roll(self.hist, 1))
    self.hist[0] = x.sum()
    return self.hist.clone()


def _out_kwarg(self, x, y, z):
    torch.add(x, y, out=z)
    return z * 2


BEHAVIOURS = [
    Behaviour("buffer_counter", program(_count_forward, _counter), _r((3,)), calls=3,
              check=_buffers_to_mutate(["count"])),
    Behaviour("input_add_", program(lambda self, x: (x.add_(1), x * 2)[1]), _r((3,)),
              check=_user_inputs_to_mutate(["x"])),
    Behaviour("input_slice_assignment", program(_slice_assign), _r((3, 2))),
    Behaviour("input_view_inplace", program(_view_inplace), _r((3, 2))),
    Behaviour("input_copy_from_other", program(_copy_from), _r((3,), (3,))),
    Behaviour("returns_mutated_input", program(_return_mutated), _r((2, 2))),
    Behaviour("list_input_mutated", program(_list_input_mutated),
              lambda: ([torch.randn(3), torch.randn(3)],)),
    Behaviour("kwarg_input_mutated", program(_kw_mutated),
              lambda: ((torch.randn(3),), {"out": torch.randn(3)}), kwargs=True),
    Behaviour("batchnorm_train_running_stats", program(lambda self, x: self.bn(x), _bn),
              _r((8, 4)), calls=2,
              check=_buffers_to_mutate(["bn.running_mean", "bn.running_var",
                                        "bn.num_batches_tracked"])),
    Behaviour("kv_cache_write_at_position", program(_cache_write, _cache),
              lambda: (torch.randn(2, 3), 2), calls=2),
    Behaviour("intermediate_inplace", program(_intermediate_inplace), _r((4,))),
    Behaviour("submodule_buffer_each_call", program(_child_thrice, _child_setup),
              lambda: (torch.ones(2, 3),), calls=2),
    Behaviour("no_grad_parameter_inplace", program(_no_grad_param_div, _param),
              _r((4, 4)), grad=False, calls=2),
    Behaviour("buffer_attribute_reassigned", program(_buffer_reassign_forward,
                                                     _buffer_reassigned),
              lambda: (torch.ones(2, 3) + 1,), calls=2,
              torch_fails="module() does not write the reassigned non-persistent buffer "
                          "back: the second call reads the old value"),
    Behaviour("buffer_mutated_then_read", program(_mutate_then_read, _counter), _r((3,)),
              calls=2),
    Behaviour("outputs_alias_input", program(_aliases), _r((2, 3))),
    Behaviour("same_output_twice", program(_same_twice), _r((2,))),
    Behaviour("index_put_accumulate_input", program(_index_put),
              lambda: (torch.zeros(5), torch.tensor([0, 2, 2]), torch.tensor([1.0, 2.0, 3.0]))),
    Behaviour("inplace_through_view_chain", program(_in_place_on_input_view_chain),
              _r((3, 4))),
    Behaviour("buffer_roll_history", program(_roll_state, _resize_cat_state), _r((2,)),
              calls=3),
    Behaviour("out_keyword_writes_input", program(_out_kwarg), _r((3,), (3,), (3,))),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
