"""``unbroken fix --write``: a fix never corrupts the user's file. The write goes through
unbroken.check.source_files.write_source (the one writer, shared with ``suggest --write``);
each case here runs the whole command on a file with the trait in question."""
import json
import os

import pytest

import unbroken.fix.command as command
from unbroken.cli import main

MESSY = (
    "# -*- coding: utf-8 -*-\r\n"
    "import torch\r\n"
    "import unbroken\r\n"
    "\r\n"
    "\r\n"
    "def keep(fn):\r\n"
    "\treturn fn\r\n"
    "\r\n"
    "\r\n"
    "class Messy(torch.nn.Module):\r\n"
    "\t@keep  # a decorator stays\r\n"
    "\tdef forward(self, x):\r\n"
    "\t\ty = torch.cat(\r\n"
    "\t\t\t[x, x],   # a multi-line call stays\r\n"
    "\t\t\tdim=0)\r\n"
    "\t\tif y.sum() > 0:  # the decision: é\r\n"
    "\t\t\ty = y * 2\r\n"
    "\t\treturn y\r\n"
    "\r\n"
    "\r\n"
    "unbroken.case(Messy(), (torch.randn(2, 3),))\r\n"
)
FIXED = MESSY.replace("\t\tif y.sum() > 0:  # the decision: é\r\n\t\t\ty = y * 2\r\n",
                      "\t\ty = torch.where(y.sum() > 0, y * 2, y)  # the decision: é\r\n")

PLAIN = ("import torch\nimport unbroken\n\n\nclass Plain(torch.nn.Module):\n"
         "    def forward(self, x):  # NOTE\n        if x.sum() > 0:\n            x = x * 2\n"
         "        return x\n\n\nunbroken.case(Plain(), (torch.randn(2, 3),))\n")
PLAIN_FIXED = PLAIN.replace("        if x.sum() > 0:\n            x = x * 2\n",
                            "        x = torch.where(x.sum() > 0, x * 2, x)\n")


def _fix_write(folder, target, monkeypatch, capsys):
    monkeypatch.chdir(folder)
    status = main(["fix", target, "--write", "--json", "out.json"])
    data = json.loads((folder / "out.json").read_text())
    return status, data, capsys.readouterr().out


def test_crlf_tabs_comments_decorators_and_multi_line_calls_are_kept(
        tmp_path, monkeypatch, capsys):
    path = tmp_path / "messy.py"
    path.write_bytes(MESSY.encode())
    status, data, out = _fix_write(tmp_path, "messy.py", monkeypatch, capsys)
    assert status == 0 and data["cases"][0]["status"] == "verified"
    assert path.read_bytes() == FIXED.encode()
    assert "written: messy.py" in out


def test_a_pep_263_encoding_and_a_bom_are_kept(tmp_path, monkeypatch, capsys):
    latin = tmp_path / "latin.py"
    text = "# -*- coding: latin-1 -*-\n# café\n" + PLAIN
    latin.write_bytes(text.encode("latin-1"))
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbf" + PLAIN.replace("\n", "\r\n").encode())
    status, _, out = _fix_write(tmp_path, ".", monkeypatch, capsys)
    assert status == 0, out
    assert latin.read_bytes() == ("# -*- coding: latin-1 -*-\n# café\n" +
                                  PLAIN_FIXED).encode("latin-1")
    assert bom.read_bytes() == b"\xef\xbb\xbf" + PLAIN_FIXED.replace("\n", "\r\n").encode()


def test_a_symlink_out_of_the_project_is_refused_one_inside_is_written_through(
        tmp_path, monkeypatch, capsys):
    outside, project = tmp_path / "outside", tmp_path / "project"
    outside.mkdir()
    project.mkdir()
    (outside / "real.py").write_text(PLAIN)
    os.symlink(outside / "real.py", project / "link.py")
    status, data, out = _fix_write(project, "link.py", monkeypatch, capsys)
    assert data["cases"][0]["status"] == "verified"
    assert status == 1 and "not written" in out and "outside" in out
    assert (outside / "real.py").read_text() == PLAIN
    os.unlink(project / "link.py")
    (project / "sub").mkdir()
    (project / "sub" / "real.py").write_text(PLAIN)
    os.symlink(project / "sub" / "real.py", project / "inner.py")
    status, _, out = _fix_write(project, "inner.py", monkeypatch, capsys)
    assert status == 0, out
    assert os.path.islink(project / "inner.py")
    assert (project / "sub" / "real.py").read_text() == PLAIN_FIXED


def test_a_file_changed_since_the_check_is_not_written(tmp_path, monkeypatch, capsys):
    path = tmp_path / "plain.py"
    path.write_text(PLAIN)
    edited = PLAIN.replace("# NOTE", "# edited meanwhile")
    real_fix_case = command.fix_case

    def fix_then_edit(case, root):
        found = real_fix_case(case, root)
        path.write_text(edited)  # the user saves the file while the fix is verified
        return found

    monkeypatch.setattr(command, "fix_case", fix_then_edit)
    status, data, out = _fix_write(tmp_path, "plain.py", monkeypatch, capsys)
    assert data["cases"][0]["status"] == "verified"
    assert status == 1 and "changed since it was read" in out
    assert path.read_text() == edited


@pytest.mark.parametrize("write", [False, True])
def test_without_write_nothing_is_written(tmp_path, monkeypatch, capsys, write):
    path = tmp_path / "plain.py"
    path.write_text(PLAIN)
    monkeypatch.chdir(tmp_path)
    assert main(["fix", "plain.py"] + (["--write"] if write else [])) == 0
    assert path.read_text() == (PLAIN_FIXED if write else PLAIN)
