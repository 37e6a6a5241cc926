"""Complete lines of a :class:`~ipfi_cli.io.sources.ByteSource`, as they arrive.

:class:`LineBuffer` drops a byte-order mark, keeps complete lines as their bytes until a line is
asked for (then decodes them as UTF-8, marking lines that are not UTF-8 or longer than
:data:`MAX_LINE_BYTES`), or hands a run of them on undecoded (:meth:`LineBuffer.take_raw`, for
the CSV reader's bulk blocks). Memory is constant: one chunk and the current line.
"""

from __future__ import annotations

import codecs
import collections
import shlex
import time
from collections.abc import Iterator

from ipfi_cli.errors import InputError
from ipfi_cli.io.sources import ByteSource, NotReadable

#: a line longer than this (no line end in sight) is a bad row and its bytes are dropped,
#: so a stream without line ends cannot fill memory
MAX_LINE_BYTES = 1 << 25


_BOM = codecs.BOM_UTF8


class LineBuffer:
    """Complete decoded lines (with their ``\\n``) taken from a byte source as they arrive."""

    def __init__(self, source: ByteSource, name: str | None = None) -> None:
        self._source = source
        self._name = name  # the input's name, for an error it ends with
        self._lines: collections.deque[str] = collections.deque()
        #: complete lines as their bytes, not decoded yet (each part ends with ``\n``, or is the input's last
        #: line); decoded into ``_lines`` when a line is asked for, or taken whole by :meth:`take_raw`
        self._raw: list[bytes] = []
        self._raw_lines = 0  # how many lines ``_raw`` holds
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
            if isinstance(error, NotReadable):  # about the input as a whole
                error.source = error.source or self._name
                named = self._name if self._name and not self._name.startswith("<") else None
                error.message = error.message.replace("{input}", shlex.quote(named) if named else "FILE")
            elif error.source is None and error.line is None:  # where it ended: the line it cut
                error.source, error.line = self._name, self._next_line + self._raw_lines
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
                self._raw.append(self._partial)
                self._raw_lines += 1
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
            complete = data[:cut]
            self._raw.append(complete)
            self._raw_lines += complete.count(b"\n")
        if len(self._partial) > MAX_LINE_BYTES:
            self._too_long()

    def _too_long(self) -> None:
        """The current line passed MAX_LINE_BYTES: mark it bad, hand on a stand-in, drop the rest."""
        self._decode_raw()  # the lines before it are numbered first
        self.bad_lines[self._next_line] = (f"the line is longer than {MAX_LINE_BYTES:,} bytes without a line end "
                                           "(is the input really CSV or JSONL?)")
        self._partial = b""
        self._lines.append("\x00\n")  # a non-blank stand-in, so the line becomes a (bad) row
        self._next_line += 1
        self._skipping = True

    def _decode_raw(self) -> None:
        """Decode the complete lines waiting as bytes into ``_lines``."""
        raw, self._raw, self._raw_lines = self._raw, [], 0
        for data in raw:
            self._add(data)

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
        while not self._lines and not self._raw and not self._eof:
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
            self._decode_raw()
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
            if self._raw:
                self._decode_raw()
                continue
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
            if not lines:
                if not self._raw:  # the end of input
                    break
                self._decode_raw()
            count = min(max_lines - len(taken), len(lines))
            taken.extend(lines.popleft() for _ in range(count))
        self.lines_read += len(taken)
        return taken

    def take_decoded(self, max_lines: int) -> list[str]:
        """Up to ``max_lines`` lines decoded already (those a row read left), without reading."""
        lines = self._lines
        taken = [lines.popleft() for _ in range(min(max_lines, len(lines)))]
        self.lines_read += len(taken)
        return taken

    def take_raw(self, max_lines: int, *, min_lines: int | None = None,
                 max_bytes: int | None = None) -> tuple[bytes, int]:
        """Up to ``max_lines`` complete lines available without waiting, as the input's bytes (a
        byte-order mark dropped, not checked as UTF-8), and how many lines they are; ``(b"", 0)`` when
        none is available, or when a decoded line waits before them (:meth:`take_decoded`). With
        ``max_bytes``, no more lines than fit in that many bytes, unless fewer than ``min_lines`` do."""
        least = max_lines if min_lines is None else min(min_lines, max_lines)

        def enough() -> bool:
            return self._raw_lines >= max_lines or (max_bytes is not None and self._raw_lines >= least
                                                    and sum(map(len, self._raw)) >= max_bytes)

        while not enough() and not self._lines and not self._eof:
            chunk = self._read(wait=False)
            if chunk is None:
                break
            self._take(chunk)
        if self._lines or not self._raw:
            return b"", 0
        data = self._raw[0] if len(self._raw) == 1 else b"".join(self._raw)
        count = self._raw_lines
        take = min(count, max_lines)
        if take < count or (max_bytes is not None and len(data) > max_bytes and take > least):
            import numpy as np

            ends = np.flatnonzero(np.frombuffer(data, dtype=np.uint8) == 10)
            if max_bytes is not None and len(data) > max_bytes:  # the lines that end within max_bytes
                take = max(least, min(take, int(np.searchsorted(ends, max_bytes))))
            if take < count:
                cut = int(ends[take - 1]) + 1
                data, rest = data[:cut], data[cut:]
                self._raw, self._raw_lines = [rest], count - take
                count = take
            else:
                self._raw, self._raw_lines = [], 0
        else:
            self._raw, self._raw_lines = [], 0
        self.lines_read += count
        self._next_line += count
        return data, count

    def give_back_raw(self, data: bytes, count: int) -> None:
        """Put the ``count`` lines :meth:`take_raw` gave back, to be read again in order."""
        self._raw.insert(0, data)
        self._raw_lines += count
        self.lines_read -= count
        self._next_line -= count

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
