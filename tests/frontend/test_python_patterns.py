"""Python-level patterns that real ``forward()`` code uses, mixed with tensors: each small module
is exported with ``unbroken.export`` and compared against eager on the example input and on one
fresh input of the same shape (and dtype)."""
import collections
import copy
import enum
import functools
import logging
import math
import operator
import typing
import warnings

import pytest
import torch
import torch.nn.functional as F
from torch import nn

import unbroken


def _fresh(value):
    if isinstance(value, torch.Tensor):
        if value.is_floating_point():
            return torch.randn_like(value)
        if value.dtype == torch.bool:
            return torch.rand(value.shape) > 0.5
        return torch.randint_like(value, 0, 5)
    if isinstance(value, (list, tuple)):
        return type(value)(_fresh(v) for v in value)
    if isinstance(value, dict):
        return {k: _fresh(v) for k, v in value.items()}
    return value


def _check(model, *args, kwargs=None):
    kwargs = kwargs or {}
    ep = unbroken.export(model, args, kwargs)
    torch.manual_seed(0)
    torch.testing.assert_close(ep.module()(*args, **kwargs), model(*args, **kwargs))
    fresh_args, fresh_kwargs = _fresh(args), _fresh(kwargs)
    torch.testing.assert_close(ep.module()(*fresh_args, **fresh_kwargs),
                               model(*fresh_args, **fresh_kwargs))
    return ep


def _x(*shape):
    return torch.randn(*shape)


# --- methods, staticmethods, classmethods -----------------------------------------------------


class _WithHelpers(nn.Module):
    scale = 3.0

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    @staticmethod
    def _act(x):
        return torch.tanh(x) * 2

    @classmethod
    def _scaled(cls, x):
        return x * cls.scale

    def _body(self, x):
        return self.lin(x)

    def forward(self, x):
        return self._scaled(self._act(self._body(x))) + _WithHelpers._act(x)


def test_static_class_and_instance_methods():
    _check(_WithHelpers(), _x(2, 4))


def test_classmethod_via_type_self():
    class M(nn.Module):
        factor = 2

        @classmethod
        def make(cls, x):
            return x * cls.factor

        def forward(self, x):
            return type(self).make(x) + self.__class__.make(x)

    _check(M(), _x(3))


class _TimesThree:
    def __call__(self, x):
        return x * 3


class _PartialHelpers(nn.Module):
    shifted = functools.partial(torch.add, other=2.0)  # not descriptors: never bound to self
    negated = torch.neg
    tripled = _TimesThree()

    def forward(self, x):
        return self.shifted(x) + self.negated(x) + self.tripled(x)


def _forward_set_on_class(forward):
    class Patched(nn.Module):
        pass

    Patched.forward = forward  # torch's test_partial_patched_forward
    return Patched


class _OuterOfPatched(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = _forward_set_on_class(
            functools.partial(lambda x, y: x * y, y=torch.full((4,), 2.0)))()

    def forward(self, x):
        return self.inner(x) + self.inner.forward(x)


@pytest.mark.parametrize("make", [
    lambda: _forward_set_on_class(functools.partial(lambda x, y: x + y, y=torch.ones(4)))(),
    lambda: _forward_set_on_class(_TimesThree())(),
    lambda: _forward_set_on_class(staticmethod(lambda x: x - 1))(),
    lambda: _forward_set_on_class(classmethod(lambda cls, x: x + len(cls.__name__)))(),
    _PartialHelpers, _OuterOfPatched,
], ids=["partial", "callable_object", "staticmethod", "classmethod", "helpers", "nested"])
def test_class_attributes_bind_to_the_module_only_when_descriptors(make):
    # CPython's descriptor protocol: a function (or staticmethod/classmethod) on the class
    # binds as such; a functools.partial, a builtin or a callable object is called as it is
    _check(make(), _x(4))


# --- inheritance, super(), mixins -------------------------------------------------------------


class _Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class _AddOneMixin:
    def forward(self, x):
        return super().forward(x) + 1


class _DoubleMixin:
    def forward(self, x):
        return super().forward(x) * 2


class _Cooperative(_AddOneMixin, _DoubleMixin, _Base):
    def forward(self, x):
        return super().forward(x).relu()


def test_cooperative_super_forward_chain():
    _check(_Cooperative(), _x(2, 4))


class _Norm(nn.Module):
    def normalize(self, x):
        return x / x.norm(dim=-1, keepdim=True)


class _ScaleMixin:
    def rescale(self, x):
        return x * self.alpha


class _WithMixins(_ScaleMixin, _Norm):
    def __init__(self):
        super().__init__()
        self.alpha = 0.5
        self.register_buffer("bias", torch.ones(4))

    def forward(self, x):
        return self.rescale(self.normalize(x)) + self.bias


def test_mixin_methods_and_plain_attributes():
    _check(_WithMixins(), _x(3, 4))


def test_super_with_explicit_arguments():
    class Child(_Base):
        def forward(self, x):
            return super(Child, self).forward(x) - x

    _check(Child(), _x(2, 4))


def test_diamond_init_and_forward_through_mro():
    class A(nn.Module):
        def __init__(self):
            super().__init__()
            self.a = nn.Linear(3, 3)

        def forward(self, x):
            return self.a(x)

    class B(A):
        def forward(self, x):
            return super().forward(x) + 1

    class C(A):
        def forward(self, x):
            return super().forward(x) * 3

    class D(B, C):
        def forward(self, x):
            return super().forward(x) - x

    _check(D(), _x(2, 3))


# --- objects created in forward ---------------------------------------------------------------


class _Box:
    def __init__(self, value):
        self._value = value

    @property
    def value(self):
        return self._value

    @value.setter
    def value(self, new):
        self._value = new * 2

    def __getitem__(self, index):
        return self._value[index]


def test_property_setter_on_object_created_in_forward():
    class M(nn.Module):
        def forward(self, x):
            box = _Box(x)
            box.value = box.value + 1
            return box.value.sin()

    _check(M(), _x(3, 2))


def test_getitem_on_object_created_in_forward():
    class M(nn.Module):
        def forward(self, x):
            box = _Box(x)
            return box[0] + box[1:].sum(0)

    _check(M(), _x(3, 2))


class _HFLike(nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = nn.Linear(4, 4)
        self.config_dict = {"hidden": 4, "dropout": 0.0}

    def __getattr__(self, name):
        try:
            return super().__getattr__(name)
        except AttributeError:
            if name in self.config_dict:
                return self.config_dict[name]
            raise

    def forward(self, x):
        return self.proj(x) * self.hidden


def test_module_overriding_getattr_hf_style():
    _check(_HFLike(), _x(2, 4))


class _Blocks(nn.Module):
    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])

    def __getitem__(self, index):
        return self.blocks[index]

    def __len__(self):
        return len(self.blocks)

    def forward(self, x):
        for i in range(len(self)):
            x = self[i](x).relu()
        return x


def test_module_list_with_none_entries_iterated_and_indexed():
    """``nn.ModuleList([None, layer])`` (local-attention's optional global layers): iterating
    and indexing yield None for the empty slots, as eager."""
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.ModuleList([None, nn.Linear(4, 4)]),
                                         nn.ModuleList([nn.Linear(4, 4), nn.ReLU()])])

        def forward(self, x):
            for first, second in self.layers:
                if first is not None:
                    x = first(x)
                x = second(x)
            return x + (self.layers[0][0] is None)

    _check(M(), _x(2, 4))


def test_module_overriding_getitem_and_len():
    _check(_Blocks(), _x(2, 4))


def test_wrapper_calls_getitem_on_inner_module():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = _Blocks()

        def forward(self, x):
            return self.inner[0](x) + self.inner[-1](x)

    _check(M(), _x(2, 4))


# --- functools / operator / typing -------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _cached_size(n):
    return n * 2


def _logged(fn):
    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        return fn(*args, **kwargs) + 1

    return wrapper


@_logged
def _wrapped_helper(x, scale=1.0):
    return x * scale


def test_lru_cache_helper_on_sizes():
    class M(nn.Module):
        def forward(self, x):
            return x.new_zeros(_cached_size(x.shape[0])) + x.sum()

    _check(M(), _x(3, 2))


def test_functools_wraps_decorated_helper():
    class M(nn.Module):
        def forward(self, x):
            return _wrapped_helper(x, scale=2.0) + _wrapped_helper(x)

    _check(M(), _x(3, 2))


def test_functools_partial_of_functional():
    act = functools.partial(F.leaky_relu, negative_slope=0.2)

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.act = act
            self.soft = functools.partial(F.softmax, dim=-1)

        def forward(self, x):
            local = functools.partial(F.gelu, approximate="tanh")
            return self.soft(self.act(x)) + local(x)

    _check(M(), _x(3, 4))


def test_operator_itemgetter_attrgetter():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            first = operator.itemgetter(0)
            weight = operator.attrgetter("lin.weight")(self)
            return first((x, x * 2)) @ weight + operator.itemgetter(1, 2)(x)[0]

    _check(M(), _x(4, 4))


def test_typing_cast_and_optional_default_none():
    class M(nn.Module):
        def forward(self, x, mask: torch.Tensor | None = None):
            y = typing.cast(torch.Tensor, x * 2)
            if mask is not None:
                y = y.masked_fill(mask, 0.0)
            return y

    m = M()
    _check(m, _x(3, 3))
    _check(m, _x(3, 3), torch.rand(3, 3) > 0.5)


def test_kwargs_forwarded_through_several_calls():
    def inner(x, *, scale=1.0, bias=0.0, **unused):
        return x * scale + bias

    def middle(x, **kwargs):
        return inner(x, **kwargs)

    class M(nn.Module):
        def run(self, x, **kwargs):
            return middle(x, **kwargs)

        def forward(self, x, **kwargs):
            return self.run(x, scale=2.0, **kwargs)

    _check(M(), _x(3), kwargs={"bias": torch.ones(3)})


def test_args_splat_into_cat():
    class M(nn.Module):
        def join(self, *parts):
            return torch.cat(parts, dim=-1)

        def forward(self, x):
            pieces = [x, x * 2, x.relu()]
            return self.join(*pieces) + torch.cat([*pieces], -1)

    _check(M(), _x(2, 3))


# --- iteration over containers and modules ----------------------------------------------------


def test_enumerate_zip():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3) for _ in range(3)])
            self.scales = [0.5, 1.0, 2.0]

        def forward(self, x):
            out = x
            for i, (layer, s) in enumerate(zip(self.layers, self.scales)):
                out = layer(out) * s + i
            return out

    _check(M(), _x(2, 3))


def test_dict_comprehension_keyed_by_names():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.heads = nn.ModuleDict({"a": nn.Linear(3, 2), "b": nn.Linear(3, 1)})

        def forward(self, x):
            outs = {name: head(x) for name, head in self.heads.items()}
            return outs["a"].sum(-1) + outs["b"].squeeze(-1)

    _check(M(), _x(4, 3))


class _SortedBlocks(nn.Module):
    def __init__(self, by_items):
        super().__init__()
        self.by_items = by_items
        self.blocks = nn.ModuleDict({"z": nn.Linear(3, 3), "a": nn.Linear(3, 3)})

    def forward(self, x):
        if self.by_items:
            for _, block in sorted(self.blocks.items()):
                x = block(x)
        else:
            for name in sorted(self.blocks.keys()):
                x = self.blocks[name](x)
        return x


def test_sorted_module_dict_keys():
    _check(_SortedBlocks(by_items=False), _x(2, 3))


def test_sorted_module_dict_items():
    _check(_SortedBlocks(by_items=True), _x(2, 3))


def test_sorted_plain_dict_items_with_key():
    class M(nn.Module):
        def forward(self, x):
            parts = {"b": x * 2, "a": x + 1, "c": x}
            ordered = [v for _, v in sorted(parts.items(), key=lambda kv: kv[0])]
            return torch.stack(ordered)

    _check(M(), _x(2, 3))


def test_reversed_module_list():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Linear(3, 3), nn.Tanh(), nn.Linear(3, 3)])

        def forward(self, x):
            for layer in reversed(self.layers):
                x = layer(x)
            return x

    _check(M(), _x(2, 3))


def test_any_isinstance_over_modules():
    class M(nn.Module):
        def __init__(self, drop):
            super().__init__()
            self.body = nn.Sequential(nn.Linear(3, 3), nn.Dropout(0.1) if drop else nn.ReLU())

        def forward(self, x):
            has_dropout = any(isinstance(m, nn.Dropout) for m in self.modules())
            return self.body(x) * (2 if has_dropout else 3)

    _check(M(True).eval(), _x(2, 3))
    _check(M(False).eval(), _x(2, 3))


def test_len_of_module_list_and_range_len_tensor():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.layers = nn.ModuleList([nn.Identity() for _ in range(4)])

        def forward(self, x):
            acc = x[0] * len(self.layers)
            for i in range(len(x)):
                acc = acc + x[i]
            return acc

    _check(M(), _x(3, 2))


def test_named_parameters_iteration():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            reg = sum(p.pow(2).sum() for name, p in self.named_parameters() if "weight" in name)
            return self.lin(x) + reg

    _check(M(), _x(2, 3))


# --- training flag and branches on shapes ------------------------------------------------------


class _TrainBranch(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        if self.training:
            return self.drop(x)
        if not self.training and x.dim() == 3:
            return x.mean(0)
        return x * 2


def test_training_branches_eval():
    _check(_TrainBranch().eval(), _x(2, 3, 4))
    _check(_TrainBranch().eval(), _x(2, 3))


def test_chained_comparisons_on_shape():
    class M(nn.Module):
        def forward(self, x):
            if 1 < x.shape[0] <= x.shape[1] < 10:
                return x + 1
            return x - 1

    _check(M(), _x(2, 3))
    _check(M(), _x(3, 2))


def test_shape_equals_tuple():
    class M(nn.Module):
        def forward(self, x):
            if x.shape == (2, 3):
                y = x * 2
            else:
                y = x
            if x.shape[1:] == torch.Size([3]):
                y = y + 1
            return y

    _check(M(), _x(2, 3))
    _check(M(), _x(3, 3))


def test_shape_tuple_unpacking():
    class M(nn.Module):
        def forward(self, x):
            b, c, h, w = x.shape
            *lead, last = x.size()
            return x.reshape(b, c * h * w).sum(-1) + last + len(lead)

    _check(M(), _x(2, 3, 4, 5))


def test_torch_size_arithmetic():
    class M(nn.Module):
        def forward(self, x):
            new_shape = x.shape[:-1] + (2, x.shape[-1] // 2)
            return x.view(new_shape).sum(-2), x.new_zeros(x.shape[:1] + x.shape[2:])

    _check(M(), _x(3, 4, 6))


def test_math_prod_ceil_and_divmod_on_sizes():
    class M(nn.Module):
        def forward(self, x):
            n = math.prod(x.shape[1:])
            chunks = math.ceil(x.shape[-1] / 4)
            q, r = divmod(x.shape[-1], 4)
            return x.reshape(x.shape[0], n) * chunks + q - r

    _check(M(), _x(2, 3, 6))


def test_scale_by_sqrt_of_last_dim():
    class M(nn.Module):
        def forward(self, q, k):
            scale = q.shape[-1] ** 0.5
            return (q @ k.transpose(-2, -1)) / scale * q.size(-1) ** -0.5

    _check(M(), _x(2, 3, 8), _x(2, 3, 8))


def test_assert_with_message_on_dims():
    class M(nn.Module):
        def forward(self, x):
            assert x.dim() == 2, "expected a matrix"
            assert x.shape[1] == 3, f"got {x.shape}"
            return x.relu()

    _check(M(), _x(4, 3))


# --- configuration: strings, enums -------------------------------------------------------------


class _ActByName(nn.Module):
    def __init__(self, act):
        super().__init__()
        self.act = act

    def forward(self, x):
        return getattr(F, self.act)(x) + getattr(torch, self.act, torch.sigmoid)(x)


@pytest.mark.parametrize("act", ["relu", "gelu", "silu"])
def test_string_config_switches_activation(act):
    _check(_ActByName(act), _x(3, 4))


class _Mode(enum.Enum):
    SUM = "sum"
    MEAN = "mean"
    MAX = "max"


class _Pool(nn.Module):
    def __init__(self, mode):
        super().__init__()
        self.mode = mode

    def forward(self, x):
        if self.mode is _Mode.SUM:
            return x.sum(1)
        elif self.mode == _Mode.MEAN:
            return x.mean(1)
        return x.amax(1) + len(self.mode.name)


@pytest.mark.parametrize("mode", list(_Mode))
def test_enum_chooses_branch(mode):
    _check(_Pool(mode), _x(2, 5))


def test_enum_value_lookup_in_forward():
    class M(nn.Module):
        def forward(self, x):
            mode = _Mode("mean")
            return x.mean() if mode in (_Mode.MEAN, _Mode.SUM) else x.max()

    _check(M(), _x(2, 5))


# --- normalising inputs, building lists ----------------------------------------------------------


def test_isinstance_list_tuple_normalisation():
    class M(nn.Module):
        def forward(self, xs):
            if not isinstance(xs, (list, tuple)):
                xs = [xs]
            return torch.stack(list(xs)).sum(0)

    _check(M(), [_x(2), _x(2)])
    _check(M(), (_x(2), _x(2)))
    _check(M(), _x(2))


def test_list_of_tensors_built_in_loop_then_stack():
    class M(nn.Module):
        def forward(self, x):
            outs = []
            for i in range(x.shape[0]):
                outs.append(x[i] * (i + 1))
            outs.extend([x.sum(0)])
            return torch.stack(outs, dim=0)

    _check(M(), _x(3, 4))


def test_while_loop_with_counter():
    class M(nn.Module):
        def forward(self, x):
            i = 0
            while i < 3 and x.shape[0] > i:
                x = x * 0.5 + i
                i += 1
            return x

    _check(M(), _x(4, 2))


def test_nested_function_closing_over_tensors():
    class M(nn.Module):
        def forward(self, x, y):
            offset = y.mean()

            def shift(t):
                return t - offset

            def outer():
                def inner(t):
                    return shift(t) * y

                return inner

            return outer()(x)

    _check(M(), _x(3), _x(3))


def test_closure_cell_rebound_after_definition():
    class M(nn.Module):
        def forward(self, x):
            k = x * 2

            def f():
                return k + 1

            k = x * 3
            return f()

    _check(M(), _x(3))


def test_lambda_over_tensors_in_map():
    class M(nn.Module):
        def forward(self, x, y):
            outs = list(map(lambda t: t * y, [x, x + 1]))
            pairs = list(map(lambda a, b: a - b, outs, [y, y]))
            return torch.stack(pairs) + sum(map(torch.sin, outs))

    _check(M(), _x(3), _x(3))


def test_filter_and_min_max_key_on_tensors_list():
    class M(nn.Module):
        def forward(self, x):
            parts = [x[:1], x[:3], x[:2]]
            longest = max(parts, key=lambda t: t.shape[0])
            shortest = min(parts, key=len)
            kept = list(filter(lambda t: t.shape[0] > 1, parts))
            return longest.sum() + shortest.sum() + len(kept)

    _check(M(), _x(4, 2))


# --- globals, buffers, parameters ---------------------------------------------------------------

_GLOBAL_TABLE = torch.arange(6.0).reshape(2, 3)
_GLOBAL_SCALE = 0.25


def test_global_constant_tensor_read():
    class M(nn.Module):
        def forward(self, x):
            return x * _GLOBAL_TABLE + _GLOBAL_SCALE

    _check(M(), _x(2, 3))


def _make_closure_module():
    table = torch.linspace(0, 1, 3)

    def bias(x):
        return x + table + _GLOBAL_TABLE[0]

    class M(nn.Module):
        def forward(self, x):
            return bias(x) * table

    return M()


def test_module_level_tensor_constant_inside_closure():
    _check(_make_closure_module(), _x(2, 3))


def test_get_parameter_and_get_submodule():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.inner = nn.Linear(3, 3)
            self.gain = nn.Parameter(torch.full((3,), 2.0))

        def forward(self, x):
            w = self.get_parameter("inner.weight")
            g = self.get_parameter("gain")
            return x @ w.t() * g + self.get_submodule("inner").bias

    _check(M(), _x(2, 3))


def test_non_persistent_buffer_used_in_forward():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("pos", torch.arange(4.0), persistent=False)
            self.register_buffer("scale", torch.tensor(3.0))

        def forward(self, x):
            return x + self.pos[: x.shape[-1]] * self.scale

    ep = _check(M(), _x(2, 3))
    assert "pos" in ep.graph_signature.non_persistent_buffers
    assert "pos" not in ep.state_dict
    assert "scale" in ep.state_dict


# --- torch mode queries and grad / autocast contexts -------------------------------------------


def test_is_scripting_and_is_compiling_branches():
    class M(nn.Module):
        def forward(self, x):
            if torch.jit.is_scripting():
                return x * 100
            if torch.compiler.is_compiling():
                y = x + 1
            else:
                y = x - 1
            return y

    ep = unbroken.export(M(), (_x(3),))
    peer = torch.export.export(M(), (_x(3),), strict=True)
    x = _x(3)
    torch.testing.assert_close(ep.module()(x), peer.module()(x))


def test_no_grad_enable_grad_autocast_disabled_blocks():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(3, 3)

        def forward(self, x):
            with torch.no_grad():
                a = self.lin(x)
            with torch.enable_grad():
                b = self.lin(x) * 2
            with torch.autocast("cpu", enabled=False):
                c = self.lin(x).float()
            return a + b + c

    _check(M(), _x(2, 3))


def test_no_grad_decorated_helper():
    @torch.no_grad()
    def helper(t):
        return t * 2

    class M(nn.Module):
        def forward(self, x):
            return helper(x) + 1

    _check(M(), _x(3))


# --- warnings, logging, print -----------------------------------------------------------------

_log = logging.getLogger("unbroken.tests.python_patterns")


def test_warnings_warn_inside_forward():
    class M(nn.Module):
        def forward(self, x):
            if x.shape[0] > 1:
                warnings.warn("batch > 1 is slow", stacklevel=2)
            return x + 1

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        _check(M(), _x(2, 3))


def test_logging_calls_inside_forward():
    class M(nn.Module):
        def forward(self, x):
            _log.debug("shape %s", x.shape)
            if _log.isEnabledFor(logging.DEBUG):
                _log.info("verbose")
            return x * 2

    _log._cache.clear()  # cold level cache, as on a model's first call (the bug needs it)
    _check(M(), _x(2, 3))


def test_print_is_dropped_from_the_program(capsys):
    """print() reports, it does not compute: dropped like logger calls (torch.export strict
    drops it too); nothing is printed at export time and the program computes eager's
    values. Its arguments are evaluated (a tensor formatted into text is not computed)."""
    class M(nn.Module):
        def forward(self, x):
            y = x + 1
            print("shape", x.shape, y.sum(), f"{y}", end="", file=None)
            return y * 2

    x = _x(3)
    ep = unbroken.export(M(), (x,))
    assert capsys.readouterr().out == ""
    targets = [n.target for n in ep.graph.nodes if n.op == "call_function"]
    assert torch.ops.aten.sum.default not in targets  # dead: nothing reads it
    torch.testing.assert_close(ep.module()(x), (x + 1) * 2)


def test_id_is_refused_ub103():
    class M(nn.Module):
        def forward(self, x):
            return x + id(x)

    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(M(), (_x(2),))
    assert info.value.code == "UB103"
    assert info.value.frames and "id(x)" in info.value.frames[-1].source


# --- tensor attributes and methods --------------------------------------------------------------


def test_transpose_attributes_and_real():
    class M(nn.Module):
        def forward(self, x):
            return x.T @ x + x.mT.mT.T @ x + x.real.T @ x.real

    _check(M(), _x(3, 3))


def test_new_ones_and_arange_with_device_dtype():
    class M(nn.Module):
        def forward(self, x):
            ones = x.new_ones(x.shape)
            pos = torch.arange(x.shape[-1], device=x.device, dtype=x.dtype)
            return x * ones + pos

    _check(M(), _x(2, 5))


def test_to_other_type_as_float_contiguous():
    class M(nn.Module):
        def forward(self, x, idx):
            a = idx.to(x)
            b = idx.type_as(x)
            c = idx.float()
            return (x.t().contiguous() + a.t() + b.t() + c.t()).contiguous()

    _check(M(), _x(2, 3), torch.randint(0, 4, (2, 3)))


def test_finfo_min_and_dtype_checks():
    class M(nn.Module):
        def forward(self, x, mask):
            neg = torch.finfo(x.dtype).min
            if x.dtype == torch.float32 and x.is_floating_point():
                x = x.masked_fill(~mask, neg)
            return x.softmax(-1)

    _check(M(), _x(2, 4), torch.rand(2, 4) > 0.3)


def test_dtype_branch_on_half_input():
    class M(nn.Module):
        def forward(self, x):
            if x.dtype in (torch.float16, torch.bfloat16):
                x = x.float()
            return x * torch.finfo(x.dtype).eps

    _check(M(), _x(2, 3).to(torch.bfloat16))


def test_pad_with_computed_amount():
    class M(nn.Module):
        def __init__(self, multiple=4):
            super().__init__()
            self.multiple = multiple

        def forward(self, x):
            pad = (self.multiple - x.shape[-1] % self.multiple) % self.multiple
            return F.pad(x, (0, pad), value=-1.0)

    _check(M(), _x(2, 5))
    _check(M(), _x(2, 8))


def test_size_methods_numel_and_ndim():
    class M(nn.Module):
        def forward(self, x):
            return x.flatten() * x.numel() + x.ndim + x.size()[-1] + x.shape.numel()

    _check(M(), _x(2, 3))


# --- assorted Python constructs ----------------------------------------------------------------


def test_fstring_keys_and_getattr_on_self_modules():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            for i in range(3):
                setattr(self, f"layer_{i}", nn.Linear(3, 3))

        def forward(self, x):
            for i in range(3):
                x = getattr(self, f"layer_{i}")(x)
            return x

    _check(M(), _x(2, 3))


def test_hasattr_on_modules_and_optional_submodule():
    class M(nn.Module):
        def __init__(self, with_norm):
            super().__init__()
            self.lin = nn.Linear(3, 3)
            self.norm = nn.LayerNorm(3) if with_norm else None

        def forward(self, x):
            x = self.lin(x)
            if self.norm is not None:
                x = self.norm(x)
            if hasattr(self.lin, "bias") and self.lin.bias is not None:
                x = x + 1
            return x

    _check(M(True), _x(2, 3))
    _check(M(False), _x(2, 3))


def test_dict_get_with_default_and_setdefault():
    class M(nn.Module):
        def forward(self, x, extra=None):
            cache = {}
            cache.setdefault("a", x * 2)
            cache.setdefault("a", x * 100)
            opts = extra or {}
            return cache["a"] + opts.get("bias", 0.5) + cache.get("missing", x)

    _check(M(), _x(3))


def test_tuple_return_with_none_and_dict_output():
    class M(nn.Module):
        def forward(self, x):
            hidden = x.relu()
            return {"logits": hidden * 2, "hidden": (hidden, hidden.sum())}

    _check(M(), _x(2, 3))


def test_ternary_on_python_flags_and_min_of_sizes():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.window = 4

        def forward(self, x):
            w = min(self.window, x.shape[-1])
            y = x[..., :w] if w < x.shape[-1] else x
            return y.cumsum(-1)

    _check(M(), _x(2, 6))
    _check(M(), _x(2, 3))


def test_string_join_and_split_config():
    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.spec = "relu,tanh,sigmoid"

        def forward(self, x):
            for name in self.spec.split(","):
                x = getattr(torch, name.strip())(x)
            return x

    _check(M(), _x(2, 3))


def test_slice_object_and_ellipsis_indexing():
    class M(nn.Module):
        def forward(self, x):
            sl = slice(1, None, 2)
            idx = (Ellipsis, sl)
            return x[idx] + x[..., ::2][..., : x[idx].shape[-1]]

    _check(M(), _x(2, 6))


def test_zip_strict_false_and_star_unpack_in_call():
    class M(nn.Module):
        def forward(self, x):
            a, b = x.chunk(2, dim=-1)
            pairs = list(zip(a.unbind(0), b.unbind(0)))
            return torch.stack([torch.maximum(*p) for p in pairs])

    _check(M(), _x(3, 4))


def test_inplace_update_of_python_float_accumulator():
    class M(nn.Module):
        def forward(self, x):
            total = 0.0
            for t in x.unbind(0):
                total += 1.5
                x = x + t * total
            return x

    _check(M(), _x(3, 2))


def test_named_tuple_returned_by_torch_max():
    class M(nn.Module):
        def forward(self, x):
            res = torch.max(x, dim=-1)
            values, indices = res
            return res.values + values, indices

    _check(M(), _x(3, 4))


# --- global state and library helpers (found while probing) ------------------------------------


_Point = collections.namedtuple("_Point", "a b")


def test_namedtuple_replace_in_forward():
    class M(nn.Module):
        def forward(self, x):
            p = _Point(x, x * 2)._replace(a=x + 1)
            return p.a + p.b

    _check(M(), _x(3))


def test_functools_reduce_over_tensors():
    class M(nn.Module):
        def forward(self, x):
            return functools.reduce(operator.add, [x, x * 2, x * 3])

    _check(M(), _x(3))


def test_ordered_dict_built_in_forward():
    class M(nn.Module):
        def forward(self, x):
            d = collections.OrderedDict(a=x, b=x * 2)
            return torch.stack(list(d.values()))

    _check(M(), _x(3))


def test_manual_seed_in_forward_is_not_silently_dropped():
    class M(nn.Module):
        def forward(self, x):
            torch.manual_seed(0)
            return x + torch.rand(3)

    x = torch.zeros(3)
    try:
        ep = unbroken.export(M(), (x,))
    except unbroken.GraphBreakError:
        return  # a refusal is a fine answer
    first, second = ep.module()(x), ep.module()(x)
    torch.testing.assert_close(second, first)  # eager gives the same value every call


def test_set_default_dtype_inside_forward_is_refused():
    class M(nn.Module):
        def forward(self, x):
            torch.set_default_dtype(torch.float64)
            y = torch.ones(3)
            torch.set_default_dtype(torch.float32)
            return x + y

    try:
        with pytest.raises(unbroken.GraphBreakError) as info:
            unbroken.export(M(), (_x(3),))
        assert info.value.code == "UB107"
    finally:
        torch.set_default_dtype(torch.float32)


def test_factories_record_the_default_dtype_in_force_at_export():
    class M(nn.Module):
        def forward(self, x):
            return x + torch.ones(3)

    torch.set_default_dtype(torch.float64)
    try:
        ep = unbroken.export(M(), (torch.zeros(3, dtype=torch.float64),))
    finally:
        torch.set_default_dtype(torch.float32)
    out = ep.module()(torch.zeros(3, dtype=torch.float64))  # default is float32 again
    assert out.dtype == torch.float64


def test_set_grad_enabled_call_does_not_leak_out_of_export():
    class M(nn.Module):
        def forward(self, x):
            torch.set_grad_enabled(False)
            return x * 2

    try:
        try:
            unbroken.export(M(), (_x(3),))
        except unbroken.GraphBreakError:
            pass  # a refusal is a fine answer too
        assert torch.is_grad_enabled()
    finally:
        torch.set_grad_enabled(True)


def test_set_grad_enabled_pair_and_is_grad_enabled_branch():
    class M(nn.Module):
        def forward(self, x):
            with torch.no_grad():
                inside = torch.is_grad_enabled()
            torch.set_grad_enabled(False)
            y = x * (2 if inside else 3)
            torch.set_grad_enabled(True)
            return y * (5 if torch.is_grad_enabled() else 7)

    _check(M(), _x(3))
    assert torch.is_grad_enabled()


def test_autocast_region_returning_from_inside_matches_eager():
    """Refused (UB110) until the recorder learned autocast's casts (tests/ir/test_autocast)."""
    class M(nn.Module):
        def forward(self, x):
            with torch.autocast("cpu", dtype=torch.bfloat16):
                return x @ x

    x = _x(3, 3)
    got, want = unbroken.export(M(), (x,)).module()(x), M()(x)
    assert got.dtype == want.dtype == torch.bfloat16 and torch.equal(got, want)
    assert not torch.is_autocast_enabled("cpu")


def test_user_config_object_with_getattr_fallback():
    class Cfg:
        def __init__(self):
            self.table = {"act": "relu"}

        def __getattr__(self, name):
            if name == "table":
                raise AttributeError(name)
            return self.table[name]

    class M(nn.Module):
        def __init__(self):
            super().__init__()
            self.cfg = Cfg()

        def forward(self, x):
            return getattr(F, self.cfg.act)(x)

    _check(M(), _x(3))


def test_struct_sequences_are_constants():
    """`sys.version_info >= (3, 12)` in forward() was an internal error (UB999): the trace
    rebuilt the struct sequence from its items, which CPython does not allow."""
    import sys
    import time

    stamp = time.gmtime(0)

    class M(nn.Module):
        def forward(self, x):
            if sys.version_info >= (3, 10) and sys.version_info.major == 3:
                return x + sys.version_info[1] + stamp.tm_year
            return x

    x = _x(2)
    assert torch.equal(unbroken.export(M(), (x,)).module()(x), M()(x))


class _IdOutput(nn.Module):
    def forward(self, x):
        token = id(x) + 1  # ID
        return x * 2, token


class _IdAfterFlag(nn.Module):
    def forward(self, x):
        return x * (bool(x.shape[0] > 1) + id(x))


@pytest.mark.parametrize("model", [_IdOutput(), _IdAfterFlag()], ids=["output", "bool_plus"])
def test_a_value_computed_from_id_is_refused_where_it_reaches_the_program(model):
    """``id()``'s number is another in every run: compared or keyed with it is fine
    (``copy.deepcopy``), returned or computed with (``flag + id(x)``: bool's own ``+``) it
    would be a constant eager never has. Refused (UB103) at the ``id()`` call's line when
    the trace has no line of its own there (an output)."""
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(model, (_x(2),))
    assert info.value.code == "UB103" and "id(x)" in info.value.frames[-1].source


class _IdKeyed(nn.Module):
    def forward(self, x):
        seen = {id(x): "x"}
        parts = [x, x * 2]
        copied = copy.deepcopy({"a": parts, "b": parts})
        return x + len(seen) + (id(x) in seen) + (copied["a"] is copied["b"]) + \
            (id(parts) != id(copied["a"]))


def test_id_compared_and_keyed_with_exports():
    ep = unbroken.export(_IdKeyed(), (_x(3),))
    x = torch.randn(3)
    torch.testing.assert_close(ep.module()(x), _IdKeyed()(x))


_COPIERS = {list: list.copy, bytearray: bytearray.copy}


class _TableOfCopiers(nn.Module):
    def __init__(self, value):
        super().__init__()
        self.value = value

    def forward(self, x):
        copier = _COPIERS.get(type(self.value))
        made = copier(self.value)  # COPY
        return x * len(made)


def test_a_table_entry_without_a_model_is_refused_only_when_called():
    """Every entry of a dict from outside is wrapped with it; a C method the trace has no
    model of (``bytearray.copy``) is refused where it is called, not where the table is
    read (``copy.copy``'s type table holds it)."""
    ep = unbroken.export(_TableOfCopiers([1, 2]), (_x(2),))
    torch.testing.assert_close(ep.module()(torch.ones(2)), torch.full((2,), 2.0))
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(_TableOfCopiers(bytearray(b"ab")), (_x(2),))
    assert info.value.code == "UB108" and "bytearray" in str(info.value)
    assert "# COPY" in info.value.frames[-1].source


class _QuietRegion(nn.Module):
    def __init__(self, record=False):
        super().__init__()
        self.record = record

    def forward(self, x):
        with warnings.catch_warnings(record=self.record):
            warnings.simplefilter("ignore")
            warnings.filterwarnings("error", category=DeprecationWarning)
            warnings.warn("inside", stacklevel=2)
            y = x * 2
        return y + 1


def test_warning_filters_and_catch_warnings_change_nothing_of_the_program_or_process():
    """The filters decide which warnings are shown; the trace shows none. A region of
    ``catch_warnings`` and the filters set in it are dropped, and the process's filters are
    left as they were; ``record=True`` (the program would read eager's warnings) is
    refused."""
    before = list(warnings.filters)
    x = torch.randn(3)
    ep = unbroken.export(_QuietRegion(), (x,))
    torch.testing.assert_close(ep.module()(x), x * 2 + 1)
    assert list(warnings.filters) == before
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(_QuietRegion(record=True), (x,))
    assert info.value.code == "UB107" and "record=True" in str(info.value)
    assert list(warnings.filters) == before


class _CachedScale(nn.Module):
    def __init__(self, factor):
        super().__init__()
        self.factor = factor
        self.weight = nn.Parameter(torch.randn(3))

    @functools.cached_property
    def scale(self):
        return self.factor * 2 + len(self.weight)

    @functools.cached_property
    def doubled(self):
        return self.weight.detach() * self.scale  # cached by eager: a constant tensor

    def forward(self, x):
        return x * self.scale + self.doubled + self.scale


def test_a_cached_property_is_computed_once_and_the_model_left_as_it_was():
    """``functools.cached_property`` writes its value into the object's ``__dict__`` on the
    first read: the trace computes it once and keeps it to itself (the model's ``__dict__``
    unchanged by the export); a value eager already cached is the one read, as eager reads
    it, even when the function would now compute another."""
    model, x = _CachedScale(3), torch.randn(3)
    ep = unbroken.export(model, (x,))
    assert "scale" not in vars(model) and "doubled" not in vars(model)
    torch.testing.assert_close(ep.module()(x), model(x))  # eager's first call caches both
    assert vars(model)["scale"] == 9
    model.factor = 100  # eager keeps reading the cached 9
    ep = unbroken.export(model, (x,))
    torch.testing.assert_close(ep.module()(x), model(x))
    assert vars(model)["scale"] == 9


class _Stages(nn.Module):
    """Stages produced by generators delegating with ``yield from``: the inner generator's
    return value (a tensor) is the value of the ``yield from``; a throw into the outer
    reaches the inner first, and the outer's StopIteration carries what it returned."""

    def __init__(self):
        super().__init__()
        self.blocks = nn.ModuleList(nn.Linear(4, 4) for _ in range(3))

    def _run(self, x):
        for block in self.blocks:
            x = torch.relu(block(x))
            yield x
        return x.sum(dim=-1)

    def _all(self, x):
        pooled = yield from self._run(x)
        yield pooled
        yield from (t * 2 for t in (x, pooled))

    def _guarded(self, x):
        try:
            yield x
            yield x * 3
        except ValueError:
            yield -x
        return "guarded"

    def forward(self, x):
        outputs = list(self._all(x))
        outer = _delegate(self._guarded(x))
        first = next(outer)
        recovered = outer.throw(ValueError("switch"))
        try:
            next(outer)
            finished = ""
        except StopIteration as stop:
            finished = stop.value
        return outputs, first, recovered * len(finished)


def _delegate(generator):
    result = yield from generator
    return result


def test_yield_from_generators_of_tensors():
    _check(_Stages(), torch.randn(2, 4))


class _SharedLayers(nn.Module):
    """Sets and dicts keyed by modules, parameters and tensors: shared weights counted once
    (``set(self.parameters())``), layers visited once through a ``seen`` set, a tensor's
    membership decided by identity (as CPython's hash), dict items giving the keys back."""

    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4)
        self.b = nn.Linear(4, 4)
        self.b.weight = self.a.weight
        self.order = [self.a, self.b, self.a]

    def forward(self, x):
        total = sum(p.sum() for p in set(self.parameters()))
        seen, y = set(), x
        for layer in self.order:
            if layer in seen:
                continue
            seen.add(layer)
            y = layer(y)
        halves = set(x.split(2))
        scales = {layer: float(i + 1) for i, layer in enumerate(seen)}
        z = sum(layer(x) * scale for layer, scale in scales.items())
        return y * total + z, len(halves), x in halves, (x * 1) in {x}


def test_sets_and_dicts_of_modules_and_tensors():
    _check(_SharedLayers(), torch.randn(4, 4))
