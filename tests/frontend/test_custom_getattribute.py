"""Reads through a ``__getattribute__`` written in Python (transformers' configs): a read of an
outside object that gave an immutable constant and changed nothing is answered again without
interpreting (``variables.objects._custom_getattribute``) until the trace changes anything it
could have read. Each model reads the same attribute before and after such a change; the
program must give eager's values."""
import pytest
import torch
from torch import nn

import unbroken
import unbroken.frontend.variables.objects as objects


class Config:
    """A config mapping aliases through its own ``__getattribute__``, with a property that
    reads a list it holds and one that reads the grad mode."""

    attribute_map = {"width": "hidden"}

    def __init__(self):
        self.hidden = 3
        self.scales = [2.0]
        self.inner = Inner()

    def __getattribute__(self, key):
        if key != "attribute_map" and key in super().__getattribute__("attribute_map"):
            key = super().__getattribute__("attribute_map")[key]
        return super().__getattribute__(key)

    @property
    def first_scale(self):
        return self.scales[0]

    @property
    def inner_n(self):
        return self.inner.n

    @property
    def grad_on(self):
        return torch.is_grad_enabled()


class Inner:
    def __init__(self):
        self.n = 1


class ReadsTwice(nn.Module):
    def __init__(self, change):
        super().__init__()
        self.config = Config()
        self.change = change

    def forward(self, x):
        before = x * self.config.width + self.config.first_scale + self.config.inner_n
        # read again: the first read of a held list takes the trace's copy of it (a change
        # itself); this one changes nothing and is remembered
        before = before + self.config.width + self.config.first_scale + self.config.inner_n
        self.change(self.config)
        after = x * self.config.width + self.config.first_scale + self.config.inner_n
        return before, after


def _attribute(config):
    config.hidden = 5


def _list_item(config):
    config.scales[0] = 7.0


def _list_append_then_pop(config):
    config.scales.insert(0, 11.0)


def _nested(config):
    config.inner.n = 4


def _nothing(config):
    pass


@pytest.mark.parametrize("change", [_attribute, _list_item, _list_append_then_pop, _nested,
                                    _nothing])
def test_a_read_after_a_change_sees_it(change):
    model, x = ReadsTwice(change), torch.randn(3)
    want = ReadsTwice(change)(x)  # eager changes its own config, not the exported model's
    program = unbroken.export(model, (x,))
    for got, expected in zip(program.module()(x), want):
        torch.testing.assert_close(got, expected, rtol=0, atol=0)
    assert model.config.hidden == 3 and model.config.scales[-1] == 2.0  # left unchanged


class ReadsGradMode(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()

    def forward(self, x):
        outside = x + float(self.config.grad_on)
        with torch.no_grad():
            inside = x + float(self.config.grad_on)
        return outside, inside


def test_a_read_under_another_grad_mode_is_interpreted_again():
    model, x = ReadsGradMode(), torch.randn(3)
    got = unbroken.export(model, (x,)).module()(x)
    want = model(x)
    for a, b in zip(got, want):
        torch.testing.assert_close(a, b, rtol=0, atol=0)
    # (x + 1.0) - x is not always 1.0 in float32: compare with eager's sums themselves
    assert torch.equal(got[0], x + 1.0) and torch.equal(got[1], x + 0.0)


class ReadsOften(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.linears = nn.ModuleList(nn.Linear(3, 3) for _ in range(4))

    def forward(self, x):
        for linear in self.linears:
            x = linear(x) * self.config.width
        return x


def test_an_unchanged_read_is_interpreted_once(monkeypatch):
    """The four reads of ``config.width`` between ops (which change no Python state) run the
    config's ``__getattribute__`` once."""
    calls = []
    real = objects.call_python
    monkeypatch.setattr(objects, "call_python",
                        lambda tx, fn, *a, **k: calls.append(fn.__name__) or real(tx, fn, *a, **k))
    model, x = ReadsOften(), torch.randn(2, 3)
    program = unbroken.export(model, (x,))
    torch.testing.assert_close(program.module()(x), model(x), rtol=0, atol=0)
    assert calls.count("__getattribute__") == 1


class Logged:
    """Every attribute read through its ``__getattribute__`` is logged: a read run natively
    stays in the log (the trace's own interpreted reads are undone with the overlay)."""

    __slots__ = ("log", "scale", "names", "__dict__")

    def __init__(self):
        object.__setattr__(self, "log", [])
        object.__setattr__(self, "scale", 2.0)
        object.__setattr__(self, "names", {"a": 1})
        object.__setattr__(self, "extra", 5)

    def __getattribute__(self, name):
        object.__getattribute__(self, "log").append(name)
        return object.__getattribute__(self, name)


class LoggedUser(nn.Module):
    def __init__(self):
        super().__init__()
        self.settings = Logged()

    def forward(self, x):
        s = self.settings
        y = x * s.scale + s.extra                       # a slot and an instance attribute
        if isinstance(s, torch.Tensor) or isinstance(s, (list, nn.Module)):  # fail: __class__
            y = y - 100
        if isinstance(s, Logged) and "a" in s.names:
            y = y + s.names["a"]
        own = super(Logged, s).__getattribute__("__dict__")  # transformers' configs read it
        return _helper(y, s) + own.get("extra", 0)


def _helper(y, settings):
    return y * settings.scale


def test_export_never_runs_a_python_getattribute_natively():
    """Export runs the user's ``__getattribute__`` only where the program does, interpreted:
    never natively for its own lookups and type tests (which once ran it dozens of times per
    read, a change to the user's object that outlived the export). First and later exports
    alike; the program gives eager's values."""
    model, x = LoggedUser(), torch.randn(4)
    log = object.__getattribute__(model.settings, "log")
    want = model(x)
    assert "__class__" in log  # eager's failed isinstance asks it
    log.clear()
    for _ in range(2):
        ep = unbroken.export(model, (x,))
        assert log == []
    assert torch.equal(ep.module()(x), want)


GLOBAL_LOGGED = Logged()


class WritesAGlobal(nn.Module):
    """Writes an outside object's attribute and reads it back: refused (the read passes the
    object to ``object.__getattribute__`` natively after a write), which must still leave
    the object as it was."""

    def forward(self, x):
        old = GLOBAL_LOGGED.scale
        GLOBAL_LOGGED.scale = 3.0
        y = x * GLOBAL_LOGGED.scale
        GLOBAL_LOGGED.scale = old
        return y


class Dynamic:
    """Attributes it lacks come from a ``__getattr__`` written in Python, which logs them."""

    def __init__(self):
        self.asked = []

    def __getattr__(self, name):
        self.asked.append(name)
        raise AttributeError(name)


GLOBAL_DYNAMIC = Dynamic()


class SetsAndDeletes(nn.Module):
    def forward(self, x):
        GLOBAL_DYNAMIC.factor = 2.0
        y = x * GLOBAL_DYNAMIC.factor
        del GLOBAL_DYNAMIC.factor
        return y


def test_a_refused_write_leaves_the_object_as_it_was():
    log = object.__getattribute__(GLOBAL_LOGGED, "log")
    log.clear()
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(WritesAGlobal(), (torch.randn(3),))
    assert info.value.code == "UB107"
    assert log == [] and object.__getattribute__(GLOBAL_LOGGED, "scale") == 2.0


def test_a_write_asks_whether_the_attribute_exists_without_the_users_code():
    """``hasattr`` would call the class's ``__getattr__`` for the missing name natively."""
    GLOBAL_DYNAMIC.asked.clear()
    model, x = SetsAndDeletes(), torch.randn(3)
    ep = unbroken.export(model, (x,))
    assert GLOBAL_DYNAMIC.asked == [] and "factor" not in vars(GLOBAL_DYNAMIC)
    assert torch.equal(ep.module()(x), model(x))
