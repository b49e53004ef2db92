"""UB104 (an uncaught exception in the traced program) claims that eager fails too only after
checking it (unbroken.exporter.uncaught); otherwise the failure is unbroken's."""
import pytest
import torch
import torch.nn as nn

import unbroken


class Raises(nn.Module):
    def forward(self, x):
        if x.shape[0] > 2:
            raise ValueError("too big")
        return x


def test_checked_when_eager_fails_too():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Raises(), (torch.randn(3),))
    assert info.value.code == "UB104"
    assert "Checked: running the model eagerly on the same inputs fails too (ValueError: too " \
           "big)" in info.value.details


class RaisesOnlyWhenTraced(nn.Module):
    """Raises in the trace, but its copy (which the eager check runs) does not: stands for a
    construct the interpreter models differently from CPython, whatever that construct is."""

    def __init__(self, fail=True):
        super().__init__()
        self.fail = fail

    def forward(self, x):
        if self.fail:
            raise ValueError("only in the trace")
        return x + 1

    def __deepcopy__(self, memo):
        return RaisesOnlyWhenTraced(fail=False)


def test_a_trace_only_exception_is_an_internal_error():
    with pytest.raises(unbroken.InternalError) as info:
        unbroken.export(RaisesOnlyWhenTraced(), (torch.ones(2),))
    assert "ValueError: only in the trace, which eager execution on the same inputs does not " \
           "raise" in info.value.message
    assert "eager execution would fail" not in info.value.render()
    assert not isinstance(info.value, unbroken.RefusalError)


class Uncopyable(nn.Module):
    def __init__(self):
        super().__init__()
        self.lock = __import__("threading").Lock()  # deepcopy refuses locks

    def forward(self, x):
        raise KeyError("missing")


def test_not_checked_when_the_model_cannot_be_copied():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(Uncopyable(), (torch.randn(2),))
    assert "was not checked" in info.value.details


def test_eager_check_changes_nothing_the_user_owns():
    class Counts(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("seen", torch.zeros(()))

        def forward(self, x):
            self.seen.add_(1)
            torch.randn(3)
            raise RuntimeError("stop")

    model, x = Counts(), torch.randn(2)
    torch.manual_seed(0)
    state = torch.random.get_rng_state()
    with pytest.raises(unbroken.GraphBreakError, match="Checked"):
        unbroken.export(model, (x,))
    assert model.seen.item() == 0
    assert torch.equal(torch.random.get_rng_state(), state)


class _Sub(torch.Tensor):
    pass


class SubclassParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(2).as_subclass(_Sub))

    def forward(self, x):
        return x * self.w


def _forward_on_instance():
    model = Wrapped()
    model.forward = model.forward  # a bound method stored on the instance
    return model


class Wrapped(nn.Module):
    def forward(self, x):
        return x + 1


@pytest.mark.parametrize("make", [_forward_on_instance, SubclassParameter],
                         ids=["forward_on_instance", "tensor_subclass_parameter"])
def test_the_cases_eager_runs_are_never_said_to_fail_in_eager(make):
    """Issue 6 item 9's examples: eager runs them, so unbroken either exports a program equal
    to eager or reports its own failure (InternalError); never a refusal claiming that
    "eager execution would fail on these inputs too"."""
    model, x = make(), torch.ones(2)
    expected = model(x)
    try:
        ep = unbroken.export(model, (x,))
    except unbroken.InternalError:
        return
    torch.testing.assert_close(ep.module()(x), expected.as_subclass(torch.Tensor))
