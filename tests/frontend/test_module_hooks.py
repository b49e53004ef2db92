"""Forward hooks and pre-hooks registered inside forward() (``frontend.variables.module_hooks``).

Eager runs a hook registered in forward() in every later call of the module, the same forward
too. Each program is compared with eager's first call from a fresh copy of the model, bit for
bit, and the caller's model must be left exactly as it was, hooks included
(``tests.state_leak``), on success and on refusal.
"""
import copy

import pytest
import torch
from torch import nn

import unbroken
from tests.exactness import assert_bit_exact
from tests.state_leak import ModelSnapshot


def hook_dicts(model) -> list:
    return [(path, dict(m._forward_hooks), dict(m._forward_pre_hooks),
             dict(m._forward_hooks_with_kwargs), dict(m._forward_pre_hooks_with_kwargs))
            for path, m in model.named_modules()]


def export_and_compare(model, *args):
    """Export, check the model is unchanged (hooks included), compare with eager's first call
    of a copy taken before the export; returns the program."""
    fresh, before, hooks = copy.deepcopy(model), ModelSnapshot.of(model), hook_dicts(model)
    ep = unbroken.export(model, args)
    assert before.diff(ModelSnapshot.of(model)) == [] and hook_dicts(model) == hooks
    assert_bit_exact(ep.module()(*args), fresh(*args))
    assert hook_dicts(model) == hooks  # running the program registers nothing either
    return ep


def refusal(model, *args) -> unbroken.UnbrokenError:
    before, hooks = ModelSnapshot.of(model), hook_dicts(model)
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(model, args)
    assert before.diff(ModelSnapshot.of(model)) == [] and hook_dicts(model) == hooks
    return info.value


class Pair(nn.Module):
    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.a, self.b = nn.Linear(4, 4), nn.Linear(4, 4)


class DoubleThenRemove(Pair):
    def forward(self, x):
        handle = self.a.register_forward_hook(lambda module, args, out: out * 2)
        first = self.a(x)         # the hook doubles it
        handle.remove()
        handle.remove()           # a second remove does nothing, as in eager
        return first, self.a(x)   # removed: not doubled


def test_hook_registered_in_forward_changes_later_calls_and_is_removed():
    model, x = DoubleThenRemove(), torch.randn(2, 4)
    ep = export_and_compare(model, x)
    first, second = ep.module()(x)
    assert_bit_exact(first, second * 2)


class Ordered(Pair):
    """Pre-hooks with kwargs, prepend, and hooks the module had before export (first)."""

    def forward(self, x):
        self.b.register_forward_hook(lambda module, args, out: out + 1)
        self.b.register_forward_hook(lambda module, args, out: out * 3, prepend=True)
        self.b.register_forward_pre_hook(
            lambda module, args, kwargs: ((args[0] - 1,), kwargs), with_kwargs=True)
        return self.b(self.a(x))


def test_order_prepend_and_kwargs_are_eagers():
    model = Ordered()
    model.b.register_forward_hook(lambda module, args, out: out.sin())
    export_and_compare(model, torch.randn(2, 4))


class Capture(nn.Module):
    """transformers' output capture: hooks installed once (a flag on the model), recording
    each layer's output into a list that forward() then reads."""

    def __init__(self):
        super().__init__()
        torch.manual_seed(0)
        self.layers = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def install(self, collected):
        if getattr(self, "installed", False):
            return
        for layer in self.layers:
            layer.register_forward_hook(lambda module, args, out: collected.append(out))
        self.installed = True

    def forward(self, x):
        collected = []
        self.install(collected)
        for layer in self.layers:
            x = layer(x).relu()
        return x, torch.stack(collected)


def test_capturing_hooks_installed_in_forward_record_outputs():
    model, x = Capture(), torch.randn(2, 4)
    with pytest.warns(unbroken.StateWriteWarning):  # `installed`: read, then written
        export_and_compare(model, x)
    assert not hasattr(model, "installed")


class SelfHook(nn.Module):
    """A module that registers a forward hook on itself inside its own forward: eager's call
    began without hooks (fast path), so the hook runs from the next call on; with a pre-hook
    present the call is on the slow path, which reads the forward hooks after forward."""

    def __init__(self):
        super().__init__()
        self.inner = nn.Module()
        self.inner.forward = self.inner_forward

    def inner_forward(self, x):
        self.inner.register_forward_hook(lambda module, args, out: out + 10)
        return x * 2

    def forward(self, x):
        return self.inner(x), self.inner(x)


def test_hook_on_the_running_module_follows_eagers_fast_path():
    model, x = SelfHook(), torch.randn(3)
    ep = export_and_compare(model, x)
    first, second = ep.module()(x)
    assert_bit_exact(first, x * 2)  # began without hooks: its own hook runs from the next call
    assert_bit_exact(second, x * 2 + 10 + 10)  # began with one, its own joins it
    model.inner.register_forward_pre_hook(lambda module, args: None)
    ep = export_and_compare(model, x)
    first, second = ep.module()(x)
    assert_bit_exact(first, x * 2 + 10)
    assert_bit_exact(second, x * 2 + 10 + 10)


class AlwaysCall(Pair):
    def forward(self, x):
        self.a.register_forward_hook(lambda module, args, out: out, always_call=True)
        return self.a(x)


class InsideNative(nn.Module):
    def __init__(self):
        super().__init__()
        self.enc = nn.TransformerEncoderLayer(8, 2, 16, dropout=0.0, batch_first=True)

    def forward(self, x):
        self.enc.linear1.register_forward_hook(lambda module, args, out: out * 0)
        return self.enc(x)


class ReadsHookDict(Pair):
    def forward(self, x):
        self.a.register_forward_hook(lambda module, args, out: out)
        return self.a(x) * len(self.a._forward_hooks)


class InBranch(Pair):
    def forward(self, x):
        def true_fn(x):
            self.a.register_forward_hook(lambda module, args, out: out)
            return x + 1

        return torch.cond(x.sum() > 0, true_fn, lambda x: x - 1, (x,))


OUTSIDE = nn.ReLU()  # a module that is not part of the model


class HooksOutside(nn.Module):
    def __init__(self, remove: bool):
        super().__init__()
        self.remove = remove

    def forward(self, x):
        handle = OUTSIDE.register_forward_hook(lambda module, args, out: out * 2)
        y = OUTSIDE(x)
        if self.remove:
            handle.remove()
        return y


def test_a_hook_on_an_outside_module_must_be_removed_by_the_end():
    x = torch.randn(2, 4)
    export_and_compare(HooksOutside(remove=True), x)
    error = refusal(HooksOutside(remove=False), x)
    assert error.code == "UB107" and "not part of the model" in str(error)
    assert not OUTSIDE._forward_hooks


@pytest.mark.parametrize("model, code, words", [
    (AlwaysCall(), "UB109", "always_call=True"),
    (InsideNative(), "UB109", "only runs inside `enc`"),
    (ReadsHookDict(), "UB109", "`self.a._forward_hooks` read after forward() registered"),
    (InBranch(), "UB107", "from inside a torch.cond branch"),
])
def test_hooks_that_cannot_equal_eager_are_refused_at_the_line(model, code, words):
    x = torch.randn(2, 8) if isinstance(model, InsideNative) else torch.randn(2, 4)
    error = refusal(model, x.unsqueeze(0) if isinstance(model, InsideNative) else x)
    assert error.code == code and words in str(error)
    assert error.frames[-1].filename == __file__
