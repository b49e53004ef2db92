"""Differential soundness suite (issue 6): random small programs over grad-mode regions,
inference_mode, detach, in-place updates (of the live value, which earlier outputs alias, of
views, through a detach alias, under no_grad or not), buffer and parameter mutation,
``requires_grad`` and grad-mode introspection, reshape/flatten and layout facts (called on
another layout too), exception chaining, type introspection, and a submodule shared by two
paths, on a leaf or non-leaf input. Each is exported and compared with eager on values,
``requires_grad``, gradients (inputs and parameters), the input, parameters and buffers after
the call, and the caller's model after export (unchanged). A program eager rejects is skipped;
export must then not crash with an internal error either.

Figures: ``UNBROKEN_SOUNDNESS_EXAMPLES=2000 pytest -s tests/test_soundness.py -m slow`` prints
the programs tried and the mismatches (0) at the end.
"""
from __future__ import annotations

import copy
import os

import pytest
import torch
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import unbroken
from tests.state_leak import ModelSnapshot

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix


def _mul(m, h):
    return h * 1.5


def _lin(m, h):
    return m.tail(m.seq(h))


def _tanh(m, h):
    return torch.tanh(h)


def _no_grad(m, h):
    with torch.no_grad():
        h = m.seq(h) * 2
    return h


def _set_grad_off(m, h):
    with torch.set_grad_enabled(False):
        h = h + 1
    return h


def _enable_inside_no_grad(m, h):
    with torch.no_grad():
        with torch.enable_grad():
            h = m.seq(h)
        h = h + 1
    return h


def _inference(m, h):
    with torch.inference_mode():
        h = h * 3
    return h.clone()


def _detach(m, h):
    return h.detach()


def _inplace(m, h):
    h = h.clone()
    h.mul_(2)
    return h


def _buffer(m, h):
    with torch.no_grad():
        m.count.add_(h.sum())
    return h + m.count


def _branch_requires_grad(m, h):
    if h.requires_grad:
        return h + 1
    return h - 1


def _branch_grad_mode(m, h):
    if torch.is_grad_enabled():
        return h * 2
    return h * 3


def _detach_then_mix(m, h):
    return h.detach() * 2 + h


def _reshape(m, h):
    return h.reshape(-1).reshape(h.shape) + h.flatten().view(h.shape)


def _layout_branch(m, h):
    scale = 2 if h.is_contiguous() else 3
    return h * scale * h.stride(0)


def _raise_from(m, h):
    try:
        try:
            raise ValueError("inner")
        except ValueError as error:
            raise KeyError("outer") from error
    except KeyError as outer:
        if outer.__cause__ is not None:
            return h + 1
        return h - 1


def _type_name(m, h):
    return h + len(h.type()) + (5 if h.is_meta else 0) + (1 if type(h) is torch.Tensor else 0)


def _write_hidden(m, h):
    """A write autograd does not see, into the live value (earlier outputs alias it)."""
    with torch.no_grad():
        h.mul_(3)
    return h


def _write_visible(m, h):
    h.add_(1)
    return h


def _write_view_hidden(m, h):
    with torch.no_grad():
        h[0].mul_(2)
    return h


def _write_view_visible(m, h):
    h[:, 1].add_(h[:, 0])
    return h


def _write_detached(m, h):
    h.detach().mul_(2)
    return h


def _saved_then_written(m, h):
    """``sin`` saves its input; the write after it makes eager's backward raise."""
    h = h * 1
    z = h.sin()
    h.mul_(2)
    return z + h


def _saved_by_a_frozen_product(m, h):
    """``h * count`` saves ``h`` only if the buffer required grad: backward runs."""
    h = h * 1
    z = h * m.count
    h.add_(1)
    return z + h


def _parameter_hidden_write(m, h):
    """A parameter updated under no_grad mid-forward (an EMA-style update), then used."""
    with torch.no_grad():
        m.seq[1].weight.mul_(0.5)
    return m.tail(h)


def _buffer_view_write(m, h):
    with torch.no_grad():
        m.count[1:].add_(h.detach().mean())
    return h * m.count


STEPS = [_mul, _lin, _tanh, _no_grad, _set_grad_off, _enable_inside_no_grad, _inference,
         _detach, _inplace, _buffer, _branch_requires_grad, _branch_grad_mode,
         _detach_then_mix, _reshape, _layout_branch, _raise_from, _type_name,
         _write_hidden, _write_visible, _write_view_hidden, _write_view_visible,
         _write_detached, _parameter_hidden_write, _buffer_view_write, _saved_then_written,
         _saved_by_a_frozen_product]
_INTROSPECTION = {_branch_requires_grad, _branch_grad_mode}


class Program(torch.nn.Module):
    """``steps`` applied in order to the input; the shared ``tail`` is ``seq[1:]``."""

    def __init__(self, steps):
        super().__init__()
        torch.manual_seed(0)
        self.seq = torch.nn.Sequential(torch.nn.Linear(3, 3), torch.nn.Linear(3, 3))
        self.tail = self.seq[1:]
        self.register_buffer("count", torch.zeros(3))
        self.steps = steps

    def forward(self, x):
        h = x
        outputs = []
        for step in self.steps:
            h = step(self, h)
            outputs.append(h)
        return tuple(outputs)


FIGURES = {"programs": 0, "compared": 0, "eager_rejects": 0, "refused": 0,
           "refused_at_call": 0, "mismatches": 0}


def _run(module, x, ambient: bool, non_leaf: bool = False):
    """Runs on a fresh copy of ``x`` (same strides), as a program may write its input; with
    ``non_leaf``, on a copy made with grad enabled (its history reaches the leaf ``x``)."""
    leaf = x.detach().clone().requires_grad_(x.requires_grad)
    x = leaf
    if non_leaf:
        with torch.enable_grad():
            x = leaf.clone()
    params = [p for p in module.parameters() if p.requires_grad]
    with torch.set_grad_enabled(ambient):
        outputs = module(x)
    flags = [o.requires_grad for o in outputs]
    grads = None
    loss_terms = [o.sum() for o in outputs if o.requires_grad]
    if loss_terms:
        inputs = ([leaf] if leaf.requires_grad else []) + params
        try:
            grads = torch.autograd.grad(sum(loss_terms), inputs, allow_unused=True)
        except RuntimeError as error:  # a saved tensor written since: the program must raise too
            assert "modified by an inplace operation" in str(error), error
            grads = "backward raises"
    state = {name: t.detach() for name, t in [*module.named_parameters(),
                                               *module.named_buffers()]}
    return outputs, flags, grads, {"x": x, **state}


def _compare(eager, program):
    (e_out, e_flags, e_grads, e_bufs), (p_out, p_flags, p_grads, p_bufs) = eager, program
    assert p_flags == e_flags, "requires_grad differs"
    for a, b in zip(p_out, e_out):
        torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    assert (p_grads is None) == (e_grads is None)
    assert (p_grads == "backward raises") == (e_grads == "backward raises"), \
        "backward raises on one side only"
    if isinstance(e_grads, str):
        return
    for a, b in zip(p_grads or (), e_grads or ()):
        assert (a is None) == (b is None), "a gradient is missing"
        if a is not None:
            torch.testing.assert_close(a, b, rtol=1e-5, atol=1e-6)
    for name, value in e_bufs.items():
        torch.testing.assert_close(p_bufs[name], value, rtol=1e-5, atol=1e-6)


def check_program(steps, x_requires_grad: bool, ambient: bool, transposed_call=False,
                  non_leaf=False, export_grad=True):
    """Export ``Program(steps)`` on a contiguous example; call it on the same example, or on
    a transposed tensor of the same shape (``transposed_call``), which ``module()`` must
    either compute as eager or refuse with InputMismatchError."""
    FIGURES["programs"] += 1
    model = Program(steps)
    eager_model = copy.deepcopy(model)
    example = torch.randn(2, 3).requires_grad_(x_requires_grad)
    x = torch.randn(3, 2).t().detach().requires_grad_(x_requires_grad) if transposed_call \
        else example
    try:
        eager = _run(eager_model, x, ambient, non_leaf)
    except RuntimeError:
        FIGURES["eager_rejects"] += 1
        with pytest.raises(unbroken.UnbrokenError) as info:  # refuse or export; never a bug
            unbroken.export(model, (example,))
            raise unbroken.UnsupportedError("exported") from None
        assert not isinstance(info.value, unbroken.InternalError)
        return
    snapshot = ModelSnapshot.of(model)
    try:
        with torch.set_grad_enabled(export_grad):  # the caller's mode at export, not the call's
            ep = unbroken.export(model, (example,))
    except unbroken.InternalError:
        raise
    except unbroken.UnbrokenError:
        FIGURES["refused"] += 1
        assert snapshot.diff(ModelSnapshot.of(model)) == []
        return
    assert snapshot.diff(ModelSnapshot.of(model)) == [], "export changed the model"
    try:
        program = _run(ep.module(), x, ambient, non_leaf)
    except unbroken.InputMismatchError:
        assert transposed_call, "module() refused the example's own layout"
        FIGURES["refused_at_call"] += 1
        return
    try:
        _compare(eager, program)
    except AssertionError:
        FIGURES["mismatches"] += 1
        raise
    FIGURES["compared"] += 1


_programs = st.tuples(st.lists(st.sampled_from(STEPS), min_size=1, max_size=5), st.booleans(),
                      st.booleans(), st.booleans(), st.booleans(), st.booleans()).filter(
    lambda d: d[2] == d[5] or not _INTROSPECTION & set(d[0]))  # introspection: export's mode


@settings(max_examples=20, deadline=None, suppress_health_check=list(HealthCheck))
@given(_programs)
def test_random_programs_match_eager(drawn):
    check_program(*drawn)


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("UNBROKEN_SOUNDNESS_EXAMPLES", "300")),
          deadline=None, suppress_health_check=list(HealthCheck))
@given(_programs)
def test_random_programs_match_eager_many(drawn):
    check_program(*drawn)


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.__name__)
@pytest.mark.parametrize("x_requires_grad", [False, True])
@pytest.mark.parametrize("transposed_call", [False, True])
def test_each_construct_matches_eager(step, x_requires_grad, transposed_call):
    check_program([step, _lin], x_requires_grad, True, transposed_call)


def test_no_grad_target_gives_eager_weight_gradient():
    """The issue's example: a loss against a target computed under no_grad."""
    class SelfDistill(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.lin = torch.nn.Linear(3, 3)

        def forward(self, x):
            with torch.no_grad():
                target = self.lin(x) * 2
            return ((self.lin(x) - target) ** 2).sum(), target

    model, x = SelfDistill(), torch.randn(2, 3)
    ep = unbroken.export(model, (x,))
    program = ep.module()
    grads = []
    for module in (model, program):
        loss, target = module(x)
        assert not target.requires_grad
        weight = dict(module.named_parameters())["lin.weight"]
        grads.append(torch.autograd.grad(loss, [weight])[0])
    torch.testing.assert_close(grads[1], grads[0], rtol=0, atol=0)


def test_requires_grad_toggle_is_refused():
    class Toggle(torch.nn.Module):
        def forward(self, x):
            return x.detach().requires_grad_()

    with pytest.raises(unbroken.GraphBreakError, match="UB116"):
        unbroken.export(Toggle(), (torch.randn(2),))


def test_program_under_callers_no_grad_keeps_it_off():
    ep = unbroken.export(Program([_no_grad, _lin]), (torch.randn(2, 3),))
    with torch.no_grad():
        outputs = ep.module()(torch.randn(2, 3))
        assert not torch.is_grad_enabled()
    assert not any(o.requires_grad for o in outputs)
    assert torch.is_grad_enabled()


def teardown_module(module):
    print(f"\nsoundness suite: {FIGURES}")


@pytest.mark.parametrize("step", STEPS, ids=lambda s: s.__name__)
def test_each_construct_after_a_module_call_matches_eager(step):
    """After ``Linear`` (run natively), ``requires_grad`` comes from the module's parameters."""
    check_program([_lin, step], False, True)
