"""Writing a patched source file in place, safely (``unbroken fix --write``).

:func:`write_source` is the one function that changes a user's file. It refuses, with
:class:`SourceWriteError`, rather than write something wrong:

- the file changed since it was read (its text is not ``expected_original``);
- the path is a symbolic link that resolves outside the project root (one inside is written
  through: the link stays a link);
- the new text cannot be encoded in the file's own encoding (its PEP 263 declaration).

It keeps the file's encoding, its byte-order mark, its permission bits, and (since the text
given was made by minimal edits of the original) its line endings, tabs and comments. The
write is atomic: a temporary file in the same directory, renamed over the target.

(The project's ``unbroken suggest --write`` has its own writer; this module is kept behind
this one function so that one safe writer can serve both.)
"""
from __future__ import annotations

import io
import os
import stat
import tempfile
import tokenize

__all__ = ["SourceWriteError", "write_source"]


class SourceWriteError(Exception):
    """A patched file was not written; the message says why and what to do."""


def write_source(path: str, new_text: str, expected_original: str, *,
                 root: str | None = None) -> None:
    """Replace the text of ``path`` by ``new_text`` if it still reads ``expected_original``.

    Args:
        path: the file to write (a symlink is followed when it stays inside ``root``).
        new_text: the complete new text (decoded, line endings as they should be on disk).
        expected_original: the text the patch was made from.
        root: the project root (default: the working directory).

    Raises:
        SourceWriteError: see the module docstring.
    """
    root = os.path.realpath(root or os.getcwd())
    target = os.path.realpath(path)
    if os.path.islink(path) and os.path.commonpath([root, target]) != root:
        raise SourceWriteError(f"{path} is a symbolic link to {target}, outside the project "
                               f"{root}: not written; apply the diff by hand")
    try:
        with open(target, "rb") as f:
            data = f.read()
    except OSError as err:
        raise SourceWriteError(f"cannot read {path}: {err.strerror}") from err
    encoding, _ = tokenize.detect_encoding(io.BytesIO(data).readline)
    bom = data.startswith(b"\xef\xbb\xbf")
    codec = "utf-8" if encoding == "utf-8-sig" else encoding
    current = data.decode(codec).removeprefix("\ufeff") if bom else data.decode(codec)
    if current != expected_original:
        raise SourceWriteError(f"{path} changed since it was checked: not written; run "
                               "`unbroken fix` again")
    try:
        encoded = new_text.encode(codec)
    except UnicodeEncodeError as err:
        raise SourceWriteError(f"the patch of {path} has characters its encoding ({codec}) "
                               f"cannot hold: {err.reason}; not written") from err
    if bom:
        encoded = b"\xef\xbb\xbf" + encoded
    mode = stat.S_IMODE(os.stat(target).st_mode)
    folder = os.path.dirname(target)
    handle, temporary = tempfile.mkstemp(prefix=".unbroken-fix-", dir=folder)
    try:
        with os.fdopen(handle, "wb") as f:
            f.write(encoded)
        os.chmod(temporary, mode)
        os.replace(temporary, target)
    except OSError as err:
        if os.path.exists(temporary):
            os.unlink(temporary)
        raise SourceWriteError(f"cannot write {path}: {err.strerror}") from err
