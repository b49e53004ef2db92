"""unbroken.fix.source: positions, line endings, indentation and edits of a user's file."""
import pytest

from unbroken.fix.source import Edit, SourceFile, apply_edits, unified_diff


def test_offsets_count_characters_not_utf8_bytes():
    src = SourceFile("m.py", "s = 'é'; t = x.sum()\n")
    call = src.tree.body[1].value
    assert src.segment(call) == "x.sum()"


def test_crlf_file_keeps_its_line_ending_and_splits_like_the_tokenizer():
    src = SourceFile("m.py", "a = 1\r\nb = '\x0c'\r\n")
    assert src.newline == "\r\n"
    assert len(src.lines) == 2  # a form feed does not split a line as str.splitlines would
    assert src.line_span(2, 2) == (7, len(src.text))


def test_indent_unit_follows_the_file():
    assert SourceFile("m.py", "def f():\n\treturn 1\n").indent_unit == "\t"
    assert SourceFile("m.py", "def f():\n  return 1\n").indent_unit == "  "


def test_edits_apply_in_place_and_may_not_overlap():
    assert apply_edits("abcdef", [Edit(4, 5, "E"), Edit(0, 1, "A")]) == "AbcdEf"
    with pytest.raises(ValueError, match="overlapping"):
        apply_edits("abcdef", [Edit(0, 3, "x"), Edit(2, 4, "y")])


def test_trailing_comment_and_statement_chain():
    src = SourceFile("m.py", "def f(x):\n    if x > 0:  # keep me\n        return x\n")
    assert src.trailing_comment(2) == "# keep me"
    chain = src.statement_at(3)
    assert [type(n).__name__ for n in chain] == ["FunctionDef", "If", "Return"]


def test_unified_diff_names_the_file():
    diff = unified_diff("pkg/m.py", "a\nb\n", "a\nc\n")
    assert diff.startswith("--- a/pkg/m.py\n+++ b/pkg/m.py\n") and "-b\n+c" in diff
