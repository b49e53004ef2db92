"""Differential tests of ``unbroken.export`` with ``dynamic_shapes``.

Programs exported with a dynamic dim are run by ``ep.module()`` at sizes drawn by hypothesis
inside the declared range and compared with eager; sizes outside the range must be rejected;
specs the code violates must be refused with ``ConstraintViolationError`` naming the line
(read from this file via a marker comment).
"""
from __future__ import annotations

import inspect
import math

import pytest
import torch
import torch.nn as nn
import torch.nn.functional as F
from hypothesis import given, settings
from hypothesis import strategies as st
from torch.export import Dim
from torch.testing import assert_close

import unbroken
from unbroken import ConstraintViolationError, ExportUsageError, GraphBreakError, InputMismatchError

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

torch.manual_seed(0)

FAST = settings(max_examples=15, deadline=None)


def line_of(obj, text: str) -> int:
    lines, start = inspect.getsourcelines(obj)
    matches = [start + i for i, line in enumerate(lines) if text in line]
    assert matches, f"{text!r} not in the source of {obj}"
    return matches[0]


def _close(actual, expected):
    if isinstance(expected, (tuple, list)):
        assert len(actual) == len(expected)
        for a, e in zip(actual, expected):
            _close(a, e)
    else:
        assert_close(actual, expected)


# --------------------------------------------------------------------------------------------
# models
# --------------------------------------------------------------------------------------------

class MLP(nn.Module):
    def __init__(self):
        super().__init__()
        self.net = nn.Sequential(nn.Linear(8, 16), nn.ReLU(), nn.Linear(16, 4))

    def forward(self, x):
        return self.net(x).softmax(-1)


class ConvNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = nn.Conv2d(3, 4, 3, padding=1)
        self.bn = nn.BatchNorm2d(4)
        self.fc = nn.Linear(4 * 4 * 4, 5)

    def forward(self, x):
        x = F.max_pool2d(self.bn(self.conv(x)).relu(), 2)
        return self.fc(x.view(x.shape[0], -1))


class Flatten(nn.Module):
    def forward(self, x):
        return x.view(x.shape[0], -1) * 2 + x.size(0)


class ReshapeBy4(nn.Module):
    def forward(self, x):
        return x.reshape(-1, 4).sum(1)


@pytest.fixture(scope="module")
def mlp_ep():
    m = MLP().eval()
    ep = unbroken.export(m, (torch.randn(8, 8),),
                         dynamic_shapes={"x": {0: Dim("batch", min=2, max=64)}})
    return m, ep


@pytest.fixture(scope="module")
def conv_ep():
    m = ConvNet().eval()
    ep = unbroken.export(m, (torch.randn(4, 3, 8, 8),),
                         dynamic_shapes={"x": {0: Dim("batch", min=2, max=64)}})
    return m, ep


@FAST
@given(st.integers(2, 64))
def test_mlp_dynamic_batch(mlp_ep, b):
    m, ep = mlp_ep
    x = torch.randn(b, 8)
    assert_close(ep.module()(x), m(x))


@FAST
@given(st.integers(2, 64))
def test_convnet_dynamic_batch(conv_ep, b):
    m, ep = conv_ep
    x = torch.randn(b, 3, 8, 8)
    assert_close(ep.module()(x), m(x))


@pytest.fixture(scope="module")
def flatten_ep():
    return unbroken.export(Flatten(), (torch.randn(3, 4, 5),),
                           dynamic_shapes={"x": {0: Dim("batch", min=2, max=64)}})


@FAST
@given(st.integers(2, 64))
def test_view_batch_minus_one(flatten_ep, b):
    x = torch.randn(b, 4, 5)
    assert_close(flatten_ep.module()(x), Flatten()(x))


@pytest.fixture(scope="module")
def reshape_ep():
    n = Dim("n", min=1, max=32)
    return unbroken.export(ReshapeBy4(), (torch.randn(12),), dynamic_shapes={"x": {0: 4 * n}})


@FAST
@given(st.integers(2, 32))  # unbroken (like torch's range_constraints) gives the root n >= 2
def test_reshape_divisible_dim(reshape_ep, n):
    x = torch.randn(4 * n)
    assert_close(reshape_ep.module()(x), ReshapeBy4()(x))


def test_reshape_divisible_dim_rejects_non_multiple(reshape_ep):
    with pytest.raises(InputMismatchError):
        reshape_ep.module()(torch.randn(13))


class TwoDims(nn.Module):
    def forward(self, x):
        b, t, c = x.shape
        y = x.transpose(0, 1).reshape(t, b * c)
        return y.sum(0).view(b, c) + x.mean(1), torch.ones(b, t) * t


@FAST
@given(st.integers(2, 16), st.integers(2, 16))
def test_two_dynamic_dims(b, t):
    # export once per process: cached on the function object
    ep = getattr(test_two_dynamic_dims, "_ep", None)
    if ep is None:
        ep = unbroken.export(TwoDims(), (torch.randn(3, 5, 4),),
                             dynamic_shapes={"x": {0: Dim("b", max=16), 1: Dim("t", max=16)}})
        test_two_dynamic_dims._ep = ep
    x = torch.randn(b, t, 4)
    _close(ep.module()(x), TwoDims()(x))


def test_dynamic_batch_guard_free_graph_has_symbolic_meta(mlp_ep):
    _, ep = mlp_ep
    ph = [n for n in ep.graph.nodes if n.op == "placeholder" and n.name == "x"][0]
    assert isinstance(ph.meta["val"].shape[0], torch.SymInt)


# --------------------------------------------------------------------------------------------
# range checks at run time
# --------------------------------------------------------------------------------------------

@pytest.mark.parametrize("b", [1, 65])
def test_outside_range_rejected(mlp_ep, b):
    _, ep = mlp_ep
    with pytest.raises(InputMismatchError) as info:
        ep.module()(torch.randn(b, 8))
    msg = str(info.value)
    assert "64" in msg and "2" in msg and str(b) in msg, msg


def test_static_dim_still_checked(mlp_ep):
    _, ep = mlp_ep
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(4, 9))


# --------------------------------------------------------------------------------------------
# constraint violations
# --------------------------------------------------------------------------------------------

class LinearOnDynamic(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(100, 10)

    def forward(self, x):
        return self.lin(x)  # MARK


def test_linear_on_dynamic_feature_dim():
    with pytest.raises(ConstraintViolationError) as info:
        unbroken.export(LinearOnDynamic(), (torch.randn(4, 100),),
                        dynamic_shapes={"x": {1: Dim("feat")}})
    err = info.value
    assert any(f.lineno == line_of(LinearOnDynamic, "# MARK") for f in err.frames), err.render()
    err.render()


class AddTwo(nn.Module):
    def forward(self, x, y):
        z = x * 2
        return z + y  # MARK


def test_different_dims_that_must_be_equal():
    with pytest.raises(ConstraintViolationError) as info:
        unbroken.export(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                        dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})
    err = info.value
    assert err.frames and err.frames[-1].lineno == line_of(AddTwo, "# MARK"), err.render()


class Specialize(nn.Module):
    def forward(self, x):
        if x.shape[0] > 10:  # MARK
            return x + 1
        return x - 1


def test_branch_on_dynamic_dim_refused():
    with pytest.raises(ConstraintViolationError) as info:
        unbroken.export(Specialize(), (torch.randn(4, 3),),
                        dynamic_shapes={"x": {0: Dim("b", max=64)}})
    assert info.value.frames[-1].lineno == line_of(Specialize, "# MARK"), info.value.render()


def test_branch_on_dynamic_dim_implied_by_range_ok():
    ep = unbroken.export(Specialize(), (torch.randn(12, 3),),
                         dynamic_shapes={"x": {0: Dim("b", min=11, max=64)}})
    for b in (11, 30, 64):
        x = torch.randn(b, 3)
        assert_close(ep.module()(x), Specialize()(x))


class NeedsEven(nn.Module):
    def forward(self, x):
        return x.view(2, -1, x.shape[1])  # MARK


def test_divisibility_guard_refused():
    with pytest.raises(ConstraintViolationError) as info:
        unbroken.export(NeedsEven(), (torch.randn(4, 3),),
                        dynamic_shapes={"x": {0: Dim("b")}})
    assert any(f.lineno == line_of(NeedsEven, "# MARK") for f in info.value.frames), \
        info.value.render()


# --------------------------------------------------------------------------------------------
# derived dims, shared dims, AUTO
# --------------------------------------------------------------------------------------------

class Halves(nn.Module):
    def forward(self, x, y):
        return x[::2] + y, x[1::2] * y


@pytest.fixture(scope="module")
def halves_ep():
    dx = Dim("dx", min=2, max=32)
    return unbroken.export(Halves(), (torch.randn(8, 3), torch.randn(4, 3)),
                           dynamic_shapes={"x": {0: 2 * dx}, "y": {0: dx}})


@FAST
@given(st.integers(2, 32))
def test_derived_dim(halves_ep, d):
    x, y = torch.randn(2 * d, 3), torch.randn(d, 3)
    _close(halves_ep.module()(x, y), Halves()(x, y))


def test_derived_dim_mismatch_rejected(halves_ep):
    with pytest.raises(InputMismatchError):
        halves_ep.module()(torch.randn(10, 3), torch.randn(4, 3))


class CatPlusOne(nn.Module):
    def forward(self, x, y):
        return torch.cat([x, y[:1]]) * y[0]


@FAST
@given(st.integers(2, 20))
def test_derived_dim_plus_one(d):
    ep = getattr(test_derived_dim_plus_one, "_ep", None)
    if ep is None:
        dx = Dim("dx", max=20)
        ep = unbroken.export(CatPlusOne(), (torch.randn(5, 2), torch.randn(6, 2)),
                             dynamic_shapes={"x": {0: dx}, "y": {0: dx + 1}})
        test_derived_dim_plus_one._ep = ep
    x, y = torch.randn(d, 2), torch.randn(d + 1, 2)
    assert_close(ep.module()(x, y), CatPlusOne()(x, y))


@pytest.fixture(scope="module")
def shared_ep():
    b = Dim("b", max=64)
    return unbroken.export(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                           dynamic_shapes={"x": {0: b}, "y": {0: b}})


@FAST
@given(st.integers(2, 64))
def test_same_dim_object(shared_ep, b):
    x, y = torch.randn(b, 3), torch.randn(b, 3)
    assert_close(shared_ep.module()(x, y), AddTwo()(x, y))


def test_same_dim_object_unequal_rejected(shared_ep):
    with pytest.raises(InputMismatchError):
        shared_ep.module()(torch.randn(5, 3), torch.randn(6, 3))


def test_same_dim_tuple_spec():
    b = Dim("b", max=64)
    ep = unbroken.export(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                         dynamic_shapes=({0: b}, {0: b}))
    x, y = torch.randn(9, 3), torch.randn(9, 3)
    assert_close(ep.module()(x, y), AddTwo()(x, y))


@FAST
@given(st.integers(2, 40), st.integers(2, 40))
def test_dim_auto(b, t):
    ep = getattr(test_dim_auto, "_ep", None)
    if ep is None:
        ep = unbroken.export(TwoDims(), (torch.randn(3, 5, 4),),
                             dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO}})
        test_dim_auto._ep = ep
    x = torch.randn(b, t, 4)
    _close(ep.module()(x), TwoDims()(x))


def test_dim_auto_infers_equality():
    # AddTwo forces x.shape[0] == y.shape[0]: AUTO must accept that rather than refuse.
    ep = unbroken.export(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                         dynamic_shapes={"x": {0: Dim.AUTO}, "y": {0: Dim.AUTO}})
    x, y = torch.randn(7, 3), torch.randn(7, 3)
    assert_close(ep.module()(x, y), AddTwo()(x, y))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(7, 3), torch.randn(8, 3))


def test_dim_auto_specializes_when_code_does():
    ep = unbroken.export(LinearOnDynamic(), (torch.randn(4, 100),),
                         dynamic_shapes={"x": {0: Dim.AUTO, 1: Dim.AUTO}})
    m = LinearOnDynamic()
    m.load_state_dict(ep.state_dict)
    x = torch.randn(9, 100)
    assert_close(ep.module()(x), m(x))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(9, 99))


class IterateRows(nn.Module):
    def forward(self, x):
        return torch.stack([row * i for i, row in enumerate(x)])  # MARK


class RangeRows(nn.Module):
    def forward(self, x):
        total = x[0]
        for i in range(1, x.shape[0]):  # MARK
            total = total + x[i] * i
        return total


@pytest.mark.parametrize("model", [IterateRows, RangeRows], ids=["iterate", "range"])
def test_a_loop_over_a_dynamic_dim_specializes_it(model):
    """A loop unrolled once per row (LLaVA's ``list(image_features)``, ``for i in
    range(x.shape[0])``) specializes the count, as torch.export does: Dim.AUTO adopts it with
    a warning, a named Dim is refused at the line with the static fix."""
    x = torch.randn(3, 4)
    with pytest.warns(unbroken.SpecializationWarning, match=r"x\.shape\[0\]"):
        ep = unbroken.export(model(), (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert_close(ep.module()(x), model()(x), rtol=0, atol=0)
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(4, 4))
    with pytest.raises(ConstraintViolationError) as info:
        unbroken.export(model(), (x,), dynamic_shapes={"x": {0: Dim("b")}})
    assert info.value.frames[-1].lineno == line_of(model, "# MARK")
    assert '"x": None' in info.value.render()


class RangeFromData(nn.Module):
    def forward(self, x):
        return torch.stack([x[0] * i for i in range(int(x.sum()))])  # MARK


def test_a_range_bounded_by_tensor_data_is_refused_at_the_line():
    with pytest.raises(GraphBreakError) as info:
        unbroken.export(RangeFromData(), (torch.ones(2, 3),))
    assert info.value.code == "UB105"
    assert info.value.frames[-1].lineno == line_of(RangeFromData, "# MARK")


def test_example_size_one_named_dim_refused():
    with pytest.raises(ExportUsageError):
        unbroken.export(MLP(), (torch.randn(1, 8),), dynamic_shapes={"x": {0: Dim("b")}})


def test_dynamic_with_kwargs_input():
    class K(nn.Module):
        def forward(self, x, *, mask):
            return x.masked_fill(mask, 0.0).sum(0)

    ep = unbroken.export(K(), (torch.randn(4, 3),), {"mask": torch.rand(4, 3) > 0.5},
                         dynamic_shapes={"x": {0: Dim("b")}, "mask": {0: Dim("b")}})
    for b in (2, 9):
        x, mask = torch.randn(b, 3), torch.rand(b, 3) > 0.5
        assert_close(ep.module()(x, mask=mask), K()(x, mask=mask))


def test_dynamic_shape_arith_in_factory():
    class Fac(nn.Module):
        def forward(self, x):
            pos = torch.arange(x.shape[1])
            return x + pos * 1.0, torch.zeros(x.shape[0] * 2)

    ep = unbroken.export(Fac(), (torch.randn(3, 5),),
                         dynamic_shapes={"x": {0: Dim("b"), 1: Dim("t")}})
    for b, t in ((2, 2), (7, 11)):
        x = torch.randn(b, t)
        _close(ep.module()(x), Fac()(x))


def test_dynamic_sdpa_and_embedding():
    class Enc(nn.Module):
        def __init__(self):
            super().__init__()
            self.emb = nn.Embedding(20, 8)
            self.qkv = nn.Linear(8, 24)

        def forward(self, idx):
            h = self.emb(idx)
            q, k, v = self.qkv(h).chunk(3, dim=-1)
            return F.scaled_dot_product_attention(q, k, v, is_causal=True)

    m = Enc()
    ep = unbroken.export(m, (torch.randint(0, 20, (2, 6)),),
                         dynamic_shapes={"idx": {0: Dim("b", max=8), 1: Dim("t", max=32)}})
    for b, t in ((2, 2), (3, 17), (8, 32)):
        idx = torch.randint(0, 20, (b, t))
        assert_close(ep.module()(idx), m(idx))


# --------------------------------------------------------------------------------------------
# sound or refuse: symbolic-size Python; every export must match eager at every admitted size
# --------------------------------------------------------------------------------------------

def _sound_or_refuse(fn, example, sizes, dims):
    """"exported" (and then equal to eager at every size), or the code of the refusal. An
    InternalError is unbroken's bug, never a refusal: it is raised."""
    try:
        ep = unbroken.export(fn, (example,), dynamic_shapes={"x": dims})
    except unbroken.RefusalError as error:
        assert error.frames, error.render()  # a refusal names the user's line
        return error.code
    for shape in sizes:
        x = torch.randn(*shape)
        try:
            expected = fn(x)
        except Exception:
            with pytest.raises(Exception):  # noqa: B017 (whatever eager raised, any type)
                ep.module()(x)
            continue
        _close(ep.module()(x), expected)
    return "exported"


B0 = {0: Dim("b", max=64)}
SIZES = [(2, 3), (3, 3), (7, 3), (10, 3), (64, 3)]

SOUND_CASES = {
    "mul_by_size": lambda x: x * x.shape[0],
    "floordiv_slice": lambda x: x[: x.shape[0] // 2],
    "range_loop": lambda x: sum(x[i] for i in range(x.shape[0])),
    "iterate_tensor": lambda x: sum(r for r in x),
    "unbind": lambda x: sum(x.unbind(0)),
    "split_len": lambda x: x * len(torch.split(x, 2)),
    "chunk": lambda x: x.chunk(2)[-1].sum(0),
    "tensor_of_size": lambda x: x * torch.tensor(x.shape[0]),
    "full_size": lambda x: torch.full((3,), x.shape[0]) + x,
    "int_size": lambda x: x * int(x.shape[0]),
    "mod_branch": lambda x: x + 1 if x.shape[0] % 2 == 0 else x - 1,
    "eq_branch": lambda x: x + 1 if x.shape[0] == 4 else x - 1,
    "ne_one_branch": lambda x: x + 1 if x.shape[0] != 1 else x - 1,
    "in_tuple": lambda x: x + 1 if x.shape[0] in (4, 5) else x - 1,
    "bool_size": lambda x: x + 1 if x.shape[0] else x - 1,
    "tuple_index": lambda x: x * (1.0, 2.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0)[x.shape[0] % 8],
    "numel": lambda x: x.sum() / x.numel(),
    "arange_norm": lambda x: torch.arange(x.shape[0]).float() / x.shape[0],
    "neg_slice": lambda x: x[-x.shape[0] // 2:],
    "step_slice": lambda x: x[:: x.shape[1]],
    "clamp_size": lambda x: x.clamp(max=x.shape[0]),
    "pow_size_tensor": lambda x: torch.pow(x, x.shape[0]),
    "reshape_pairs": lambda x: x.reshape(-1, 2),
    "view_minus_one": lambda x: x.view(-1),
    "str_size": lambda x: x * len(str(x.shape[0])),
    "fstring_shape": lambda x: x * len(f"{x.shape[0]}"),
    "str_shape": lambda x: x * len(str(x.shape)),
}


# What the cases above get today when they are not exported: a change either way must show (a
# regression to a refusal, or a construct newly supported: then delete its entry).
REFUSED_CASES = {
    # the code specializes the dim
    **dict.fromkeys(["range_loop", "iterate_tensor", "unbind", "split_len", "int_size",
                     "mod_branch", "eq_branch", "in_tuple", "tuple_index", "reshape_pairs",
                     "str_size", "fstring_shape", "str_shape"], "UB003"),
}


@pytest.mark.parametrize("name", list(SOUND_CASES))
def test_sound_or_refuse(name):
    outcome = _sound_or_refuse(SOUND_CASES[name], torch.randn(4, 3), SIZES, B0)
    assert outcome == REFUSED_CASES.get(name, "exported")


@pytest.mark.parametrize("fn", [
    pytest.param(lambda x: x * x.shape[0] ** -0.5, id="pow_neg_half"),
    pytest.param(lambda x: x * (x.shape[0] / 3), id="truediv"),
    pytest.param(lambda x: x * math.sqrt(x.shape[0]), id="math_sqrt"),
    pytest.param(lambda x: x * math.pow(x.shape[0], 0.5), id="math_pow"),
    pytest.param(lambda x: x * math.fabs(1 - x.shape[0]), id="math_fabs"),
    pytest.param(lambda x: x * abs(x.shape[0] - 7), id="builtin_abs"),
    pytest.param(lambda x: torch.zeros(max(x.shape[0], 8)), id="builtin_max"),
    pytest.param(lambda x: x[x.shape[0] - 1], id="index_last"),
    pytest.param(lambda x: x[x.shape[0] // 2 - 1:, None, -1], id="slice_none_select"),
])
def test_symbolic_size_arithmetic_exports(fn):
    assert _sound_or_refuse(fn, torch.randn(4, 3), SIZES, B0) == "exported"


class ViewByThird(nn.Module):
    def forward(self, x):
        return x.view(-1, 3 * x.shape[1])  # MARK


def test_view_divisibility_is_constraint_violation():
    with pytest.raises(ConstraintViolationError) as info:
        unbroken.export(ViewByThird(), (torch.randn(6, 4),),
                        dynamic_shapes={"x": {0: Dim("b", max=64), 1: Dim("c", max=64)}})
    assert any(f.lineno == line_of(ViewByThird, "# MARK") for f in info.value.frames)


def test_symint_outputs():
    def f(x):
        return x * 2, x.shape[0], x.shape[0] * 2 + 1

    ep = unbroken.export(f, (torch.ones(4, 3),), dynamic_shapes={"x": {0: Dim("b", max=64)}})
    for b in (2, 9, 64):
        x = torch.randn(b, 3)
        out = ep.module()(x)
        assert_close(out[0], x * 2)
        assert out[1:] == (b, 2 * b + 1)


def test_dim_auto_adopts_equality_with_a_named_dim():
    ep = unbroken.export(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                         dynamic_shapes={"x": {0: Dim("rows", max=32)}, "y": {0: Dim.AUTO}})
    assert len(ep.range_constraints) == 1  # y's dim became x's symbol
    x, y = torch.randn(9, 3), torch.randn(9, 3)
    assert_close(ep.module()(x, y), AddTwo()(x, y))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(9, 3), torch.randn(5, 3))


def test_named_dims_are_never_adopted():
    # only Dim.AUTO lets export change the spec; a named Dim that the code constrains is refused
    with pytest.raises(ConstraintViolationError):
        unbroken.export(AddTwo(), (torch.randn(4, 3), torch.randn(4, 3)),
                        dynamic_shapes={"x": {0: Dim("a")}, "y": {0: Dim("b")}})


class BranchOnSize(nn.Module):
    def forward(self, x):
        if x.shape[0] > 4:
            return x[:4] * 2
        return x


def test_dim_auto_adopts_a_narrower_range():
    ep = unbroken.export(BranchOnSize(), (torch.randn(8, 3),), dynamic_shapes={"x": {0: Dim.AUTO}})
    (value_range,) = ep.range_constraints.values()
    assert value_range.lower == 5
    x = torch.randn(6, 3)
    assert_close(ep.module()(x), BranchOnSize()(x))
    with pytest.raises(InputMismatchError):
        ep.module()(torch.randn(4, 3))


class DynamicShapeRound(nn.Module):
    """ExportDB ``dynamic_shape_round`` (torch.export refuses it)."""

    def forward(self, x):
        return x[: round(x.shape[0] / 2)]


def test_exportdb_dynamic_shape_round_exports():
    ep = unbroken.export(DynamicShapeRound(), (torch.randn(3, 2),),
                         dynamic_shapes={"x": {0: Dim("dimx")}})
    for n in (2, 5, 6, 7, 40):  # odd halves round to even: 5 -> 2, 7 -> 4
        x = torch.randn(n, 2)
        assert_close(ep.module()(x), DynamicShapeRound()(x))


class NestedSum(nn.Module):
    def forward(self, x, others):
        return x.sum(1) + others[0].sum(1) * others[1].sum(1)


def _nested_args(n):
    return torch.randn(n, 3), [torch.randn(n, 5), torch.randn(n, 2)]


def test_shapes_collection_is_accepted():
    from torch.export import ShapesCollection

    x, others = _nested_args(4)
    spec, batch = ShapesCollection(), Dim("batch", max=64)
    for tensor in (x, *others):
        spec[tensor] = {0: batch}
    ep = unbroken.export(NestedSum(), (x, others), dynamic_shapes=spec)
    (value_range,) = ep.range_constraints.values()
    assert value_range.upper == 64
    args = _nested_args(9)
    assert_close(ep.module()(*args), NestedSum()(*args))


def test_additional_inputs_make_varying_dims_dynamic():
    from torch.export import AdditionalInputs

    spec = AdditionalInputs()
    spec.add(_nested_args(6))
    ep = unbroken.export(NestedSum(), _nested_args(4), dynamic_shapes=spec)
    assert len(ep.range_constraints) == 1  # three Dim.DYNAMIC batch dims that must be equal
    args = _nested_args(11)
    assert_close(ep.module()(*args), NestedSum()(*args))


def test_additional_inputs_the_program_cannot_take_are_refused():
    from torch.export import AdditionalInputs

    spec = AdditionalInputs()
    spec.add((torch.randn(3, 3),))  # BranchOnSize's graph is for x.shape[0] > 4 only
    with pytest.raises(ConstraintViolationError, match="additional input #1"):
        unbroken.export(BranchOnSize(), (torch.randn(8, 3),), dynamic_shapes=spec)
