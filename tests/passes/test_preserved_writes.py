"""``passes.preserved_writes`` (issue 21): a submodule named in
``preserve_module_call_signature`` that writes its inputs or buffers in place is kept; the
program's ``module()``, ``torch.export.unflatten`` and the unflattened module with the eager
submodule swapped in all agree with eager (outputs, the inputs and buffers written), side by
side with torch.export.export(strict=True). Kept through ``unbroken.save``/``load``;
``run_decompositions`` keeps it or refuses (UnsupportedError)."""
import copy
import io
import json
import zipfile

import pytest
import torch
import torch.nn as nn
from torch.export import Dim
from torch.utils import _pytree as pytree

import unbroken


class AddsToInput(nn.Module):
    def forward(self, x):
        a = x.add_(3)
        return a - 2


class WritesTwice(nn.Module):
    def forward(self, x):
        x.mul_(2).add_(3)
        return x - 1


class WritesARow(nn.Module):
    def forward(self, x):
        x[0].add_(5)
        return x.sum(0)


class CountsAndScales(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(3))

    def forward(self, x):
        self.count.add_(x.sum(0))
        x.mul_(2)
        return x + self.count


class Steps(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("step", torch.tensor(10.0))

    def forward(self, x):
        self.step.add_(1).mul_(2)
        return x + 2


class ReturnsItsInput(nn.Module):
    def forward(self, x):
        return x.mul_(2).add_(1)


class Parent(nn.Module):
    def __init__(self, child, forward):
        super().__init__()
        self.child = child
        self._forward = forward

    def forward(self, x):
        return self._forward(self, x)


def _then_reads(self, x):
    return self.child(x) + x * 4


def _then_writes(self, x):
    y = self.child(x)
    x.mul_(10)
    return y + x * 4


def _twice(self, x):
    y = self.child(x)
    z = self.child(x)
    return y + z + x


def _twice_with_buffer(self, x):
    y = self.child(x)
    z = self.child(x)
    return y + z + x + self.child.count


def _thrice_reading_buffer(self, x):
    for _ in range(3):
        x = self.child(x) + self.child.step
    return x


def _returns_the_input(self, x):
    return self.child(x), x


def _writes_first(self, x):
    x.add_(1)
    return self.child(x) * x


CASES = {
    "input": (AddsToInput, _then_reads),
    "input_then_caller_writes": (AddsToInput, _then_writes),
    "chain_then_caller_writes": (WritesTwice, _then_writes),
    "row": (WritesARow, _then_reads),
    "row_then_caller_writes": (WritesARow, _then_writes),
    "input_by_two_calls": (AddsToInput, _twice),
    "buffer_and_input_by_two_calls": (CountsAndScales, _twice_with_buffer),
    "scalar_buffer_chain_thrice": (Steps, _thrice_reading_buffer),
    "caller_writes_first": (AddsToInput, _writes_first),
    "child_returns_its_written_input": (ReturnsItsInput, _then_writes),
    "caller_returns_the_written_input": (WritesTwice, _returns_the_input),
}


def _model(case):
    child, forward = CASES[case]
    torch.manual_seed(0)
    return Parent(child(), forward)


def _inputs(batch=2):
    torch.manual_seed(1)
    return (torch.randn(batch, 3),)


def _export(case, exporter=unbroken.export, **options):
    return exporter(_model(case), _inputs(), preserve_module_call_signature=("child",),
                    **options)


def _agree(eager, module, inputs, calls=2):
    """Outputs, inputs after the call and buffers, over ``calls`` calls, bit for bit."""
    for _ in range(calls):
        expected_inputs, got_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
        expected, got = eager(*expected_inputs), module(*got_inputs)
        assert all(torch.equal(e, g) for e, g in zip(pytree.tree_leaves(expected),
                                                     pytree.tree_leaves(got), strict=True))
        assert all(torch.equal(e, g) for e, g in zip(expected_inputs, got_inputs))
        for name, buffer in eager.named_buffers():
            assert torch.equal(buffer, _attribute(module, name)), name


def _attribute(module, dotted):
    for atom in dotted.split("."):
        module = getattr(module, atom)
    return module


def _unflatten_agrees(ep, case, inputs):
    """unflatten(ep) agrees with eager, then again with eager's submodule swapped in."""
    eager = _model(case)
    eager.load_state_dict(ep.state_dict, strict=False)  # module() ran: the state it wrote
    flat = torch.export.unflatten(ep)
    _agree(eager, flat, inputs)
    child = copy.deepcopy(eager.child)
    flat.set_submodule("child", child)
    _agree(eager, flat, inputs)


@pytest.mark.matrix  # torch's unflatten differs across releases
@pytest.mark.parametrize("case", CASES)
def test_module_and_unflatten_agree_with_eager(case):
    ep = _export(case)
    inputs = _inputs()
    _agree(_model(case), ep.module(), inputs)
    _unflatten_agrees(ep, case, inputs)


@pytest.mark.matrix
@pytest.mark.parametrize("case", CASES)
def test_side_by_side_with_torch_strict(case):
    """Where torch.export (strict) exports, its unflattened module gives eager's answer and so
    does ours; the call signatures have the same structure."""
    theirs = _export(case, torch.export.export, strict=True)
    ours = _export(case)
    inputs = _inputs()
    torch_flat, our_flat = torch.export.unflatten(theirs), torch.export.unflatten(ours)
    expected_inputs, got_inputs = copy.deepcopy(inputs), copy.deepcopy(inputs)
    expected, got = torch_flat(*expected_inputs), our_flat(*got_inputs)
    assert all(torch.equal(e, g) for e, g in zip(pytree.tree_leaves(expected),
                                                 pytree.tree_leaves(got), strict=True))
    assert torch.equal(expected_inputs[0], got_inputs[0])
    preserved = [[(e.fqn, e.signature.in_spec, e.signature.out_spec, len(e.signature.inputs))
                  for e in ep.module_call_graph if e.fqn and e.signature is not None]
                 for ep in (theirs, ours)]
    assert preserved[0] == preserved[1]


def test_dynamic_batch():
    ep = _export("buffer_and_input_by_two_calls", dynamic_shapes=({0: Dim("batch")},))
    _agree(_model("buffer_and_input_by_two_calls"), ep.module(), _inputs(5))
    _unflatten_agrees(ep, "buffer_and_input_by_two_calls", _inputs(4))


def _saved(ep) -> io.BytesIO:
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    return buffer


@pytest.mark.parametrize("case", CASES)
def test_kept_by_save_and_load_then_decompositions(case):
    loaded = unbroken.load(_saved(_export(case)))
    _unflatten_agrees(loaded, case, _inputs())
    decomposed = unbroken.load(_saved(_export(case))).run_decompositions()
    _agree(_model(case), decomposed.module(), _inputs())
    _unflatten_agrees(decomposed, case, _inputs())


@pytest.mark.parametrize("mark", ["yes", True])
def test_crafted_write_mark_is_refused(mark):
    """The saved write mark is a boolean on a node that writes a tensor argument."""
    buffer = _saved(_export("input"))
    with zipfile.ZipFile(buffer) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    document = json.loads(members["program.json"])
    placeholder = next(n for n in document["graph"]["nodes"] if n["op"] == "placeholder")
    placeholder["writes_first"] = mark
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in {**members, "program.json": json.dumps(document).encode()}.items():
            archive.writestr(name, data)
    out.seek(0)
    with pytest.raises(unbroken.SerializationError, match="writes_first"):
        unbroken.load(out)


@pytest.mark.parametrize("case", CASES)
def test_kept_by_run_decompositions(case):
    decomposed = _export(case).run_decompositions()
    _agree(_model(case), decomposed.module(), _inputs())
    _unflatten_agrees(decomposed, case, _inputs())


def test_run_decompositions_refuses_a_write_it_cannot_keep():
    """A write whose decomposition no longer ends in a node of the written tensor is refused
    (UB117) rather than unflattened into a copy to the wrong tensor."""
    aten = torch.ops.aten

    def add(a, b, alpha=1):  # a + b as (-(-a)) - (-b): exact, but it ends in no node of a
        return aten.sub.Tensor(aten.neg.default(aten.neg.default(a)), -b)

    table = {aten.add.Tensor: add}
    with pytest.raises(unbroken.UnsupportedError, match="preserved call signature") as info:
        _export("input_then_caller_writes").run_decompositions(table)
    assert info.value.code == "UB117"


def test_call_key_is_the_frontends():
    from unbroken.frontend.trace_site import stack_key
    from unbroken.passes.preserved_writes import call_key
    assert call_key("child") == stack_key("child")
    assert call_key("block.0.attn@2") == stack_key("block.0.attn", "@2")


def test_the_writes_are_the_unflattened_submodules():
    """The unflattened child writes the caller's tensor itself (what a swap relies on)."""
    flat = torch.export.unflatten(_export("input"))
    x = torch.ones(2, 3)
    out = flat.child(x)
    assert torch.equal(x, torch.full((2, 3), 4.0)) and torch.equal(out, torch.full((2, 3), 2.0))


class WritesUnderNoGrad(nn.Module):
    def forward(self, h):
        with torch.no_grad():
            h.mul_(2)
        return h * 3


def _writes_an_intermediate(self, x):
    h = x * 1
    return self.child(h) + h * 5


@pytest.mark.parametrize("child", [WritesTwice, WritesARow])
def test_gradients_through_a_written_intermediate(child):
    """The call writes a tensor the caller computed from an input that requires grad: the
    gradients of the unflattened module (and with eager's child swapped in) are eager's."""
    torch.manual_seed(0)
    model = Parent(child(), _writes_an_intermediate)
    x = torch.randn(2, 3)
    ep = unbroken.export(model, (x.clone().requires_grad_(),),
                         preserve_module_call_signature=("child",))
    swapped = torch.export.unflatten(ep)
    swapped.set_submodule("child", child())
    results = []
    for module in (model, ep.module(), torch.export.unflatten(ep), swapped):
        leaf = x.clone().requires_grad_()
        out = module(leaf)
        out.sum().backward()
        results.append((out.detach(), leaf.grad))
    for out, grad in results[1:]:
        assert torch.equal(out, results[0][0]) and torch.equal(grad, results[0][1])


def test_a_write_under_no_grad_leaving_the_call_is_refused():
    """torch makes the no_grad region one higher-order op: its result is not a write that
    unflatten could copy back, so the call is refused rather than rebuilt wrongly."""
    model = Parent(WritesUnderNoGrad(), _writes_an_intermediate)
    with pytest.raises(unbroken.UnsupportedError, match="grad-mode region") as info:
        unbroken.export(model, (torch.randn(2, 3, requires_grad=True),),
                        preserve_module_call_signature=("child",))
    assert "child" in str(info.value)


@pytest.mark.parametrize("case", ["chain_then_caller_writes", "buffer_and_input_by_two_calls",
                                  "caller_writes_first"])
def test_kept_by_torch_save_and_load(case, tmp_path):
    path = tmp_path / "program.pt2"
    torch.export.save(_export(case), path)
    _unflatten_agrees(torch.export.load(path), case, _inputs())
