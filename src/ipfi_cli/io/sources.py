"""Bytes and lines from a file, a pipe or stdin, read as they arrive.

:class:`ByteSource` polls a file descriptor with ``select`` (Python's buffered ``sys.stdin``
hides already-buffered data from it) and inflates gzip on the fly; :class:`LineBuffer`
decodes complete UTF-8 lines, drops a byte-order mark and marks lines that are not UTF-8
or longer than :data:`MAX_LINE_BYTES`. Memory is constant: one chunk and the current line.
"""

from __future__ import annotations

import codecs
import collections
import os
import select
import sys
import time
import zlib
from collections.abc import Iterator
from typing import BinaryIO

from ipfi_cli.errors import InputError

CHUNK_SIZE = 1 << 16
#: cap on decompressed bytes produced per step, so a gzip bomb cannot fill memory
_MAX_INFLATE = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = codecs.BOM_UTF8
#: a line longer than this (no line end in sight) is a bad row and its bytes are dropped,
#: so a stream without line ends cannot fill memory
MAX_LINE_BYTES = 1 << 25


class ByteSource:
    """Chunks of bytes from a file descriptor (polled with ``select``) or a file object.

    ``read(wait)`` returns a chunk, ``b''`` at end of input, or ``None`` when ``wait`` is
    false and nothing can be read without blocking. gzip data is inflated on the fly.
    """

    def __init__(self, stream: BinaryIO | int, close: bool) -> None:
        self._stream = stream
        self._close = close
        self._fd: int | None = None
        if isinstance(stream, int):
            self._fd = stream
        else:
            try:
                self._fd = stream.fileno()
            except (AttributeError, OSError, ValueError):
                self._fd = None  # e.g. BytesIO: every read returns at once
        self._pollable = self._fd is not None
        self._eof = False
        self._first = True
        self._inflate: zlib._Decompress | None = None  # zlib decompressor when the input is gzip
        self._pending = b""  # compressed bytes not yet inflated

    def _raw_ready(self, timeout: float) -> bool:
        if not self._pollable:
            return True
        try:
            readable, _, _ = select.select([self._fd or 0], [], [], timeout)
        except (OSError, ValueError):  # not selectable (e.g. some platforms' files)
            self._pollable = False
            return True
        return bool(readable)

    def _raw_read(self) -> bytes:
        if self._fd is not None:
            return os.read(self._fd, CHUNK_SIZE)
        stream = self._stream
        read1 = getattr(stream, "read1", None)
        return read1(CHUNK_SIZE) if read1 is not None else stream.read(CHUNK_SIZE)  # type: ignore[union-attr]

    def ready(self, timeout: float = 0.0) -> bool:
        """True when :meth:`read` would return without blocking."""
        return self._eof or bool(self._pending) or self._raw_ready(timeout)

    def read(self, wait: bool = True) -> bytes | None:
        while True:
            if self._eof:
                return b""
            if self._pending:
                out = self._inflate_step(b"")
                if out:
                    return out
                continue
            if not wait and not self._raw_ready(0.0):
                return None
            chunk = self._raw_read()
            if self._first and chunk:
                if len(chunk) == 1 and chunk == _GZIP_MAGIC[:1]:
                    chunk += self._raw_read()  # need two bytes to recognise gzip
                self._first = False
                if chunk.startswith(_GZIP_MAGIC):
                    self._inflate = zlib.decompressobj(wbits=31)
            if not chunk:
                self._eof = True
                if self._inflate is not None and not self._inflate.eof and self._inflate_started:
                    raise InputError("the gzip data ends early (truncated file?)")
                return b""
            if self._inflate is None:
                return chunk
            out = self._inflate_step(chunk)
            if out:
                return out
            # a gzip header or an empty member produced nothing yet: read again

    _inflate_started = False

    def _inflate_step(self, chunk: bytes) -> bytes:
        inflate = self._inflate
        assert inflate is not None  # only gzip input is inflated (and has pending bytes)
        data = self._pending + chunk if self._pending else chunk
        self._pending = b""
        try:
            out = inflate.decompress(data, _MAX_INFLATE)
        except zlib.error as error:
            raise InputError(f"invalid gzip data ({error})") from None
        self._inflate_started = True
        if inflate.unconsumed_tail:
            self._pending = inflate.unconsumed_tail
        elif inflate.eof:
            rest = inflate.unused_data
            if rest.strip(b"\x00"):  # concatenated gzip members: start the next one
                self._inflate = zlib.decompressobj(wbits=31)
                self._pending = rest
            self._inflate_started = False
        return out

    def close(self) -> None:
        if self._close and not isinstance(self._stream, int):
            self._stream.close()


# -- lines --------------------------------------------------------------------------------------
class LineBuffer:
    """Complete decoded lines (with their ``\\n``) taken from a byte source as they arrive."""

    def __init__(self, source: ByteSource, name: str | None = None) -> None:
        self._source = source
        self._name = name  # the input's name, for an error it ends with
        self._lines: collections.deque[str] = collections.deque()
        self._partial = b""
        self._start = True
        self._eof = False
        self.lines_read = 0  # lines handed out so far
        self._next_line = 1  # number of the next line to enter the buffer
        #: line number -> message, for lines that were not valid UTF-8 or too long
        self.bad_lines: dict[int, str] = {}
        self._skipping = False  # dropping the rest of a line longer than MAX_LINE_BYTES
        self._error: InputError | None = None  # the input ended in error (a gzip cut short)

    def _read(self, wait: bool) -> bytes | None:
        """The source's next bytes. When it ends in error (a truncated gzip), the input ends there:
        the complete lines before it are handed out first, the line it cut is dropped, and the error
        is raised when a line past them is asked for."""
        try:
            return self._source.read(wait=wait)
        except InputError as error:
            if error.source is None and error.line is None:  # where it ended: the line it cut
                error.source, error.line = self._name, self._next_line
            self._error = error
            self._partial = b""
            self._skipping = False
            return b""

    def _at_end(self) -> None:
        """The end of input: raise the error it ended with, if any."""
        if self._error is not None:
            raise self._error

    def _take(self, chunk: bytes) -> None:
        if self._start:
            head = self._partial + chunk
            if chunk and len(head) < len(_BOM) and _BOM.startswith(head):
                self._partial = head  # perhaps a byte-order mark split across reads: wait for more
                return
            self._start = False
            self._partial = b""
            if head.startswith(_BOM):
                head = head[len(_BOM):]
            if not chunk:
                self._partial = head  # end of input, handled below
            elif not head:
                return
            else:
                chunk = head
        if not chunk:  # end of input: the last line may lack its newline
            self._eof = True
            if self._partial:
                self._add(self._partial)
                self._partial = b""
            return
        if self._skipping:
            end = chunk.find(b"\n")
            if end < 0:
                return
            self._skipping = False
            chunk = chunk[end + 1:]
            if not chunk:
                return
        data = self._partial + chunk if self._partial else chunk
        cut = data.rfind(b"\n") + 1
        if cut == 0:
            self._partial = data
        else:
            self._partial = data[cut:]
            self._add(data[:cut])
        if len(self._partial) > MAX_LINE_BYTES:
            self._too_long()

    def _too_long(self) -> None:
        """The current line passed MAX_LINE_BYTES: mark it bad, hand on a stand-in, drop the rest."""
        self.bad_lines[self._next_line] = (f"the line is longer than {MAX_LINE_BYTES:,} bytes without a line end "
                                           "(is the input really CSV or JSONL?)")
        self._partial = b""
        self._lines.append("\x00\n")  # a non-blank stand-in, so the line becomes a (bad) row
        self._next_line += 1
        self._skipping = True

    def _add(self, data: bytes) -> None:
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            self._add_slowly(data)
            return
        parts = text.split("\n")
        last = parts.pop()
        lines = self._lines
        for part in parts:
            lines.append(part + "\n")
        if last:
            lines.append(last)
        self._next_line += len(parts) + (1 if last else 0)

    def _add_slowly(self, data: bytes) -> None:
        """Decode line by line, noting the lines that are not UTF-8 (decoded with U+FFFD)."""
        for raw in data.splitlines(keepends=True) if b"\r" not in data else split_newlines(data):
            try:
                text = raw.decode("utf-8")
            except UnicodeDecodeError as error:
                bad = raw[error.start:error.start + 1]
                self.bad_lines[self._next_line] = (
                    f"not valid UTF-8 (byte 0x{bad.hex()} at position {error.start + 1})")
                text = raw.decode("utf-8", errors="replace")
            self._lines.append(text)
            self._next_line += 1

    def ready(self, timeout: float = 0.0) -> bool:
        """True when :meth:`readline` returns without blocking (a line, or the end).

        Waits up to ``timeout`` seconds for input to arrive.
        """
        deadline = time.monotonic() + timeout
        while not self._lines and not self._eof:
            chunk = self._read(wait=False)
            if chunk is None:
                remaining = deadline - time.monotonic()
                if remaining <= 0 or not self._source.ready(remaining):
                    return False
                continue
            self._take(chunk)
        return True

    def peek_nonblank(self) -> str | None:
        """The first non-blank line, without consuming anything; ``None`` if there is none."""
        while True:
            for text in self._lines:
                if text.strip():
                    return text
            if self._eof:
                self._at_end()
                return None
            self._take(self._read(wait=True) or b"")

    def readline(self) -> str:
        """The next line with its newline; ``''`` at the end of input. Blocks if needed."""
        lines = self._lines
        while not lines:
            if self._eof:
                self._at_end()
                return ""
            self._take(self._read(wait=True) or b"")
        self.lines_read += 1
        return lines.popleft()

    def take_ready(self, max_lines: int) -> list[str]:
        """Up to ``max_lines`` lines that are available without waiting (perhaps none)."""
        lines = self._lines
        taken: list[str] = []
        while len(taken) < max_lines and self.ready():
            if not lines:  # the end of input
                break
            count = min(max_lines - len(taken), len(lines))
            taken.extend(lines.popleft() for _ in range(count))
        self.lines_read += len(taken)
        return taken

    def give_back(self, lines: list[str]) -> None:
        """Put lines taken by :meth:`take_ready` back, to be read again in order."""
        self._lines.extendleft(reversed(lines))
        self.lines_read -= len(lines)

    def __iter__(self) -> Iterator[str]:
        readline = self.readline
        while True:
            line = readline()
            if not line:
                return
            yield line


def split_newlines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    last = parts.pop()
    out = [p + b"\n" for p in parts]
    if last:
        out.append(last)
    return out



def stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False
