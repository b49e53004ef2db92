"""``preserve_module_call_signature`` (issue 9): the program's ``module_call_graph`` holds the
call signature of each named submodule, as torch.export records it, so
``torch.export.unflatten`` gives the submodule back with its original call signature, and it
can be swapped for the eager one. Kept through ``unbroken.save``/``load``,
``torch.export.save``/``load`` and ``run_decompositions``; refused (UnsupportedError) where
the call is not one boundary. A call that writes its inputs or buffers in place is kept: the
unflattened submodule makes the same writes (tests/passes/test_preserved_writes.py)."""
import io
import json
import zipfile

import pytest
import torch
import torch.nn as nn
from torch.export import Dim

import unbroken


class Sub(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x, y, scale=2.0):
        return {"a": self.lin(x) * scale, "b": y + 1}


class Model(nn.Module):
    def __init__(self, kwargs_call: bool = False):
        super().__init__()
        self.sub = Sub()
        self.other = nn.Linear(4, 4)
        self.kwargs_call = kwargs_call

    def forward(self, x, y):
        d = self.sub(x, y=y, scale=3.0) if self.kwargs_call else self.sub(x, y)
        return self.other(d["a"]) + d["b"]


def _inputs(batch=2):
    return torch.randn(batch, 4), torch.randn(batch, 4)


def _signature(ep, fqn="sub"):
    return next(e.signature for e in ep.module_call_graph if e.fqn == fqn)


def _swapped_matches_eager(ep, model, inputs):
    flat = torch.export.unflatten(ep)
    torch.testing.assert_close(flat(*inputs), model(*inputs))
    flat.sub = model.sub  # the eager submodule, called with the same signature
    torch.testing.assert_close(flat(*inputs), model(*inputs))


@pytest.mark.parametrize("kwargs_call", [False, True])
def test_signature_is_torchs(kwargs_call):
    model, inputs = Model(kwargs_call), _inputs()
    ours = _signature(unbroken.export(model, inputs, preserve_module_call_signature=("sub",)))
    theirs = _signature(torch.export.export(model, inputs,
                                            preserve_module_call_signature=("sub",)))
    assert ours.in_spec == theirs.in_spec and ours.out_spec == theirs.out_spec
    assert [type(a) for a in ours.inputs] == [type(a) for a in theirs.inputs]
    assert [type(a) for a in ours.outputs] == [type(a) for a in theirs.outputs]
    assert [getattr(a, "value", None) for a in ours.inputs] == \
        [getattr(a, "value", None) for a in theirs.inputs]


def test_submodules_not_named_have_no_signature():
    ep = unbroken.export(Model(), _inputs(), preserve_module_call_signature=("sub",))
    assert _signature(ep, "other") is None and _signature(ep, "sub.lin") is None
    assert _signature(unbroken.export(Model(), _inputs()), "sub") is None


@pytest.mark.parametrize("kwargs_call", [False, True])
def test_unflatten_then_swap_matches_eager(kwargs_call):
    model, inputs = Model(kwargs_call), _inputs()
    ep = unbroken.export(model, inputs, preserve_module_call_signature=("sub",))
    _swapped_matches_eager(ep, model, inputs)


def test_nested_and_leaf_submodules():
    model, inputs = Model(), _inputs()
    ep = unbroken.export(model, inputs, preserve_module_call_signature=("other", "sub", "sub.lin"))
    assert all(_signature(ep, fqn) is not None for fqn in ("other", "sub", "sub.lin"))
    flat = torch.export.unflatten(ep)
    flat.other, flat.sub.lin = model.other, model.sub.lin
    torch.testing.assert_close(flat(*inputs), model(*inputs))


def test_dynamic_batch():
    model, inputs = Model(), _inputs()
    batch = Dim("batch")
    ep = unbroken.export(model, inputs, dynamic_shapes=({0: batch}, {0: batch}),
                         preserve_module_call_signature=("sub",))
    _swapped_matches_eager(ep, model, _inputs(5))


def test_kept_by_unbroken_and_torch_files_and_decompositions(tmp_path):
    model, inputs = Model(), _inputs()
    ep = unbroken.export(model, inputs, preserve_module_call_signature=("sub",))
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    path = tmp_path / "model.pt2"
    torch.export.save(ep, path)
    for program in (unbroken.load(buffer), torch.export.load(path), ep.run_decompositions()):
        assert _signature(program).in_spec == _signature(ep).in_spec
        _swapped_matches_eager(program, model, inputs)


class NoGradSub(nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = nn.Linear(4, 4)

    def forward(self, x):
        with torch.no_grad():
            target = self.lin(x) * 2
        return self.lin(x) - target


class WithNoGrad(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = NoGradSub()

    def forward(self, x):
        return self.sub(x) + 1


def test_grad_region_inside_the_submodule():
    model, x = WithNoGrad(), torch.randn(2, 4)
    ep = unbroken.export(model, (x,), preserve_module_call_signature=("sub",))
    names = {n.name for n in ep.graph.nodes}
    assert {a.name for a in _signature(ep).outputs} <= names
    flat = torch.export.unflatten(ep)
    torch.testing.assert_close(flat(x), model(x))


class HiddenWriteSub(nn.Module):
    def forward(self, x):
        h = x * 2
        with torch.no_grad():
            h.add_(1)  # autograd does not see it: h * 3 still differentiates x * 2
        return h * 3


class WithHiddenWrite(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = HiddenWriteSub()

    def forward(self, x):
        return self.sub(x) + 1


def test_a_write_autograd_does_not_see_inside_the_submodule():
    """The reads that keep the gradient of a value written under no_grad belong to the call
    that reads it (they were outside every module call: the call was refused)."""
    model = WithHiddenWrite()
    x = torch.randn(3, requires_grad=True)
    ep = unbroken.export(model, (x,), preserve_module_call_signature=("sub",))
    ours, eager = x.detach().clone().requires_grad_(), x.detach().clone().requires_grad_()
    got, want = torch.export.unflatten(ep)(ours), model(eager)
    got.sum().backward()
    want.sum().backward()
    assert torch.equal(got, want) and torch.equal(ours.grad, eager.grad)


# -- refusals ----------------------------------------------------------------------------------
class Twice(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = nn.Linear(4, 4)

    def forward(self, x):
        return self.sub(self.sub(x))


class WritesAView(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = InPlace()

    def forward(self, x):
        return self.sub(x[0]) + x  # the write reaches x through the view sub is given


class InPlace(nn.Module):
    def forward(self, x):
        x.mul_(2)
        return x + 1


class Stash(nn.Module):
    def forward(self, x):
        self.last = x * 3
        return x + 1


class LeavesAValue(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Stash()

    def forward(self, x):
        return self.sub(x) + self.sub.last


class Counts(nn.Module):
    def __init__(self):
        super().__init__()
        self.register_buffer("count", torch.zeros(4))

    def forward(self, x):
        self.count.add_(1)
        return x + self.count


class WritesTheBufferFirst(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Counts()

    def forward(self, x):
        self.sub.count.mul_(2)  # unflatten would not carry this write into the call
        return self.sub(x)


class PassesSize(nn.Module):
    def __init__(self):
        super().__init__()
        self.sub = Reshape()

    def forward(self, x):
        return self.sub(x, x.shape[0])


class Reshape(nn.Module):
    def forward(self, x, n):
        return x.reshape(n, -1)


def test_each_call_of_a_submodule_called_twice_is_kept_as_torch_names_it():
    model, x = Twice(), torch.randn(2, 4)
    ep = unbroken.export(model, (x,), preserve_module_call_signature=("sub",))
    theirs = torch.export.export(model, (x,), preserve_module_call_signature=("sub",))
    assert [e.fqn for e in ep.module_call_graph if e.signature is not None] == \
        [e.fqn for e in theirs.module_call_graph if e.signature is not None] == \
        ["", "sub", "sub@1"]
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    for program in (ep, unbroken.load(buffer), ep.run_decompositions()):
        flat = torch.export.unflatten(program)
        torch.testing.assert_close(flat(x), model(x))
        flat.sub = model.sub
        torch.testing.assert_close(flat(x), model(x))


@pytest.mark.parametrize("model, inputs, dynamic, match", [
    (WritesAView(), (torch.randn(2, 4),), None, "not the new value of a tensor the call takes"),
    (LeavesAValue(), (torch.randn(2, 4),), None, "not the new value of a tensor the call takes"),
    (WritesTheBufferFirst(), (torch.randn(2, 4),), None, "computed outside the call"),
    (PassesSize(), (torch.randn(3, 4),), ({0: Dim("n")},), "neither a tensor nor a constant"),
])
def test_what_cannot_be_kept_is_refused(model, inputs, dynamic, match):
    with pytest.raises(unbroken.UnsupportedError, match=match) as info:
        unbroken.export(model, inputs, dynamic_shapes=dynamic,
                        preserve_module_call_signature=("sub",))
    assert "preserve_module_call_signature" in str(info.value)


def test_static_size_argument_is_a_constant():
    model, x = PassesSize(), torch.randn(3, 4)
    ep = unbroken.export(model, (x,), preserve_module_call_signature=("sub",))
    assert [getattr(a, "value", None) for a in _signature(ep).inputs] == [None, 3]
    torch.testing.assert_close(torch.export.unflatten(ep)(x), model(x))


@pytest.mark.parametrize("paths", [("nope",), "sub", ("",)])
def test_paths_must_name_submodules(paths):
    with pytest.raises(unbroken.ExportUsageError, match="preserve_module_call_signature"):
        unbroken.export(Model(), _inputs(), preserve_module_call_signature=paths)


def _crafted(change) -> io.BytesIO:
    ep = unbroken.export(Model(), _inputs(), preserve_module_call_signature=("sub",))
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    with zipfile.ZipFile(io.BytesIO(buffer.getvalue())) as archive:
        members = {n: archive.read(n) for n in archive.namelist()}
    document = json.loads(members["program.json"])
    change(document["module_calls"][0])
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, data in {**members, "program.json": json.dumps(document).encode()}.items():
            archive.writestr(name, data)
    out.seek(0)
    return out


@pytest.mark.parametrize("change", [
    lambda call: call["inputs"][0]["arg"].update(name="nowhere"),
    lambda call: call["outputs"].pop(),
    lambda call: call.update(fqn="sub..x"),
    lambda call: call.update(fqn="sub@0"),
    lambda call: call.update(fqn="sub@x.y"),
    lambda call: call.update(in_spec="not a spec"),
    lambda call: call["inputs"][0]["arg"].update(kind="symint"),
])
def test_crafted_module_call_is_refused(change):
    with pytest.raises(unbroken.SerializationError, match="module_calls"):
        unbroken.load(_crafted(change))


@pytest.mark.slow
@pytest.mark.parametrize("path", ["encoder.layer.0", "embeddings"])
def test_hugging_face_bert_layer_swaps(path):
    transformers = pytest.importorskip("transformers")
    config = transformers.BertConfig(num_hidden_layers=2, hidden_size=32, num_attention_heads=2,
                                     intermediate_size=64, vocab_size=100)
    model, ids = transformers.BertModel(config).eval(), torch.randint(0, 100, (2, 7))
    ep = unbroken.export(model, (ids,), preserve_module_call_signature=(path,))
    flat = torch.export.unflatten(ep)
    owner, _, name = path.rpartition(".")
    setattr(flat.get_submodule(owner) if owner else flat, name, model.get_submodule(path))
    torch.testing.assert_close(flat(ids)["last_hidden_state"], model(ids).last_hidden_state)
