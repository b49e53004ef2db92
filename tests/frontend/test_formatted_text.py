"""Text formatted from tensors and symbolic sizes (``frontend.variables.text``): computed only
when a use needs it.

An error message built for a check that holds is never read: it neither refuses (a tensor's
text) nor specializes a dynamic size. A use of a tensor's text is refused (UB105) at the line
of the use; a use of a size's text records the guard there.
"""
import pytest
import torch
from torch.export import Dim
from torch.utils._sympy.numbers import int_oo

import unbroken
from tests.exactness import assert_bit_exact


class UnreadMessage(torch.nn.Module):
    """transformers' ``get_placeholder_mask``: an f-string of a tensor and a size, passed to a
    check as its message."""

    def forward(self, x):
        count = (x > 0).sum()
        message = f"count {count}, rows {x.shape[0]}, {str(count)!r:>5}, {format(count)}"
        torch._check(x.shape[0] >= 1, lambda: message)
        return x * 2, f"{x.shape[1]}"


def test_unread_text_of_a_tensor_and_a_dynamic_size_neither_refuses_nor_specializes():
    x = torch.randn(3, 4)
    ep = unbroken.export(UnreadMessage(), (x,), dynamic_shapes={"x": {0: Dim("rows")}})
    assert [r.upper for r in ep.range_constraints.values()] == [int_oo]  # rows stays dynamic
    assert_bit_exact(ep.module()(x), UnreadMessage()(x))  # the text output is a constant "4"
    bigger = torch.randn(7, 4)
    assert_bit_exact(ep.module()(bigger), UnreadMessage()(bigger))


class ReadsText(torch.nn.Module):
    def forward(self, x):
        message = f"count {(x > 0).sum()}"
        if len(message) > 7:  # the use
            return x
        return x * 2


class SizeKey(torch.nn.Module):
    def forward(self, x):
        key = f"rows{x.shape[0]}"
        return x * len(key)  # the use specializes the size


def test_a_use_of_a_tensors_text_is_refused_at_the_line_of_the_use():
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(ReadsText(), (torch.randn(3, 4),))
    error = info.value
    assert error.code == "UB105" and "text made from a tensor's values" in str(error)
    use = ReadsText.forward.__code__.co_firstlineno + 2
    assert (error.frames[-1].filename, error.frames[-1].lineno) == (__file__, use)


def test_a_use_of_a_sizes_text_records_the_guard_at_the_use():
    x = torch.randn(3, 4)
    with pytest.raises(unbroken.ConstraintViolationError) as info:
        unbroken.export(SizeKey(), (x,), dynamic_shapes={"x": {0: Dim("rows")}})
    use = SizeKey.forward.__code__.co_firstlineno + 2
    assert "x.shape[0] == 3" in str(info.value)
    assert f"test_formatted_text.py:{use}: return x * len(key)" in str(info.value)
    with pytest.warns(unbroken.SpecializationWarning):
        ep = unbroken.export(SizeKey(), (x,), dynamic_shapes={"x": {0: Dim.AUTO}})
    assert_bit_exact(ep.module()(x), SizeKey()(x))


@pytest.mark.parametrize("make_text", [
    pytest.param(lambda x: "{}".format(x.sum()), id="str.format"),
    pytest.param(lambda x: str.format("{}", x.sum()), id="unbound str.format"),
    pytest.param(lambda x: "{a}".format_map({"a": x.sum()}), id="format_map"),
    pytest.param(lambda x: str(x), id="str"),
    pytest.param(lambda x: f"{x!r}", id="f-string repr"),
])
def test_text_of_a_tensor_is_never_the_meta_tensors(make_text):
    """``"{}".format(t)`` was formatted natively on the meta tensor ("tensor(..., device=
    'meta')"): a program with the wrong text. Unread, it exports; read, it is refused."""
    def unread(x):
        make_text(x)
        return x * 2

    def read(x):
        return x * len(make_text(x))

    x = torch.randn(2, 3)
    assert_bit_exact(unbroken.export(unread, (x,)).module()(x), x * 2)
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(read, (x,))
    assert info.value.code == "UB105"


@pytest.mark.parametrize("make_text, error", [
    pytest.param(lambda x: f"{x.sum():d}", ValueError, id="float item with :d"),
    pytest.param(lambda x: f"{x:>5}", TypeError, id="spec on a 2-d tensor"),
    pytest.param(lambda x: str.format("{1}", x), IndexError, id="missing field"),
])
def test_what_eagers_formatting_raises_whatever_the_data_is_raised_at_the_format(make_text,
                                                                                 error):
    def unread(x):
        make_text(x)
        return x * 2

    x = torch.randn(2, 3)
    with pytest.raises(error):
        unread(x)
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(unread, (x,))
    assert info.value.code == "UB104" and error.__name__ in str(info.value)


class ReadsTextThenBranches(torch.nn.Module):
    def forward(self, x):
        message = f"count {(x > 0).sum()}"
        if len(message) > 7:
            x = x + 1
        if x.sum() > 0:
            return x
        return -x


def test_find_graph_breaks_goes_on_past_a_use_of_a_tensors_text():
    """In "find them all" mode the text is the example's, so the breaks after it are found."""
    breaks = unbroken.find_graph_breaks(ReadsTextThenBranches(), (torch.randn(3, 4),))
    assert [b.code for b in breaks] == ["UB105", "UB101"]
