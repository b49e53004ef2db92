"""Patterns from real libraries (found exporting Hugging Face models): registries keyed by
modules, dict subclasses with their own methods, imports inside functions, global state set
and reset around a call, introspection, objects with container protocols."""
import contextvars
import inspect
import math

import pytest
import torch
import torch.nn as nn

import unbroken

REGISTRY: dict = {}


class Registry(dict):
    """Keys stored by class name: ``get`` must run this code, not dict.get."""

    def __setitem__(self, module, value):
        super().__setitem__(type(module).__name__, value)

    def get(self, module):
        return super().get(type(module).__name__) or {}


SETTINGS = Registry()


class Switch:
    """A set/reset global, like transformers' CompileableContextVar."""

    def __init__(self):
        self.value = None
        self.var = contextvars.ContextVar("switch", default=None)

    def set(self, value):
        self.value = value
        return "token"

    def reset(self, token):
        self.value = None


SWITCH = Switch()


class Bag:
    def __init__(self, items):
        self._items = list(items)

    def __iter__(self):
        return iter(self._items)

    def __len__(self):
        return len(self._items)

    def __contains__(self, item):
        return item in self._items

    def __getitem__(self, index):
        return self._items[index]


BAG = Bag(["a", "b", "c"])


class Library(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        REGISTRY[self.lin] = 2.0     # a dict keyed by a module
        SETTINGS[self] = {"scale": 3.0}

    def helper(self, x, y=1):
        return x * y

    def forward(self, x):
        import math as m              # already imported: only a lookup
        from torch.nn import functional as F
        token = SWITCH.set("on")
        try:
            scale = SETTINGS.get(self)["scale"] * REGISTRY[self.lin]
            arity = len(inspect.signature(self.helper).parameters)
            hidden = F.relu(self.lin(x)) * scale * arity
            if callable(self.helper) and "b" in BAG and len(BAG) == 3:
                hidden = hidden + m.pi + sum(1 for _ in BAG) + len(BAG[1])
        finally:
            SWITCH.reset(token)
        return hidden


def test_library_patterns_export_and_match():
    model = Library()
    ep = unbroken.export(model, (torch.randn(2, 4),))
    x = torch.randn(2, 4)
    torch.testing.assert_close(ep.module()(x), model(x))
    assert SWITCH.value is None       # the real object was never changed


class LeavesStateChanged(nn.Module):
    def forward(self, x):
        SWITCH.set("left on")
        return x + 1


def test_a_global_change_not_undone_is_refused():
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(LeavesStateChanged(), (torch.randn(2),))
    assert info.value.code == "UB107" and "Switch.value" in info.value.message
    assert SWITCH.value is None


def test_importing_a_module_for_the_first_time_is_refused():
    def f(x):
        import unbroken_not_a_module_xyz  # noqa: F401
        return x

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(f, (torch.randn(2),))
    assert info.value.code == "UB111"


_ = math  # imported at module level so that `import math as m` above is a lookup
