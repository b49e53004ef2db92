"""Interop without raw exceptions: the programs unbroken returns, in torch's own runtime and
fx passes, compute what eager computes — forward, backward and state — over the model zoo and
the programs that stress the runtime: a slice assignment (a write through a view), a buffer
mutation, an input mutation and a channels_last convolution.

- torch's own ``ExportedProgram.module(ep)``, before and after ``torch.export.save``/``load``:
  forward and backward (a slice assignment used to record ``aten.copy``, which torch cannot
  differentiate);
- ``torch.export.unflatten(ep)``;
- on ``ep.module()``: ``eliminate_dead_code()`` + ``recompile()`` (it deleted the buffer
  write-back), ``torch.fx.Interpreter`` and ``split_module``.
"""
from __future__ import annotations

import copy
import io

import pytest
import torch
from torch.fx.passes.split_module import split_module
from torch.utils import _pytree as pytree

import unbroken
from tests.models.zoo import ZOO


class SliceAssign(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)

    def forward(self, x):
        y = self.lin(x)
        y[:, 0] = x[:, 1] * 2
        y[1:] = y[1:] * 3
        return y


class BufferMutation(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 4)
        self.register_buffer("count", torch.zeros(()))
        self.register_buffer("running", torch.zeros(4))

    def forward(self, x):
        self.count += 1
        self.running.mul_(0.9).add_(x.mean(0).detach() * 0.1)
        return self.lin(x) + self.running * self.count


class InputMutation(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.w = torch.nn.Parameter(torch.randn(4))

    def forward(self, x, state):
        state.add_(1)
        return x * self.w + state


class ChannelsLastConv(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.conv = torch.nn.Conv2d(3, 4, 3)
        self.norm = torch.nn.GroupNorm(2, 4)

    def forward(self, x):
        return self.norm(self.conv(x)).relu()


def _g(seed=0):
    return torch.Generator().manual_seed(seed)


PROGRAMS = {
    "slice_assign": (SliceAssign, lambda: (torch.randn(3, 4, generator=_g()),)),
    "buffer_mutation": (BufferMutation, lambda: (torch.randn(3, 4, generator=_g()),)),
    "input_mutation": (InputMutation, lambda: (torch.randn(4, generator=_g()),
                                               torch.zeros(4))),
    "channels_last_conv": (ChannelsLastConv, lambda: (
        torch.randn(2, 3, 8, 8, generator=_g()).contiguous(memory_format=torch.channels_last),)),
}


def _case(name):
    """(a fresh eager model, fresh example args) for a program of this file or the zoo."""
    if name in PROGRAMS:
        make, args = PROGRAMS[name]
        torch.manual_seed(0)
        return make().eval(), args()
    torch.manual_seed(0)
    model, args = ZOO[name].make()
    return model.eval(), args


# In make test: this file's programs and two zoo models; the rest of the zoo (five exports
# each) under slow and heavy (`make test-heavy`).
FAST_ZOO = ("mlp", "cnn")
CASES = [*PROGRAMS, *(pytest.param(n, id=n, marks=[] if n in FAST_ZOO else
                                   [pytest.mark.slow, pytest.mark.heavy]) for n in ZOO)]


def _exported(name):
    model, args = _case(name)
    return model, args, unbroken.export(copy.deepcopy(model), copy.deepcopy(args))


def _clone(args):
    return pytree.tree_map(lambda v: v.clone() if isinstance(v, torch.Tensor) else v, args)


def _assert_runs_as_eager(module, model, args, calls=2, backward=True):
    """``calls`` calls of ``module`` and of the eager ``model`` on copies of ``args``: outputs,
    written inputs, buffers, and (``backward``) the parameters' gradients agree."""
    for _ in range(calls):
        ours_args, eager_args = _clone(args), _clone(args)
        ours, eager = module(*ours_args), model(*eager_args)
        torch.testing.assert_close(ours, eager)
        torch.testing.assert_close(ours_args, eager_args)
    torch.testing.assert_close(dict(module.named_buffers()), dict(model.named_buffers()))
    leaves = [t for t in pytree.tree_leaves(eager) if isinstance(t, torch.Tensor)
              and t.requires_grad]
    if not backward or not leaves:
        return
    for fn in (module, model):
        for p in fn.parameters():
            p.grad = None
        out = fn(*_clone(args))
        sum(t.float().sum() for t in pytree.tree_leaves(out)
            if isinstance(t, torch.Tensor) and t.requires_grad).backward()
    ours_grads = {n: p.grad for n, p in module.named_parameters()}
    eager_grads = {n: p.grad for n, p in model.named_parameters()}
    torch.testing.assert_close(ours_grads, eager_grads)


@pytest.mark.parametrize("name", CASES)
def test_torchs_own_module_runs_and_differentiates(name):
    model, args, ep = _exported(name)
    _assert_runs_as_eager(torch.export.ExportedProgram.module(ep), model, args)


@pytest.mark.parametrize("name", CASES)
def test_torchs_module_after_save_and_load(name):
    model, args, ep = _exported(name)
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    _assert_runs_as_eager(torch.export.load(buffer).module(), model, args)


@pytest.mark.parametrize("name", CASES)
def test_unflatten(name):
    model, args, ep = _exported(name)
    _assert_runs_as_eager(torch.export.unflatten(ep), model, args, backward=False)


@pytest.mark.parametrize("name", CASES)
def test_dead_code_elimination_keeps_behaviour(name):
    model, args, ep = _exported(name)
    module = ep.module()
    module.graph.eliminate_dead_code()
    module.recompile()
    _assert_runs_as_eager(module, model, args, calls=3)


@pytest.mark.parametrize("name", CASES)
def test_interpreter_and_split_module_keep_behaviour(name):
    model, args, ep = _exported(name)
    module = ep.module()
    flat_args = pytree.tree_leaves(args)
    eager = copy.deepcopy(model)  # the modules share the program's state: so does eager
    expected = pytree.tree_leaves(eager(*_clone(args)))
    interpreted = torch.fx.Interpreter(module).run(*_clone(flat_args))
    torch.testing.assert_close(pytree.tree_leaves(interpreted), expected)
    expected = pytree.tree_leaves(eager(*_clone(args)))
    split = ep.module()
    order = {node: i for i, node in enumerate(split.graph.nodes)}
    half = len(order) // 2  # two partitions in graph order: no cycle between them
    pieces = split_module(split, None, lambda node: int(order[node] >= half))
    torch.testing.assert_close(pytree.tree_leaves(pieces(*_clone(flat_args))), expected)
