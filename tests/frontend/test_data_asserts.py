"""``assert`` on tensor data becomes a run-time check in the program, as torch.export makes
it: ``aten._assert_async`` for a tensor condition, ``aten._assert_scalar`` for a condition on
a value read with ``.item()`` (and ``torch._check`` on data). The program raises on an input
that violates it; side by side with torch.export (strict for tensor conditions, which
non-strict refuses; the default for ``.item()`` ones, which strict drops from its graph).

PYTEST_DONT_REWRITE: the models' ``assert`` statements must stay Python's own bytecode."""
from __future__ import annotations

import pytest
import torch

import unbroken
from tests.exactness import assert_bit_exact


class LengthsBounded(torch.nn.Module):
    def forward(self, x, lengths):
        assert lengths.max().item() <= 8, "lengths exceed the buffer"
        return x * 2


class AllPositive(torch.nn.Module):
    def forward(self, x):
        assert (x > 0).all()
        return x + 1


class AllPositiveSaid(torch.nn.Module):
    def forward(self, x):
        assert (x > 0).all(), "negative input"
        return x + 1


class NoneNegative(torch.nn.Module):
    def forward(self, x):
        assert not (x < 0).any()
        return x - 1


class CheckedSum(torch.nn.Module):
    def forward(self, x):
        torch._check(x.sum().item() > 0)
        return x.cos()


def _targets(program):
    return {str(n.target) for n in program.graph.nodes if n.op == "call_function"}


# peer: how torch.export exports it (True: strict, False: non-strict), or None where both of
# torch's modes refuse it (strict cannot jump on a tensor inside `assert not`, non-strict
# cannot guard on the data).
CASES = [
    pytest.param(LengthsBounded, (torch.ones(3), torch.tensor([3, 5])),
                 (torch.ones(3), torch.tensor([3, 20])), "aten._assert_scalar.default",
                 True, id="item-bound"),
    pytest.param(AllPositive, (torch.ones(3),), (-torch.ones(3),), "aten._assert_async.msg",
                 True, id="tensor-all"),
    pytest.param(NoneNegative, (torch.ones(3),), (-torch.ones(3),), "aten._assert_async.msg",
                 None, id="assert-not"),
    pytest.param(CheckedSum, (torch.ones(3),), (-torch.ones(3),),
                 "aten._assert_scalar.default", False, id="torch-check-item"),
]


@pytest.mark.parametrize("model_class, args, violating, check_op, strict", CASES)
def test_data_assertion_is_checked_when_the_program_runs(model_class, args, violating,
                                                         check_op, strict):
    model = model_class()
    ours = unbroken.export(model, args)
    assert check_op in _targets(ours)
    assert_bit_exact(ours.module()(*args), model(*args))
    with pytest.raises((AssertionError, RuntimeError)):  # eager: the assert, torch._check
        model(*violating)
    with pytest.raises(RuntimeError):
        ours.module()(*violating)
    if strict is None:
        for mode in (True, False):
            with pytest.raises(Exception):  # noqa: B017 - torch's exporters refuse it
                torch.export.export(model, args, strict=mode)
        return
    peer = torch.export.export(model, args, strict=strict)
    assert_bit_exact(peer.module()(*args), model(*args))


def test_the_asserts_own_message_is_the_checks_message():
    """The program raises with the assert's message, as eager's AssertionError (and torch
    strict's program) say it; a message computed at run time is not part of the program."""
    ours = unbroken.export(AllPositiveSaid(), (torch.ones(3),))
    (check,) = [n for n in ours.graph.nodes if n.target is torch.ops.aten._assert_async.msg]
    assert check.args[1] == "negative input"
    with pytest.raises(RuntimeError, match="negative input"):
        ours.module()(-torch.ones(3))
    (check,) = [n for n in unbroken.export(AllPositive(), (torch.ones(3),)).graph.nodes
                if n.target is torch.ops.aten._assert_async.msg]
    assert check.args[1] == "assertion error"


def test_a_multi_element_tensor_condition_is_still_refused():
    """bool() of a tensor with several elements raises in eager: nothing to check later."""
    class Ambiguous(torch.nn.Module):
        def forward(self, x):
            assert x > 0
            return x

    with pytest.raises(unbroken.GraphBreakError):
        unbroken.export(Ambiguous(), (torch.ones(3),))


def test_a_size_condition_stays_a_guard():
    """An assert on sizes is decided at export time (a guard), not checked at run time."""
    class Sized(torch.nn.Module):
        def forward(self, x):
            assert x.shape[0] > 1
            return x * 3

    program = unbroken.export(Sized(), (torch.ones(3),))
    assert not {"aten._assert_async.msg", "aten._assert_scalar.default"} & _targets(program)
