"""Reading and writing the user's source files without damage (unbroken.check.source_files)."""
from __future__ import annotations

import ast
import os
import stat

import pytest

from unbroken.check.source_files import (
    Edit,
    SourceFileError,
    check_writable,
    read_source,
    write_source,
)


def _replace_call(source, name: str, text: str) -> str:
    """The file's text with the first call of ``name(...)`` replaced by ``text``."""
    call = next(n for n in ast.walk(ast.parse(source.text))
                if isinstance(n, ast.Call) and getattr(n.func, "id", None) == name)
    start, end = source.node_span(call)
    return source.edited([Edit(start, end, text)])


def test_a_pep_263_encoding_is_read_and_written_back(tmp_path):
    path = tmp_path / "latin.py"
    original = "# -*- coding: latin-1 -*-\nlabel = 'caf\xe9'  # \xe9t\xe9\nspec = f(1)\n"
    path.write_bytes(original.encode("latin-1"))
    source = read_source(path)
    assert source.encoding == "iso-8859-1" and "caf\xe9" in source.text
    write_source(source, _replace_call(source, "f", "g(2)"), within=[tmp_path])
    assert path.read_bytes() == original.replace("f(1)", "g(2)").encode("latin-1")


def test_positions_after_non_ascii_text_on_the_line(tmp_path):
    path = tmp_path / "wide.py"
    path.write_text("x = ('\u00e9\u4e2d', f(1))\n", encoding="utf-8")
    source = read_source(path)
    assert _replace_call(source, "f", "g") == "x = ('\u00e9\u4e2d', g)\n"


def test_undecodable_bytes_are_refused_with_their_line(tmp_path):
    path = tmp_path / "bad.py"
    path.write_bytes(b"a = 1\nb = '\xe9'\n")
    with pytest.raises(SourceFileError, match=r"bad.py:2 is not valid utf-8.*PEP 263"):
        read_source(path)


def test_an_unencodable_edit_is_refused(tmp_path):
    path = tmp_path / "latin.py"
    path.write_bytes(b"# coding: latin-1\nspec = f(1)\n")
    source = read_source(path)
    with pytest.raises(SourceFileError, match="cannot represent"):
        write_source(source, _replace_call(source, "f", "'\u4e2d'"), within=[tmp_path])
    assert path.read_bytes() == b"# coding: latin-1\nspec = f(1)\n"


@pytest.mark.parametrize("newline", ["\r\n", "\r", "\n"])
def test_line_endings_tabs_and_comments_are_kept(tmp_path, newline):
    path = tmp_path / "ends.py"
    lines = ["if True:", "\tspec = f(  # why", "\t\t1,", "\t)  ", "x = 1 # done"]
    path.write_bytes(newline.join(lines).encode() + newline.encode())
    source = read_source(path)
    assert source.newline == newline
    call = next(n for n in ast.walk(ast.parse(source.text)) if isinstance(n, ast.Constant)
                and n.value == 1 and n.lineno == 3)
    start, end = source.node_span(call)
    write_source(source, source.edited([Edit(start, end, "(2,\n3)")]), within=[tmp_path])
    expected = ["if True:", "\tspec = f(  # why", "\t\t(2,", "3),", "\t)  ", "x = 1 # done"]
    assert path.read_bytes() == newline.join(expected).encode() + newline.encode()


def test_a_bom_is_kept(tmp_path):
    path = tmp_path / "bom.py"
    path.write_bytes(b"\xef\xbb\xbfspec = f(1)\n")
    source = read_source(path)
    assert source.encoding == "utf-8-sig" and source.text.startswith("spec")
    write_source(source, _replace_call(source, "f", "g"), within=[tmp_path])
    assert path.read_bytes() == b"\xef\xbb\xbfspec = g\n"


def test_a_file_changed_since_read_is_not_written(tmp_path):
    path = tmp_path / "race.py"
    path.write_text("spec = f(1)\n")
    source = read_source(path)
    path.write_text("spec = f(1)  # edited meanwhile\n")
    with pytest.raises(SourceFileError, match="changed since it was read"):
        write_source(source, _replace_call(source, "f", "g"), within=[tmp_path])
    assert path.read_text() == "spec = f(1)  # edited meanwhile\n"


def test_a_symlink_out_of_the_tree_is_refused(tmp_path):
    outside, tree = tmp_path / "outside", tmp_path / "tree"
    outside.mkdir()
    tree.mkdir()
    (outside / "real.py").write_text("spec = f(1)\n")
    (tree / "link.py").symlink_to(outside / "real.py")
    source = read_source(tree / "link.py")
    with pytest.raises(SourceFileError, match="a symbolic link to .*outside the checked tree"):
        check_writable(source, [tree])
    with pytest.raises(SourceFileError):
        write_source(source, "spec = g\n", within=[tree])
    assert (outside / "real.py").read_text() == "spec = f(1)\n"


def test_a_symlink_inside_the_tree_writes_its_target_and_stays_a_link(tmp_path):
    (tmp_path / "real.py").write_text("spec = f(1)\n")
    (tmp_path / "link.py").symlink_to(tmp_path / "real.py")
    os.chmod(tmp_path / "real.py", 0o640)
    source = read_source(tmp_path / "link.py")
    write_source(source, _replace_call(source, "f", "g"), within=[tmp_path])
    assert (tmp_path / "link.py").is_symlink()
    assert (tmp_path / "real.py").read_text() == "spec = g\n"
    assert stat.S_IMODE(os.stat(tmp_path / "real.py").st_mode) == 0o640
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".unbroken")] == []


def test_overlapping_edits_are_a_bug_of_the_caller(tmp_path):
    (tmp_path / "a.py").write_text("abcdef\n")
    source = read_source(tmp_path / "a.py")
    assert source.edited([Edit(4, 5, "E"), Edit(0, 1, "A"), Edit(2, 2, "+")]) == "Ab+cdEf\n"
    with pytest.raises(ValueError, match="overlapping"):
        source.edited([Edit(0, 3, "x"), Edit(2, 4, "y")])
