"""Attribute writes in forward(): module attributes, buffers, tensors, ``setattr()``.

Each export is compared with eager bit for bit, and the caller's model must be left exactly as
it was (``tests.state_leak``): the trace keeps its writes in an overlay, never on the model.
"""
import copy
import importlib
import warnings

import pytest
import torch
from torch import nn

import unbroken
from tests.exactness import assert_bit_exact
from tests.state_leak import ModelSnapshot


def export_unchanged(model, *args):
    """Export ``model(*args)``, check the model is unchanged, and return the program's module."""
    before = ModelSnapshot.of(model)
    ep = unbroken.export(model, args)
    assert before.diff(ModelSnapshot.of(model)) == []
    return ep


def refusal(model, *args) -> unbroken.UnbrokenError:
    before = ModelSnapshot.of(model)
    with pytest.raises(unbroken.UnbrokenError) as info:
        unbroken.export(model, args)
    assert before.diff(ModelSnapshot.of(model)) == []
    return info.value


class Counter(nn.Module):
    def __init__(self):
        super().__init__()
        self.count = 0
        self.sub = nn.Module()
        self.sub.flag = None

    def forward(self, x):
        self.count = self.count + 1
        self.sub.flag = 2
        self.sub.flag *= 3
        self.note = x * 2  # a tensor in a plain attribute, read back below
        return x * self.count + self.sub.flag + self.note


def test_module_attribute_write_is_read_back_and_not_applied():
    model, x = Counter(), torch.randn(3)
    ep = export_unchanged(model, x)
    assert model.count == 0 and model.sub.flag is None and not hasattr(model, "note")
    assert_bit_exact(ep.module()(x), Counter()(x))
    assert model.count == 0  # running the program does not replay the write either


class Reassign(nn.Module):
    """``self.buf = ...``: the buffer *is* the new tensor, so a later in-place change of that
    tensor reaches the buffer."""

    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(3))

    def forward(self, x):
        y = self.buf + x
        setattr(self, "buf", y)
        y.mul_(2)
        return self.buf * 3


def test_buffer_assignment_is_a_buffer_mutation():
    model, x = Reassign(), torch.randn(3)
    ep = export_unchanged(model, x)
    kinds = [spec.kind.name for spec in ep.graph_signature.output_specs]
    assert kinds == ["BUFFER_MUTATION", "USER_OUTPUT"]
    module, reference = ep.module(), Reassign()
    for _ in range(2):  # the written-back buffer feeds the next call, as in eager
        assert_bit_exact(module(x), reference(x))
        assert_bit_exact(module.buf, reference.buf)


class Shrink(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(3))

    def forward(self, x):
        self.buf = x[:2]
        return self.buf.sum()


def test_buffer_assignment_changing_the_shape_is_refused():
    error = refusal(Shrink(), torch.randn(3))
    assert error.code == "UB107" and "shape (2,)" in str(error)
    assert "test_attribute_writes.py" in str(error)


class ReplaceParameter(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        self.lin = nn.Identity()
        return self.lin(x)


class BufferToInt(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.ones(3))

    def forward(self, x):
        self.buf = 3
        return x


def test_replacing_a_submodule_is_refused_and_a_bad_buffer_value_raises_as_eager():
    error = refusal(ReplaceParameter(), torch.randn(3))
    assert error.code == "UB107" and "sets a submodule" in str(error)
    with pytest.raises(TypeError, match="cannot assign 'int' as buffer 'buf'"):
        BufferToInt()(torch.randn(3))
    with pytest.raises(unbroken.UnbrokenError, match="cannot assign 'int' as buffer 'buf'") as info:
        unbroken.export(BufferToInt(), (torch.randn(3),))
    assert info.value.code == "UB104" and "fails too" in str(info.value)


class DropoutRate(nn.Module):
    def __init__(self):
        super().__init__()
        self.drop = nn.Dropout(0.5)

    def forward(self, x):
        self.drop.p = 0.0  # nn.Dropout's forward runs natively: it would read the real p
        return self.drop(x)


def test_write_to_an_attribute_of_pytorch_own_module_is_refused():
    error = refusal(DropoutRate(), torch.randn(3))
    assert error.code == "UB107" and "Dropout is PyTorch's own module" in str(error)


class BranchWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.flag = 0

    def forward(self, x):
        def positive(x):
            self.flag = 1
            return x + 1

        def negative(x):
            return x - self.flag  # eager reads 0 here: the other branch's write never ran

        return torch.cond(x.sum() > 0, positive, negative, (x,))


def test_write_to_model_state_inside_a_cond_branch_is_refused():
    error = refusal(BranchWrite(), torch.randn(3))
    assert error.code == "UB107" and "torch.cond branch" in str(error)


class Settings:
    verbose = False


SETTINGS = Settings()


class OutsideObject(nn.Module):
    def forward(self, x):
        SETTINGS.verbose = True  # an object that is not the model's: the program cannot replay it
        return x + 1


def test_write_to_an_object_outside_the_model_is_still_refused():
    assert refusal(OutsideObject(), torch.randn(3)).code == "UB107"
    assert SETTINGS.verbose is False


class TensorNote(nn.Module):
    def forward(self, x):
        x.scale = 3.0
        setattr(x, "offset", x.sum())
        return x * x.scale + x.offset


def test_python_attribute_of_an_input_tensor():
    x = torch.randn(3)
    ep = export_unchanged(TensorNote(), x)
    assert not hasattr(x, "scale") and not hasattr(x, "offset")
    assert_bit_exact(ep.module()(x), TensorNote()(x.clone()))


class RequiresGradWrite(nn.Module):
    def forward(self, x):
        x.requires_grad = True
        return x


def test_pytorch_tensor_attribute_write_is_refused():
    assert refusal(RequiresGradWrite(), torch.randn(3)).code == "UB116"


class RescaleOnce(nn.Module):
    """RWKV's pattern: the first eval call rescales the weights in place and sets a flag."""

    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)
        self.rescaled = False

    def forward(self, x):
        if not self.rescaled:
            with torch.no_grad():
                self.lin.weight.div_(2)
        self.rescaled = True
        return self.lin(x)


def test_parameter_written_in_place_is_used_and_written_back():
    """The program uses the rescaled weight and writes it back, as eager's first call leaves
    it (and torch.export's ep.module()); the gradient reaches the parameter, which stays the
    leaf ``linear`` differentiates. The flag is Python state the program does not keep (a
    StateWriteWarning says so): each call rescales the weights it finds, as eager's first."""
    torch.manual_seed(0)
    model, x = RescaleOnce().eval(), torch.randn(2, 3)
    eager = copy.deepcopy(model)  # the program shares the model's parameters
    with pytest.warns(unbroken.StateWriteWarning, match="rescaled"):
        ep = export_unchanged(model, x)
    assert [spec.kind.name for spec in ep.graph_signature.output_specs] == [
        "PARAMETER_MUTATION", "USER_OUTPUT"]
    module = ep.module()
    got = module(x)
    got.sum().backward()
    want = eager(x)
    want.sum().backward()
    assert_bit_exact(got, want)
    assert_bit_exact(module.lin.weight.detach(), eager.lin.weight.detach())
    assert module.lin.weight.is_leaf and module.lin.weight.requires_grad
    assert_bit_exact(module.lin.weight.grad, eager.lin.weight.grad)


class AccumulatesIntoFrozen(nn.Module):
    def __init__(self):
        super().__init__()
        self.w = nn.Parameter(torch.ones(3), requires_grad=False)

    def forward(self, x):
        self.w.add_(x)  # with grad enabled: eager's w now carries x's gradient
        with torch.no_grad():
            self.w.mul_(2)  # invisible to autograd
        return self.w * 3


def test_frozen_parameter_written_with_grad_passes_the_gradient_on():
    """The output of a frozen parameter written under grad mode with a value that requires
    grad did not require grad (the rest of forward read the parameter as an autograd leaf):
    x's gradient was silently lost."""
    x = torch.randn(3, requires_grad=True)
    ep = export_unchanged(AccumulatesIntoFrozen(), x)
    got = ep.module()(x)
    (grad,) = torch.autograd.grad(got.sum(), x)
    want = AccumulatesIntoFrozen()(x)
    assert got.requires_grad
    assert_bit_exact(got, want)
    assert_bit_exact(grad, torch.full((3,), 3.0))  # eager: d(3 * w)/dx through add_ only


@pytest.mark.parametrize("name", ["model_attr_mutation", "tensor_setattr"])
def test_exportdb_attribute_writes(name):
    example = importlib.import_module(f"torch._export.db.examples.{name}")
    args = tuple(a.clone() if isinstance(a, torch.Tensor) else a for a in example.example_args)
    ep = export_unchanged(example.model, *args)
    assert not hasattr(args[0], "attr")
    assert_bit_exact(ep.module()(*args), example.model(*args))


class SelectivePrecision(nn.Module):
    """Switch-Transformers' router: `self.classifier = self.classifier.to(self.dtype)`."""

    def __init__(self, dtype=torch.float32):
        super().__init__()
        self.classifier = nn.Linear(3, 2)
        self.dtype_wanted = dtype

    def forward(self, x):
        self.classifier = self.classifier.to(self.dtype_wanted)
        return self.classifier(x.to(self.dtype_wanted))


def test_module_to_that_changes_nothing_returns_the_module():
    model, x = SelectivePrecision(), torch.randn(2, 3)
    ep = export_unchanged(model, x)
    assert_bit_exact(ep.module()(x), model(x))


def test_module_to_that_converts_is_refused():
    error = refusal(SelectivePrecision(torch.float64), torch.randn(2, 3))
    assert error.code == "UB108" and "converts the module" in str(error)


def test_a_read_then_changed_attribute_warns_that_calls_do_not_accumulate():
    with pytest.warns(unbroken.StateWriteWarning, match=r"`Counter.count` and then changes it at "
                      r"test_attribute_writes.py:\d+ \(`self.count = self.count \+ 1`\)"):
        unbroken.export(Counter(), (torch.randn(3),))


class WrittenFirst(nn.Module):
    """Funnel's pattern: the attribute is set before it is read, every call."""

    def __init__(self):
        super().__init__()
        self.mult = None

    def forward(self, x):
        self.mult = 1
        self.mult *= 2
        return x * self.mult


def test_an_attribute_written_before_it_is_read_does_not_warn():
    with warnings.catch_warnings():
        warnings.simplefilter("error", unbroken.StateWriteWarning)
        unbroken.export(WrittenFirst(), (torch.randn(3),))


class RawSetattr(nn.Module):
    def forward(self, x):
        object.__setattr__(self, "scale", 4)  # bypasses nn.Module.__setattr__, as eager
        return x * self.scale


def test_object_setattr_on_the_model_is_the_overlay_write():
    model, x = RawSetattr(), torch.randn(3)
    ep = export_unchanged(model, x)
    assert not hasattr(model, "scale")
    assert_bit_exact(ep.module()(x), RawSetattr()(x))
