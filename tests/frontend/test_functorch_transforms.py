"""``torch.vmap`` (``torch.func.vmap``) inside forward(), and the context managers of torch's
that come with it.

vmap is traced through torch's own Python code: its ``@contextmanager`` nesting is interpreted
like the program's own context managers (``builder._context_manager_body``), its native calls
are leaf calls, and the batching rules run natively while a leaf call runs, so the recorder
sees the ops they dispatch on the unbatched tensors (the program holds those, as torch's
``run_decompositions`` gives). The transform's level is on the thread's stack only during
leaf calls (``TraceContext._call_native``): unbroken's own work never runs transformed, and a
trace that stops inside vmap leaves none open. The transforms that differentiate
(``torch.func.grad``...) are refused by name. Differential against eager, bit for bit."""
from __future__ import annotations

import copy
import functools
import operator

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from torch.export import Dim

import unbroken
from tests.exactness import assert_bit_exact
from tests.frontend.parity import PARITY
from unbroken import GraphBreakError, RefusalError
from unbroken.symbolic.torch_compat import functorch_depth

pytestmark = pytest.mark.matrix


class Calls(torch.nn.Module):
    """forward(x, y) = body(self, x, y), with a Linear(4, 3) to call."""

    def __init__(self, body):
        super().__init__()
        self.body = body
        self.lin = torch.nn.Linear(4, 3)

    def forward(self, x, y):
        return self.body(self, x, y)


def _check(body, shapes=((5, 4), (5, 4)), others=((7, 4), (7, 4)), dynamic=True):
    """Export ``Calls(body)`` static and with every dim ``Dim.AUTO``; both equal eager bit for
    bit (values and requires_grad) on the example and, when the program stays dynamic, on
    inputs of ``others``' shapes. Returns the static program."""
    model = Calls(body)
    x, y = (torch.randn(*s) for s in shapes)
    program = unbroken.export(model, (x, y))
    assert_bit_exact(program.module()(x, y), model(x, y))
    if dynamic:
        auto = {0: Dim.AUTO, 1: Dim.AUTO}
        program_auto = unbroken.export(model, (x, y), dynamic_shapes=(auto, auto))
        assert_bit_exact(program_auto.module()(x, y), model(x, y))
        x2, y2 = (torch.randn(*s) for s in others)
        assert_bit_exact(program_auto.module()(x2, y2), model(x2, y2))
    assert functorch_depth() == 0
    return program


def _ops(program) -> list[str]:
    return [getattr(n.target, "__name__", None) if n.target is operator.getitem
            else str(n.target) for n in program.graph.nodes if n.op == "call_function"]


def test_vmap_records_the_ops_its_batching_rules_dispatch():
    program = _check(lambda m, x, y: torch.vmap(lambda a, b: (a * b).sum() + a.max())(x, y))
    # the unbatched ops, on the whole tensors: no functorch call is left in the program
    assert _ops(program) == ["aten.mul.Tensor", "aten.sum.dim_IntList", "aten.max.dim",
                             "getitem", "aten.add.Tensor"]


@pytest.mark.parametrize("name, body", [
    ("in_dims with None", lambda m, x, y: torch.vmap(lambda a, b: a @ b, in_dims=(0, None))(
        x, y.T)),
    ("in_dims=1", lambda m, x, y: torch.vmap(lambda a: a.cumsum(0), in_dims=1)(x)),
    ("out_dims=1", lambda m, x, y: torch.vmap(lambda a: a * 2, out_dims=1)(x)),
    ("nested", lambda m, x, y: torch.vmap(torch.vmap(lambda a, b: a * b + 1))(x, y)),
    ("torch.func.vmap", lambda m, x, y: torch.func.vmap(torch.dot)(x, y)),
    ("a tuple out", lambda m, x, y: torch.vmap(lambda a: (a.sum(), a * 3))(x)),
    ("a dict in", lambda m, x, y: torch.vmap(lambda d: d["p"] - d["q"])({"p": x, "q": y})),
    ("partial with keywords", lambda m, x, y: torch.vmap(functools.partial(
        lambda a, scale: a * scale, scale=3.0))(x)),
    ("in-place on a batched copy", lambda m, x, y: torch.vmap(
        lambda a: a.clone().add_(1).relu_())(x)),
    ("a captured tensor", lambda m, x, y: (lambda w: torch.vmap(lambda a: a * w)(x))(
        y.sum(0))),
    ("indexing by a batched index", lambda m, x, y: torch.vmap(lambda a, i: a[i])(
        x, torch.arange(x.shape[0]) % x.shape[1])),
    ("randomness='same' not drawn from", lambda m, x, y: torch.vmap(
        lambda a: a + torch.zeros(()), randomness="same")(x)),
    ("a branch on the example's size", lambda m, x, y: torch.vmap(
        lambda a: a * 2 if a.shape[0] > 3 else a)(x)),
])
def test_vmap_forms_equal_eager(name, body):
    _check(body)


def test_vmap_of_a_submodule_and_its_parameters_keeps_gradients():
    model = Calls(lambda m, x, y: torch.vmap(lambda a: m.lin(a).relu())(x))
    x = torch.randn(5, 4)
    program = unbroken.export(model, (x, torch.randn(5, 4)))
    module = program.module()
    got, want = module(x, x), model(x, x)
    assert_bit_exact(got, want)
    assert got.requires_grad
    (ours,) = torch.autograd.grad(got.sum(), dict(module.named_parameters())["lin.weight"])
    (eager,) = torch.autograd.grad(want.sum(), model.lin.weight)
    assert torch.equal(ours, eager)


def test_model_ensembling_with_functional_call():
    def body(m, x, y):
        params = {"weight": torch.stack([m.lin.weight, 2 * m.lin.weight]),
                  "bias": torch.stack([m.lin.bias, m.lin.bias])}
        return torch.vmap(lambda p, a: torch.func.functional_call(m.lin, p, (a,)),
                          in_dims=(0, None))(params, x)

    _check(body, others=((7, 4), (7, 4)))


def test_chunked_vmap_pins_the_batch_it_splits():
    # chunk_size splits the batch by its value: a program for that size only, as torch's
    model = Calls(lambda m, x, y: torch.vmap(lambda a: a.softmax(-1), chunk_size=2)(x))
    x = torch.randn(5, 4)
    program = unbroken.export(model, (x, x), dynamic_shapes=({0: Dim.AUTO}, None))
    assert_bit_exact(program.module()(x, x), model(x, x))
    with pytest.raises(unbroken.InputMismatchError):
        program.module()(torch.randn(7, 4), torch.randn(7, 4))


_BODIES = {
    "mul-sum": lambda a, b: (a * b).sum(-1),
    "softmax": lambda a, b: (a + b).softmax(-1),
    "outer": lambda a, b: torch.outer(a, b),
    "where": lambda a, b: torch.where(a > b, a, b * 2),
}


@PARITY
@given(body=st.sampled_from(sorted(_BODIES)), batch=st.integers(1, 5),
       features=st.integers(1, 4), in_a=st.sampled_from([0, 1]),
       in_b=st.sampled_from([0, 1, None]), out=st.sampled_from([0, 1, -1]))
def test_drawn_vmap_programs_equal_eager(body, batch, features, in_a, in_b, out):
    fn = _BODIES[body]
    dims = (in_a, in_b)

    def program_body(m, x, y):
        return torch.vmap(fn, in_dims=dims, out_dims=out)(x, y if in_b is not None else y[0])

    def shape(in_dim, b, f):
        return (b, f) if in_dim in (0, None) else (f, b)

    model = Calls(program_body)
    x, y = torch.randn(*shape(in_a, batch, features)), torch.randn(*shape(in_b, batch, features))
    try:
        want = model(x, y)
    except (ValueError, RuntimeError, IndexError):  # out_dims past a result's dims: eager's
        with pytest.raises(RefusalError):
            unbroken.export(model, (x, y))
    else:
        program = unbroken.export(model, (x, y))
        assert_bit_exact(program.module()(x, y), want)
    assert functorch_depth() == 0


def test_a_break_inside_vmap_leaves_no_transform_open():
    def body(m, x, y):
        def f(a):
            return a * len(a.tolist())
        return torch.vmap(f)(x)

    with pytest.raises(RefusalError):
        unbroken.export(Calls(body), (torch.randn(5, 4), torch.randn(5, 4)))
    assert functorch_depth() == 0
    torch.nn.Linear(2, 2)  # random initialisation: refused inside a vmap left open


def test_errors_eager_raises_inside_vmap_are_reported_at_the_line():
    model = Calls(lambda m, x, y: torch.vmap(lambda a: a + torch.rand(()))(x))
    with pytest.raises(GraphBreakError, match="randomness"):
        unbroken.export(model, (torch.randn(5, 4), torch.randn(5, 4)))
    assert functorch_depth() == 0


@pytest.mark.parametrize("transform", [
    lambda x: torch.func.grad(lambda a: (a ** 2).sum())(x),
    lambda x: torch.vmap(torch.func.grad(lambda a: a.sin().sum()))(x),
    lambda x: torch.func.jacrev(lambda a: a.sin() * 2)(x[0]),
    lambda x: torch.func.jvp(lambda a: a.cos(), (x,), (torch.ones_like(x),))[1],
])
def test_differentiating_transforms_of_traced_code_are_refused_by_name(transform):
    with pytest.raises(GraphBreakError, match="torch.func") as refused:
        unbroken.export(Calls(lambda m, x, y: transform(x)), (torch.randn(5, 4),
                                                              torch.randn(5, 4)))
    assert "UB108" in str(refused.value) and __file__ in str(refused.value)
    assert functorch_depth() == 0


@pytest.mark.parametrize("transform", [
    lambda x: torch.func.jacrev(torch.sin)(x[0]),
    lambda x: torch.func.jvp(torch.sin, (x,), (torch.ones_like(x),))[1],
])
def test_transforms_of_torch_functions_run_natively_as_one_leaf_call(transform):
    """Given torch's own function, the transform is torch's code through and through: one leaf
    call, whose derivative ops the recorder sees as it sees vmap's."""
    _check(lambda m, x, y: transform(x), dynamic=False)


def test_transformers_style_mask_through_vmap_and_getitem_to_index():
    """transformers builds a custom attention mask (``or_mask_function``: Gemma 3's image
    tokens) with ``vmap`` over index functions inside TorchDynamo's
    ``TransformGetItemToIndex`` mode, a torch function mode of torch's own: entered natively,
    the leaf calls of the block run through it as eager's do."""
    from torch._dynamo._trace_wrapped_higher_order_op import TransformGetItemToIndex

    class Mask(torch.nn.Module):
        def forward(self, x, token_type):
            batch, length = x.shape[:2]

            def same_block(b, h, q, k):
                return (token_type[b, q] == token_type[b, k]) & (token_type[b, q] == 1)

            def mask_fn(b, h, q, k):
                return (k <= q) | same_block(b, h, q, k)

            fn = mask_fn
            for dims in [(None, None, None, 0), (None, None, 0, None), (None, 0, None, None),
                         (0, None, None, None)]:
                fn = torch.vmap(fn, in_dims=dims, out_dims=0)
            with TransformGetItemToIndex():
                mask = fn(torch.arange(batch), torch.arange(1), torch.arange(length),
                          torch.arange(length))
            return torch.where(mask[:, 0, :, :, None], x[:, None], 0.0)

    x = torch.randn(2, 6, 3)
    token_type = torch.tensor([[0, 1, 1, 0, 0, 0], [1, 1, 0, 0, 1, 1]])
    model = Mask()
    program = unbroken.export(model, (x, token_type),
                              dynamic_shapes=({0: Dim.AUTO, 1: Dim.AUTO},
                                              {0: Dim.AUTO, 1: Dim.AUTO}))
    assert_bit_exact(program.module()(x, token_type), model(x, token_type))
    x2, types2 = torch.randn(3, 5, 3), torch.randint(0, 2, (3, 5))
    assert_bit_exact(program.module()(x2, types2), model(x2, types2))


def test_an_ensemble_from_stack_module_state():
    """torch.func's model-ensembling recipe inside forward(): ``stack_module_state`` of the
    members, one ``functional_call`` of a meta copy under ``vmap`` (torch non-strict exports
    it with wrong values, torch strict refuses it)."""
    class Ensemble(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.members = torch.nn.ModuleList([torch.nn.Linear(4, 3) for _ in range(3)])
            self.base = copy.deepcopy(self.members[0]).to("meta")

        def forward(self, x):
            params, buffers = torch.func.stack_module_state(list(self.members))

            def member(p, b, inputs):
                return torch.func.functional_call(self.base, (p, b), (inputs,))

            return torch.vmap(member, in_dims=(0, 0, None))(params, buffers, x)

    model, x = Ensemble(), torch.randn(5, 4)
    program = unbroken.export(model, (x,), dynamic_shapes=({0: Dim.AUTO},))
    for inputs in (x, torch.randn(2, 4)):
        got, want = program.module()(inputs), model(inputs)
        assert_bit_exact(got, want)
    assert functorch_depth() == 0
