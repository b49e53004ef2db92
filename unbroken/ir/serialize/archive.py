"""The zip container of saved programs: reading it within limits, writing it byte for byte
the same every time.

Reading (:func:`read_members`) trusts nothing in the archive. Before ``zipfile`` parses the
central directory, its declared size and entry count are checked against the file (``zipfile``
would otherwise allocate what the end record claims). Then the member list must be exactly the
members of the file's version, each once, no symlinks, no encryption, stored or deflated only;
each member's declared size is checked against its limit, and inflation streams in chunks that
stop at the limit, so a small archive that inflates to gigabytes is refused after reading at
most the limit. Every failure of the zip layer (bad headers, CRC mismatch, truncated deflate
stream, undecodable names) is a :class:`SerializationError` naming the member.

Writing (:func:`write_members`) fixes everything ``zipfile`` would take from the environment:
timestamps (1980-01-01), creating system, permissions, member order and compression.
"""
from __future__ import annotations

import stat
import struct
import zipfile
import zlib

from .format import Limits, fail

__all__ = ["open_archive", "read_extra_files", "read_members", "write_members", "ARCHIVE",
           "EXTRA_FILES"]

#: The directory of the user's extra files (``unbroken.save(..., extra_files=...)``), as in
#: torch.export's archives: optional members ``extra_files/<name>`` of UTF-8 text.
EXTRA_FILES = "extra_files/"

ARCHIVE = "the archive"
_CHUNK = 1 << 20
_EPOCH = (1980, 1, 1, 0, 0, 0)
# What the zip layer raises on a damaged archive: bad structures, CRC mismatches (BadZipFile),
# truncated or corrupt deflate streams (zlib.error, EOFError), seeks before the start
# (ValueError on BytesIO, OSError on files), undecodable names (UnicodeDecodeError), zip
# versions and methods zipfile does not implement (NotImplementedError).
ZIP_ERRORS = (zipfile.BadZipFile, zlib.error, EOFError, OSError, ValueError, struct.error,
              NotImplementedError)
_COMPRESSIONS = (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED)


def open_archive(f, limits: Limits) -> zipfile.ZipFile:
    """A ``ZipFile`` over ``f`` whose central directory was checked against ``limits``."""
    try:
        _check_end_record(f, limits)
        return zipfile.ZipFile(f)
    except ZIP_ERRORS as error:
        raise fail(ARCHIVE, f"not a readable zip archive ({_describe(error)})") from None


def _check_end_record(f, limits: Limits) -> None:
    """Refuse a central directory larger than the file or than ``limits`` allows, before
    ``zipfile`` reads it into memory in one piece."""
    if isinstance(f, (str, bytes)) or hasattr(f, "__fspath__"):
        with open(f, "rb") as handle:
            return _check_end_record(handle, limits)
    start = f.tell()
    size = f.seek(0, 2)
    f.seek(start)
    end = zipfile._EndRecData(f)  # parses only the end record (and its zip64 locator)
    f.seek(start)
    if end is None:
        raise fail(ARCHIVE, "not a zip archive (no end of central directory record)")
    entries, directory_size = end[zipfile._ECD_ENTRIES_TOTAL], end[zipfile._ECD_SIZE]
    if entries > limits.archive_entries:
        raise fail(ARCHIVE, f"{entries} entries exceed the limit of {limits.archive_entries}")
    if directory_size > min(size, limits.archive_entries * 1024):
        raise fail(ARCHIVE, f"the central directory claims {directory_size} bytes")


def read_members(archive: zipfile.ZipFile, names: tuple[str, ...], limits: Limits,
                 sizes: dict[str, int]) -> dict[str, bytes]:
    """The inflated bytes of exactly ``names`` (the members of the file's version).

    ``sizes``: member name -> its size limit in bytes.
    """
    infos = _checked_infos(archive, names)
    return {name: _read(archive, infos[name], sizes[name]) for name in names}


def read_extra_files(archive: zipfile.ZipFile, limit: int) -> dict[str, str]:
    """The extra files (``extra_files/<name>`` members), name -> text, each within
    ``limit`` bytes; in the archive's order."""
    files = {}
    for info in archive.infolist():
        if info.filename.startswith(EXTRA_FILES):
            _check_info(info)
            data = _read(archive, info, limit)
            try:
                files[info.filename[len(EXTRA_FILES):]] = data.decode("utf-8")
            except UnicodeDecodeError:
                raise fail(info.filename, "is not UTF-8 text") from None
    return files


def read_member(archive: zipfile.ZipFile, name: str, limit: int) -> bytes:
    """One member (``format.json``, read first to learn the version), within ``limit``."""
    try:
        info = archive.getinfo(name)
    except KeyError:
        raise fail(name, "missing from the archive") from None
    _check_info(info)
    return _read(archive, info, limit)


def _checked_infos(archive: zipfile.ZipFile, names: tuple[str, ...]) -> dict:
    infos = archive.infolist()
    found = [info.filename for info in infos]
    for name in found:
        if found.count(name) > 1:
            raise fail(ARCHIVE, f"the member {name!r} appears {found.count(name)} times")
    unexpected = sorted(n for n in set(found) - set(names) if not n.startswith(EXTRA_FILES))
    if unexpected:
        raise fail(ARCHIVE, f"unexpected member(s) {', '.join(map(repr, unexpected))} "
                            f"(a file of this version holds {', '.join(names)})")
    missing = [name for name in names if name not in found]
    if missing:
        raise fail(missing[0], "missing from the archive")
    for info in infos:
        _check_info(info)
    return {info.filename: info for info in infos}


def _check_info(info: zipfile.ZipInfo) -> None:
    if stat.S_ISLNK(info.external_attr >> 16) or info.is_dir():
        raise fail(info.filename, "is a link or a directory, not a file")
    if info.flag_bits & 0x1:
        raise fail(info.filename, "is encrypted")
    if info.compress_type not in _COMPRESSIONS:
        raise fail(info.filename, f"uses compression method {info.compress_type} (only stored "
                                  f"and deflated members are read)")


def _read(archive: zipfile.ZipFile, info: zipfile.ZipInfo, limit: int) -> bytes:
    if info.file_size > limit:
        raise fail(info.filename, f"declares {info.file_size} bytes, over the limit of {limit}")
    chunks, total = [], 0
    try:
        with archive.open(info) as stream:
            while chunk := stream.read(min(_CHUNK, limit + 1 - total)):
                total += len(chunk)
                if total > limit:
                    raise fail(info.filename, f"inflates past the limit of {limit} bytes")
                chunks.append(chunk)
    except ZIP_ERRORS as error:
        raise fail(info.filename, f"cannot be read from the archive ({_describe(error)})") \
            from None
    if total != info.file_size:
        raise fail(info.filename, f"inflates to {total} bytes but declares {info.file_size}")
    return b"".join(chunks)


def _describe(error: BaseException) -> str:
    text = str(error).splitlines()[0] if str(error) else ""
    return f"{type(error).__name__}: {text[:200]}" if text else type(error).__name__


def write_members(f, members: list[tuple[str, bytes, bool]]) -> None:
    """Write ``(name, data, compress)`` members in order; the same members give the same bytes."""
    with zipfile.ZipFile(f, "w") as archive:
        for name, data, compress in members:
            info = zipfile.ZipInfo(name, date_time=_EPOCH)
            info.create_system = 3  # unix, whatever the host
            info.external_attr = (stat.S_IFREG | 0o644) << 16
            info.compress_type = zipfile.ZIP_DEFLATED if compress else zipfile.ZIP_STORED
            archive.writestr(info, data, compresslevel=6 if compress else None)
