"""``unbroken.save``/``unbroken.load`` take what ``torch.export.save``/``load`` take:
``extra_files`` stored with the program and given back, side by side with torch's."""
from __future__ import annotations

import inspect
import io
import zipfile

import pytest
import torch

import unbroken
from unbroken.ir.serialize import Limits


class AddOne(torch.nn.Module):
    def forward(self, x):
        return x + 1


EXTRA = {"labels.txt": "cat\ndog\n", "meta/config.json": '{"size": 3, "name": "caf\u00e9"}'}


@pytest.fixture(scope="module")
def programs():
    args = (torch.randn(3),)
    return torch.export.export(AddOne(), args), unbroken.export(AddOne(), args)


def test_the_signatures_take_torchs_arguments():
    for ours, theirs in ((unbroken.save, torch.export.save), (unbroken.load, torch.export.load)):
        wanted = {n: p.kind for n, p in inspect.signature(theirs).parameters.items()}
        have = {n: p.kind for n, p in inspect.signature(ours).parameters.items()}
        assert wanted.items() <= have.items(), (ours.__name__, wanted, have)


@pytest.mark.parametrize("where", ["path", "pathlike", "file"])
def test_extra_files_come_back_as_torchs_do(programs, tmp_path, where):
    theirs, ours = programs
    found = {}
    for name, save, load, ep in (("torch", torch.export.save, torch.export.load, theirs),
                                 ("unbroken", unbroken.save, unbroken.load, ours)):
        target = tmp_path / f"{name}.pt2"
        f = {"path": str(target), "pathlike": target, "file": io.BytesIO()}[where]
        save(ep, f, extra_files=dict(EXTRA))
        if where == "file":
            f.seek(0)
        extra = {"labels.txt": ""}  # torch: the values are replaced, every file is added
        loaded = load(f, extra_files=extra)
        found[name] = extra
        x = torch.randn(3)
        torch.testing.assert_close(loaded.module()(x), x + 1)
    assert found["unbroken"] == found["torch"] == EXTRA


def test_a_program_without_extra_files_is_unchanged(programs):
    _, ours = programs
    plain, empty = io.BytesIO(), io.BytesIO()
    unbroken.save(ours, plain)
    unbroken.save(ours, empty, extra_files={})
    assert plain.getvalue() == empty.getvalue()
    extra = {"stale": "x"}
    unbroken.load(io.BytesIO(plain.getvalue()), extra_files=extra)
    assert extra == {"stale": "x"}  # nothing in the file: nothing added (as torch)


def test_extra_files_are_checked(programs, tmp_path):
    _, ours = programs
    with pytest.raises(unbroken.ExportUsageError, match="must map file names to text"):
        unbroken.save(ours, tmp_path / "a.ubp", extra_files={"blob.bin": b"\x00\x01"})
    with pytest.raises(unbroken.ExportUsageError, match="must be an int"):
        unbroken.save(ours, tmp_path / "a.ubp", pickle_protocol="2")
    with pytest.raises(unbroken.ExportUsageError, match="operator-set"):
        unbroken.save(ours, tmp_path / "a.ubp", opset_version={"aten": "new"})
    unbroken.save(ours, tmp_path / "b.ubp", opset_version={"aten": 1}, pickle_protocol=4)
    unbroken.load(tmp_path / "b.ubp", expected_opset_version={"aten": 1})


def test_an_extra_file_within_the_limits(programs, tmp_path):
    _, ours = programs
    path = tmp_path / "big.ubp"
    unbroken.save(ours, path, extra_files={"big.txt": "x" * 5000})
    with pytest.raises(unbroken.SerializationError, match="extra_files/big.txt.*limit"):
        unbroken.load(path, extra_files={}, limits=Limits(json_bytes=4096))
    buffer = io.BytesIO(path.read_bytes())
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("extra_files/latin.txt", b"caf\xe9")
    with pytest.raises(unbroken.SerializationError, match="latin.txt.*not UTF-8"):
        unbroken.load(io.BytesIO(buffer.getvalue()), extra_files={})


def test_other_members_are_still_refused(programs):
    _, ours = programs
    buffer = io.BytesIO()
    unbroken.save(ours, buffer)
    with zipfile.ZipFile(buffer, "a") as archive:
        archive.writestr("notes.txt", "hello")
    with pytest.raises(unbroken.SerializationError, match="unexpected member"):
        unbroken.load(io.BytesIO(buffer.getvalue()))


def test_files_with_extra_files_still_load_without_asking(programs):
    _, ours = programs
    buffer = io.BytesIO()
    unbroken.save(ours, buffer, extra_files=EXTRA)
    buffer.seek(0)
    assert isinstance(unbroken.load(buffer), unbroken.ExportedProgram)
