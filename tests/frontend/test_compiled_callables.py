"""Callables TorchDynamo wrapped (``torch.compile(f)``, ``torch.compile(module)``,
``module.compile()``, ``torch.compiler.disable``) inside forward() are traced as the callable
inside the wrapper (``symbolic.torch_compat.compiled_original``): the wrapper only sets
TorchDynamo's frame hook around the call. Run natively, it had TorchDynamo compile the
interpreter's own frames (an internal error), or the interpreter met its context managers (a
graph break whose fix spoke of the user's ``with``). torch.export takes all of these (strict
inlines a compiled callable; a disabled one only non-strict traces). Side by side with
torch.export and eager; no compiler runs during the capture."""
from __future__ import annotations

import functools

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact
from unbroken.symbolic.torch_compat import compiled_original

pytestmark = pytest.mark.matrix


class _Backend:
    """A TorchDynamo backend that counts the graphs it is given and runs them as they are."""

    def __init__(self):
        self.graphs = 0

    def __call__(self, graph_module, example_inputs):
        self.graphs += 1
        return graph_module.forward


def _ops(program) -> list[str]:
    return [str(n.target) for n in program.graph.nodes if n.op == "call_function"]


def test_a_compiled_function_is_traced_as_the_function_and_nothing_is_compiled():
    backend = _Backend()

    @torch.compile(backend=backend)
    def scaled(x, *, k):
        return x.sin() * k

    class Calls(torch.nn.Module):
        def forward(self, x):
            return scaled(x, k=3.0) + 1

    x = torch.randn(3, 4)
    program = unbroken.export(Calls(), (x,), dynamic_shapes=({0: Dim.AUTO},))
    assert backend.graphs == 0  # the capture compiled nothing
    assert _ops(program) == ["aten.sin.default", "aten.mul.Tensor", "aten.add.Tensor"]
    assert _ops(program) == _ops(torch.export.export(Calls(), (x,)))
    for inputs in (x, torch.randn(7, 4)):
        assert_bit_exact(program.module()(inputs), Calls()(inputs))
    assert backend.graphs >= 1  # (the backend does compile an eager call)


@pytest.mark.parametrize("how", ["torch.compile", "Module.compile", "compiler.disable"])
def test_a_wrapped_submodule_is_called_as_the_module_with_torch_s_names(how):
    class Holds(torch.nn.Module):
        def __init__(self):
            super().__init__()
            linear = torch.nn.Linear(4, 5)
            if how == "torch.compile":
                linear = torch.compile(linear, backend=_Backend())
            elif how == "Module.compile":
                linear.compile(backend=_Backend())
            else:
                linear = torch.compiler.disable(linear)
            self.linear = linear

        def forward(self, x):
            return self.linear(x).relu()

    model, x = Holds(), torch.randn(2, 4)
    program = unbroken.export(model, (x,))
    peer = torch.export.export(model, (x,))
    assert list(program.state_dict) == list(peer.state_dict)
    assert ("_orig_mod" in next(iter(program.state_dict))) == (how != "Module.compile")
    assert _ops(program) == ["aten.linear.default", "aten.relu.default"]
    assert_bit_exact(program.module()(x), model(x))


def test_a_disabled_function_is_traced_as_torch_s_non_strict_export_does():
    @torch.compiler.disable
    def shifted(x):
        return x.cos() - 1

    class Calls(torch.nn.Module):
        def forward(self, x):
            return shifted(x) * 2

    x = torch.randn(5)
    program = unbroken.export(Calls(), (x,))
    assert _ops(program) == ["aten.cos.default", "aten.sub.Tensor", "aten.mul.Tensor"]
    assert _ops(program) == _ops(torch.export.export(Calls(), (x,), strict=False))
    assert_bit_exact(program.module()(x), Calls()(x))


def test_a_non_recursive_disable_is_traced_too():
    """torch's non-strict export refuses ``disable(recursive=False)`` (2.13: "not supported
    with torch.export"); it steers TorchDynamo only, so unbroken traces the function."""
    @torch._dynamo.disable(recursive=False)
    def squashed(x):
        return x.tanh()

    class Calls(torch.nn.Module):
        def forward(self, x):
            return squashed(x) + x

    x = torch.randn(5)
    program = unbroken.export(Calls(), (x,))
    assert _ops(program) == ["aten.tanh.default", "aten.add.Tensor"]
    assert_bit_exact(program.module()(x), Calls()(x))


def test_a_compiled_method_and_a_wrapper_around_a_compiled_function():
    """A method compiled in the class body is bound to the instance as usual; a
    ``functools.wraps`` copy of a compiled function is not the compiled function (it carries
    the attribute, not the wrapper's id): its own code runs (the ``+ 10``)."""
    def plus_ten(fn):
        @functools.wraps(fn)
        def wrapper(*args, **kwargs):
            return fn(*args, **kwargs) + 10
        return wrapper

    @plus_ten
    @torch.compile(backend=_Backend(), fullgraph=True)
    def exp(x):
        return x.exp()

    class Method(torch.nn.Module):
        @torch.compile(backend=_Backend())
        def helper(self, x, *, k=2):
            return x * k

        def forward(self, x):
            return self.helper(x, k=3) + exp(x)

    model, x = Method(), torch.randn(2, 3)
    assert compiled_original(exp) is None and compiled_original(exp.__wrapped__) is not None
    program = unbroken.export(model, (x,))
    assert "aten.exp.default" in _ops(program) and _ops(program).count("aten.add.Tensor") == 2
    assert_bit_exact(program.module()(x), model(x))


def test_compiled_original_tells_the_wrappers_torch_makes():
    def plain(x):
        return x

    compiled = torch.compile(plain, backend=_Backend())
    disabled = torch.compiler.disable(plain)
    module = torch.compile(torch.nn.Linear(2, 2), backend=_Backend())
    assert compiled_original(compiled) is plain
    assert compiled_original(disabled) is plain
    assert compiled_original(plain) is None
    assert compiled_original(torch.sin) is None and compiled_original(module) is None
    inner = compiled_original(module.forward)  # the compiled module's forward: a call of the
    assert inner is not None and compiled_original(inner) is None  # module inside, uncompiled
    x = torch.randn(3, 2)
    assert_bit_exact(inner(x), module._orig_mod(x))
