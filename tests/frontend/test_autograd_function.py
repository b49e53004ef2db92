"""Custom ``torch.autograd.Function``: forward inlined for inference; under grad mode the
program carries forward and backward (``autograd_function_apply``), so training through it
uses the user's backward, as eager does."""
import torch
import torch.nn as nn

import unbroken


class RoundStraightThrough(torch.autograd.Function):
    """round() forward, identity backward: autodiff of the forward would give zero grads."""

    @staticmethod
    def forward(ctx, x, scale):
        ctx.save_for_backward(x)
        ctx.scale = scale
        return torch.round(x * scale) / scale

    @staticmethod
    def backward(ctx, grad):
        (x,) = ctx.saved_tensors
        return grad * (x.abs() <= 10).to(grad.dtype), None


class SquareSetupContext(torch.autograd.Function):
    """New style: forward without ctx, setup_context saves; backward doubles the autodiff."""

    @staticmethod
    def forward(x):
        return x * x, x.sum()

    @staticmethod
    def setup_context(ctx, inputs, output):
        (x,) = inputs
        ctx.save_for_backward(x)
        ctx.mark_non_differentiable(output[1])

    @staticmethod
    def backward(ctx, grad, _):
        (x,) = ctx.saved_tensors
        return 4 * x * grad


class Quantized(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        y = RoundStraightThrough.apply(self.lin(x), 4.0)
        square, total = SquareSetupContext.apply(y)
        return square + total


def _graph_targets(ep):
    return {str(n.target) for n in ep.graph.nodes if n.op == "call_function"}


def test_inference_inlines_forward():
    torch.manual_seed(0)
    model, x = Quantized(), torch.randn(3, 4)
    with torch.no_grad():
        ep = unbroken.export(model, (x,))
        expected = model(x)
    assert not any("autograd_function_apply" in t for t in _graph_targets(ep))
    assert "aten.round.default" in _graph_targets(ep)
    assert torch.equal(ep.module()(x), expected)


def test_training_keeps_the_custom_backward():
    torch.manual_seed(0)
    model, x = Quantized(), torch.randn(3, 4)
    ep = unbroken.export(model, (x,))
    assert any("autograd_function_apply" in t for t in _graph_targets(ep))
    exported = ep.module()
    x_eager, x_exported = x.clone().requires_grad_(), x.clone().requires_grad_()
    expected, out = model(x_eager), exported(x_exported)
    assert torch.equal(out, expected)
    expected.sum().backward()
    out.sum().backward()
    assert x_eager.grad.abs().sum() > 0  # the straight-through backward, not round's zero
    assert torch.allclose(x_exported.grad, x_eager.grad)
    weight = dict(exported.named_parameters())["lin.weight"]
    assert torch.allclose(weight.grad, model.lin.weight.grad)


def test_training_program_saves_and_loads(tmp_path):
    torch.manual_seed(0)
    model, x = Quantized(), torch.randn(3, 4)
    ep = unbroken.export(model, (x,))
    unbroken.save(ep, tmp_path / "model.ubp")
    loaded = unbroken.load(tmp_path / "model.ubp")
    with torch.no_grad():
        assert torch.equal(loaded.module()(x), model(x))
    x_eager, x_loaded = x.clone().requires_grad_(), x.clone().requires_grad_()
    model(x_eager).sum().backward()
    loaded.module()(x_loaded).sum().backward()
    assert torch.allclose(x_loaded.grad, x_eager.grad)  # the custom backward, saved and loaded


def test_tensor_read_from_outside_is_refused_with_the_fix():
    class Scale(torch.autograd.Function):
        @staticmethod
        def forward(ctx, x):
            return x * WEIGHT

        @staticmethod
        def backward(ctx, grad):
            return grad * WEIGHT

    WEIGHT = torch.randn(4)

    class Model(nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = nn.Linear(4, 4)

        def forward(self, x):
            return Scale.apply(self.lin(x))

    try:
        unbroken.export(Model(), (torch.randn(2, 4),))
    except unbroken.UnbrokenError as error:
        assert error.code == "UB113" and "reads a tensor" in str(error)
        assert "Pass every tensor" in str(error)
    else:
        raise AssertionError("expected a refusal")
