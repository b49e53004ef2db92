"""``variables.builder.wrap``: the per-class conclusion that an object is a plain
``ObjectVariable`` (``_PLAIN_OBJECT_TYPES``) gives the same trackers and programs as deciding
each time, and is decided afresh when what it rests on changes."""
import abc
import collections.abc

import torch

import unbroken
from unbroken.frontend.variables import builder
from unbroken.frontend.variables.objects import ObjectVariable


class _Tx:
    """The little of an interpreter ``wrap`` asks for an ObjectVariable."""

    class output:  # noqa: N801 (a namespace)
        native_objects: dict = {}


class Settings:
    def __init__(self):
        self.scale = 3


class Lookups:
    """Counts the ``__class__`` reads its own ``__getattribute__`` answers (as isinstance asks)."""

    reads = 0

    def __getattribute__(self, name):
        if name == "__class__":
            type(self).reads += 1
        return object.__getattribute__(self, name)


class Pretender:
    """Claims another class: isinstance believes it, so no per-class conclusion is drawn."""

    @property
    def __class__(self):
        return Settings


def test_plain_object_class_is_concluded_once_and_reused():
    first = builder.wrap(_Tx, Settings())
    assert type(first) is ObjectVariable
    # concluded with the class's MRO and the ABC registrations; its ``__class__`` is read per
    # wrap (a C-level read: a proxy's names its referent's class)
    assert builder._PLAIN_OBJECT_TYPES.get(Settings) == (Settings.__mro__,
                                                         abc.get_cache_token(), True)
    second = builder.wrap(_Tx, Settings())
    assert type(second) is ObjectVariable and second.value is not first.value


def test_a_python_getattribute_is_never_run_by_wrap():
    """Its class's ``__getattribute__`` is the user's code: wrap tells the object by its type
    (each failed isinstance of the chain used to call it for ``__class__``)."""
    Lookups.reads = 0
    first = builder.wrap(_Tx, Lookups())
    second = builder.wrap(_Tx, Lookups())
    assert type(first) is ObjectVariable and type(second) is ObjectVariable
    assert Lookups.reads == 0
    assert builder._PLAIN_OBJECT_TYPES[Lookups] == (Lookups.__mro__, abc.get_cache_token(),
                                                    False)


def test_object_lying_about_its_class_is_not_concluded():
    builder.wrap(_Tx, Pretender())
    assert Pretender not in builder._PLAIN_OBJECT_TYPES


def test_callables_and_containers_are_not_concluded():
    class Call:
        def __call__(self):
            return 1

    class Items(list):
        pass

    builder.wrap(_Tx, Call())
    builder.wrap(_Tx, Items([1]))
    assert Call not in builder._PLAIN_OBJECT_TYPES
    assert Items not in builder._PLAIN_OBJECT_TYPES


def test_abc_registration_decides_afresh():
    class View:
        def __init__(self, items):
            self.items = items

        def __iter__(self):
            return iter(self.items)

        def __len__(self):
            return len(self.items)

    assert type(builder.wrap(_Tx, View([1, 2]))) is ObjectVariable
    collections.abc.ValuesView.register(View)  # now isinstance(View(...), ValuesView)
    tracker = builder.wrap(_Tx, View([1, 2]))
    assert type(tracker) is not ObjectVariable  # a mapping view: a list of its values
    assert [e.as_constant() for e in tracker.elements] == [1, 2]


def test_changed_bases_decide_afresh():
    class Base:
        pass

    class Thing(Base):
        pass

    assert type(builder.wrap(_Tx, Thing())) is ObjectVariable
    key = builder._PLAIN_OBJECT_TYPES[Thing]
    Thing.__bases__ = (Base, collections.abc.Hashable)
    assert key[:2] != (Thing.__mro__, abc.get_cache_token())  # the next wrap decides again
    assert type(builder.wrap(_Tx, Thing())) is ObjectVariable


def test_export_reading_an_object_with_python_getattribute():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.settings = Lookups()
            self.settings.scale = 2.0

        def forward(self, x):
            for _ in range(3):
                x = x * self.settings.scale
            return x

    model, x = Model(), torch.randn(4)
    ep = unbroken.export(model, (x,))
    torch.testing.assert_close(ep.module()(x), model(x))
