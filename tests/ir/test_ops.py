"""ir.ops: the one op classification, read from the schemas (the recorder, the aliasing
tracker, the verifier and functionalization all ask it)."""
import pytest
import torch

from unbroken.ir.ops import (
    functional_variant,
    inplace_written_index,
    is_functional,
    is_inplace_op,
    is_mutating,
    is_view_op,
    op_name,
    takes_argument,
    written_arguments,
)

aten = torch.ops.aten


@pytest.mark.parametrize("op, view, inplace, functional, mutating", [
    (aten.add.Tensor, False, False, True, False),
    (aten.add_.Tensor, False, True, False, True),
    (aten.view.default, True, False, False, False),
    (aten.select.int, True, False, False, False),
    (aten.split.Tensor, True, False, False, False),
    (aten.copy_.default, False, True, False, True),
    (aten.add.out, False, False, False, True),  # writes `out`, a keyword-only argument
    (aten.zeros.default, False, False, True, False),
], ids=str)
def test_classification(op, view, inplace, functional, mutating):
    assert (is_view_op(op), is_inplace_op(op), is_functional(op), is_mutating(op)) == \
        (view, inplace, functional, mutating)


def test_written_arguments_and_the_functional_variant():
    assert written_arguments(aten.add_.Tensor) == [0]
    assert inplace_written_index(aten.add_.Tensor) == 0
    assert inplace_written_index(aten.add.out) is None  # writes `out`, not self
    assert written_arguments(aten._native_batch_norm_legit.default) == [3, 4]
    assert functional_variant(aten.add_.Tensor) is aten.add.Tensor
    assert functional_variant(aten.normal_.default) is aten.normal_functional.default
    assert functional_variant(aten.copy_.default) is aten.copy.default
    assert op_name(aten.relu_.default) == ("aten", "relu_")
    assert takes_argument(aten.zeros.default, "device")
    assert not takes_argument(aten.add.Tensor, "device")
