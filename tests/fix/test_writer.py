"""unbroken.fix.writer and ``unbroken fix --write``: a fix never corrupts the user's file."""
import json
import os

import pytest

from unbroken.cli import main
from unbroken.fix.writer import SourceWriteError, write_source


def test_keeps_the_declared_encoding_and_the_bom(tmp_path):
    latin = tmp_path / "latin.py"
    latin.write_bytes("# -*- coding: latin-1 -*-\ns = 'é'\n".encode("latin-1"))
    write_source(str(latin), "# -*- coding: latin-1 -*-\ns = 'è'\n",
                 "# -*- coding: latin-1 -*-\ns = 'é'\n", root=str(tmp_path))
    assert latin.read_bytes() == "# -*- coding: latin-1 -*-\ns = 'è'\n".encode("latin-1")
    bom = tmp_path / "bom.py"
    bom.write_bytes(b"\xef\xbb\xbfx = 1\r\n")
    write_source(str(bom), "x = 2\r\n", "x = 1\r\n", root=str(tmp_path))
    assert bom.read_bytes() == b"\xef\xbb\xbfx = 2\r\n"


def test_refuses_a_file_changed_since_the_check(tmp_path):
    path = tmp_path / "m.py"
    path.write_text("x = 1\n")
    with pytest.raises(SourceWriteError, match="changed since"):
        write_source(str(path), "x = 2\n", "x = 0\n", root=str(tmp_path))
    assert path.read_text() == "x = 1\n"


def test_refuses_characters_the_encoding_cannot_hold(tmp_path):
    path = tmp_path / "m.py"
    path.write_bytes(b"# coding: ascii\nx = 1\n")
    with pytest.raises(SourceWriteError, match="encoding"):
        write_source(str(path), "# coding: ascii\nx = 'é'\n", "# coding: ascii\nx = 1\n",
                     root=str(tmp_path))


def test_symlinks_outside_the_project_are_refused_inside_written_through(tmp_path):
    outside, project = tmp_path / "outside", tmp_path / "project"
    outside.mkdir()
    project.mkdir()
    (outside / "real.py").write_text("x = 1\n")
    os.symlink(outside / "real.py", project / "link.py")
    with pytest.raises(SourceWriteError, match="outside the project"):
        write_source(str(project / "link.py"), "x = 2\n", "x = 1\n", root=str(project))
    (project / "real.py").write_text("x = 1\n")
    os.symlink(project / "real.py", project / "inner.py")
    write_source(str(project / "inner.py"), "x = 2\n", "x = 1\n", root=str(project))
    assert os.path.islink(project / "inner.py")
    assert (project / "real.py").read_text() == "x = 2\n"


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


def test_write_applies_the_verified_fix_keeping_crlf_tabs_comments_decorators(
        tmp_path, monkeypatch, capsys):
    path = tmp_path / "messy.py"
    path.write_bytes(MESSY.encode())
    monkeypatch.chdir(tmp_path)
    assert main(["fix", "messy.py", "--write", "--json", "out.json"]) == 0
    data = json.loads((tmp_path / "out.json").read_text())
    assert data["cases"][0]["status"] == "verified"
    new = path.read_bytes().decode()
    assert "\n" not in new.replace("\r\n", "")  # every line still ends in CRLF
    expected = MESSY.replace(
        "\t\tif y.sum() > 0:  # the decision: é\r\n\t\t\ty = y * 2\r\n",
        "\t\ty = torch.where(y.sum() > 0, y * 2, y)  # the decision: é\r\n")
    assert new == expected
    assert "written: messy.py" in capsys.readouterr().out
