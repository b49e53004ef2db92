"""A user's source file as text and syntax tree, and minimal text edits of it.

Every rewrite of :mod:`unbroken.fix.rewrites` is a set of :class:`Edit` values: character
ranges of the file's text and their replacement. Only those ranges change: comments,
decorators, blank lines and the formatting around them stay byte for byte. New lines use the
file's own line ending (``\\r\\n`` when the file has one) and its own indentation unit (a tab
when the file indents with tabs).

Positions: ``ast`` gives 1-based lines and UTF-8 byte columns; :meth:`SourceFile.offset`
turns them into offsets of the decoded text (a character index), which is what edits use.
"""
from __future__ import annotations

import ast
import difflib
import io
import re
import tokenize
from dataclasses import dataclass
from functools import cached_property

_LINE = re.compile(r"[^\r\n]*(?:\r\n|\r|\n)|[^\r\n]+$")

__all__ = ["Edit", "SourceFile", "apply_edits", "unified_diff"]


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``text[start:end]`` (character offsets of the decoded file) by ``new``."""

    start: int
    end: int
    new: str


class SourceFile:
    """One file: its decoded text, encoding, line ending and syntax tree.

    path:     the file's path (as the break record names it).
    text:     the decoded text, line endings as in the file.
    encoding: the PEP 263 encoding declared by the file (utf-8 when none).
    """

    def __init__(self, path: str, text: str, encoding: str = "utf-8", disk=None):
        self.path, self.text, self.encoding = path, text, encoding
        self.disk = disk

    @classmethod
    def read(cls, path: str) -> SourceFile:
        """Read ``path`` as Python reads it (:func:`unbroken.check.source_files.read_source`:
        its PEP 263 encoding, its line endings, a BOM dropped from the text). ``disk`` keeps
        that record (its bytes' digest): ``--write`` writes through it, refusing a file that
        changed since."""
        from ..check.source_files import read_source

        disk = read_source(path)
        encoding = "utf-8" if disk.encoding == "utf-8-sig" else disk.encoding
        return cls(path, disk.text, encoding, disk)

    @cached_property
    def tree(self) -> ast.Module:
        return ast.parse(self.text)

    @cached_property
    def lines(self) -> list[str]:
        """The lines with their endings, split where Python's tokenizer splits them (``\\n``,
        ``\\r\\n``, ``\\r``; not ``str.splitlines``'s form feeds and Unicode separators)."""
        return _LINE.findall(self.text)

    @cached_property
    def _starts(self) -> list[int]:
        starts = [0]
        for line in self.lines:
            starts.append(starts[-1] + len(line))
        return starts

    @property
    def newline(self) -> str:
        """The file's line ending: ``\\r\\n`` when its first line ends so, else ``\\n``."""
        first = self.lines[0] if self.lines else "\n"
        return "\r\n" if first.endswith("\r\n") else "\n"

    @property
    def indent_unit(self) -> str:
        """One level of indentation as the file writes it (a tab, or N spaces)."""
        for node in ast.walk(self.tree):
            body = getattr(node, "body", None)
            if isinstance(node, (ast.FunctionDef, ast.ClassDef, ast.If, ast.For, ast.While)) \
                    and body:
                outer, inner = self.indentation(node.lineno), self.indentation(body[0].lineno)
                if inner.startswith(outer) and len(inner) > len(outer):
                    return inner[len(outer):]
        return "    "

    def indentation(self, lineno: int) -> str:
        """The leading whitespace of line ``lineno``."""
        line = self.lines[lineno - 1]
        return line[:len(line) - len(line.lstrip(" \t"))]

    def offset(self, lineno: int, col: int) -> int:
        """The text offset of ``ast`` position (``lineno``, UTF-8 byte column ``col``)."""
        line = self.lines[lineno - 1]
        return self._starts[lineno - 1] + len(line.encode("utf-8")[:col].decode("utf-8"))

    def span(self, node: ast.AST) -> tuple[int, int]:
        """(start, end) text offsets of ``node``."""
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def segment(self, node: ast.AST) -> str:
        start, end = self.span(node)
        return self.text[start:end]

    def line_span(self, first: int, last: int) -> tuple[int, int]:
        """Offsets from the start of line ``first`` to the end of line ``last`` (its ending
        included)."""
        return self._starts[first - 1], self._starts[last]

    def statement_at(self, lineno: int) -> list[ast.AST]:
        """The statements enclosing line ``lineno``, outermost first."""
        chain: list[ast.AST] = []
        node: ast.AST = self.tree
        while True:
            inner = [c for c in ast.iter_child_nodes(node) if isinstance(c, ast.stmt)
                     and c.lineno <= lineno <= c.end_lineno]
            if not inner:
                return chain
            node = inner[0]
            chain.append(node)

    def trailing_comment(self, lineno: int) -> str:
        """The ``# comment`` at the end of line ``lineno`` ('' when none)."""
        tokens = tokenize.generate_tokens(io.StringIO(self.lines[lineno - 1]).readline)
        try:
            return next((t.string for t in tokens if t.type == tokenize.COMMENT), "")
        except (tokenize.TokenError, IndentationError, SyntaxError):
            return ""

    def edited(self, edits) -> SourceFile:
        """A new :class:`SourceFile` with ``edits`` applied."""
        return SourceFile(self.path, apply_edits(self.text, edits), self.encoding)

    def encode(self, text: str | None = None) -> bytes:
        return (self.text if text is None else text).encode(self.encoding)


def apply_edits(text: str, edits) -> str:
    """``text`` with every edit applied; edits may not overlap."""
    ordered = sorted(edits, key=lambda e: (e.start, e.end))
    for before, after in zip(ordered, ordered[1:]):
        if after.start < before.end:
            raise ValueError(f"overlapping edits at offsets {before.start} and {after.start}")
    out, at = [], 0
    for edit in ordered:
        out += [text[at:edit.start], edit.new]
        at = edit.end
    out.append(text[at:])
    return "".join(out)


def unified_diff(path: str, old: str, new: str, context: int = 3) -> str:
    """The unified diff of ``path`` from ``old`` to ``new`` text (``a/`` and ``b/`` labels,
    line endings shown as ``\\n``)."""
    label = path.lstrip("/")
    lines = difflib.unified_diff(old.splitlines(), new.splitlines(), f"a/{label}", f"b/{label}",
                                 n=context, lineterm="")
    return "\n".join(lines) + "\n"
