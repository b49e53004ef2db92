"""Read a user's Python file and write an edited version back without damaging it.

Every command that edits the user's source (``unbroken suggest --write``, ``unbroken fix``)
goes through this module, so that one set of rules holds for all of them:

- **Encoding.** The file is decoded as Python decodes it (:func:`tokenize.detect_encoding`: a
  PEP 263 ``# -*- coding: ... -*-`` line or a UTF-8 BOM) and written back in the same
  encoding, BOM included. A file that does not decode, or an edit that the encoding cannot
  represent, is refused with the reason; nothing is written.
- **Bytes outside the edits are kept.** Line endings (LF, CRLF, CR, even mixed), tabs,
  comments and trailing whitespace are untouched: an edit replaces a span of characters, and
  a newline inside a replacement is written with the line ending of the file.
- **Symbolic links.** The file written is the link's target (the link stays a link), and only
  when that target lies inside one of the trees the command was asked to work on (``within``);
  a link that leads out of them is refused.
- **Changed since read.** The file is written only when its bytes on disk are still those
  :func:`read_source` read (a SHA-256 of them); an editor or another run that changed it in
  the meantime makes the write refuse, so that edits computed on old text never land on new.
- **Atomic.** The new text goes to a temporary file in the same directory, which then
  replaces the original (``os.replace``) with the original's permission bits.

Positions: :mod:`ast` gives ``col_offset`` in UTF-8 bytes of the line; :meth:`SourceFile.offset`
turns ``(lineno, col_offset)`` into an index into :attr:`SourceFile.text`.

Example::

    source = read_source("models/head.py")
    node = ...  # an ast node of ast.parse(source.text)
    start = source.offset(node.lineno, node.col_offset)
    end = source.offset(node.end_lineno, node.end_col_offset)
    write_source(source, source.edited([Edit(start, end, "None")]), within=[os.getcwd()])
"""
from __future__ import annotations

import hashlib
import io
import os
import re
import stat
import tempfile
import tokenize
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

__all__ = ["Edit", "SourceFile", "SourceFileError", "check_writable", "read_source",
           "write_source"]

#: What Python's tokenizer ends a line at (not the form feed or the Unicode separators that
#: ``str.splitlines`` also splits on).
_LINE_END = re.compile(r"\r\n|\r|\n")


class SourceFileError(Exception):
    """A file cannot be read as Python source, or must not be written; the message names the
    file, says why and what to do instead."""


@dataclass(frozen=True, slots=True)
class Edit:
    """Replace ``text[start:end]`` of a :class:`SourceFile` by ``text`` (character indexes;
    ``start == end`` inserts). A ``"\\n"`` in ``text`` is written as the file's line ending."""

    start: int
    end: int
    text: str


@dataclass(frozen=True, slots=True)
class SourceFile:
    """A Python source file as read from disk.

    path:     the path as given (for messages).
    real:     the file it names with every symbolic link resolved: the file written.
    text:     the decoded text, line endings exactly as in the file.
    encoding: the codec Python reads the file with (``utf-8-sig`` when it starts with a BOM).
    newline:  the file's first line ending (``"\\n"`` when it has none); inserted newlines use it.
    digest:   SHA-256 of the bytes read, to detect a change before writing.
    """

    path: str
    real: str
    text: str
    encoding: str
    newline: str
    digest: str
    _starts: tuple = field(default=(), repr=False, compare=False)

    def line(self, lineno: int) -> str:
        """Line ``lineno`` (1-based) without its line ending."""
        start = self._starts[lineno - 1]
        end = self._starts[lineno] if lineno < len(self._starts) else len(self.text)
        return _LINE_END.sub("", self.text[start:end], count=1)

    def offset(self, lineno: int, col_offset: int) -> int:
        """The index into :attr:`text` of an :mod:`ast` position (``col_offset`` counts UTF-8
        bytes of the line, whatever the file's encoding)."""
        line = self.line(lineno)
        column = len(line.encode("utf-8")[:col_offset].decode("utf-8", errors="strict"))
        return self._starts[lineno - 1] + column

    def node_span(self, node) -> tuple[int, int]:
        """``(start, end)`` indexes of an :mod:`ast` node's source text."""
        return (self.offset(node.lineno, node.col_offset),
                self.offset(node.end_lineno, node.end_col_offset))

    def edited(self, edits: Iterable[Edit]) -> str:
        """:attr:`text` with ``edits`` applied; they must not overlap (two inserts at one
        index are applied in the order given)."""
        ordered = sorted(enumerate(edits), key=lambda p: (p[1].start, p[1].end, p[0]))
        parts, position = [], 0
        for _, edit in ordered:
            if edit.start < position or edit.end < edit.start:
                raise ValueError(f"overlapping or inverted edits at index {edit.start}")
            parts += [self.text[position:edit.start], self.with_newlines(edit.text)]
            position = edit.end
        parts.append(self.text[position:])
        return "".join(parts)

    def with_newlines(self, text: str) -> str:
        """``text`` with every line ending written as the file's (:attr:`newline`)."""
        return _LINE_END.sub(lambda _: self.newline, text)


def read_source(path: str | os.PathLike) -> SourceFile:
    """Read ``path`` as Python reads it. Raises :class:`SourceFileError` when it cannot be
    read or decoded (the message gives the line of the first undecodable byte)."""
    path = os.fspath(path)
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as err:
        raise SourceFileError(f"cannot read {path}: {err.strerror}") from err
    try:
        encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    except SyntaxError as err:  # an unknown codec named, or a BOM that contradicts the cookie
        raise SourceFileError(f"{path}: {err.msg}; fix the coding declaration (PEP 263)") \
            from err
    try:
        text = data.decode(encoding)
    except UnicodeDecodeError as err:
        lineno = data[:err.start].count(b"\n") + 1
        raise SourceFileError(
            f"{path}:{lineno} is not valid {encoding} (byte {data[err.start]:#04x}); declare "
            "the file's encoding on its first or second line (PEP 263), e.g. "
            "`# -*- coding: latin-1 -*-`, or save it as UTF-8") from err
    first = _LINE_END.search(text)
    starts = (0, *(m.end() for m in _LINE_END.finditer(text)))
    return SourceFile(path, os.path.realpath(path), text, encoding,
                      first.group() if first else "\n", hashlib.sha256(data).hexdigest(),
                      starts)


def check_writable(source: SourceFile, within: Sequence[str | os.PathLike]) -> None:
    """Raise :class:`SourceFileError` unless :func:`write_source` may write ``source``: the
    file (its symbolic links resolved) lies inside one of the directories ``within`` (also
    resolved), it is a regular file, and its bytes are still those read."""
    roots = [os.path.realpath(os.fspath(r)) for r in within]
    if not any(_inside(source.real, r) for r in roots):
        via = f" (a symbolic link to {source.real})" if source.real != os.path.abspath(
            source.path) else ""
        raise SourceFileError(
            f"{source.path}{via} lies outside {_names(roots)}; not rewritten. Run the command "
            "from the directory that holds the file, or apply the change by hand")
    try:
        info = os.stat(source.real)
        with open(source.real, "rb") as f:
            now = hashlib.sha256(f.read()).hexdigest()
    except OSError as err:
        raise SourceFileError(f"cannot read {source.path} again: {err.strerror}") from err
    if not stat.S_ISREG(info.st_mode):
        raise SourceFileError(f"{source.path} is not a regular file; not rewritten")
    if now != source.digest:
        raise SourceFileError(
            f"{source.path} changed since it was read (edited meanwhile?); not rewritten, "
            "run the command again")


def write_source(source: SourceFile, text: str, *, within: Sequence[str | os.PathLike]) -> None:
    """Write ``text`` (a new version of ``source.text``) to the file, in its encoding, after
    :func:`check_writable`. Nothing is written when any check fails."""
    check_writable(source, within)
    try:
        data = text.encode(source.encoding)
    except UnicodeEncodeError as err:
        raise SourceFileError(
            f"{source.path} is declared {source.encoding}, which cannot represent "
            f"{text[err.start:err.end]!r} of the new text; not rewritten") from err
    directory = os.path.dirname(source.real)
    mode = stat.S_IMODE(os.stat(source.real).st_mode)
    handle, temporary = tempfile.mkstemp(prefix=".unbroken-", suffix=".py.tmp", dir=directory)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(data)
        os.chmod(temporary, mode)
        os.replace(temporary, source.real)
    except BaseException:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise


def _inside(path: str, root: str) -> bool:
    return os.path.commonpath([path, root]) == root


def _names(roots: list[str]) -> str:
    if len(roots) == 1:
        return f"the checked tree {roots[0]}"
    return "the checked trees " + ", ".join(roots)
