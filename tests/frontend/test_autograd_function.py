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


class LocalConstants(torch.autograd.Function):
    """Forward and backward each build tensors of their own (a literal, a factory call)."""

    @staticmethod
    def forward(ctx, x):
        scale = torch.tensor(2.0)
        ctx.save_for_backward(scale)
        return x * scale + torch.ones(x.shape[-1])

    @staticmethod
    def backward(ctx, grad):
        (scale,) = ctx.saved_tensors
        return grad * scale * torch.tensor(3.0)


class ReadsModuleWeight(torch.autograd.Function):
    """Reads a parameter through a module passed as a plain argument (not one of apply's
    tensors): eager gives the parameter no gradient through this Function, and the output
    requires grad only when ``x`` does."""

    @staticmethod
    def forward(ctx, x, module):
        ctx.module = module
        return x * module.lin.weight[0]

    @staticmethod
    def backward(ctx, grad):
        return grad * ctx.module.lin.weight[0] * 3, None


class UsesFunctions(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        return (LocalConstants.apply(self.lin(x)), ReadsModuleWeight.apply(x, self),
                ReadsModuleWeight.apply(self.lin(x), self))


def _grads(module, x):
    x = x.clone().requires_grad_()
    module.zero_grad(set_to_none=True)
    outputs = module(x)
    sum(o.sum() for o in outputs).backward()
    params = dict(module.named_parameters())
    return [o.requires_grad for o in outputs], x.grad, params["lin.weight"].grad, \
        params["lin.bias"].grad


def test_values_the_bodies_read_from_outside_become_inputs(tmp_path):
    """A tensor the forward or backward makes or reads from outside (a literal, a parameter
    reached through an argument) was refused (UB113); it is now an extra input of the
    operator (the backward's through the forward's saved values), without a gradient, and the
    outputs require grad as eager's do."""
    model = UsesFunctions()
    x = torch.randn(2, 4)
    ep = unbroken.export(model, (x,))
    unbroken.save(ep, tmp_path / "f.pt2")
    loaded = unbroken.load(tmp_path / "f.pt2")
    want = model(x)
    for program in (ep, loaded):
        got = program.module()(x)
        assert all(torch.equal(g, w) for g, w in zip(got, want))
        assert [g.requires_grad for g in got] == [w.requires_grad for w in want] \
            == [True, False, True]
        eager, traced = _grads(model, x), _grads(program.module(), x)
        assert eager[0] == traced[0]
        for a, b in zip(eager[1:], traced[1:]):
            assert torch.equal(a, b)
