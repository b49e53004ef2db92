"""save/load (ir.serialize): round trips against eager, the versioned format, and clear
errors for every kind of bad file. Loading never runs pickled code."""
import io
import json
import pickle
import zipfile
from pathlib import Path

import pytest
import torch
from torch.export import Dim

import unbroken
from tests.models.zoo import ZOO

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _round_trip(ep):
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    buffer.seek(0)
    return unbroken.load(buffer)


@pytest.mark.parametrize("name", ["mlp", "cnn", "transformer_block", "lstm"])
def test_zoo_round_trip_matches_eager(name):
    model, args = ZOO[name].make()
    loaded = _round_trip(unbroken.export(model, args))
    fresh = ZOO[name].fresh_args(5)
    torch.testing.assert_close(loaded.module()(*fresh), model(*fresh))
    assert str(loaded.graph_signature) == str(unbroken.export(model, args).graph_signature)


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


def test_files_of_format_version_1_still_load():
    loaded = unbroken.load(GOLDEN / "program_v1.ubp")
    x = torch.randn(7, 4)
    weight, bias = loaded.state_dict["lin.weight"], loaded.state_dict["lin.bias"]
    torch.testing.assert_close(loaded.module()(x), torch.relu(x @ weight.T + bias) * 2)


def _members(ep) -> dict:
    buffer = io.BytesIO()
    unbroken.save(ep, buffer)
    with zipfile.ZipFile(buffer) as archive:
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


class _Evil:
    def __reduce__(self):
        return (print, ("this must never run",))


@pytest.mark.parametrize("corrupt, message", [
    (lambda m: io.BytesIO(b"not a zip"), "not an unbroken program archive"),
    (lambda m: _rezip({k: v for k, v in m.items() if k != "program.json"}), "missing"),
    (lambda m: _rezip({**m, "program.json": b"{oops"}), "not valid JSON"),
    (lambda m: _rezip({**m, "format.json": json.dumps({"format": "unbroken.exported_program",
                                                        "version": 99}).encode()}), "version 99"),
    (lambda m: _rezip({**m, "format.json": b'{"format": "something.else", "version": 1}'}),
     "another format"),
    (lambda m: _rezip({**m, "program.json": m["program.json"].replace(
        b"op:aten::linear.default", b"op:nolib::linear.default")}), "not registered"),
    (lambda m: _rezip({**m, "tensors.pt": pickle.dumps(_Evil())}), "cannot be read safely"),
    (lambda m: _rezip({**m, "program.json": b'{"graph": {}}'}), "corrupt"),
])
def test_bad_files_give_a_clear_error(corrupt, message, capsys):
    with pytest.raises(unbroken.SerializationError, match=message):
        unbroken.load(corrupt(_mlp_members()))
    assert "this must never run" not in capsys.readouterr().out
