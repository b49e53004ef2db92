"""Call signatures: kwargs, defaults, preserve_module_call_signature, unflatten, save/load,
node metadata, and what module() refuses."""
from __future__ import annotations

import functools
import io

import pytest
import torch
import torch.nn as nn

from tests.behaviours.harness import Behaviour, assert_same, params, program, side_by_side


def _r(*shapes):
    return lambda: tuple(torch.randn(*s) for s in shapes)


class _N(nn.Module):
    def forward(self, x, b):
        return x + 1 if b else x + 2


class _Child(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(3, 3)

    def forward(self, x):
        return self.lin(x).relu()


class _BufChild(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("buf", torch.tensor(10.0))

    def forward(self, x):
        self.buf.add_(1)
        return x + 2


class _Mutator(nn.Module):
    def forward(self, x):
        a = x.add_(3)
        return a - 2


class _ChainMutator(nn.Module):
    def forward(self, x):
        x.mul_(2).add_(3)
        return x - 1


class _RowMutator(nn.Module):
    def forward(self, x):
        x[0].add_(5)
        return x.sum(0)


class _BufAndInput(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        self.count.add_(x.sum(0))
        x.mul_(2)
        return x + self.count


def _setup_n(self):
    self.n = _N()


def _setup_child(self):
    self.child = _Child()
    self.other = nn.Linear(3, 3)


def _setup_buf(self):
    self.child = _BufChild()


def _setup_mutator(self):
    self.child = _Mutator()


def _setup_chain(self):
    self.child = _ChainMutator()


def _setup_row(self):
    self.child = _RowMutator()


def _setup_buf_and_input(self):
    self.child = _BufAndInput()


def _seeded(builder):
    torch.manual_seed(0)
    return builder()


def _unflatten_agrees(inputs, swap=None):
    def check(ep):
        ufm = torch.export.unflatten(ep)
        assert_same(ep.module()(*_seeded(inputs)), ufm(*_seeded(inputs)), "unflattened output")
        if swap:
            for fqn, make in swap.items():
                ufm.set_submodule(fqn, _seeded(make))
            assert_same(ep.module()(*_seeded(inputs)), ufm(*_seeded(inputs)), "after the swap")
    return check


def _unflatten_like_eager(make, inputs, swap=()):
    """``torch.export.unflatten(ep)`` agrees with eager started from the program's state (the
    harness ran ``ep.module()``, which writes that state, as torch's does): outputs, the
    inputs it writes and the buffers after two calls; then again with the submodules named in
    ``swap`` replaced by eager ones holding the same state."""
    def check(ep):
        ufm = torch.export.unflatten(ep)
        eager = _seeded(make)
        eager.load_state_dict(ep.state_dict, strict=False)
        _agree_twice(eager, ufm, inputs)
        for fqn in swap:
            submodule = _seeded(make).get_submodule(fqn)
            submodule.load_state_dict(eager.get_submodule(fqn).state_dict())
            ufm.set_submodule(fqn, submodule)
            _agree_twice(eager, ufm, inputs)
    return check


def _agree_twice(eager, ufm, inputs):
    for _ in range(2):
        expected_inputs, got_inputs = _seeded(inputs), _seeded(inputs)
        assert_same(eager(*expected_inputs), ufm(*got_inputs), "unflattened output")
        assert_same(expected_inputs, got_inputs, "inputs after the call")
        buffers = dict(eager.named_buffers())
        assert_same(buffers, {name: _attribute(ufm, name) for name in buffers}, "buffers")


def _attribute(module, dotted):
    for atom in dotted.split("."):
        module = getattr(module, atom)
    return module


def _mutator_unflatten(ep):
    ufm = torch.export.unflatten(ep)
    x = torch.ones(2, 3)
    out = ufm(x)
    torch.testing.assert_close(out, torch.full((2, 3), 18.0))
    torch.testing.assert_close(x, torch.full((2, 3), 4.0))


def _call_graph_has(*fqns):
    def check(ep):
        got = {entry.fqn for entry in ep.module_call_graph}
        assert set(fqns) <= got, f"module_call_graph {sorted(got)} lacks {fqns}"
    return check


def _module_stack(ep):
    stacks = [n.meta.get("nn_module_stack") for n in ep.graph.nodes
              if n.op == "call_function" and "linear" in str(n.target)]
    assert stacks and all(s and any(path == "child.lin" for path, _ in s.values())
                          for s in stacks[:1]), stacks


def _stack_trace(ep):
    nodes = [n for n in ep.graph.nodes if n.op == "call_function"]
    assert nodes and all("test_signatures.py" in (n.meta.get("stack_trace") or "")
                         for n in nodes), [n.meta.get("stack_trace") for n in nodes]


def _annotated(self, x):
    y = x * 2
    with torch.fx.traceback.annotate({"k": 0}):
        return y + 1


def _custom_meta(ep):
    found = {n.target.__name__: n.meta.get("custom") for n in ep.graph.nodes
             if n.op == "call_function"}
    assert found == {"mul.Tensor": None, "add.Tensor": {"k": 0}}, found


def _save_load(ep):
    buffer = io.BytesIO()
    torch.export.save(ep, buffer)
    buffer.seek(0)
    loaded = torch.export.load(buffer)
    x = torch.randn(2, 3)
    torch.testing.assert_close(loaded.module()(x), ep.module()(x))


def _user_input_names(names):
    def check(ep):
        got = [s.arg.name for s in ep.graph_signature.input_specs
               if s.kind == torch.export.graph_signature.InputKind.USER_INPUT]
        assert got == list(names), got
    return check


def _input_kind_order(ep):
    kinds = [s.kind.name for s in ep.graph_signature.input_specs]
    assert kinds == sorted(kinds, key=["PARAMETER", "BUFFER", "CONSTANT_TENSOR",
                                       "USER_INPUT"].index), kinds


def _kw_default(self, x, scale=2.0, *, shift=1):
    return x * scale + shift


def _bias_setup(self):
    self.lin = nn.Linear(3, 3)
    self.register_buffer("running", torch.ones(3))


def _thrice(self, x):
    y = self.child(x)
    x = y + self.child.buf
    y = self.child(x)
    x = y + self.child.buf
    y = self.child(x)
    return y + self.child.buf


def _chain_then_write(self, x):
    y = self.child(x)
    x.mul_(10)
    return y + x * 4


def _buf_and_input_twice(self, x):
    y = self.child(x)
    z = self.child(x)
    return y + z + x + self.child.count


_BUF_THRICE = program(_thrice, _setup_buf)
_CHAIN_THEN_WRITE = program(_chain_then_write, _setup_chain)
_ROW_THEN_READ = program(lambda self, x: self.child(x) + x * 4, _setup_row)
_BUF_AND_INPUT_TWICE = program(_buf_and_input_twice, _setup_buf_and_input)

class _PartialForward(nn.Module):
    pass


# torch's test_partial_patched_forward: a partial is no descriptor, so forward is not bound
_PartialForward.forward = functools.partial(lambda x, y: x + y, y=torch.ones(4))


BEHAVIOURS = [
    Behaviour("forward_partial_set_on_class", _PartialForward, _r((4,))),
    Behaviour("kwargs_only_call", program(lambda self, x, y: x - y),
              lambda: ((), {"y": torch.randn(3), "x": torch.randn(3)}), kwargs=True),
    Behaviour("default_arguments_kept", program(_kw_default), _r((3,))),
    Behaviour("default_overridden_by_kwarg", program(_kw_default),
              lambda: ((torch.randn(3),), {"shift": 3}), kwargs=True),
    Behaviour("kwargs_reordered_at_call", program(lambda self, a, kw1, kw2: a + kw1 * kw2),
              lambda: ((torch.randn(2),), {"kw2": torch.randn(2), "kw1": torch.randn(2)}),
              kwargs=True,
              more=(lambda: ((torch.randn(2),), {"kw1": torch.randn(2),
                                                  "kw2": torch.randn(2)}),)),
    Behaviour("preserve_signature_swap", program(
        lambda self, x: self.n(x + 1, True) + self.n(x + 1, False), _setup_n),
              lambda: (torch.zeros(4),),
              options={"preserve_module_call_signature": ("n",)},
              check=_unflatten_agrees(lambda: (torch.zeros(4),), swap={"n": _N})),
    Behaviour("preserve_signature_call_graph", program(
        lambda self, x: self.other(self.child(x)), _setup_child), _r((2, 3)),
              options={"preserve_module_call_signature": ("child",)},
              check=_call_graph_has("child")),
    Behaviour("unflatten_nested_modules", program(
        lambda self, x: self.other(self.child(x)), _setup_child), _r((2, 3)),
              check=_unflatten_agrees(_r((2, 3)))),
    Behaviour("unflatten_swap_child_with_params", program(
        lambda self, x: self.other(self.child(x)), _setup_child), _r((2, 3)),
              options={"preserve_module_call_signature": ("child",)},
              check=_unflatten_agrees(_r((2, 3)), swap={"child": _Child})),
    Behaviour("unflatten_buffer_mutated_in_child", _BUF_THRICE, lambda: (torch.ones(2, 3),),
              options={"preserve_module_call_signature": ("child",)},
              check=_unflatten_like_eager(_BUF_THRICE, lambda: (torch.ones(2, 3),),
                                          swap=("child",))),
    Behaviour("unflatten_input_mutated_in_child", program(
        lambda self, x: self.child(x) + x * 4, _setup_mutator), lambda: (torch.ones(2, 3),),
              options={"preserve_module_call_signature": ("child",)},
              check=_mutator_unflatten),
    Behaviour("unflatten_input_written_twice_in_child", _CHAIN_THEN_WRITE, _r((2, 3)),
              options={"preserve_module_call_signature": ("child",)},
              check=_unflatten_like_eager(_CHAIN_THEN_WRITE, _r((2, 3)), swap=("child",))),
    Behaviour("unflatten_input_row_written_in_child", _ROW_THEN_READ, _r((2, 3)),
              options={"preserve_module_call_signature": ("child",)},
              check=_unflatten_like_eager(_ROW_THEN_READ, _r((2, 3)), swap=("child",))),
    Behaviour("unflatten_buffer_and_input_written_by_two_calls", _BUF_AND_INPUT_TWICE,
              _r((2, 3)), options={"preserve_module_call_signature": ("child",)},
              check=_unflatten_like_eager(_BUF_AND_INPUT_TWICE, _r((2, 3)), swap=("child",))),
    Behaviour("nn_module_stack_meta", program(
        lambda self, x: self.other(self.child(x)), _setup_child), _r((2, 3)),
              check=_module_stack),
    Behaviour("stack_trace_meta", program(lambda self, x: (x * 2).sin()), _r((2, 3)),
              check=_stack_trace),
    Behaviour("fx_annotate_custom_meta", program(_annotated), _r((4,)), check=_custom_meta),
    Behaviour("torch_save_load_roundtrip", program(
        lambda self, x: self.lin(x) + self.running, _bias_setup), _r((2, 3)),
              check=_save_load),
    Behaviour("user_input_names", program(lambda self, left, right: left @ right),
              _r((2, 3), (3, 2)), check=_user_input_names(["left", "right"])),
    Behaviour("input_spec_kind_order", program(
        lambda self, x: self.lin(x) + self.running + torch.tensor([1.0, 2.0, 3.0]),
        _bias_setup), _r((2, 3)), check=_input_kind_order),
    Behaviour("module_rejects_wrong_shape", program(lambda self, x: x * 2), _r((2, 3)),
              rejects=(_r((3, 3)),)),
    Behaviour("module_rejects_wrong_rank", program(lambda self, x: x * 2), _r((2, 3)),
              rejects=(_r((2, 3, 1)),),
              torch_fails="module() accepts a tensor of another rank (2, 3, 1)"),
    Behaviour("module_rejects_missing_argument", program(lambda self, x, y: x * y),
              _r((2,), (2,)), rejects=(_r((2,)),)),
    Behaviour("module_rejects_extra_argument", program(lambda self, x: x * 2), _r((2,)),
              rejects=(_r((2,), (2,)),)),
    Behaviour("module_rejects_changed_structure", program(lambda self, xs: xs[0] + xs[1]),
              lambda: ([torch.randn(2), torch.randn(2)],),
              rejects=(lambda: ([torch.randn(2), torch.randn(2), torch.randn(2)],),
                       lambda: ({"a": torch.randn(2)},))),
    Behaviour("module_rejects_wrong_dtype", program(lambda self, x: x * 2), _r((2,)),
              rejects=(lambda: (torch.ones(2, dtype=torch.int64),),),
              torch_fails="module() accepts an int64 tensor for a float32 input"),
]


@pytest.mark.parametrize("behaviour", params(BEHAVIOURS))
def test_behaviour(behaviour):
    side_by_side(behaviour)
