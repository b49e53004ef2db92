"""UB123: parameters that are not the exported model's (a module reached through a global, a
closure or a plain object; a global tensor that requires grad) are refused at the user's line
with the fix, not baked into the program as constants (the output lost requires_grad and no
gradient reached them). ``variables/builder.py`` refuses what a name reaches; the recorder
refuses any tensor requiring grad it would lift as a constant."""
from __future__ import annotations

import pytest
import torch

import unbroken

GLOBAL_LINEAR = torch.nn.Linear(3, 3)
GLOBAL_WEIGHT = torch.nn.Parameter(torch.ones(3))
FROZEN = torch.nn.ReLU()  # a module without parameters: nothing to lose


class Holder:
    def __init__(self):
        self.layer = torch.nn.Linear(3, 3)


HOLDER = Holder()


def closure_model():
    layer = torch.nn.Linear(3, 3)

    class ThroughClosure(torch.nn.Module):
        def forward(self, x):
            return layer(x)

    return ThroughClosure()


class ThroughGlobal(torch.nn.Module):
    def forward(self, x):
        return GLOBAL_LINEAR(x)


class GlobalWeightRead(torch.nn.Module):
    def forward(self, x):
        return torch.nn.functional.linear(x, GLOBAL_LINEAR.weight)


class GlobalParameter(torch.nn.Module):
    def forward(self, x):
        return x * GLOBAL_WEIGHT


class ThroughObject(torch.nn.Module):
    def forward(self, x):
        return HOLDER.layer(x)


class Registered(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.proj = GLOBAL_LINEAR

    def forward(self, x):
        return GLOBAL_LINEAR(x) + self.proj(x)  # the same object, registered: it is the model's


class ParameterFree(torch.nn.Module):
    def forward(self, x):
        return FROZEN(x)


@pytest.mark.parametrize("make, name", [
    (ThroughGlobal, "GLOBAL_LINEAR"), (GlobalWeightRead, "GLOBAL_LINEAR"),
    (GlobalParameter, "GLOBAL_WEIGHT"), (ThroughObject, "HOLDER.layer"),
    (closure_model, "layer")])
def test_parameters_outside_the_model_are_refused(make, name):
    model = make()
    assert model(torch.randn(2, 3)).requires_grad  # eager: the output requires grad
    with pytest.raises(unbroken.GraphBreakError) as info:
        unbroken.export(model, (torch.randn(2, 3),))
    error = info.value
    assert error.code == "UB123"
    assert f"`{name}`" in str(error)
    assert error.frames and error.frames[-1].filename == __file__
    assert "Register" in error.hint or "nn.Parameter" in error.hint


def test_a_registered_module_reached_through_a_global_is_the_models():
    model, x = Registered(), torch.randn(2, 3)
    ep = unbroken.export(model, (x,))
    out = ep.module()(x)
    torch.testing.assert_close(out, model(x))
    assert out.requires_grad
    assert "proj.weight" in ep.state_dict


def test_a_global_module_without_parameters_is_fine():
    model, x = ParameterFree(), torch.randn(2, 3)
    torch.testing.assert_close(unbroken.export(model, (x,)).module()(x), model(x))
