"""``dataclasses.fields`` inside ``forward()`` (``frontend.builtins._dataclass_fields``): read
natively from the class when what the argument's ``__dataclass_fields__`` gives is the class's
own, else ``dataclasses``' own code, interpreted. Each model is exported and compared with
eager; the fast path is checked not to interpret ``fields``, the others to interpret it."""
import collections
import dataclasses
from dataclasses import dataclass, field, fields

import pytest
import torch
from torch import nn

import unbroken
from unbroken.frontend import translator


@dataclass
class Scales:
    first: float = 2.0
    second: float = 3.0
    hidden: float = field(default=5.0, repr=False)


@dataclass
class MoreScales(Scales):
    third: float = 7.0


@dataclass
class Output(collections.OrderedDict):
    """Hugging Face's ModelOutput pattern: an ordered dict whose ``__post_init__`` and
    ``__setattr__`` call ``fields(self)``."""

    logits: torch.Tensor | None = None
    hidden: torch.Tensor | None = None

    def __post_init__(self):
        for f in fields(self):
            value = getattr(self, f.name)
            if value is not None:
                self[f.name] = value

    def __setattr__(self, name, value):
        if name in {f.name for f in fields(self)} and value is not None:
            super().__setitem__(name, value)
        super().__setattr__(name, value)


@dataclass
class Logged:
    scale: float = 4.0

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


class NotADataclass:
    scale = 1.0


def _total(x, obj):
    return sum(x * getattr(obj, f.name) for f in fields(obj) if f.repr)


class FromInstanceMadeInForward(nn.Module):
    def forward(self, x):
        return _total(x, MoreScales(second=x.shape[0] * 1.0))


class FromHeldInstance(nn.Module):
    def __init__(self):
        super().__init__()
        self.scales = MoreScales(first=0.5)

    def forward(self, x):
        return _total(x, self.scales) + len(fields(self.scales))


class FromClass(nn.Module):
    def forward(self, x):
        names = [f.name for f in fields(MoreScales)]
        return x * len(names) + sum(f.default for f in fields(Scales))


class ModelOutputPattern(nn.Module):
    def forward(self, x):
        out = Output(logits=x * 2)
        out.hidden = x + 1
        return out["logits"] + out["hidden"], list(out.keys()) == ["logits", "hidden"]


FAST = [FromInstanceMadeInForward, FromHeldInstance, FromClass, ModelOutputPattern]


class NotADataclassIsTypeError(nn.Module):
    def forward(self, x):
        try:
            fields(NotADataclass())
        except TypeError as error:
            return x + len(str(error))
        return x


class ShadowedOnTheInstance(nn.Module):
    def forward(self, x):
        scales = Scales()
        object.__setattr__(scales, "__dataclass_fields__",
                           {"first": Scales.__dataclass_fields__["first"]})
        return x * len(fields(scales))


class PythonGetattribute(nn.Module):
    def __init__(self):
        super().__init__()
        self.logged = Logged()

    def forward(self, x):
        return x * len(fields(self.logged)) * self.logged.scale


INTERPRETED = [NotADataclassIsTypeError, ShadowedOnTheInstance, PythonGetattribute]


def _export_counting_fields(model, x, monkeypatch):
    names = []
    original = translator.InstructionTranslator.inline_call

    def inline_call(self, code, f_globals, bound, closure, name):
        names.append(name)
        return original(self, code, f_globals, bound, closure, name)

    monkeypatch.setattr(translator.InstructionTranslator, "inline_call", inline_call)
    ep = unbroken.export(model, (x,))
    return ep, names.count("fields")


def _assert_same(got, want):
    for a, b in zip(torch.utils._pytree.tree_leaves(got), torch.utils._pytree.tree_leaves(want)):
        if isinstance(b, torch.Tensor):
            assert torch.equal(a, b)
        else:
            assert a == b


@pytest.mark.parametrize("model_class", FAST + INTERPRETED, ids=lambda c: c.__name__)
def test_fields_in_forward_matches_eager(model_class, monkeypatch):
    model, x = model_class(), torch.randn(3, 4)
    ep, interpreted = _export_counting_fields(model, x, monkeypatch)
    _assert_same(ep.module()(x), model(x))
    if model_class in FAST:
        assert interpreted == 0  # read from the class, natively
    else:
        assert interpreted > 0  # dataclasses' own code decides


def test_fields_of_a_held_instance_sees_a_write_to_its_class_dict(monkeypatch):
    """A held dataclass instance given its own ``__dataclass_fields__`` in its instance dict
    (outside the trace) is not answered from the class."""
    model = FromHeldInstance()
    model.scales.__dict__["__dataclass_fields__"] = {
        "first": Scales.__dataclass_fields__["first"]}
    x = torch.randn(2, 4)
    ep, interpreted = _export_counting_fields(model, x, monkeypatch)
    assert interpreted > 0
    assert torch.equal(ep.module()(x), model(x))
    assert len(dataclasses.fields(model.scales)) == 1
