"""The object protocol (``unbroken/frontend/protocol.py``): one attribute lookup for user
objects, objects created in the trace, classes, namedtuples and ``super()``, checked against
CPython on the same functions."""
from __future__ import annotations

import collections
import dataclasses
import functools
import inspect
import typing

import pytest
import torch

import unbroken
from tests.frontend.parity import check
from unbroken import Dim
from unbroken.frontend.protocol import class_attribute
from unbroken.frontend.translator import InstructionTranslator
from unbroken.frontend.variables.base import Interpreter

Pair = collections.namedtuple("Pair", "x y")


class Point(typing.NamedTuple):
    a: int
    b: int = 2

    @property
    def total(self):
        return self.a + self.b

    def scaled(self, k):
        return Point(self.a * k, self.b * k)

    @classmethod
    def square(cls, v):
        return cls(v, v)

    @staticmethod
    def double(v):
        return 2 * v


class Base:
    kind = "base"
    __slots__ = ("slot",)

    def __init__(self, slot):
        self.slot = slot

    @property
    def label(self):
        return f"{self.kind}:{self.slot}"

    def describe(self):
        return "base " + self.label

    @classmethod
    def make(cls, v):
        return cls(v)

    @staticmethod
    def helper(v):
        return v + 1


class Child(Base):
    kind = "child"
    __slots__ = ()

    def describe(self):
        return "child/" + super().describe() + "/" + super().label

    def parent_helper(self, v):
        return super().helper(v), super().make(v).slot, super().kind


CONFIG = Child(7)  # an object from outside the trace (ObjectVariable)


def test_namedtuple_lookup_binds_like_python():
    def f(v):
        p, q = Pair(1, v), Point(v)
        return (p._asdict(), p._replace(x=5), p._fields, Pair._make([1, 2]), q.total,
                q.scaled(3), Point.square(4), q.square(2), q.double(1), Point.double(2))

    check(f, 3)


def test_namedtuple_keeps_tuple_methods_on_the_elements():
    def f(v):
        q = Point(v, v)
        return q.count(v), q.index(v), len(q)

    check(f, 3)


def test_instance_lookup_descriptors_and_slots():
    def f(v):
        obj = Child(v)
        return (obj.slot, obj.kind, obj.label, obj.describe(), obj.make(2).slot, obj.helper(1),
                Child.make(3).slot, Child.helper(4), Base.describe(obj))

    check(f, 5)


def test_super_lookup_skips_to_the_next_class():
    def f(v):
        obj = Child(v)
        return obj.describe(), obj.parent_helper(v)

    check(f, 4)


def test_outside_object_reads_through_the_same_lookup():
    def f():
        return CONFIG.slot, CONFIG.label, CONFIG.describe(), CONFIG.parent_helper(1)

    check(f)


def test_class_lookup_does_not_bind_functions():
    def f():
        unbound = Child.describe
        prop = Base.__dict__["label"]
        return unbound(Child(1)), isinstance(Child.label, property), prop.fget(Base(2))

    check(f)


@dataclasses.dataclass(frozen=True)
class Frozen:
    a: int
    b: int


def test_frozen_dataclass_init_stores_through_object_setattr():
    def f(v):
        made = Frozen(v, v + 1)
        return made.a + made.b

    check(f, 2)


def test_missing_attribute_is_the_programs_attribute_error():
    def f():
        try:
            return Point(1).missing
        except AttributeError:
            return "missing"

    check(f)


class _LastRow(torch.nn.Module):
    def forward(self, x):
        return x[x.shape[0] - 1]


def test_symbolic_index_goes_through_the_tensor_tracker():
    """``x[n - 1]`` with a symbolic ``n`` is an ``aten.select`` whose index is the size
    expression, not the example's value (Python's own indexing would guard ``n`` to it): the
    program is right at every admitted size."""
    ep = unbroken.export(_LastRow(), (torch.randn(6, 3),),
                         dynamic_shapes={"x": {0: Dim("b", min=2, max=64)}})
    selects = [n for n in ep.graph.nodes if n.target is torch.ops.aten.select.int]
    assert selects and isinstance(selects[0].args[2], torch.fx.Node), ep.graph
    for rows in (2, 7, 64):
        x = torch.randn(rows, 3)
        torch.testing.assert_close(ep.module()(x), x[rows - 1])


def test_the_translator_implements_the_interpreter_interface():
    """Trackers reach the interpreter only through ``variables.base.Interpreter``: every member
    it declares is implemented by ``InstructionTranslator``, with the same parameters."""
    members = [name for name in vars(Interpreter)
               if not name.startswith("_") and callable(vars(Interpreter)[name])]
    assert {"wrap", "call_leaf", "inline_call", "user_exception"} <= set(members)
    for name in members:
        declared = inspect.signature(getattr(Interpreter, name))
        implemented = inspect.signature(getattr(InstructionTranslator, name))
        assert list(implemented.parameters) == list(declared.parameters), name


@pytest.mark.parametrize("name, expected", [("kind", "child"), ("helper", Base.__dict__["helper"]),
                                            ("absent", None)])
def test_class_attribute_walks_the_mro(name, expected):
    assert class_attribute(Child, name) is expected or class_attribute(Child, name) == expected


class _Shadowed:
    """Instance attributes named like special methods: Python's implicit calls ignore them."""

    def __init__(self):
        self.__bool__ = lambda: False
        self.__call__ = lambda: "instance"
        self.__enter__ = lambda: "instance"

    def __bool__(self):
        return True

    def __call__(self, *args, scale=1):
        return ("class", args, scale)

    def __enter__(self):
        return "class"

    def __exit__(self, *exc):
        return False


def _entered(obj):
    with obj as value:
        return value


@pytest.mark.parametrize("use", [
    pytest.param(lambda obj: "yes" if obj else "no", id="if"),
    pytest.param(lambda obj: bool(obj), id="bool"),
    pytest.param(lambda obj: obj(2, scale=3), id="call"),
    pytest.param(_entered, id="with"),
])
def test_special_methods_come_from_the_class(use):
    check(lambda: use(_Shadowed()))


def test_calling_an_object_without_call_is_the_programs_type_error():
    def f():
        try:
            Base(1)()
        except TypeError as exc:
            return str(exc)

    check(f)


class TensorClassQueries(torch.nn.Module):
    """Every class query on a tensor, a parameter and a buffer, as one bit each."""

    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.ones(1))
        self.register_buffer("b", torch.ones(1))

    def forward(self, x):
        checks = [x.__class__ is torch.Tensor, type(x) is torch.Tensor,
                  (x + 1).__class__ is torch.Tensor, x.__class__.__name__ == "Tensor",
                  type(self.w) is torch.nn.Parameter, self.w.__class__ is torch.nn.Parameter,
                  self.b.__class__ is torch.Tensor, issubclass(self.w.__class__, torch.Tensor),
                  isinstance(x, x.__class__)]
        bits = x * 0
        for i, holds in enumerate(checks):
            bits = bits + (2 ** i) * int(holds)
        return bits


def test_tensor_class_is_the_eager_class():
    x = torch.zeros(1)
    model = TensorClassQueries()
    ep = unbroken.export(model, (x,))
    assert ep.module()(x).item() == model(x).item() == 2 ** 9 - 1


# ---------------------------------------------------------------- descriptors on a class
# Any callable stored on a class binds as Python binds it: an lru_cache wrapper (C __get__),
# descriptor classes written in Python (interpreted __get__), a function's own __get__.

class _Descriptors:
    @functools.lru_cache(None)  # noqa: B019 - the construct under test (transformers does it)
    def cached_scale(self, n):
        return n * 2

    def _power(self, n, p=2):
        return n ** p

    class _Bind:
        def __get__(self, instance, owner):
            return _Descriptors._power.__get__(instance, owner)

    square = _Bind()

    class _Twice:
        def __get__(self, instance, owner):
            return lambda n: instance.base * n * 2

    twice = _Twice()

    def __init__(self):
        self.base = 5


def test_descriptors_on_a_class_bind_as_in_python():
    def f():
        obj = _Descriptors()
        return obj.cached_scale(4), obj.square(3), obj.twice(2)

    expected = f()
    actual = unbroken.frontend.interpret(f)
    assert actual == expected == (8, 9, 20)


_OUTSIDE = _Descriptors()


class _UsesDescriptors(torch.nn.Module):
    def forward(self, x):
        return x * _OUTSIDE.cached_scale(3) + _OUTSIDE.square(2) + _OUTSIDE.twice(1)


def test_lru_cache_method_of_an_outside_object_exports_as_torch():
    x = torch.arange(3.0)
    model = _UsesDescriptors()
    for program in (unbroken.export(model, (x,)), torch.export.export(model, (x,))):
        assert torch.equal(program.module()(x), model(x))


def test_transformers_warning_once_is_a_method_of_the_logger():
    hf_logging = pytest.importorskip("transformers.utils.logging")
    logger = hf_logging.get_logger("unbroken.tests.warning_once")

    class Warns(torch.nn.Module):
        def forward(self, x):
            logger.warning_once("shown once")
            return x + 1

    x = torch.arange(3.0)
    for program in (unbroken.export(Warns(), (x,)), torch.export.export(Warns(), (x,))):
        assert torch.equal(program.module()(x), x + 1)


# --- static_attribute: inspect.getattr_static's answer, read directly for plain classes -----

class _Slotted:
    __slots__ = ("a", "b")

    def __init__(self):
        self.a = 1


class _WithDict(_Slotted):
    __slots__ = ("__dict__",)
    b = "class"


class _DictProperty:
    def __init__(self):
        self.x = 1

    @property
    def __dict__(self):  # shadows the instance dict: getattr_static reads none
        return {"x": 2, "y": 3}


class _DataDescriptor:
    def __get__(self, obj, owner=None):
        return "get"

    def __set__(self, obj, value):
        raise AttributeError


class _Shadows:
    described = _DataDescriptor()
    plain = "class"

    def method(self):
        return 1

    def __init__(self):
        self.__dict__.update(described="instance", plain="instance", own=1, method=2)


class _Lying:
    @property
    def __class__(self):
        return int


class _Meta(type):
    tag = "meta"


class _WithMeta(metaclass=_Meta):
    def __init__(self):
        self.x = 1


class _Dynamic:
    def __getattr__(self, name):
        return name

    def __getattribute__(self, name):
        return object.__getattribute__(self, name)


def _objects():
    import transformers
    return [_Slotted(), _WithDict(), _DictProperty(), _Shadows(), _Lying(), _WithMeta(),
            _Dynamic(), torch.nn.Linear(2, 2), transformers.GPT2Config(n_layer=1),
            Pair(1, 2), Point(1), functools.partial(print), 3, "text", _Shadows, _WithMeta]


@pytest.mark.parametrize("obj", _objects(), ids=lambda o: type(o).__name__)
def test_static_attribute_is_getattr_static(obj):
    from unbroken.frontend.protocol import _MISSING, static_attribute

    names = {"a", "b", "x", "y", "own", "described", "plain", "method", "tag", "missing",
             "__dict__", "__class__", "__init__", "weight", "forward", "n_embd",
             "hidden_size", "attribute_map", "__getattribute__", "func", "total"}
    names |= set(getattr(obj, "__dict__", {}) if not isinstance(obj, _DictProperty) else ())
    for name in sorted(names):
        try:
            expected = inspect.getattr_static(obj, name)
        except AttributeError:
            expected = _MISSING
        assert static_attribute(obj, name) is expected, name


class _ConfigLike:
    """A config whose every attribute read reads its instance dict first, as transformers'
    ``HeterogeneousConfigMixin.__getattribute__`` does."""

    def __init__(self):
        self.scale = 3.0
        self.labels = {0: "a", 1: "b"}
        self.sizes = [2, 4]

    def __getattribute__(self, key):
        spec = super().__getattribute__("__dict__").get("_spec")
        if spec is not None and key in spec:
            raise AttributeError(key)
        return super().__getattribute__(key)


_SHARED_CONFIG = _ConfigLike()


def test_an_outside_objects_dict_is_one_dict_however_it_is_read():
    def reads():
        first, second = _SHARED_CONFIG.__dict__, vars(_SHARED_CONFIG)
        return (first is second, _SHARED_CONFIG.__dict__ is first, _SHARED_CONFIG.scale,
                _SHARED_CONFIG.labels[1], _SHARED_CONFIG.sizes[-1], "_spec" in first,
                sorted(first))

    check(reads)


def test_a_config_reading_its_dict_on_every_attribute_exports_as_eager():
    class Model(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.config = _ConfigLike()
            self.proj = torch.nn.Linear(4, 4)

        def forward(self, x):
            for _ in range(3):
                x = self.proj(x) * self.config.scale + self.config.sizes[0]
            return x, self.config.labels[0]

    model, x = Model(), torch.randn(2, 4)
    program = unbroken.export(model, (x,))
    torch.testing.assert_close(program.module()(x)[0], model(x)[0], rtol=0, atol=0)
    assert model.config.__dict__ == {"scale": 3.0, "labels": {0: "a", 1: "b"}, "sizes": [2, 4]}


def test_an_instance_dict_changed_natively_is_read_again():
    from unbroken.frontend.protocol import _instance_dict

    class Output:
        instance_dicts: dict = {}

    class Tx:
        output = Output()
        wrapped = 0

        def wrap(self, value, source=None):
            Tx.wrapped += 1
            return unbroken.frontend.variables.containers.DictVariable(
                {k: v for k, v in value.items()}, source, external=True)

    tx, owner = Tx(), _ConfigLike()
    first = _instance_dict(tx, vars(owner), None)
    assert _instance_dict(tx, vars(owner), None) is first and Tx.wrapped == 1
    owner.scale = 4.0  # a new value object: read again
    second = _instance_dict(tx, vars(owner), None)
    assert second is not first and second.entries["scale"] == 4.0 and Tx.wrapped == 2
    object.__setattr__(owner, "extra", 1)  # a new key
    assert _instance_dict(tx, vars(owner), None) is not second and Tx.wrapped == 3
