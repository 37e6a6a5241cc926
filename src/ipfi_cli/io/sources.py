"""Bytes and lines from a file, a pipe or stdin, read as they arrive.

:class:`ByteSource` polls a file descriptor with ``select`` (Python's buffered ``sys.stdin``
hides already-buffered data from it) and decompresses gzip, bz2 and xz on the fly (recognised by
their magic bytes, whatever the file's name); a zip archive, zstd data, UTF-16 text, a Parquet file
(on a pipe), binary data (a NUL byte in the first KiB) or a file named ``.gz``/``.bz2``/``.xz``
whose data is not compressed so is refused at its first bytes, naming what it is and how to read
it (:class:`NotReadable`). :class:`~ipfi_cli.io.lines.LineBuffer` makes lines of the bytes.
"""

from __future__ import annotations

import bz2
import lzma
import os
import select
import sys
import zlib
from typing import Any, BinaryIO

from ipfi_cli.errors import InputError

CHUNK_SIZE = 1 << 16
#: cap on decompressed bytes produced per step, so a gzip bomb cannot fill memory
_MAX_INFLATE = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
#: the first bytes of the compressed formats read on the fly
_COMPRESSED = {_GZIP_MAGIC: "gzip", b"BZh": "bz2", b"\xfd7zXZ\x00": "xz"}
#: the first bytes of inputs that are not text ipfi reads, and what to do with them (``{input}``: the file)
_NOT_READABLE = {
    b"PK\x03\x04": "a zip archive, which ipfi does not open (it reads CSV or JSONL, plain or compressed with gzip, "
                    "bz2 or xz): extract the file from it, e.g. unzip -p {input} FILE | ipfi ... -",
    b"PK\x05\x06": "an empty zip archive, which ipfi does not open (it reads CSV or JSONL, plain or compressed with "
                    "gzip, bz2 or xz)",
    b"\x28\xb5\x2f\xfd": "zstd-compressed, which ipfi does not decompress (it reads gzip, bz2 and xz): decompress it "
                         "first, e.g. zstd -dc {input} | ipfi ... -",
    b"\xff\xfe\x00\x00": "UTF-32 text (it starts with a UTF-32 byte-order mark); ipfi reads UTF-8: convert it first, "
                         "e.g. iconv -f UTF-32 -t UTF-8 {input} | ipfi ... -",
    b"\xff\xfe": "UTF-16 text (it starts with a UTF-16 byte-order mark, as Excel's 'Unicode text' and PowerShell "
                 "write); ipfi reads UTF-8: convert it first, e.g. iconv -f UTF-16 -t UTF-8 {input} | ipfi ... -",
    b"\xfe\xff": "UTF-16 text (it starts with a UTF-16 byte-order mark); ipfi reads UTF-8: convert it first, "
                 "e.g. iconv -f UTF-16 -t UTF-8 {input} | ipfi ... -",
    b"PAR1": "a Parquet file (it starts with Parquet's magic bytes PAR1), not CSV or JSONL text; ipfi reads "
             "Parquet from a file, whose table of contents is at its end, not from a pipe or as CSV: give its path "
             "(named .parquet, or with --format parquet)",
    b"\xd0\xcf\x11\xe0\xa1\xb1\x1a\xe1": "an old Excel workbook (.xls) or another OLE2 document, not CSV or "
                                          "JSONL text: save or export the sheet as CSV first",
}
#: how many first bytes are looked at for binary content (a NUL byte, which no CSV or JSONL text holds)
_BINARY_PROBE = 1024
#: the file-name endings that say the data is compressed, and the format each says
_SUFFIXES = {".gz": "gzip", ".tgz": "gzip", ".bz2": "bz2", ".xz": "xz"}


class NotReadable(InputError):
    """The input is not text ipfi reads (a zip archive, UTF-16 text...): said of the input as a
    whole, at its first bytes."""


def _binary(head: bytes) -> str | None:
    """What makes the first bytes binary data rather than text (a NUL byte), or ``None``. (Other
    control bytes are text: a field may hold them, and messages print them escaped.)"""
    nul = head.find(b"\x00", 0, _BINARY_PROBE)
    return f"a NUL byte at byte {nul + 1}" if nul >= 0 else None


def _sniff(head: bytes, name: str | None = None) -> str | None:
    """The compressed format the first bytes show, or ``None``; raises :class:`NotReadable` for an
    input ipfi cannot read (checked longest magic first: UTF-32's begins as UTF-16's): a format it
    does not open, binary data, or a name saying gzip, bz2 or xz over data that is not compressed."""
    for magic, why in sorted(_NOT_READABLE.items(), key=lambda item: -len(item[0])):
        if head.startswith(magic):
            raise NotReadable(why)
    for magic, kind in _COMPRESSED.items():
        if head.startswith(magic):
            return kind
    binary = _binary(head)
    said = next((kind for suffix, kind in _SUFFIXES.items() if name and name.lower().endswith(suffix)), None)
    if said is not None:
        what = f"binary data ({binary})" if binary else "plain text"
        raise NotReadable(f"the name says {said}, but the data is not {said}-compressed: it is {what}"
                          + ("" if binary else "; if it is CSV or JSONL text, rename it or pipe it in, "
                             "e.g. ipfi ... - < {input}"))
    if binary is not None:
        raise NotReadable(f"binary data ({binary}), not CSV or JSONL text: ipfi reads CSV or JSONL (plain, or "
                          "compressed with gzip, bz2 or xz) and Parquet files")
    return None


class _Decompressor:
    """Compressed bytes of one format (gzip, bz2 or xz) in; at most ``_MAX_INFLATE`` bytes out per
    step. Concatenated members or streams (``cat a.gz b.gz``, ``pbzip2``'s output) are read on."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._pending = b""  # gzip: compressed bytes not yet inflated (bz2 and xz keep their own)
        self.started = False  # a member or stream is begun and not ended
        self._new()

    def _new(self) -> None:
        self._d: Any = (zlib.decompressobj(wbits=31) if self.kind == "gzip"
                        else bz2.BZ2Decompressor() if self.kind == "bz2" else lzma.LZMADecompressor())

    @property
    def has_more(self) -> bool:
        """Output is waiting without more input."""
        if self.kind == "gzip":
            return bool(self._pending)
        return bool(self._pending) or (self.started and not self._d.eof and not self._d.needs_input)

    @property
    def truncated(self) -> bool:
        """The input ended inside a member or stream."""
        return self.started and not self._d.eof

    def step(self, chunk: bytes) -> bytes:
        data = self._pending + chunk if self._pending else chunk
        self._pending = b""
        d = self._d
        if data and d.eof:  # the last member ended exactly at the previous chunk's end
            self._new()
            d = self._d
        try:
            out = d.decompress(data, _MAX_INFLATE)
        except (zlib.error, OSError, EOFError, lzma.LZMAError) as error:
            raise InputError(f"invalid {self.kind} data ({error})") from None
        self.started = True
        if self.kind == "gzip" and d.unconsumed_tail:
            self._pending = d.unconsumed_tail
        elif d.eof:
            rest = d.unused_data
            if rest.strip(b"\x00"):  # concatenated members: start the next one
                self._new()
                self._pending = rest
            self.started = False
        return bytes(out)
class ByteSource:
    """Chunks of bytes from a file descriptor (polled with ``select``) or a file object.

    ``read(wait)`` returns a chunk, ``b''`` at end of input, or ``None`` when ``wait`` is
    false and nothing can be read without blocking. gzip, bz2 and xz data are decompressed on
    the fly; an input ipfi cannot read raises :class:`NotReadable` at its first bytes.
    """

    def __init__(self, stream: BinaryIO | int, close: bool, name: str | None = None) -> None:
        self._stream = stream
        self._name = name  # the file's name, whose ending may say the data is compressed
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
        self._decompressor: _Decompressor | None = None  # when the input is compressed

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

    def _pending(self) -> bool:
        return self._decompressor is not None and self._decompressor.has_more

    def ready(self, timeout: float = 0.0) -> bool:
        """True when :meth:`read` would return without blocking."""
        return self._eof or self._pending() or self._raw_ready(timeout)

    def _first_chunk(self, chunk: bytes) -> bytes:
        """The first chunk, long enough to recognise its format (a pipe may hand on a byte at a time)."""
        while any(len(chunk) < len(magic) and magic.startswith(chunk) for magic in [*_COMPRESSED, *_NOT_READABLE]):
            more = self._raw_read()
            if not more:
                break
            chunk += more
        self._first = False
        kind = _sniff(chunk, self._name)
        if kind is not None:
            self._decompressor = _Decompressor(kind)
        return chunk

    def read(self, wait: bool = True) -> bytes | None:
        while True:
            if self._eof:
                return b""
            decompressor = self._decompressor
            if decompressor is not None and decompressor.has_more:
                out = decompressor.step(b"")
                if out:
                    return out
                continue
            if not wait and not self._raw_ready(0.0):
                return None
            chunk = self._raw_read()
            if self._first and chunk:
                chunk = self._first_chunk(chunk)
                decompressor = self._decompressor
            if not chunk:
                self._eof = True
                if decompressor is not None and decompressor.truncated:
                    raise InputError(f"the {decompressor.kind} data ends early (truncated file?)")
                return b""
            if decompressor is None:
                return chunk
            out = decompressor.step(chunk)
            if out:
                return out
            # a header or an empty member produced nothing yet: read again

    def close(self) -> None:
        if self._close and not isinstance(self._stream, int):
            self._stream.close()


def stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False
