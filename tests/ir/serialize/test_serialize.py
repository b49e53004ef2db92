"""save/load (ir.serialize): round trips against eager, the versioned format, determinism, and
clear errors for bad files. The attacks on the loader are in test_serialize_redteam.py, the
fuzz tests in test_serialize_fuzz.py."""
import io
import json
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.ir.test_saved_tensors import _backward, _ScaledByParameter
from tests.models.zoo import ZOO
from unbroken.ir.serialize import FORMAT_VERSION, Limits

# In the slice every Python x torch cell runs (`make test-slice`; ci/cells.txt).
pytestmark = pytest.mark.matrix

GOLDEN = Path(__file__).resolve().parents[2] / "golden"


def _save(ep) -> bytes:
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    return buffer.getvalue()


def _round_trip(ep):
    return unbroken.load(io.BytesIO(_save(ep)))


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer_block", "lstm"])
def test_zoo_round_trip_matches_eager(name):
    model, args = ZOO[name].make()
    ep = unbroken.export(model, args)
    loaded = _round_trip(ep)
    fresh = ZOO[name].fresh_args(5)
    torch.testing.assert_close(loaded.module()(*fresh), model(*fresh))
    assert str(loaded.graph_signature) == str(ep.graph_signature)
    assert _save(loaded) == _save(ep)  # load then save gives the same file


class _Builtins(torch.nn.Module):
    def forward(self, input, len, slice):
        return input[:, :2] * len + slice


@pytest.mark.parametrize("model, args", [
    (torch.nn.Conv2d(3, 4, 3), (torch.randn(1, 3, 8, 8),)),  # forward(self, input)
    (_Builtins(), (torch.randn(2, 3), torch.randn(2, 1), torch.randn(2, 2))),
], ids=["conv2d", "builtin_names"])
def test_arguments_named_like_builtins_round_trip(model, args):
    """fx names an argument ``input`` ``input_1``: the file's placeholder target differs from
    its name. The loader refuses that only when the generated code also reads the name as a
    global (test_serialize_redteam: ``torch``); these programs read none of these builtins."""
    loaded = _round_trip(unbroken.export(model, args))
    torch.testing.assert_close(loaded.module()(*args), model(*args))


def test_dynamic_program_keeps_its_ranges(tmp_path):
    model, args = ZOO["mlp"].make()
    ep = unbroken.export(model, args, dynamic_shapes=({0: Dim("batch", max=64)},))
    path = tmp_path / "mlp.ubp"
    unbroken.save(ep, path)
    loaded = unbroken.load(path)
    assert {str(k): (v.lower, v.upper) for k, v in loaded.range_constraints.items()} == \
        {str(k): (v.lower, v.upper) for k, v in ep.range_constraints.items()}
    x = torch.randn(40, args[0].shape[1])
    torch.testing.assert_close(loaded.module()(x), model(x))
    with pytest.raises(unbroken.InputMismatchError):
        loaded.module()(torch.randn(65, args[0].shape[1]))


class FloatSizeArithmetic(torch.nn.Module):
    def forward(self, x):
        return x * (x.shape[0] / 3) + torch.sym_float(x.shape[0]) * 0.5


def test_float_size_arithmetic_round_trips(tmp_path):
    """x.shape[0] / 3 was recorded with a SymInt value whose expression is a float
    (IntTrueDiv(s0, 3)); unbroken.load then refused the file it had written ("is not a SymInt")."""
    model, x = FloatSizeArithmetic(), torch.randn(5, 4)
    ep = unbroken.export(model, (x,), dynamic_shapes=({0: Dim("batch", min=2, max=8)},))
    floats = [n for n in ep.graph.nodes if isinstance(n.meta.get("val"), torch.SymFloat)]
    assert len(floats) == 3  # truediv, sym_float, mul
    unbroken.save(ep, tmp_path / "f.ubp")
    loaded = unbroken.load(tmp_path / "f.ubp")
    for n in (2, 7):
        sample = torch.randn(n, 4)
        torch.testing.assert_close(loaded.module()(sample), model(sample))


class DataDependent(torch.nn.Module):
    def forward(self, x):
        count = (x > 0).sum().item()
        torch._check(count >= 0)
        picked = x.nonzero()
        return picked.float().sum(0) + count, x.shape[0] // 2


def test_data_dependent_program_round_trips():
    x = torch.randn(6, 3)
    ep = unbroken.export(DataDependent(), (x,), dynamic_shapes=({0: Dim("n", max=32)},))
    loaded = _round_trip(ep)
    y = torch.randn(9, 3)
    assert str(loaded.range_constraints) == str(ep.range_constraints)
    got, want = loaded.module()(y), DataDependent()(y)
    torch.testing.assert_close(got[0], want[0])
    assert got[1] == want[1]


class Looping(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(3, 3)

    def forward(self, x):
        def body(i, t):
            return i + 1, self.lin(t).tanh()

        _, looped = torch.while_loop(lambda i, t: i < 3, body, (torch.tensor(0), x))
        return torch.cond(looped.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (looped,))


def test_cond_and_while_loop_subgraphs_round_trip():
    model, x = Looping(), torch.randn(2, 3)
    loaded = _round_trip(unbroken.export(model, (x,)))
    for seed in range(3):
        y = torch.randn(2, 3, generator=torch.Generator().manual_seed(seed))
        torch.testing.assert_close(loaded.module()(y), model(y))


def test_mutations_and_cond_survive():
    class M(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.register_buffer("steps", torch.zeros(()))

        def forward(self, x):
            self.steps.add_(1)
            return torch.cond(x.sum() > 0, lambda t: t.sin(), lambda t: t.cos(), (x,))

    loaded = _round_trip(unbroken.export(M(), (torch.randn(3),)))
    module = loaded.module()
    x = torch.randn(3)
    torch.testing.assert_close(module(x), x.sin() if x.sum() > 0 else x.cos())
    assert module.steps.item() == 1


def test_tied_and_strided_weights_keep_identity_and_layout():
    class Tied(torch.nn.Module):
        def __init__(self):
            super().__init__()
            self.a = torch.nn.Linear(4, 4)
            self.b = torch.nn.Linear(4, 4)
            self.b.weight = self.a.weight
            self.register_buffer("t", torch.randn(4, 5).t())  # column-major

        def forward(self, x):
            return self.b(self.a(x)) + self.t.sum()

    model, x = Tied(), torch.randn(2, 4)
    loaded = _round_trip(unbroken.export(model, (x,)))
    torch.testing.assert_close(loaded.module()(x), model(x))
    assert loaded.state_dict["t"].stride() == model.t.stride()


def test_files_of_format_version_1_still_load():
    loaded = unbroken.load(GOLDEN / "program_v1.ubp")
    x = torch.randn(7, 4)
    weight, bias = loaded.state_dict["lin.weight"], loaded.state_dict["lin.bias"]
    torch.testing.assert_close(loaded.module()(x), torch.relu(x @ weight.T + bias) * 2)


class GoldenV2(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.lin = torch.nn.Linear(4, 3)
        self.register_buffer("calls", torch.zeros((), dtype=torch.long))

    def forward(self, x):
        self.calls.add_(1)
        return torch.relu(self.lin(x)) * 2


def _golden_v2_program():
    torch.manual_seed(0)
    return unbroken.export(GoldenV2(), (torch.randn(5, 4),),
                           dynamic_shapes=({0: Dim("batch", max=64)},))


def test_files_of_format_version_2_still_load():
    """The golden file is written once by this test (then committed) and never rewritten."""
    path = GOLDEN / "program_v2.ubp"
    if not path.exists():
        unbroken.save(_golden_v2_program(), path)
    loaded = unbroken.load(path)
    x = torch.randn(7, 4)
    weight, bias = loaded.state_dict["lin.weight"], loaded.state_dict["lin.bias"]
    module = loaded.module()
    torch.testing.assert_close(module(x), torch.relu(x @ weight.T + bias) * 2)
    assert module.calls.item() == 1
    with zipfile.ZipFile(path) as archive:
        assert json.loads(archive.read("format.json"))["version"] == 2


def test_saves_are_byte_identical():
    first, second = _save(_golden_v2_program()), _save(_golden_v2_program())
    assert first == second
    with zipfile.ZipFile(io.BytesIO(first)) as archive:
        assert archive.namelist() == ["format.json", "program.json", "tensors.safetensors"]
        assert {info.date_time for info in archive.infolist()} == {(1980, 1, 1, 0, 0, 0)}
        assert json.loads(archive.read("format.json")) == {
            "format": "unbroken.exported_program", "version": FORMAT_VERSION}


def test_saves_are_byte_identical_across_processes():
    script = ("import io, sys, hashlib, unbroken\n"
              "from tests.ir.serialize.test_serialize import _golden_v2_program\n"
              "b = io.BytesIO(); unbroken.save(_golden_v2_program(), b)\n"
              "print(hashlib.sha256(b.getvalue()).hexdigest())\n")
    root = Path(__file__).resolve().parents[3]
    digests = {subprocess.run([sys.executable, "-c", script], cwd=root, capture_output=True,
                              text=True, check=True).stdout.strip() for _ in range(2)}
    assert len(digests) == 1


def _members(ep) -> dict:
    with zipfile.ZipFile(io.BytesIO(_save(ep))) as archive:
        return {n: archive.read(n) for n in archive.namelist()}


def _rezip(members: dict) -> io.BytesIO:
    buffer = io.BytesIO()
    with zipfile.ZipFile(buffer, "w") as archive:
        for name, data in members.items():
            archive.writestr(name, data)
    buffer.seek(0)
    return buffer


def _mlp_members():
    model, args = ZOO["mlp"].make()
    return _members(unbroken.export(model, args))


def _edit(members, change):
    document = json.loads(members["program.json"])
    change(document)
    return _rezip({**members, "program.json": json.dumps(document).encode()})


@pytest.mark.parametrize("corrupt, message", [
    (lambda m: io.BytesIO(b"not a zip"), "the archive: not a zip archive"),
    (lambda m: _rezip({k: v for k, v in m.items() if k != "program.json"}),
     "program.json: missing"),
    (lambda m: _rezip({**m, "program.json": b"{oops"}), "program.json: is not valid JSON"),
    (lambda m: _rezip({**m, "format.json": json.dumps({"format": "unbroken.exported_program",
                                                        "version": 99}).encode()}), "version '99'"),
    (lambda m: _rezip({**m, "format.json": b'{"format": "something.else", "version": 1}'}),
     "another format"),
    (lambda m: _rezip({**m, "program.json": m["program.json"].replace(
        b"op:aten::linear.default", b"op:nolib::linear.default")}), "not registered"),
    (lambda m: _rezip({**m, "program.json": b'{"graph": {}}'}), "has no field"),
    (lambda m: _edit(m, lambda d: d["graph"]["nodes"].pop(3)), "program.json"),
    (lambda m: _edit(m, lambda d: d["signature"]["inputs"].pop(0)),
     "fails the verifier: .*graph has 7 placeholders but the signature has 6"),
])
def test_bad_files_name_the_member_and_the_fault(corrupt, message):
    with pytest.raises(unbroken.SerializationError, match=message):
        unbroken.load(corrupt(_mlp_members()))


def test_limits_are_configurable():
    members = _mlp_members()
    with pytest.raises(unbroken.SerializationError, match="tensors.safetensors: declares"):
        unbroken.load(_rezip(members), limits=Limits(tensor_bytes=100))
    with pytest.raises(unbroken.SerializationError, match="more than 3 nodes"):
        unbroken.load(_rezip(members), limits=Limits(nodes=3))


def _writes_a_split_output(x):
    a, b = (x * 2).split(2)
    a.add_(1)  # eager raises here when a gradient is recorded
    return a + b.sum()


def test_autograd_refusal_marks_round_trip():
    """A program recorded without gradients keeps, through save/load, the points where eager's
    autograd raises in a call that records one (module() raises there too)."""
    x = torch.randn(4)
    loaded = _round_trip(unbroken.export(_writes_a_split_output, (x,)))
    module = loaded.module()
    assert torch.equal(module(x), _writes_a_split_output(x.clone()))
    with pytest.raises(unbroken.UnbrokenError, match="for which eager raises") as info:
        module(x.clone().requires_grad_())
    assert "a.add_(1)" in str(info.value)


def test_a_malformed_autograd_refusal_mark_is_refused():
    ep = unbroken.export(_writes_a_split_output, (torch.randn(4),))
    data = _save(ep)
    with zipfile.ZipFile(io.BytesIO(data)) as archive:
        members = {name: archive.read(name) for name in archive.namelist()}
    program = json.loads(members["program.json"])
    marked = [n for n in program["graph"]["nodes"] if "eager_refuses" in n]
    assert marked  # the write, and the reads of its sibling view after it
    marked[0]["eager_refuses"][2] = [7]  # not an argument of the node
    members["program.json"] = json.dumps(program).encode()
    out = io.BytesIO()
    with zipfile.ZipFile(out, "w") as archive:
        for name, content in members.items():
            archive.writestr(name, content)
    with pytest.raises(unbroken.SerializationError, match="argument positions"):
        unbroken.load(io.BytesIO(out.getvalue()))


@pytest.mark.parametrize("frozen", [False, True])
def test_saved_then_written_marks_round_trip(frozen):
    """The loaded program's backward raises exactly where eager's does (the parameter frozen
    or not: the mark keeps which arguments decide)."""
    model, x = _ScaledByParameter(), torch.randn(3)
    loaded = _round_trip(unbroken.export(model, (x,))).module()
    for module in (model, loaded):
        module.w.requires_grad_(not frozen)
    x.requires_grad_()
    assert _backward(loaded, x) == _backward(model, x) == (not frozen)


def test_a_malformed_saved_then_written_mark_is_refused():
    members = _members(unbroken.export(_ScaledByParameter(), (torch.randn(3),)))
    program = json.loads(members["program.json"])
    marked = [n for n in program["graph"]["nodes"] if "saved_then_written" in n]
    assert marked
    marked[0]["saved_then_written"][2] = [[5]]  # indexes no position
    members["program.json"] = json.dumps(program).encode()
    with pytest.raises(unbroken.SerializationError, match="a pattern must index"):
        unbroken.load(_rezip(members))
