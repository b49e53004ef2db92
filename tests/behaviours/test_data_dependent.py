"""Data-dependent values: .item(), .tolist(), nonzero, torch._check, runtime assertions."""
from __future__ import annotations

import math

import pytest
import torch

from tests.behaviours.harness import Behaviour, params, program, side_by_side


def _full_from_item(self, x):
    b = x.item()
    torch._check_is_size(b)
    return torch.full((b, 1), 1)


def _checked_range(self, x):
    b = x.item()
    torch._check_is_size(b)
    torch._check(b >= 4)
    torch._check(b <= 5)
    return torch.full((b, 1), 1)


def _narrow_unbacked(self, x, seq_len):
    n = seq_len.item()
    torch._check_is_size(n, max=x.size(1))
    return x.narrow(1, 0, n)


def _bincount_tolist(self, xs):
    u0, u1 = xs.tolist()
    torch._check_is_size(u0)
    torch._check_is_size(u1)
    return torch.bincount(torch.ones(u0, dtype=torch.int64), minlength=u1)


def _nonzero_static(self, seq, mask, exp):
    index = torch.nonzero_static(mask, size=exp.shape[0])
    chunks = index.chunk(chunks=mask.dim(), dim=1)
    return seq[chunks].squeeze() * 2


def _check_eq(self, x1, x2, x3, y):
    z1, z2, z3 = x1.item(), x2.item(), x3.item()
    torch._check(z1 == (z2 + z3))
    if z2 + z3 == z1:
        return y * 2
    return y + 3


def _slice_item(self, x, y):
    b = x.item()
    torch._check_is_size(b)
    torch._check(b < y.size(0))
    return y[:b]


def _select_item(self, x, i):
    k = i.item()
    torch._check(k >= 0)
    torch._check(k < x.shape[0])
    return x[k]


def _unchecked_branch(self, x):
    if x.item() > 2:
        return torch.ones(2)
    return torch.zeros(2)


def _assert_on_shape(self, x):
    assert x.shape[0] > 2, "need three rows"
    return x.sum(0)


def _torch_assert(self, x):
    torch._assert(x.shape[0] > 1, "need two rows")
    return x * 2


def _repeat_interleave(self, x, r):
    return torch.repeat_interleave(x, r, dim=0)


def _split_tolist(self, x, sizes):
    parts = sizes.tolist()
    for p in parts:
        torch._check_is_size(p)
    torch._check(sum(parts) == x.shape[0])
    return [t.sum(0) for t in x.split(parts)]


def _unique_count(self, x):
    return torch.unique(x).numel()


def _scalar_multiply(self, x, s):
    return x * s.item()


def _float_item_arith(self, x, t):
    v = t.item()
    return x * (v * 2 + 1)


def _float_item_squared(self, s, x):
    f = s.item()
    return x + f * f


def _float_item_cubed(self, s, x):
    f = s.item()
    return x + f ** 3 - 2 * f ** 2


def _int_item_squared(self, s, x):
    n = s.item()
    return x + n * n + n ** 2.0


def _math_pow_item(self, x, y):
    return y * math.pow(x.item(), 2)


def _abs_item(self, x, y):
    return y * abs(x.item())


def _slice_by_tolist(self, bounds, y):
    a, b = bounds.tolist()
    return y[a:b] * 2


BEHAVIOURS = [
    Behaviour("item_to_full", program(_full_from_item), lambda: (torch.tensor([3]),),
              more=(lambda: (torch.tensor([5]),),)),
    Behaviour("checked_range_runtime_assert", program(_checked_range),
              lambda: (torch.tensor([4]),), rejects=(lambda: (torch.tensor([3]),),
                                                      lambda: (torch.tensor([6]),))),
    Behaviour("narrow_by_item", program(_narrow_unbacked),
              lambda: (torch.randn(10, 7), torch.tensor(5)),
              more=(lambda: (torch.randn(10, 7), torch.tensor(2)),)),
    Behaviour("tolist_bincount", program(_bincount_tolist), lambda: (torch.tensor([20, 10]),),
              more=(lambda: (torch.tensor([5, 10]),),)),
    Behaviour("nonzero_static", program(_nonzero_static),
              lambda: (torch.randn(5, 5), torch.ones(5, 5, dtype=torch.bool), torch.randn(25))),
    Behaviour("check_equality_decides_branch", program(_check_eq),
              lambda: (torch.tensor(6), torch.tensor(3), torch.tensor(3), torch.randn(1)),
              rejects=(lambda: (torch.tensor(6), torch.tensor(3), torch.tensor(2),
                                torch.randn(1)),)),
    Behaviour("slice_by_checked_item", program(_slice_item),
              lambda: (torch.tensor(3), torch.randn(10)),
              more=(lambda: (torch.tensor(7), torch.randn(10)),),
              rejects=(lambda: (torch.tensor(12), torch.randn(10)),)),
    Behaviour("slice_by_unchecked_tolist", program(_slice_by_tolist),
              lambda: (torch.tensor([1, 4]), torch.randn(6)),
              more=(lambda: (torch.tensor([-3, 5]), torch.randn(6)),
                    lambda: (torch.tensor([4, 1]), torch.randn(6)),
                    lambda: (torch.tensor([0, 100]), torch.randn(6)))),
    Behaviour("float_item_squared_admits_negatives", program(_float_item_squared),
              lambda: (torch.tensor(2.5), torch.randn(3)),
              more=(lambda: (torch.tensor(-1.0), torch.randn(3)),
                    lambda: (torch.tensor(-3.5), torch.randn(3)))),
    Behaviour("float_item_cubed_admits_negatives", program(_float_item_cubed),
              lambda: (torch.tensor(2.5), torch.randn(3)),
              more=(lambda: (torch.tensor(-1.5), torch.randn(3)),)),
    Behaviour("int_item_squared_admits_negatives", program(_int_item_squared),
              lambda: (torch.tensor(3), torch.randn(3)),
              more=(lambda: (torch.tensor(-4), torch.randn(3)),)),
    Behaviour("select_by_item", program(_select_item),
              lambda: (torch.randn(5, 2), torch.tensor(3)),
              more=(lambda: (torch.randn(5, 2), torch.tensor(0)),)),
    Behaviour("unchecked_data_branch_refused", program(_unchecked_branch),
              lambda: (torch.tensor(3),), expect="refuses"),
    Behaviour("python_assert_on_shape", program(_assert_on_shape), lambda: (torch.randn(3, 2),)),
    Behaviour("torch_assert_on_shape", program(_torch_assert), lambda: (torch.randn(3, 2),)),
    Behaviour("repeat_interleave_tensor_repeats", program(_repeat_interleave),
              lambda: (torch.randn(3, 2), torch.tensor([1, 0, 2])),
              more=(lambda: (torch.randn(3, 2), torch.tensor([2, 2, 2])),)),
    Behaviour("split_by_tolist", program(_split_tolist),
              lambda: (torch.randn(6, 2), torch.tensor([2, 4])),
              more=(lambda: (torch.randn(6, 2), torch.tensor([5, 1])),)),
    Behaviour("unique_numel_output", program(_unique_count),
              lambda: (torch.tensor([1, 2, 2, 3]),)),
    Behaviour("masked_select", program(lambda self, x: torch.masked_select(x, x.ge(0.5))),
              lambda: (torch.rand(3, 4),), more=(lambda: (torch.rand(3, 4),),)),
    Behaviour("boolean_mask_index", program(lambda self, x: x[x > 0] * 2),
              lambda: (torch.randn(6),), more=(lambda: (torch.randn(6),),)),
    Behaviour("item_as_scalar_operand", program(_scalar_multiply),
              lambda: (torch.randn(3), torch.tensor(2.5)),
              more=(lambda: (torch.randn(3), torch.tensor(-1.0)),)),
    Behaviour("float_item_arithmetic", program(_float_item_arith),
              lambda: (torch.randn(3), torch.tensor(0.5)),
              more=(lambda: (torch.randn(3), torch.tensor(3.0)),)),
    Behaviour("tensor_of_int_item", program(lambda self, u: torch.tensor([u.item()])),
              lambda: (torch.tensor([3]),), more=(lambda: (torch.tensor([-5]),),)),
    Behaviour("tensor_of_float_item", program(lambda self, u: torch.tensor([[u.item(), 1]])),
              lambda: (torch.tensor([0.25]),), more=(lambda: (torch.tensor([-7.5]),),)),
    Behaviour("tensor_of_bool_item", program(lambda self, u: torch.tensor([u.item()])),
              lambda: (torch.tensor([True]),), more=(lambda: (torch.tensor([False]),),)),
    Behaviour("math_pow_of_item", program(_math_pow_item),
              lambda: (torch.tensor(5), torch.randn(5)),
              more=(lambda: (torch.tensor(-2), torch.randn(5)),),
              torch_fails="specializes the item `math.pow` converts with float() (torch's "
                          "non-strict export computes it)"),
    Behaviour("abs_of_float_item", program(_abs_item),
              lambda: (torch.tensor(-2.5), torch.randn(5)),
              more=(lambda: (torch.tensor(3.0), torch.randn(5)),)),
    Behaviour("abs_of_int_item", program(_abs_item),
              lambda: (torch.tensor(-3), torch.randn(5)),
              more=(lambda: (torch.tensor(4), torch.randn(5)),)),
    Behaviour("bool_of_tensor_returned", program(lambda self, x: bool(x.eq(0.1).any())),
              lambda: (torch.randn(8),), more=(lambda: (torch.full((8,), 0.1),),)),
    Behaviour("float_of_tensor_scales", program(lambda self, x: x * float(x.sum())),
              lambda: (torch.randn(8),), more=(lambda: (torch.randn(8),),)),
    Behaviour("int_of_tensor_scales", program(lambda self, x: x * int(x.argmax())),
              lambda: (torch.randn(8),), more=(lambda: (torch.randn(8),),)),
    Behaviour("tensor_of_items_given_dtype",
              program(lambda self, u, v: torch.tensor([u.item(), v.item()],
                                                      dtype=torch.float64)),
              lambda: (torch.tensor(3), torch.tensor(True)),
              more=(lambda: (torch.tensor(-2), torch.tensor(False)),)),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
