"""Control flow: torch.cond, map, while_loop, Python loops and branches on shapes."""
from __future__ import annotations

import pytest
import torch
import torch.nn as nn
from functorch.experimental.control_flow import map as control_map
from torch._higher_order_ops.while_loop import while_loop
from torch.export import Dim

from tests.behaviours.harness import Behaviour, params, program, side_by_side


def _cond_tensor_pred(self, p, a, b):
    def true_fn(x, y):
        return x + y

    def false_fn(x, y):
        return x - y

    return torch.cond(p, true_fn, false_fn, [a, b])


def _cond_branch_item_assignment(self, x):
    def fill(t):
        y = t.clone()
        y[0] = 1.0
        return y

    return torch.cond(x.sum() > 0, fill, lambda t: t.cos(), (x,))


def _cond_closes_over_int_inputs(self, x, trigger, target):
    return torch.cond(trigger == 1, lambda: x + target, lambda: x * target, ())


def _num(self):
    self.num = 4


def _cond_int_closure(self, a, x):
    def true_fn(x):
        return x * self.num

    def false_fn(x):
        return x + self.num

    return torch.cond(a, true_fn, false_fn, (x,)) * 2


def _cond_on_shape(self, x):
    return torch.cond(x.shape[0] > 4, lambda t: t.cos(), lambda t: t.sin(), (x,))


def _cond_on_data(self, x):
    return torch.cond(x.sum() > 0, lambda t: t * 2, lambda t: t * 3, (x,))


def _cond_constant_int(self, x):
    idx = torch.cond(x.sum() > 3, lambda: 0, lambda: 1, ())
    return x[idx]


def _cond_nested(self, x):
    def outer_true(t):
        return torch.cond(t.mean() > 0, lambda u: u + 10, lambda u: u - 10, (t,))

    return torch.cond(x.sum() > 0, outer_true, lambda t: t * 0, (x,))


def _lin(self):
    self.lin = nn.Linear(3, 3)
    self.register_buffer("scale", torch.tensor(2.0))


def _cond_with_module(self, x):
    return torch.cond(x.sum() > 0, lambda t: self.lin(t), lambda t: t * self.scale, (x,))


def _cond_multi_out(self, x):
    return torch.cond(x[0] > 0, lambda t: (t + 1, t.sum()), lambda t: (t - 1, t.mean()), (x,))


def _map(self, xs, y):
    def body(x, y):
        return x * y + 1

    return control_map(body, xs, y)


def _while(self, x):
    def cond_fn(i, acc):
        return i < 5

    def body_fn(i, acc):
        return i + 1, acc * 2

    return while_loop(cond_fn, body_fn, (torch.tensor(0), x))[1]


def _loop_over_size(self, x):
    out = x
    for i in range(x.shape[0]):
        out = out + x[i]
    return out


def _python_branch_data(self, x):
    if x.sum() > 0:
        return x * 2
    return x * 3


def _loop_break(self, x):
    total = x * 0
    for i in range(10):
        if i == 3:
            break
        total = total + x * i
    return total


class _Sub(nn.Module):
    def forward(self, p, a, b):
        return _cond_tensor_pred(self, p, a, b)


def _sub(self):
    self.m1 = _Sub()


def _unflatten(ep):
    args = (torch.tensor(False), torch.ones(3, 3), torch.ones(3, 3))
    torch.testing.assert_close(torch.export.unflatten(ep)(*args), ep.module()(*args))


def _cond_unbacked(self, a):
    az = a.nonzero()
    return torch.cond(az.size(0) > 3, lambda t: (t + 1).sum(), lambda t: (t + 3).sum(),
                      (az,)) * 2


def _cond_item_closure(self, a, b1, c):
    return torch.cond(a, lambda x: x * b1.item(), lambda x: x * 2, (c,)) * 2


def _enumerate_zip(self, xs, ys):
    out = []
    for i, (x, y) in enumerate(zip(xs, ys)):
        out.append(x * y + i)
    return torch.stack(out)


BEHAVIOURS = [
    Behaviour("cond_tensor_predicate", program(_cond_tensor_pred),
              lambda: (torch.tensor(False), torch.ones(3, 3), torch.ones(3, 3)),
              more=(lambda: (torch.tensor(True), torch.ones(3, 3), torch.ones(3, 3)),)),
    Behaviour("cond_branch_item_assignment", program(_cond_branch_item_assignment),
              lambda: (torch.rand(6, 4),), more=(lambda: (-torch.rand(6, 4),),)),
    Behaviour("cond_closes_over_dynamic_int_inputs", program(_cond_closes_over_int_inputs),
              lambda: (torch.randn(2), 0, 2), dynamic_shapes=(None, Dim.DYNAMIC, Dim.DYNAMIC),
              more=(lambda: (torch.randn(2), 1, 3), lambda: (torch.randn(2), 0, -4))),
    Behaviour("cond_int_closure", program(_cond_int_closure, _num),
              lambda: (torch.tensor(True), torch.randn(10)),
              more=(lambda: (torch.tensor(False), torch.randn(10)),)),
    Behaviour("cond_on_dynamic_shape", program(_cond_on_shape), lambda: (torch.randn(6),),
              dynamic_shapes={"x": {0: Dim("n")}},
              more=(lambda: (torch.randn(3),), lambda: (torch.randn(9),))),
    Behaviour("cond_on_data", program(_cond_on_data), lambda: (torch.randn(4),),
              more=(lambda: (-torch.ones(4),), lambda: (torch.ones(4),))),
    Behaviour("cond_branches_return_ints", program(_cond_constant_int),
              lambda: (torch.randn(3, 3),), more=(lambda: (torch.ones(3, 3) * 5,),)),
    Behaviour("cond_nested", program(_cond_nested), lambda: (torch.randn(4),),
              more=(lambda: (torch.ones(4),), lambda: (-torch.ones(4),))),
    Behaviour("cond_branch_uses_module", program(_cond_with_module, _lin),
              lambda: (torch.randn(2, 3),), more=(lambda: (-torch.ones(2, 3),),)),
    Behaviour("cond_multiple_outputs", program(_cond_multi_out), lambda: (torch.randn(4),),
              more=(lambda: (-torch.ones(4),),)),
    Behaviour("cond_in_submodule_unflatten", program(lambda self, p, a, b: self.m1(p, a, b),
                                                     _sub),
              lambda: (torch.tensor(False), torch.ones(3, 3), torch.ones(3, 3)),
              check=_unflatten),
    Behaviour("cond_on_unbacked_size", program(_cond_unbacked), lambda: (torch.randn(7),),
              more=(lambda: (torch.tensor([0.0, 1.0, 0.0, 0.0, 0.0, 0.0, 0.0]),),)),
    Behaviour("cond_branch_item", program(_cond_item_closure),
              lambda: (torch.tensor(True), torch.tensor([4]), torch.randn(10))),
    Behaviour("map_over_first_dim", program(_map),
              lambda: (torch.randn(3, 4), torch.randn(4))),
    Behaviour("while_loop_doubling", program(_while), lambda: (torch.randn(3),)),
    Behaviour("python_loop_over_static_size", program(_loop_over_size),
              lambda: (torch.randn(3, 4),)),
    Behaviour("python_branch_on_data_refused", program(_python_branch_data),
              lambda: (torch.randn(4),), expect="refuses"),
    Behaviour("python_loop_break", program(_loop_break), lambda: (torch.randn(3),)),
    Behaviour("enumerate_zip_lists", program(_enumerate_zip),
              lambda: ([torch.randn(2) for _ in range(3)], [torch.randn(2) for _ in range(3)])),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
