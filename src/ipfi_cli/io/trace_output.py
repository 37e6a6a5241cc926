"""The traces file a ``--state`` checkpoint vouches for, and its continuation on resume.

The traces file is tracked by :class:`TrackedOutput`, which counts the bytes written and
keeps their CRC-32. A checkpoint records both after flushing (and syncing) the traces, so
it never claims a record that is not in the file. On resume :func:`reopen_traces` checks
that the file still starts with exactly those bytes, cuts off anything written after the
checkpoint (records the resumed run writes again, identically), and appends from there;
:func:`continue_stdout_traces` does the same for traces on stdout where it can.

>>> import io
>>> out = TrackedOutput(io.BytesIO())
>>> out.write(b"row,a\\n")
6
>>> out.size, out.crc == zlib.crc32(b"row,a\\n")
(6, True)
"""

from __future__ import annotations

import os
import stat
import zlib
from typing import BinaryIO

from ipfi_cli.io.run_state import StateFileError
from ipfi_cli.io.targets import write_all


class TrackedOutput:
    """A binary output stream that counts the bytes written through it and their CRC-32.

    ``muted`` drops writes (used to skip the header when traces continue a file).
    """

    def __init__(self, stream: BinaryIO, *, size: int = 0, crc: int = 0, close: bool = False) -> None:
        self.stream = stream
        self.size = size
        self.crc = crc
        self.muted = False
        self._close = close

    def write(self, data: bytes) -> int:
        if self.muted:
            return len(data)
        write_all(self.stream, data)
        self.size += len(data)
        self.crc = zlib.crc32(data, self.crc)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()

    def isatty(self) -> bool:
        """Whether the stream is a terminal (the writers then show text from data escaped)."""
        return bool(self.stream.isatty())

    def sync(self) -> None:
        """Flush, and ``fsync`` when the stream is a regular file (not a pipe or terminal)."""
        self.stream.flush()
        try:
            fd = self.stream.fileno()
            if _is_regular(fd):
                os.fsync(fd)
        except (AttributeError, OSError, ValueError):
            pass

    def close(self) -> None:
        try:
            self.stream.flush()
        finally:
            if self._close:
                self.stream.close()


def _is_regular(fd: int) -> bool:
    return stat.S_ISREG(os.fstat(fd).st_mode)


def file_crc(path: str | os.PathLike[str], length: int, chunk: int = 1 << 20) -> tuple[int, int]:
    """CRC-32 of the first ``length`` bytes of a file, and how many bytes there were (<= length)."""
    crc, seen = 0, 0
    with open(path, "rb") as f:
        while seen < length:
            data = f.read(min(chunk, length - seen))
            if not data:
                break
            crc = zlib.crc32(data, crc)
            seen += len(data)
    return crc, seen


def continue_stdout_traces(size: int, crc: int, header: bytes, fd: int = 1) -> str | None:
    """Traces on stdout continued after a checkpoint: make them neither duplicated nor lost.

    When stdout is a regular file (``>> traces.csv``), the earlier traces in it are found (they
    start at the file's start or at a header line ``header``, and their first ``size`` bytes have
    the CRC ``crc``) and whatever the interrupted run wrote after the checkpoint is cut off, as
    with ``--output``; returns ``None``. Otherwise (a pipe, a terminal, or a file without those
    traces) returns the line that tells which records of the earlier output are repeated.
    """
    try:
        regular = _is_regular(fd)
    except OSError:
        regular = False
    start = -1
    if regular and os.fstat(fd).st_size == 0:
        return None  # a new file: the continuation alone
    if regular:
        try:
            start = _earlier_traces(fd, size, crc, header)
        except OSError:  # stdout is open for writing only, and the file cannot be read by its name
            start = -1
        if start >= 0:
            os.ftruncate(fd, start + size)  # records written after the checkpoint come again, identically
            try:
                os.lseek(fd, start + size, os.SEEK_SET)
            except OSError:
                pass
            return None
    return ("the traces continue on stdout after the checkpoint; the earlier output may hold records written "
            "after it, which come again now: keep the earlier output only up to the last row before the first "
            "row written now (with `>> FILE`, or --output FILE, ipfi cuts them itself)")


def _earlier_traces(fd: int, size: int, crc: int, header: bytes) -> int:
    """Where in the file open as ``fd`` the traces with ``size`` first bytes of CRC ``crc`` start, or -1."""
    import mmap

    for name in (f"/proc/self/fd/{fd}", f"/dev/fd/{fd}"):  # stdout is often write-only (`>>`): read it by name
        if os.path.exists(name):
            break
    else:
        return -1
    with open(name, "rb") as f:
        if os.fstat(f.fileno()).st_ino != os.fstat(fd).st_ino:
            return -1
        length = os.fstat(f.fileno()).st_size
        with mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ) as view:
            starts = [0]
            at = view.find(b"\n" + header) if header else -1
            while at >= 0:
                starts.append(at + 1)
                at = view.find(b"\n" + header, at + 1)
            for start in reversed(starts):
                if start + size <= length and zlib.crc32(view[start:start + size]) == crc:
                    return start
    return -1


def reopen_traces(path: str, size: int, crc: int) -> TrackedOutput:
    """Open the traces file of a resumed run: check it starts with the ``size`` bytes (CRC ``crc``)
    the state vouches for, cut off what follows them, and return it ready to append."""
    if size == 0 and not os.path.exists(path):  # nothing written yet (a merged state): a new file
        try:
            return TrackedOutput(open(path, "wb"), close=True)
        except OSError as error:
            raise StateFileError(path, f"cannot write the traces file ({error.strerror or error})") from None
    if not os.path.exists(path):
        raise StateFileError(path, f"the traces file is missing; the state continues a file of {size:,} bytes. "
                               "Restore it, or start a new run with a new --state")
    try:
        found_crc, found = file_crc(path, size)
    except OSError as error:
        raise StateFileError(path, f"cannot read the traces file ({error.strerror or error})") from None
    if found < size:
        raise StateFileError(path, f"the traces file has {found:,} bytes, but the state continues a file of {size:,} "
                               "bytes: it is not the file this state wrote")
    if found_crc != crc:
        raise StateFileError(path, f"the traces file's first {size:,} bytes are not the ones this state wrote "
                               "(another file, or changed since)")
    try:
        stream = open(path, "r+b")
        stream.truncate(size)  # records written after the checkpoint come again, identically
        stream.seek(size)
    except OSError as error:
        raise StateFileError(path, f"cannot reopen the traces file ({error.strerror or error})") from None
    return TrackedOutput(stream, size=size, crc=crc, close=True)
