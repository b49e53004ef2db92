"""frontend.output: how failures of leaf calls (torch functions run on meta tensors) are
reported."""
import pytest
import torch

import unbroken


class NegativeStep(torch.nn.Module):
    def forward(self, x):
        return x[::-1]


class BadKeyword(torch.nn.Module):
    def forward(self, x):
        return x.sum(dim="a")


@pytest.mark.parametrize("model, error", [(NegativeStep(), "ValueError: step must be greater"),
                                          (BadKeyword(), "TypeError: sum()")])
def test_error_raised_by_a_native_torch_function_is_the_users(model, error):
    """A native function (no Python frame) rejecting the user's arguments was reported as
    UB999 "a leaf call failed inside unbroken": the innermost frame was unbroken's call site."""
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(model, (torch.randn(4, 3),))
    assert info.value.code == "UB120"
    assert error in str(info.value)
    assert "test_output.py" in str(info.value)  # the user's line
