"""Issue 6, items 2-4: aliasing of inputs and buffers, layout facts, Python semantics. Each
case is either a program that computes what eager computes or a clean refusal.

Policies:
- 2a, one tensor passed twice as the example: traced as separate inputs (one placeholder per
  position), so any later call computes what eager computes.
- 2b, the program writes an input that shares memory with another input: ``module()`` refuses
  the call (InputMismatchError), since eager would see the write through both names.
- 2c, a buffer written in place that shares memory with another state tensor: export refuses
  (UB121). Views of buffers that nothing writes are fine.
- 3, layout: when the trace read a layout fact (``x.stride()``, ``is_contiguous(...)``) or
  the program writes its inputs, ``module()`` checks every tensor input's strides against the
  example's (InputMismatchError), except along dims of size 1. Otherwise any layout is taken;
  a ``view`` recorded for a ``reshape`` that fails on another layout is reported as an
  InputMismatchError naming the input (not a raw RuntimeError).
"""
from __future__ import annotations

import pytest
import torch

import unbroken


class AddTwice(torch.nn.Module):
    def forward(self, x, y):
        return x + 2 * y


class WritesX(torch.nn.Module):
    def forward(self, x, y):
        x.add_(1)
        return y * 2


class ViewBuffer(torch.nn.Module):
    def __init__(self, write: bool):
        super().__init__()
        self.write = write
        self.register_buffer("base", torch.zeros(4))
        self.register_buffer("head", self.base[:2])

    def forward(self, x):
        if self.write:
            self.base.add_(1)
        return self.head + x


def test_same_tensor_twice_is_traced_as_two_inputs():
    x = torch.ones(2)
    ep = unbroken.export(AddTwice(), (x, x))
    zeros, tens = torch.zeros(2), torch.full((2,), 10.0)
    torch.testing.assert_close(ep.module()(zeros, tens), AddTwice()(zeros, tens))
    torch.testing.assert_close(ep.module()(x, x), AddTwice()(x, x))


@pytest.mark.parametrize("alias", [lambda u: u, lambda u: u[1:], lambda u: u.view(2, 2)[0]])
def test_written_input_sharing_memory_is_refused_at_call(alias):
    ep = unbroken.export(WritesX(), (torch.ones(2), torch.ones(2)))
    base = torch.zeros(4)
    x = base[:2]
    with pytest.raises(unbroken.InputMismatchError, match="share memory"):
        ep.module()(x, alias(base)[:2] if alias(base).dim() else alias(base))
    x, y = torch.zeros(2), torch.zeros(2)  # separate inputs: as eager
    out = ep.module()(x, y)
    torch.testing.assert_close(x, torch.ones(2))
    torch.testing.assert_close(out, torch.zeros(2))


def test_written_buffer_viewed_by_another_is_refused():
    with pytest.raises(unbroken.UnsupportedError, match="shares memory with `head`") as info:
        unbroken.export(ViewBuffer(write=True), (torch.zeros(2),))
    assert info.value.code == "UB121"


def test_read_only_view_buffer_exports():
    model, x = ViewBuffer(write=False), torch.randn(2)
    ep = unbroken.export(model, (x,))
    torch.testing.assert_close(ep.module()(x), model(x))


class Layout(torch.nn.Module):
    def forward(self, x):
        scale = 2 if x.is_contiguous() else 3
        return x.reshape(-1) * scale * x.stride(0), x.flatten()


@pytest.mark.parametrize("make", [lambda: torch.randn(4, 3).t(),
                                  lambda: torch.randn(3, 8)[:, ::2]])
def test_other_layouts_are_refused_by_module(make):
    ep = unbroken.export(Layout(), (torch.randn(3, 4),))
    with pytest.raises(unbroken.InputMismatchError, match="strides"):
        ep.module()(make())
    x = make().contiguous()
    for got, want in zip(ep.module()(x), Layout()(x)):
        torch.testing.assert_close(got, want)


def test_example_layout_is_the_accepted_layout():
    example = torch.randn(4, 3).t()
    ep = unbroken.export(Layout(), (example,))
    fresh = torch.randn(4, 3).t()
    for got, want in zip(ep.module()(fresh), Layout()(fresh)):
        torch.testing.assert_close(got, want)
    with pytest.raises(unbroken.InputMismatchError):
        ep.module()(fresh.contiguous())


class ChannelsLastScale(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)

    def forward(self, x):
        y = self.conv(x)
        return y * (1.5 if y.is_contiguous(memory_format=torch.channels_last) else 1.0)


def test_channels_last_fact_is_checked():
    model, x = ChannelsLastScale(), torch.randn(2, 3, 8, 8)
    ep = unbroken.export(model, (x,))
    with pytest.raises(unbroken.InputMismatchError):
        ep.module()(x.contiguous(memory_format=torch.channels_last))
    torch.testing.assert_close(ep.module()(x), model(x))


def test_layout_free_program_takes_any_layout():
    conv, x = torch.nn.Conv2d(3, 4, 3), torch.randn(2, 3, 8, 8)
    ep = unbroken.export(conv, (x,))
    last = x.contiguous(memory_format=torch.channels_last)
    torch.testing.assert_close(ep.module()(last), conv(last))


class ViewsInput(torch.nn.Module):
    def forward(self, x):
        return x.reshape(-1) * 2


def test_view_that_fails_on_another_layout_is_an_input_mismatch():
    ep = unbroken.export(ViewsInput(), (torch.randn(3, 4),))
    with pytest.raises(unbroken.InputMismatchError, match="strides"):
        ep.module()(torch.randn(4, 3).t())


def test_dynamic_sizes_check_strides_symbolically():
    batch = unbroken.Dim("batch")
    ep = unbroken.export(Layout(), (torch.randn(3, 4),), dynamic_shapes={"x": {1: batch}})
    x = torch.randn(3, 7)
    for got, want in zip(ep.module()(x), Layout()(x)):
        torch.testing.assert_close(got, want)
    with pytest.raises(unbroken.InputMismatchError):
        ep.module()(torch.randn(7, 3).t())


class Chained(torch.nn.Module):
    def forward(self, x):
        try:
            try:
                raise ValueError("inner")
            except ValueError as error:
                raise KeyError("outer") from error
        except KeyError as outer:
            if outer.__cause__ is not None and isinstance(outer.__context__, ValueError):
                return x + 1
            return x - 1


class ImplicitChain(torch.nn.Module):
    def forward(self, x):
        try:
            try:
                raise ValueError("inner")
            except ValueError:
                raise KeyError("outer")  # noqa: B904 (implicit chaining is under test)
        except KeyError as outer:
            return x + 1 if outer.__cause__ is None and outer.__context__ is not None else x


class FromNone(torch.nn.Module):
    def forward(self, x):
        try:
            try:
                raise ValueError("inner")
            except ValueError:
                raise KeyError("outer") from None
        except KeyError as outer:
            return x + 1 if outer.__suppress_context__ and outer.__cause__ is None else x


class Introspects(torch.nn.Module):
    def forward(self, x):
        name = x.type()
        return x + len(name) + (1 if type(x) is torch.Tensor else 0) + (5 if x.is_meta else 0)


@pytest.mark.parametrize("cls", [Chained, ImplicitChain, FromNone, Introspects])
def test_python_semantics_match_eager(cls):
    x = torch.zeros(1)
    ep = unbroken.export(cls(), (x,))
    torch.testing.assert_close(ep.module()(x), cls()(x), rtol=0, atol=0)


def _counter_model():
    calls = 0

    class Counter(torch.nn.Module):
        def forward(self, x):
            nonlocal calls
            calls += 1
            return x + calls

    return Counter()


def test_nonlocal_counter_is_refused():
    with pytest.raises(unbroken.GraphBreakError, match="UB107"):
        unbroken.export(_counter_model(), (torch.zeros(1),))


def test_closure_read_is_fine():
    scale = 3

    class Reads(torch.nn.Module):
        def forward(self, x):
            return x * scale

    x = torch.randn(2)
    torch.testing.assert_close(unbroken.export(Reads(), (x,)).module()(x), x * 3)


class WritesThroughContiguous(torch.nn.Module):
    def forward(self, x):
        y = x.contiguous()  # x itself on a contiguous input, a copy on a transposed one
        y.add_(1)
        return y * 2


def test_write_through_layout_dependent_alias_checks_the_layout():
    ep = unbroken.export(WritesThroughContiguous(), (torch.zeros(3, 4),))
    transposed = torch.zeros(4, 3).t()
    with pytest.raises(unbroken.InputMismatchError, match="strides"):
        ep.module()(transposed)
    x, eager_x = torch.zeros(3, 4), torch.zeros(3, 4)
    torch.testing.assert_close(ep.module()(x), WritesThroughContiguous()(eager_x))
    torch.testing.assert_close(x, eager_x)


class WritesLayoutCopy(torch.nn.Module):
    def forward(self, x):
        y = x * 2
        x.T.contiguous().add_(5)  # a copy for a contiguous x; x.T itself for a transposed x
        y.T.reshape(-1).mul_(3)   # likewise for y (elementwise ops keep x's layout)
        return x + 0, y


@pytest.mark.parametrize("make", [lambda: torch.randn(3, 4).t(), lambda: torch.randn(4, 3)])
def test_write_into_a_layout_dependent_copy_checks_the_layout(make):
    """On the contiguous example x.T.contiguous() copies and the write changes nothing; on a
    transposed input it is a view and eager changes x (and y). The program was accepted for any
    layout and returned x unchanged."""
    ep = unbroken.export(WritesLayoutCopy(), (torch.randn(4, 3),))
    x = make()
    if not x.is_contiguous():
        with pytest.raises(unbroken.InputMismatchError, match="strides"):
            ep.module()(x)
        return
    eager_x = x.clone()
    torch.testing.assert_close(ep.module()(x), WritesLayoutCopy()(eager_x))
    torch.testing.assert_close(x, eager_x)


class WritesThroughIntermediateAlias(torch.nn.Module):
    def forward(self, x):
        h = x.relu()
        c = h.contiguous()  # h itself when x is contiguous, a copy when x is transposed
        c.zero_()
        return h * 1


def test_write_through_a_layout_dependent_alias_of_an_intermediate_checks_the_layout():
    """The written tensor is no input, so the program was accepted for any layout; on a
    transposed x eager's contiguous() copies and h keeps its values."""
    ep = unbroken.export(WritesThroughIntermediateAlias(), (torch.randn(4, 3),))
    with pytest.raises(unbroken.InputMismatchError, match="strides"):
        ep.module()(torch.randn(3, 4).t())
    x = torch.randn(4, 3)
    torch.testing.assert_close(ep.module()(x), WritesThroughIntermediateAlias()(x))


# -- "returns self when nothing changes": the result aliases the input exactly as in eager ----
class WritesConversion(torch.nn.Module):
    """Writes into what a conversion returned: the input changes iff eager's conversion
    returned the input itself."""

    def __init__(self, convert):
        super().__init__()
        self.convert = convert

    def forward(self, x):
        y = self.convert(x)
        y.add_(1)
        return y * 2, x * 3


CONVERSIONS = {
    # eager returns x itself: the write reaches the input
    "to_cpu": lambda x: x.to("cpu"),
    "to_device_object": lambda x: x.to(torch.device("cpu")),
    "to_device_keyword": lambda x: x.to(device="cpu"),
    "cpu": lambda x: x.cpu(),
    "to_cpu_same_dtype": lambda x: x.to("cpu", torch.float32),
    "to_same_dtype": lambda x: x.to(x.dtype),
    "to_other_tensor": lambda x: x.to(torch.zeros(1)),
    "type_as_self": lambda x: x.type_as(x),
    "contiguous": lambda x: x.contiguous(),
    "float": lambda x: x.float(),
    "type_dtype": lambda x: x.type(torch.float32),
    "type_legacy_name": lambda x: x.type("torch.FloatTensor"),
    "type_legacy_class": lambda x: x.type(torch.FloatTensor),
    "as_tensor_cpu": lambda x: torch.as_tensor(x, device="cpu"),
    "dropout_eval": lambda x: torch.nn.functional.dropout(x, 0.5, training=False),
    "dropout_p0": lambda x: torch.nn.functional.dropout(x, 0.0, training=True),
    "feature_dropout_eval": lambda x: torch.nn.functional.dropout2d(x[None], 0.5, False)[0],
    # eager copies: the input is untouched
    "to_cpu_index": lambda x: x.to("cpu:0"),
    "to_cpu_other_dtype": lambda x: x.to("cpu", torch.float64),
    "double": lambda x: x.double(),
    "type_legacy_other": lambda x: x.type("torch.DoubleTensor"),
    "to_copy": lambda x: x.to("cpu", copy=True),
    "transposed_contiguous": lambda x: x.t().contiguous(),
}


@pytest.mark.parametrize("name", CONVERSIONS)
def test_conversion_aliases_its_input_exactly_as_eager(name):
    model = WritesConversion(CONVERSIONS[name])
    ep = unbroken.export(model, (torch.randn(3, 3),))
    x = torch.randn(3, 3)
    eager_x, ours_x = x.clone(), x.clone()
    expected = model(eager_x)
    got = ep.module()(ours_x)
    torch.testing.assert_close(ours_x, eager_x)  # the input written iff eager wrote it
    for ours, eager in zip(got, expected):
        torch.testing.assert_close(ours, eager)
        assert ours.dtype == eager.dtype
