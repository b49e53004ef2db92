"""Differential tests of ``unbroken.export``: the "sound or refuse" standard.

Every exported program is checked against eager on the example inputs and on fresh random
inputs of the same shapes (``check``). Refusals are checked for their id and for the *line*
they name, read from this file's source via a marker comment (``line_of``), never hard-coded.
"""
from __future__ import annotations

import collections
import copy
import inspect

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from torch.testing import assert_close
from torch.utils import _pytree as pytree

import unbroken
from unbroken import (
    ExportUsageError,
    GraphBreakError,
    InputMismatchError,
    RefusalError,
    UnbrokenError,
)

torch.manual_seed(0)


# --------------------------------------------------------------------------------------------
# helpers
# --------------------------------------------------------------------------------------------

def _fresh(x):
    if isinstance(x, torch.Tensor):
        if x.dtype.is_floating_point:
            return torch.randn_like(x)
        if x.dtype == torch.bool:
            return torch.rand(x.shape) > 0.5
        return torch.randint_like(x, 0, max(int(x.max()) + 1, 2) if x.numel() else 2)
    return x


def _clone(tree):
    return pytree.tree_map(lambda t: t.clone() if isinstance(t, torch.Tensor) else t, tree)


def _close(actual, expected):
    a_leaves, a_spec = pytree.tree_flatten(actual)
    e_leaves, e_spec = pytree.tree_flatten(expected)
    assert a_spec == e_spec, f"output structure differs:\n{a_spec}\nvs eager\n{e_spec}"
    for a, e in zip(a_leaves, e_leaves):
        if isinstance(e, torch.Tensor):
            assert_close(a, e)
        else:
            assert type(a) is type(e) and a == e, (a, e)


def check(mod, args, kwargs=None, *, fresh=2, **export_kwargs):
    """Export ``mod``, then compare ``ep.module()`` with eager on the example and fresh inputs."""
    kwargs = kwargs or {}
    ep = unbroken.export(mod, args, kwargs, **export_kwargs)
    gm = ep.module()
    inputs = [(args, kwargs)]
    for _ in range(fresh):
        inputs.append(pytree.tree_map(_fresh, (args, kwargs)))
    for a, k in inputs:
        expected = mod(*_clone(a), **_clone(k))
        actual = gm(*_clone(a), **_clone(k))
        _close(actual, expected)
    return ep


def line_of(obj, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    matches = [start + i for i, line in enumerate(lines) if text in line]
    assert matches, f"{text!r} not in the source of {obj}"
    return matches[0]


def assert_break(mod, args, code, marker, obj=None, kwargs=None):
    obj = obj if obj is not None else type(mod)
    with pytest.raises(GraphBreakError) as info:
        unbroken.export(mod, args, kwargs)
    err = info.value
    assert err.code == code, err.render()
    assert err.frames, err.render()
    assert err.frames[-1].lineno == line_of(obj, marker), err.render()
    err.render()  # renders without error
    return err


def mutable_targets(ep):
    out = []
    for n in ep.graph.nodes:
        if n.op == "call_function" and hasattr(n.target, "_schema") and n.target._schema.is_mutable:
            out.append(n.target)
    return out


# --------------------------------------------------------------------------------------------
# basic inputs / outputs
# --------------------------------------------------------------------------------------------

class AddMul(nn.Module):
    def forward(self, x, y, *, scale):
        return (x + y) * scale


def test_kwargs_inputs():
    check(AddMul(), (torch.randn(3, 4),), {"y": torch.randn(3, 4), "scale": torch.randn(4)})


class KwOnly(nn.Module):
    def forward(self, x, bias=None, alpha=1.0):
        if bias is not None:
            x = x + bias
        return x * alpha


def test_kwargs_defaults_and_none():
    check(KwOnly(), (torch.randn(2, 3),))
    check(KwOnly(), (torch.randn(2, 3),), {"bias": torch.randn(3), "alpha": 2.5})


Pair = collections.namedtuple("Pair", ["a", "b"])


class PytreeIO(nn.Module):
    def forward(self, inp):
        t, lst, d, p = inp
        s = t[0] + t[1] + lst[0] * lst[1][0] + d["u"] - d["v"]["w"] + p.a * p.b
        return {"sum": s, "parts": [s + 1, (s * 2, Pair(s - 1, s.relu()))], "p": Pair(p.b, p.a)}


def test_pytree_inputs_and_outputs_nested():
    x = lambda: torch.randn(2, 3)  # noqa: E731
    inp = ((x(), x()), [x(), (x(),)], {"u": x(), "v": {"w": x()}}, Pair(x(), x()))
    check(PytreeIO(), (inp,))


class NonTensorIO(nn.Module):
    def forward(self, x, n: int, f: float, flag, name: str):
        y = x * n + f
        if flag is None:
            y = y - 1
        if name == "double":
            y = y * 2
        return y, n + 1, f * 2.0, None, name + "!"


def test_non_tensor_inputs_and_outputs():
    check(NonTensorIO(), (torch.randn(3), 3, 0.5, None, "double"))


def test_non_tensor_outputs_match_eager_for_other_constants():
    check(NonTensorIO(), (torch.randn(3), 2, 1.5, None, "single"))


def test_non_tensor_input_changed_at_runtime_is_rejected():
    ep = unbroken.export(NonTensorIO(), (torch.randn(3), 3, 0.5, None, "double"))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(3), 4, 0.5, None, "double")


def plain_function(x, y):
    return torch.sin(x) * y.cos() + 1


def test_plain_function_exported():
    check(plain_function, (torch.randn(4), torch.randn(4)))


class StarArgs(nn.Module):
    def forward(self, *xs):
        out = xs[0]
        for t in xs[1:]:
            out = out + t
        return out * len(xs)


def test_star_args_forward():
    check(StarArgs(), (torch.randn(3), torch.randn(3), torch.randn(3)))


class StarKwargs(nn.Module):
    def forward(self, x, **extra):
        return x + extra["a"] * extra["b"]


def test_star_kwargs_forward():
    check(StarKwargs(), (torch.randn(3),), {"a": torch.randn(3), "b": torch.randn(3)})


# --------------------------------------------------------------------------------------------
# state: constants, buffers, tied weights, meta
# --------------------------------------------------------------------------------------------

class WithConst(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.tensor([1.0, 2.0, 3.0])
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x) * self.c


def test_plain_tensor_attribute_is_lifted_constant():
    ep = check(WithConst(), (torch.randn(2, 3),))
    names = [n.name for n in ep.graph.nodes if n.op == "placeholder"]
    assert any(n.startswith("c_") for n in names), names


class TensorsMadeInForward(nn.Module):
    """Each torch.tensor(...) made in forward is its own lifted constant (DeBERTa's relative
    position buckets: an int64 7 and a float 7.875 once both read the last one lifted)."""

    def forward(self, x):
        mid = torch.tensor(7)
        ratio = torch.tensor(7.875)
        scale = torch.tensor(16.0)
        return (x * mid + torch.log(ratio)) / torch.sqrt(scale)


def test_constants_made_in_forward_each_keep_their_value():
    model, x = TensorsMadeInForward(), torch.randn(2, 3)
    ep = check(model, (x,))
    targets = [s.target for s in ep.graph_signature.input_specs
               if s.kind.name == "CONSTANT_TENSOR"]
    assert len(targets) == len(set(targets)) == 3
    assert sorted(ep.constants[t].item() for t in targets) == [7, 7.875, 16.0]
    assert torch.equal(ep.module()(x), model(x))


class NonPersistent(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("scale", torch.full((3,), 2.0), persistent=False)
        self.register_buffer("shift", torch.ones(3))

    def forward(self, x):
        return x * self.scale + self.shift


def test_non_persistent_buffer():
    check(NonPersistent(), (torch.randn(2, 3),))


class Tied(nn.Module):
    def __init__(self):
        super().__init__()
        self.a = nn.Linear(4, 4, bias=False)
        self.b = nn.Linear(4, 4, bias=False)
        self.b.weight = self.a.weight

    def forward(self, x):
        return self.b(self.a(x))


def test_tied_weights():
    m = Tied()
    check(m, (torch.randn(2, 4),))
    # updating the shared weight through one name is seen through the other
    with torch.no_grad():
        m.a.weight.mul_(2)
    x = torch.randn(2, 4)
    assert_close(unbroken.export(m, (x,)).module()(x), m(x))


class MetaModel(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(16, 8, device="meta")

    def forward(self, x):
        return self.lin(x).relu()


def test_meta_model_exports():
    ep = unbroken.export(MetaModel(), (torch.randn(4, 16, device="meta"),))
    outs = [n for n in ep.graph.nodes if n.op == "output"]
    assert outs
    vals = [n.meta["val"] for n in ep.graph.nodes if n.op == "call_function"]
    assert vals and vals[-1].shape == (4, 8)


# --------------------------------------------------------------------------------------------
# mutation
# --------------------------------------------------------------------------------------------

class InplaceIntermediates(nn.Module):
    def forward(self, x, y):
        z = x * 2
        z.add_(1)
        z.relu_()
        z += y
        w = torch.sigmoid(z)
        w.mul_(y)
        return w


def test_inplace_on_intermediates_is_functional():
    ep = check(InplaceIntermediates(), (torch.randn(3, 4), torch.randn(3, 4)))
    assert mutable_targets(ep) == []


class InplaceView(nn.Module):
    def forward(self, x):
        z = x.clone()
        z[:, 0] = 0.0
        z[1].mul_(3)
        z.view(-1)[2] = 5.0
        return z


def test_inplace_through_views_of_intermediates():
    ep = check(InplaceView(), (torch.randn(3, 4),))
    assert mutable_targets(ep) == []


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("running", torch.zeros(3))

    def forward(self, x):
        self.count.add_(1)
        self.running.mul_(0.5).add_(x.mean(0))
        return x * self.count + self.running


def test_buffer_mutation_written_back():
    eager = Counter()
    ep = unbroken.export(copy.deepcopy(eager), (torch.randn(4, 3),))
    assert mutable_targets(ep) == []
    gm = ep.module()
    for _ in range(2):
        x = torch.randn(4, 3)
        assert_close(gm(x.clone()), eager(x.clone()))
    assert_close(gm.count, eager.count)
    assert_close(gm.running, eager.running)
    assert eager.count.item() == 2.0


class MutateInput(nn.Module):
    def forward(self, x, y):
        x.mul_(2)
        return x + y


def test_user_input_mutation():
    ep = unbroken.export(MutateInput(), (torch.randn(3), torch.randn(3)))
    assert mutable_targets(ep) == []
    x, y = torch.randn(3), torch.randn(3)
    xe, xu = x.clone(), x.clone()
    oe = MutateInput()(xe, y)
    ou = ep.module()(xu, y)
    assert_close(ou, oe)
    assert_close(xu, xe)
    assert_close(xu, 2 * x)


class MutateInputSlice(nn.Module):
    def forward(self, x):
        x[0] = 7.0
        return x.sum()


def test_user_input_mutation_through_view():
    ep = unbroken.export(MutateInputSlice(), (torch.randn(3, 2),))
    x = torch.randn(3, 2)
    xe, xu = x.clone(), x.clone()
    assert_close(ep.module()(xu), MutateInputSlice()(xe))
    assert_close(xu, xe)


# --------------------------------------------------------------------------------------------
# hooks
# --------------------------------------------------------------------------------------------

class Inner(nn.Module):
    def forward(self, x):
        return x * 3


class WithHooks(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = Inner()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(self.inner(x))


def _pre_hook(mod, args):
    return (args[0] + 1,)


def _post_hook(mod, args, out):
    return out * 2


def test_hooks_on_user_submodule():
    m = WithHooks()
    m.inner.register_forward_pre_hook(_pre_hook)
    m.inner.register_forward_hook(_post_hook)
    check(m, (torch.randn(2, 4),))


def test_hooks_on_linear():
    m = WithHooks()
    m.lin.register_forward_pre_hook(_pre_hook)
    m.lin.register_forward_hook(_post_hook)
    check(m, (torch.randn(2, 4),))


def test_hook_on_root_module():
    m = WithHooks()
    m.register_forward_hook(_post_hook)
    check(m, (torch.randn(2, 4),))


# --------------------------------------------------------------------------------------------
# containers and Python features
# --------------------------------------------------------------------------------------------

class Containers(nn.Module):
    def __init__(self):
        super().__init__()
        self.seq = nn.Sequential(nn.Linear(4, 4), nn.ReLU(), nn.Linear(4, 4), nn.Tanh())
        self.ml = nn.ModuleList([nn.Linear(4, 4) for _ in range(3)])
        self.md = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Sigmoid()})

    def forward(self, x):
        x = self.seq(x)
        for layer in self.seq:
            x = layer(x)
        x = self.seq[0](x) + self.seq[-1](x)
        x = self.seq[1:3](x)
        for i, layer in enumerate(self.ml):
            x = layer(x) * (i + 1)
        for a, b in zip(self.ml, self.ml[::-1]):
            x = a(x) - b(x)
        x = x * len(self.ml) + len(self.seq)
        for k in self.md:
            x = self.md[k](x)
        x = self.ml[len(self.ml) - 1](x)
        return x


def test_module_containers():
    check(Containers(), (torch.randn(2, 4),))


class DictViews(nn.Module):
    def __init__(self):
        super().__init__()
        self.md = nn.ModuleDict({"a": nn.Linear(4, 4), "b": nn.Sigmoid()})

    def forward(self, x):
        for _k, v in self.md.items():
            x = v(x)
        for v in self.md.values():
            x = v(x)
        for k in self.md.keys():
            x = self.md[k](x)
        return x


def test_module_dict_views():
    check(DictViews(), (torch.randn(2, 4),))


class Base(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return self.lin(x)


class Derived(Base):
    def forward(self, x):
        return super().forward(x).relu() + super(Derived, self).forward(x)


def test_super_forward():
    check(Derived(), (torch.randn(2, 4),))


class WithProperty(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)
        self.factor = 3

    @property
    def scale(self):
        return self.factor * 2

    @property
    def w(self):
        return self.lin.weight

    def forward(self, x):
        return x @ self.w.t() * self.scale


def test_property():
    check(WithProperty(), (torch.randn(2, 4),))


class Closures(nn.Module):
    def forward(self, x, y):
        k = 2

        def inner(t):
            return t * k + y

        def outer(t):
            def deepest(u):
                return inner(u) - t
            return deepest(t * 3)

        fn = lambda t: t.sin()  # noqa: E731
        return outer(x) + fn(y)


def test_closures_and_nested_functions():
    check(Closures(), (torch.randn(3), torch.randn(3)))


class Comprehensions(nn.Module):
    def forward(self, xs):
        ys = [t * i for i, t in enumerate(xs)]
        d = {f"k{i}": t.exp() for i, t in enumerate(ys) if i != 1}
        return torch.stack(ys).sum(0), sum(d.values()), tuple(t + 1 for t in xs)


def test_comprehensions_over_tensors():
    check(Comprehensions(), ([torch.randn(3) for _ in range(3)],))


class NoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        with torch.no_grad():
            y = self.lin(x)
        return y + x


def test_no_grad_block():
    check(NoGrad(), (torch.randn(2, 3),))


class ShapeArith(nn.Module):
    def forward(self, x):
        b = x.shape[0]
        c = x.size(1)
        n = x.dim()
        y = x.view(b, c * x.size(2))
        z = x.reshape(len(x), -1)
        w = x.reshape(b * c // 2, 2, -1)
        return y + z, w.sum(n - 2), x.view(-1)[: b * c]


def test_shape_arithmetic():
    check(ShapeArith(), (torch.randn(4, 6, 5),))


class Factories(nn.Module):
    def forward(self, x):
        a = torch.ones(4)
        b = torch.arange(4)
        c = torch.tensor([1.0, 2.0, 3.0, 4.0])
        d = torch.zeros_like(x)
        e = torch.full((4,), 2.5)
        return x * a + b + c + d + e, torch.arange(0, 8, 2) * 1.0


def test_factories_inside_forward():
    ep = check(Factories(), (torch.randn(4),))
    for n in ep.graph.nodes:
        if n.op == "call_function" and isinstance(n.meta.get("val"), torch.Tensor):
            assert n.meta["val"].device.type in ("cpu", "meta")
        if "device" in n.kwargs:
            assert n.kwargs["device"] in (None, torch.device("cpu")), n.format_node()


class Attention(nn.Module):
    def __init__(self):
        super().__init__()
        self.mha = nn.MultiheadAttention(8, 2, batch_first=True)

    def forward(self, q, k, v):
        a = F.scaled_dot_product_attention(q.unsqueeze(1), k.unsqueeze(1), v.unsqueeze(1))
        b, _ = self.mha(q, k, v)
        return a.squeeze(1) + b


def test_attention():
    check(Attention().eval(), (torch.randn(2, 5, 8), torch.randn(2, 5, 8), torch.randn(2, 5, 8)))


def test_sdpa_causal():
    def f(q, k, v):
        return F.scaled_dot_product_attention(q, k, v, is_causal=True)
    check(f, (torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8), torch.randn(2, 2, 5, 8)))


class GRUNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.gru = nn.GRU(4, 6, batch_first=True, num_layers=2)

    def forward(self, x):
        out, h = self.gru(x)
        return out, h


def test_gru():
    check(GRUNet().eval(), (torch.randn(2, 5, 4),))


class ConvEmb(nn.Module):
    def __init__(self):
        super().__init__()
        self.emb = nn.Embedding(10, 4)
        self.conv = nn.Conv1d(4, 6, 3, padding=1)

    def forward(self, idx):
        e = self.emb(idx)  # (B, L, 4)
        return self.conv(e.transpose(1, 2))


def test_conv1d_embedding():
    check(ConvEmb(), (torch.randint(0, 10, (2, 7)),))


class TensorOps(nn.Module):
    def forward(self, x, mask):
        a = torch.cat([x, x * 2], dim=1)
        b = torch.stack([x, x + 1], dim=0)
        c1, c2 = torch.split(a, [2, 6], dim=1)
        d = torch.chunk(x, 2, dim=1)
        e = x[..., 1:3]
        f = x[:, None]
        g = x.masked_fill(mask, 0)
        h = torch.where(mask, x, -x)
        i = x[::2, ::-1] if False else x[::2]
        return a, b.sum(0), c1, c2, d[0] + d[1], e, f, g, h, i, x[-1], x[1, 2]


def test_tensor_ops():
    check(TensorOps(), (torch.randn(4, 4), torch.rand(4, 4) > 0.5))


class Isinstance(nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = nn.ModuleList([nn.Linear(3, 3), nn.ReLU(), nn.Linear(3, 3)])

    def forward(self, x, extra):
        for layer in self.layers:
            if isinstance(layer, nn.Linear):
                x = layer(x)
            elif isinstance(layer, (nn.ReLU, nn.GELU)):
                x = layer(x) * 2
        if isinstance(extra, torch.Tensor):
            x = x + extra
        if isinstance(extra, (list, tuple)):
            x = x - 100
        return x


def test_isinstance():
    check(Isinstance(), (torch.randn(2, 3), torch.randn(3)))


class GetattrLoop(nn.Module):
    def __init__(self):
        super().__init__()
        self.n = 3
        for i in range(self.n):
            setattr(self, f"layer{i}", nn.Linear(4, 4))

    def forward(self, x):
        for i in range(self.n):
            x = getattr(self, f"layer{i}")(x)
        x = getattr(self, "layer0")(x)
        return x + getattr(self, "missing", 1.0)


def test_getattr_and_range_loop():
    check(GetattrLoop(), (torch.randn(2, 4),))


class TupleUnpackAndDefaults(nn.Module):
    def helper(self, x, *rest, scale=2, **kw):
        return x * scale + sum(rest) + kw.get("bias", 0)

    def forward(self, x, y):
        a, *b = x.unbind(0)
        return self.helper(a, *b, scale=3, bias=y)


def test_varargs_helper():
    check(TupleUnpackAndDefaults(), (torch.randn(3, 2), torch.randn(2)))


def test_dtype_and_int_tensors():
    def f(x, i):
        return (x.to(torch.float64) * i).sum(-1), i // 2, (i % 3).to(torch.int32), x.half().float()
    check(f, (torch.randn(2, 3), torch.randint(1, 9, (2, 3))))


def test_train_mode_batchnorm_dropout_free():
    m = nn.Sequential(nn.Conv2d(3, 4, 3), nn.BatchNorm2d(4), nn.ReLU())
    m.train()
    eager = copy.deepcopy(m)
    ep = unbroken.export(m, (torch.randn(2, 3, 8, 8),))
    gm = ep.module()
    for _ in range(2):
        x = torch.randn(2, 3, 8, 8)
        assert_close(gm(x), eager(x))
    for name in ("running_mean", "running_var", "num_batches_tracked"):
        got = dict(gm.named_buffers())
        key = [k for k in got if k.endswith(name)][0]
        assert_close(got[key], dict(eager.named_buffers())[key])


# --------------------------------------------------------------------------------------------
# usage errors and input checks
# --------------------------------------------------------------------------------------------

class One(nn.Module):
    def forward(self, x):
        return x + 1


class Two(nn.Module):
    def forward(self, x, y):
        return x + y


class Custom:
    pass


def test_args_not_a_tuple():
    with pytest.raises(ExportUsageError) as info:
        unbroken.export(One(), torch.randn(3))
    assert "tuple" in str(info.value)


def test_wrong_number_of_args():
    with pytest.raises(ExportUsageError):
        unbroken.export(Two(), (torch.randn(3),))
    with pytest.raises(ExportUsageError):
        unbroken.export(One(), (torch.randn(3), torch.randn(3)))


@pytest.mark.parametrize("bad", [{1, 2}, Custom(), object()], ids=["set", "custom", "object"])
def test_unsupported_input_type(bad):
    with pytest.raises(UnbrokenError) as info:
        unbroken.export(Two(), (torch.randn(3), bad))
    assert isinstance(info.value, (ExportUsageError, GraphBreakError)), info.value.render()


def test_calling_ep_directly_is_refused():
    ep = unbroken.export(One(), (torch.randn(3),))
    with pytest.raises(Exception) as info:
        ep(torch.randn(3))
    assert "module()" in str(info.value)


@pytest.fixture(scope="module")
def two_ep():
    return unbroken.export(Two(), (torch.randn(2, 3), torch.randn(2, 3)))


def test_module_wrong_count(two_ep):
    with pytest.raises(InputMismatchError):
        two_ep.module()(torch.randn(2, 3))
    with pytest.raises(InputMismatchError):
        two_ep.module()(torch.randn(2, 3), torch.randn(2, 3), torch.randn(2, 3))


def test_module_wrong_dtype(two_ep):
    with pytest.raises(InputMismatchError) as info:
        two_ep.module()(torch.randn(2, 3), torch.randn(2, 3, dtype=torch.float64))
    msg = str(info.value)
    assert "y" in msg and "float32" in msg and "float64" in msg, msg


def test_module_wrong_rank(two_ep):
    with pytest.raises(InputMismatchError) as info:
        two_ep.module()(torch.randn(2, 3, 1), torch.randn(2, 3))
    msg = str(info.value)
    assert "x" in msg and "2" in msg and "3" in msg, msg


def test_module_wrong_size(two_ep):
    with pytest.raises(InputMismatchError) as info:
        two_ep.module()(torch.randn(2, 3), torch.randn(2, 5))
    msg = str(info.value)
    assert "y" in msg and "3" in msg and "5" in msg, msg


def test_module_wrong_type(two_ep):
    with pytest.raises(InputMismatchError):
        two_ep.module()(torch.randn(2, 3), 3.0)


def test_module_wrong_pytree_structure():
    example = ((torch.randn(2), torch.randn(2)), [torch.randn(2), (torch.randn(2),)],
               {"u": torch.randn(2), "v": {"w": torch.randn(2)}},
               Pair(torch.randn(2), torch.randn(2)))
    ep = unbroken.export(PytreeIO(), (example,))
    with pytest.raises(InputMismatchError):
        ep.module()(((torch.randn(2), torch.randn(2)), [torch.randn(2), (torch.randn(2),)],
                     {"u": torch.randn(2), "zz": {"w": torch.randn(2)}},
                     Pair(torch.randn(2), torch.randn(2))))


# --------------------------------------------------------------------------------------------
# graph breaks: id and line
# --------------------------------------------------------------------------------------------

class BItem(nn.Module):
    def forward(self, x):
        s = x.sum().item()
        if s > 0:  # MARK
            return x * s
        return x


class BTolist(nn.Module):
    # a small static tensor's .tolist() exports (its elements are .item() reads); one whose
    # length is data-dependent cannot be a Python list
    def forward(self, x):
        vals = x.nonzero().tolist()  # MARK
        return x + len(vals)


class BId(nn.Module):
    def forward(self, x):
        y = x + 1
        return y + id(y)  # MARK


class BNumpy(nn.Module):
    def forward(self, x):
        a = x.numpy()
        return x + float(a.sum())  # MARK: reads the array's value


class BIfAny(nn.Module):
    def forward(self, x):
        if x.any():  # MARK
            return x + 1
        return x - 1


class BWhile(nn.Module):
    def forward(self, x):
        while x.sum() > 0:  # MARK
            x = x - 1
        return x


class BRaise(nn.Module):
    def forward(self, x):
        if x.dim() == 2:
            raise ValueError("no 2-d inputs")  # MARK
        return x


def _gen(x):
    yield x + 1  # MARK
    yield x + 2


class BGenerator(nn.Module):
    def forward(self, x):
        return sum(_gen(x))


GLOBAL_STATE = 0


class BGlobal(nn.Module):
    def forward(self, x):
        global GLOBAL_STATE
        GLOBAL_STATE = GLOBAL_STATE + 1  # MARK
        return x + 1


class BSetattr(nn.Module):
    """Replaces a submodule: the program's modules are fixed at export. (A plain attribute
    write is the model's state, traced as torch.export does: tests/frontend/
    test_attribute_writes.py.)"""

    def __init__(self):
        super().__init__()
        self.head = nn.Identity()

    def forward(self, x):
        self.head = nn.ReLU()  # MARK
        return self.head(x)



class BMaskIndex(nn.Module):
    def forward(self, x):
        return x[torch.tensor([0, 1]), x[0] > 0]  # MARK: a mask beside another index tensor


class MyFn(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):
        return x * 2

    @staticmethod
    def backward(ctx, g):
        return g * 2


class BAutogradFn(nn.Module):
    def forward(self, x):
        return MyFn.apply(x) + 1  # MARK


class BInt(nn.Module):
    def forward(self, x):
        return [x] * int(x.max() + 3)  # MARK: a Python list as long as a tensor value


@pytest.mark.parametrize("cls, code", [
    (BItem, "UB105"),
    (BTolist, "UB105"),
    (BId, "UB103"),
    (BNumpy, "UB105"),
    (BIfAny, "UB101"),
    (BWhile, "UB101"),
    (BRaise, "UB104"),
    (BGlobal, "UB107"),
    (BSetattr, "UB107"),
    (BMaskIndex, "UB114"),
    (BInt, "UB105"),
], ids=lambda v: v.__name__ if isinstance(v, type) else v)
def test_graph_break(cls, code):
    assert_break(cls(), (torch.randn(2, 3),), code, "# MARK")


def test_custom_autograd_function_exports():
    # inlined for inference; see tests/frontend/test_autograd_function.py for training
    with torch.no_grad():
        check(BAutogradFn(), (torch.randn(2, 3),))


def test_generator_function_exports():
    # generators run lazily through the interpreter (one paused frame per generator)
    check(BGenerator(), (torch.randn(2, 3),))


class BNested(nn.Module):
    def __init__(self):
        super().__init__()
        self.inner = BItem()

    def forward(self, x):
        return self.inner(x) + 1  # OUTER


def test_graph_break_in_submodule_has_full_stack():
    with pytest.raises(GraphBreakError) as info:
        unbroken.export(BNested(), (torch.randn(2, 3),))
    err = info.value
    assert err.code == "UB105"
    assert err.frames[-1].lineno == line_of(BItem, "# MARK")
    assert any(f.lineno == line_of(BNested, "# OUTER") for f in err.frames[:-1]), err.render()


def test_graph_break_does_not_mutate_module_state():
    m = BSetattr()
    with pytest.raises(GraphBreakError):
        unbroken.export(m, (torch.randn(2, 3),))
    assert type(m.head) is nn.Identity


def test_global_write_does_not_leak():
    before = GLOBAL_STATE
    with pytest.raises(GraphBreakError):
        unbroken.export(BGlobal(), (torch.randn(2, 3),))
    assert GLOBAL_STATE == before


class ViewThenMutate(nn.Module):
    def forward(self, x):
        z = x * 1
        a = z.view(-1)
        z.add_(1)  # MARK
        return a


def test_mutation_of_viewed_tensor_is_sound():
    # The view `a` must see the later in-place update (eager semantics).
    ep = unbroken.export(ViewThenMutate(), (torch.randn(2, 3),))
    x = torch.randn(2, 3)
    assert_close(ep.module()(x), ViewThenMutate()(x))


class ConstMutate(nn.Module):
    def __init__(self):
        super().__init__()
        self.c = torch.zeros(3)

    def forward(self, x):
        self.c.add_(1)
        return x + self.c


def test_constant_mutation_sound_or_refused():
    try:
        ep = unbroken.export(ConstMutate(), (torch.randn(3),))
    except RefusalError as error:  # an InternalError is a bug, never a refusal
        assert error.code == "UB121" and error.frames, error.render()
        return
    eager, gm = ConstMutate(), ep.module()
    for _ in range(2):
        x = torch.randn(3)
        assert_close(gm(x), eager(x))


# --------------------------------------------------------------------------------------------
# regressions: bugs this suite found (fixed); gaps still open are marked xfail(strict=True)
# --------------------------------------------------------------------------------------------

class AttrList(nn.Module):
    def __init__(self):
        super().__init__()
        self.cache = []

    def forward(self, x):
        self.cache.append(1)
        return x * len(self.cache)


class AttrDict(nn.Module):
    def __init__(self):
        super().__init__()
        self.cfg = {"k": 1}

    def forward(self, x):
        self.cfg["k"] = self.cfg["k"] + 1
        return x * self.cfg["k"]


@pytest.mark.parametrize("cls", [AttrList, AttrDict], ids=["list.append", "dict.setitem"])
def test_attribute_container_mutation_sound_or_refused(cls):
    try:
        ep = unbroken.export(cls(), (torch.ones(2),))
    except RefusalError as error:  # an InternalError is a bug, never a refusal
        assert error.code == "UB107" and error.frames, error.render()
        return
    assert_close(ep.module()(torch.ones(2)), cls()(torch.ones(2)))  # first call of each


def test_new_tensor_inside_forward():
    check(lambda x: x.new_tensor([1.0, 2.0, 3.0]) + x, (torch.randn(3),))


def test_integer_tensor_index():
    check(lambda x, i: x[i] * 2 + x[:, i].sum(), (torch.randn(5, 5), torch.tensor([0, 3, 3])))


def test_tensor_from_tensor_elements():
    try:
        check(lambda x: torch.tensor([x[0], x[1]]) * 2, (torch.randn(3),))
    except GraphBreakError as err:
        assert err.code == "UB105", err.render()


class TiedBuffers(nn.Module):
    def __init__(self):
        super().__init__()
        t = torch.zeros(3)
        self.register_buffer("a", t)
        self.register_buffer("b", t)  # the same tensor under two names

    def forward(self, x):
        self.a.add_(1)
        return x + self.b


def test_tied_buffers_mutation():
    eager = TiedBuffers()
    gm = unbroken.export(TiedBuffers(), (torch.ones(3),)).module()
    for _ in range(2):
        x = torch.randn(3)
        assert_close(gm(x), eager(x))


def test_mutating_an_input_list_is_refused():
    # eager would change the caller's list; an exported program cannot replay that
    def f(xs):
        xs.append(xs[0] * 2)
        return torch.stack(xs)

    with pytest.raises(GraphBreakError) as info:
        unbroken.export(f, ([torch.randn(2), torch.randn(2)],))
    assert info.value.code == "UB107"


def test_copying_an_input_list_then_mutating_the_copy_exports():
    def f(xs):
        ys = list(xs)
        ys.append(xs[0] * 2)
        return torch.stack(ys)

    check(f, ([torch.randn(2), torch.randn(2)],))


# -- the user's own pytree functions ---------------------------------------------------------------

class _Crate:
    def __init__(self, t):
        self.t = t


def _flatten_crate(crate):
    if crate.t.dim() == 1:  # this flatten function is broken for 1-d contents
        raise KeyError("crate")
    return [crate.t], None


torch.utils._pytree.register_pytree_node(_Crate, _flatten_crate, lambda xs, ctx: _Crate(xs[0]))


class _Pack(nn.Module):
    def forward(self, x):
        return _Crate(x.flatten())


class _Unpack(nn.Module):
    def forward(self, crate):
        return crate.t + 1


@pytest.mark.parametrize("model, example, what", [
    (_Unpack(), _Crate(torch.randn(3)), "the example inputs"),
    (_Pack(), torch.randn(2, 3), "forward()'s result"),
])
def test_a_raising_user_pytree_flatten_is_a_usage_error_at_its_line(model, example, what):
    """The user's flatten function raising is their error (their line, the type), not an
    InternalError of unbroken and not a raw KeyError."""
    with pytest.raises(unbroken.ExportUsageError) as info:
        unbroken.export(model, (example,))
    error = info.value
    assert f"flattening {what} failed" in str(error) and "_Crate" in str(error)
    assert "KeyError" in str(error)
    assert error.frames[-1].function == "_flatten_crate"
    assert "raise KeyError" in error.frames[-1].source
    two_d = _Crate(torch.randn(2, 3))  # where the flatten works, export works
    assert torch.equal(unbroken.export(_Unpack(), (two_d,)).module()(two_d), two_d.t + 1)


_OUTSIDE = torch.nn.Linear(3, 3)  # a module that is not part of the exported model


class _UsesOutsideModule(torch.nn.Module):
    def forward(self, x):
        return _OUTSIDE(x) * 2


def test_parameters_of_a_module_outside_the_model_are_refused():
    """A module reached through a global is not the model's: its parameters would be baked in
    as constants (no requires_grad, no gradient). Refused as torch strict refuses (UB123),
    naming the global; tests/frontend/test_outside_parameters.py has the variations."""
    with pytest.raises(GraphBreakError) as info:
        unbroken.export(_UsesOutsideModule(), (torch.randn(2, 3),))
    assert info.value.code == "UB123" and "_OUTSIDE" in str(info.value)


@pytest.mark.parametrize("lazy", [lambda: nn.LazyLinear(3), lambda: nn.LazyBatchNorm1d()])
def test_a_lazy_module_is_refused_until_it_has_run_once(lazy):
    """An uninitialized lazy parameter or buffer is the user's to initialize (one eager call):
    refused with that fix, the model left as it was; after the call it exports as eager."""
    model, x = nn.Sequential(lazy()).eval(), torch.randn(2, 4)
    with pytest.raises(unbroken.ExportUsageError) as info:
        unbroken.export(model, (x,))
    assert "not initialized" in info.value.message and "once" in info.value.hint
    assert any(torch.nn.parameter.is_lazy(t) for t in [*model.parameters(), *model.buffers()])
    model(x)
    assert_close(unbroken.export(model, (x,)).module()(x), model(x))
