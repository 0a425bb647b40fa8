"""Read a file's bytes, or a record's range of them; file-system failures become DecodeErrors naming the
file (or record)."""

from __future__ import annotations

import os

from .errors import DecodeError

try:
    from ._jpeg import read_file as _read_whole
except ImportError:  # built without the extension
    _read_whole = None


def read_file(index: int, path: str) -> bytes:
    """The whole file, read without the GIL and without a Python file object (a buffered file costs a loader
    thread ~15 us of GIL per image; fastload._jpeg.read_file ~2), so reader threads overlap."""
    try:
        data = _read_whole(path) if _read_whole is not None else b""
        if not data:  # (also a file whose size the file system does not report: a pipe, /proc)
            data = _read_with_os(path)
    except IsADirectoryError:
        raise DecodeError(index, path, "is a directory, not an image file") from None
    except FileNotFoundError:
        reason = "dangling symbolic link" if os.path.islink(path) else "file not found (removed after listing?)"
        raise DecodeError(index, path, reason) from None
    except OSError as error:
        raise DecodeError(index, path, f"cannot read: {error.strerror or error}") from error
    if not data:
        raise DecodeError(index, path, "empty file")
    return data


def _read_with_os(path: str) -> bytes:
    fd = os.open(path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
    try:
        size = os.fstat(fd).st_size
        chunks = [os.read(fd, size)]
        while chunk := os.read(fd, 1 << 20):  # a file that grew is read to its end
            chunks.append(chunk)
        return b"".join(chunks)
    finally:
        os.close(fd)


def read_range(index: int, path: str, start: int, length: int, name: str) -> bytes:
    """``length`` bytes of ``path`` from ``start`` (a record of a file of records, named ``name``); a file
    that ends before them is a DecodeError."""
    try:
        with open(path, "rb") as file:
            file.seek(start)
            data = file.read(length)
    except OSError as error:
        raise DecodeError(index, name, f"cannot read: {error.strerror or error}") from error
    if len(data) != length:
        raise DecodeError(index, name, f"the file ends inside the record ({len(data)} of {length} bytes)")
    return data
