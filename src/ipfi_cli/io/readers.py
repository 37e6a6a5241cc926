"""Streaming readers: rows of a CSV or JSONL file, stdin or pipe, one at a time.

* ``INPUT`` is a path, ``-`` or ``None`` (stdin). gzip input is recognised by its magic
  bytes, so ``data.csv.gz`` and ``zcat``-less pipes of gzip both work. Text is UTF-8; a
  byte-order mark at the start is ignored.
* CSV has a header line; fields follow the stdlib ``csv`` rules (quoted fields may hold
  commas, quotes and newlines). JSONL is one JSON object per line; blank lines are skipped.
* CSV fields are separated by ``,``; a header line with no comma but ``;``, a tab or
  ``|`` sets that separator instead (European exports, TSV), and so does a ``.tsv`` or
  ``.tab`` file name or ``delimiter=``.
* Values: a CSV field that parses as a number becomes an ``int`` or ``float``, other
  fields stay strings. JSONL values keep their JSON types. **Missing values** become
  ``MISSING``, which is ``float('nan')``, so the model always sees NaN for a missing
  value, whatever the input format: an empty CSV field, a JSON ``null``, and a CSV field
  or JSON string that is one of the ``na_values`` tokens (surrounding spaces ignored).
  The default tokens, :data:`DEFAULT_NA_VALUES`, are pandas' default list plus UCI's
  ``?``: ``NA``, ``N/A``, ``NaN``, ``nan``, ``null``, ``NULL``, ``None``, ``#N/A``...
* A column's kind is fixed by its first non-missing value (a missing value never fixes it): once a column has held a
  number, a later non-numeric value in it is a bad row (``column 'age': expected a
  number``); once it has held a string, later number-like fields keep their text
  (``"07"`` stays ``"07"``), so a categorical column never mixes types. Only good rows
  fix a column's kind: a row that is bad for another reason does not.
* Memory is constant: the reader keeps one read chunk and the current row. A line longer
  than :data:`MAX_LINE_BYTES` (32 MiB) is a bad row and the rest of it is dropped unread.

Rows come out as :class:`Row` objects that know their 1-based data row number and the
line they start on. A row that cannot be read (wrong number of fields, invalid UTF-8 or
JSON, a type clash) comes out with ``row.error`` set instead of raising, so the caller
decides whether to stop or skip it; only problems with the file as a whole (cannot be
opened, no header, duplicate column names) raise :class:`InputError`.

:meth:`RowReader.batches` groups rows into micro-batches of *whatever is already
available*: it blocks for the first row, then takes more rows only while they can be
read without waiting. A fast pipe therefore gives large batches (a static model
explains them in one call) and a slow writer's row is handed on at once. It reads the
raw file descriptor with ``os.read`` and ``select``, because Python's buffered
``sys.stdin`` hides already-buffered data from ``select``.

>>> import io
>>> reader = RowReader(io.BytesIO(b"a,b,label\\n1,x,yes\\n2.5,,no\\n"), name="demo.csv")
>>> reader.columns
['a', 'b', 'label']
>>> [(row.number, row.line, row.values) for row in reader]
[(1, 2, {'a': 1, 'b': 'x', 'label': 'yes'}), (2, 3, {'a': 2.5, 'b': nan, 'label': 'no'})]
"""

from __future__ import annotations

import codecs
import collections
import csv
import math
import os
import select
import sys
import time
import zlib
from typing import Any, BinaryIO, Callable, Iterable, Iterator

#: the value a missing field becomes (an empty CSV field, a JSON null)
MISSING = float("nan")

STDIN_NAME = "<stdin>"
TTY_HINT = "No input file or piped data provided. Waiting for standard input:"
FORMATS = ("csv", "jsonl")
CHUNK_SIZE = 1 << 16
#: cap on decompressed bytes produced per step, so a gzip bomb cannot fill memory
_MAX_INFLATE = 1 << 20
_GZIP_MAGIC = b"\x1f\x8b"
_BOM = codecs.BOM_UTF8
#: a line longer than this (no line end in sight) is a bad row and its bytes are dropped,
#: so a stream without line ends cannot fill memory
MAX_LINE_BYTES = 1 << 25

_NUMBER, _STRING = 1, 2

#: Tokens read as missing values by default: pandas' default list (``pandas.read_csv``'s
#: ``na_values``) plus ``?``, which UCI data sets use. An empty field is always missing.
DEFAULT_NA_VALUES: frozenset[str] = frozenset({
    "", "#N/A", "#N/A N/A", "#NA", "-1.#IND", "-1.#QNAN", "-NaN", "-nan", "1.#IND", "1.#QNAN", "<NA>",
    "N/A", "NA", "NULL", "NaN", "None", "n/a", "nan", "null", "?",
})
#: field separators recognised from a header line that holds no comma
SNIFFED_DELIMITERS = (";", "\t", "|")
_DELIMITER_NAMES = {"tab": "\t", "\\t": "\t", "comma": ",", "semicolon": ";", "pipe": "|", "space": " "}


def na_tokens(extra: Iterable[str] | None = None, *, defaults: bool = True) -> frozenset[str]:
    """The set of missing-value tokens: the defaults (unless ``defaults=False``) plus ``extra``.

    The empty field is always in it.

    >>> sorted(na_tokens(["-999", " missing "], defaults=False))
    ['', '-999', 'missing']
    """
    tokens = set(DEFAULT_NA_VALUES) if defaults else {""}
    tokens.update(t.strip() for t in extra or ())
    return frozenset(tokens)


def parse_delimiter(text: str) -> str:
    """A ``--delimiter`` value as one character: ``;``, ``tab`` or ``\\t``, ``|``...

    >>> [parse_delimiter(t) for t in [";", "tab", "\\t", "semicolon", ","]]
    [';', '\\t', '\\t', ';', ',']
    """
    value = _DELIMITER_NAMES.get(text.lower(), text)
    if len(value) != 1 or value in "\"\r\n":
        raise ValueError(f"a delimiter is one character (or tab, semicolon, comma, pipe, space), got {text!r}")
    return value


def sniff_delimiter(header_line: str) -> str:
    """The separator of a CSV header line: ``,`` unless it has none and has ``;``, tab or ``|``.

    >>> [sniff_delimiter(h) for h in ["a,b;c", "a;b;c", "a\\tb", "a|b", "a"]]
    [',', ';', '\\t', '|', ',']
    """
    if "," in header_line:
        return ","
    counts = {d: header_line.count(d) for d in SNIFFED_DELIMITERS}
    best = max(counts, key=lambda d: counts[d])
    return best if counts[best] else ","


def is_missing(value: Any) -> bool:
    """True for the missing marker (NaN) and ``None``."""
    return value is None or (type(value) is float and math.isnan(value))


class InputError(ValueError):
    """A problem with the input, located as precisely as known.

    ``str(error)`` is one line: ``source: row R (line L), column 'c': message``.
    """

    def __init__(self, message: str, *, source: str | None = None, row: int | None = None,
                 line: int | None = None, column: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.source = source
        self.row = row
        self.line = line
        self.column = column

    def __str__(self) -> str:
        where = []
        if self.row is not None:
            where.append(f"row {self.row}" + (f" (line {self.line})" if self.line is not None else ""))
        elif self.line is not None:
            where.append(f"line {self.line}")
        if self.column is not None:
            where.append(f"column {self.column!r}")
        prefix = f"{self.source}: " if self.source else ""
        return prefix + (", ".join(where) + ": " if where else "") + self.message


class Row:
    """One data row: its 1-based ``number`` among data rows, the ``line`` it starts on,
    and either ``values`` (column -> value) or ``error`` (an :class:`InputError`)."""

    __slots__ = ("number", "line", "values", "error")

    def __init__(self, number: int, line: int, values: dict[str, Any] | None,
                 error: InputError | None = None) -> None:
        self.number = number
        self.line = line
        self.values = values
        self.error = error

    def __repr__(self) -> str:
        state = f"error={str(self.error)!r}" if self.error else f"values={self.values!r}"
        return f"Row(number={self.number}, line={self.line}, {state})"


def parse_value(text: str, na_values: frozenset[str] = DEFAULT_NA_VALUES) -> Any:
    """A CSV field as a value: missing token -> ``MISSING``, number-like -> int/float, else the text.

    >>> [parse_value(s) for s in ["12", "-3.5", "1e3", "", "abc", "1_000", " 7 ", "-4", "2.0", "NA", " ? "]]
    [12, -3.5, 1000.0, nan, 'abc', '1_000', 7, -4, 2.0, nan, nan]
    """
    if text in na_values:
        return MISSING
    if text.isdigit():
        try:
            return int(text)
        except ValueError:  # digits int() does not take, such as superscripts
            return text
    try:
        value = float(text)
    except ValueError:
        stripped = text.strip()
        return MISSING if stripped and stripped in na_values else text
    if "_" in text:  # float() accepts digit separators; in a data file that is a string
        return text
    if value != value:  # "nan" and its spellings: missing, like the tokens
        return MISSING
    if value.is_integer() and text.strip().lstrip("+-").isdigit():
        return int(text)
    return value


class _NotANumber(ValueError):
    pass


def _number_parser(na_values: frozenset[str]) -> Callable[[str], Any]:
    """:func:`parse_value` for a column known to hold numbers: raises on anything else."""

    def number(text: str) -> Any:
        if text in na_values:
            return MISSING
        if text.isdigit():
            try:
                return int(text)
            except ValueError:
                raise _NotANumber(text) from None
        try:
            value = float(text)
        except ValueError:
            stripped = text.strip()
            if stripped and stripped in na_values:
                return MISSING
            raise _NotANumber(text) from None
        if "_" in text:
            raise _NotANumber(text)
        if value != value:
            return MISSING
        if value.is_integer() and text.strip().lstrip("+-").isdigit():
            return int(text)
        return value
    return number


def _string_parser(na_values: frozenset[str]) -> Callable[[str], Any]:
    def string(text: str) -> Any:
        if text in na_values:
            return MISSING
        stripped = text.strip()
        return MISSING if stripped and stripped in na_values else text
    return string


def detect_format(path: str | None, explicit: str | None = None) -> str | None:
    """``csv`` or ``jsonl`` from ``explicit`` or the file name (``.gz`` ignored); ``None`` if unknown."""
    if explicit:
        key = explicit.lower()
        if key in ("ndjson", "json"):
            key = "jsonl"
        if key not in FORMATS:
            raise ValueError(f"unknown input format {explicit!r}; choose csv or jsonl")
        return key
    if not path or path == "-":
        return None
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    if name.endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    if name.endswith((".csv", ".txt", ".tsv", ".tab")):
        return "csv"
    return None


def delimiter_for(path: str | None) -> str | None:
    """The separator a file name implies: tab for ``.tsv``/``.tab`` (``.gz`` ignored), else ``None``."""
    if not path or path == "-":
        return None
    name = path.lower()
    if name.endswith(".gz"):
        name = name[:-3]
    return "\t" if name.endswith((".tsv", ".tab")) else None


# -- raw bytes -------------------------------------------------------------------------------
class _ByteSource:
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
        self._inflate: Any = None  # zlib decompressor when the input is gzip
        self._pending = b""  # compressed bytes not yet inflated

    def _raw_ready(self, timeout: float) -> bool:
        if not self._pollable:
            return True
        try:
            readable, _, _ = select.select([self._fd], [], [], timeout)
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
        data = self._pending + chunk if self._pending else chunk
        self._pending = b""
        try:
            out = self._inflate.decompress(data, _MAX_INFLATE)
        except zlib.error as error:
            raise InputError(f"invalid gzip data ({error})") from None
        self._inflate_started = True
        if self._inflate.unconsumed_tail:
            self._pending = self._inflate.unconsumed_tail
        elif self._inflate.eof:
            rest = self._inflate.unused_data
            if rest.strip(b"\x00"):  # concatenated gzip members: start the next one
                self._inflate = zlib.decompressobj(wbits=31)
                self._pending = rest
            self._inflate_started = False
        return out

    def close(self) -> None:
        if self._close and not isinstance(self._stream, int):
            self._stream.close()


# -- lines --------------------------------------------------------------------------------------
class _LineBuffer:
    """Complete decoded lines (with their ``\\n``) taken from a byte source as they arrive."""

    def __init__(self, source: _ByteSource) -> None:
        self._source = source
        self._lines: collections.deque[str] = collections.deque()
        self._partial = b""
        self._start = True
        self._eof = False
        self.lines_read = 0  # lines handed out so far
        self._next_line = 1  # number of the next line to enter the buffer
        #: line number -> message, for lines that were not valid UTF-8 or too long
        self.bad_lines: dict[int, str] = {}
        self._skipping = False  # dropping the rest of a line longer than MAX_LINE_BYTES

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
        for raw in data.splitlines(keepends=True) if b"\r" not in data else _split_newlines(data):
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
            chunk = self._source.read(wait=False)
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
                return None
            self._take(self._source.read(wait=True))

    def readline(self) -> str:
        """The next line with its newline; ``''`` at the end of input. Blocks if needed."""
        lines = self._lines
        while not lines:
            if self._eof:
                return ""
            self._take(self._source.read(wait=True))
        self.lines_read += 1
        return lines.popleft()

    def __iter__(self) -> Iterator[str]:
        readline = self.readline
        while True:
            line = readline()
            if not line:
                return
            yield line


def _csv_problem(error: csv.Error) -> str:
    """The csv module's message in the user's terms."""
    text = str(error)
    if "new-line character seen in unquoted field" in text:
        return ("a carriage return (CR) inside an unquoted field: quote the field, or, if the lines end with CR "
                "alone (old Mac style), convert the line ends to LF or CRLF")
    if "field larger than field limit" in text:
        return f"a field is longer than {csv.field_size_limit():,} characters, the csv module's limit"
    return text


def _split_newlines(data: bytes) -> list[bytes]:
    parts = data.split(b"\n")
    last = parts.pop()
    out = [p + b"\n" for p in parts]
    if last:
        out.append(last)
    return out


# -- rows ---------------------------------------------------------------------------------------
class RowReader:
    """Rows of one CSV or JSONL input. See the module docstring.

    Parameters
    ----------
    stream
        A binary file object or a file descriptor.
    name
        How messages name the input (a path or ``<stdin>``).
    format
        ``csv``, ``jsonl`` or ``None`` to sniff it (a first line ``{...}`` means JSONL).
    close
        Close ``stream`` in :meth:`close`.
    na_values
        Fields (CSV) and strings (JSONL) that mean a missing value; see :func:`na_tokens`.
    delimiter
        The CSV field separator; ``None`` sniffs it from the header line.
    """

    def __init__(self, stream: BinaryIO | int, *, name: str = STDIN_NAME, format: str | None = None,
                 close: bool = False, na_values: frozenset[str] = DEFAULT_NA_VALUES,
                 delimiter: str | None = None) -> None:
        self.name = name
        self.na_values = na_values
        self.delimiter = delimiter
        self._source = _ByteSource(stream, close)
        self._lines = _LineBuffer(self._source)
        self._format = detect_format(None, format) if format else None
        self._columns: list[str] | None = None
        self._kinds: dict[str, int] = {}  # JSONL: the kinds; CSV: kinds assumed before the first row
        self._csv_kinds: list[int] | None = None
        self._rows_started = False
        self._peeked: collections.deque[Row] = collections.deque()
        self._csv: Any = None
        self.rows_read = 0  # data rows handed out, bad ones included

    # -- set-up ---------------------------------------------------------------------------
    @property
    def format(self) -> str:
        """``csv`` or ``jsonl``; when not given, sniffed from the first non-blank line (may block)."""
        if self._format is None:
            first = self._lines.peek_nonblank()
            line = first.strip() if first is not None else ""
            # a JSON object line starts with '{' and ends with '}'; a CSV header may start with '{'
            self._format = "jsonl" if line.startswith("{") and line.endswith("}") else "csv"
        return self._format

    def _start(self) -> None:
        if self._rows_started:
            return
        self._rows_started = True
        if self.format == "csv":
            if self.delimiter is None:
                first = self._lines.peek_nonblank()
                self.delimiter = sniff_delimiter(first or "")
            self._csv = csv.reader(iter(self._lines), delimiter=self.delimiter)
            header = self._read_header()
            self._columns = header
        # JSONL: columns come from the first object (see ``columns``)

    def _read_header(self) -> list[str]:
        try:
            header = next(self._csv)
            while not header:  # blank lines before the header
                header = next(self._csv)
        except StopIteration:
            raise InputError("the input is empty (no header line)", source=self.name) from None
        except csv.Error as error:
            raise InputError(f"cannot read the header: {_csv_problem(error)}", source=self.name,
                             line=self._csv.line_num) from None
        bad = [n for n in self._lines.bad_lines if n <= self._csv.line_num]
        if bad:
            raise InputError(self._lines.bad_lines[bad[0]], source=self.name, line=bad[0])
        names = [h.strip() for h in header]
        for i, n in enumerate(names, 1):
            if not n:
                raise InputError(f"the header's field {i} is empty; every column needs a name",
                                 source=self.name, line=self._csv.line_num)
        seen: set[str] = set()
        duplicates = [n for n in names if n in seen or seen.add(n)]  # type: ignore[func-returns-value]
        if duplicates:
            raise InputError(f"duplicate column name(s) in the header: {', '.join(sorted(set(duplicates)))}",
                             source=self.name, line=self._csv.line_num)
        return names

    @property
    def columns(self) -> list[str]:
        """The column names: the CSV header, or the keys of the first JSONL object.

        Reading them may block until the first line (JSONL: the first row) arrives.
        """
        self._start()
        if self._columns is None:  # JSONL: peek at the first good row
            for row in self._iter_rows():
                self._peeked.append(row)
                if row.error is None:
                    break
            if self._columns is None:
                self._columns = []
        return self._columns

    # -- rows -----------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Row]:
        self._start()
        while self._peeked:
            yield self._peeked.popleft()
        yield from self._iter_rows()

    def _iter_rows(self) -> Iterator[Row]:
        if self.format == "csv":
            return self._csv_rows()
        return self._jsonl_rows()

    def _bad(self, message: str, line: int, column: str | None = None) -> Row:
        self.rows_read += 1
        error = InputError(message, source=self.name, row=self.rows_read, line=line, column=column)
        return Row(self.rows_read, line, None, error)

    def _csv_rows(self) -> Iterator[Row]:
        reader = self._csv
        header = self._columns
        n_fields = len(header)
        bad_lines = self._lines.bad_lines
        # 0 until the column's first non-missing value (or as assumed by ``assume_kinds``)
        kinds = self._csv_kinds = [self._kinds.get(h, 0) for h in header]
        converters: list[Callable[[str], Any]] | None = None  # once every kind is known
        na_values = self.na_values
        as_number, as_string = _number_parser(na_values), _string_parser(na_values)
        last_line = reader.line_num
        while True:
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                line = last_line + 1
                last_line = reader.line_num
                yield self._bad(f"cannot parse the line: {_csv_problem(error)}", line)
                continue
            line = last_line + 1
            last_line = reader.line_num
            if not fields:  # blank line
                continue
            if bad_lines:
                bad = [n for n in bad_lines if n <= last_line]
                if bad:
                    message = bad_lines[bad[0]]
                    for n in bad:
                        del bad_lines[n]
                    yield self._bad(message, line)
                    continue
            if len(fields) != n_fields:
                hint = ""
                if last_line > line and any("\n" in f for f in fields):
                    hint = (f"; a quoted field runs from line {line} to line {last_line}: is a closing quote "
                            "missing?")
                yield self._bad(f"expected {n_fields} fields (as in the header), got {len(fields)}{hint}", line)
                continue
            if converters is not None:  # fast path: every column's kind is known
                try:
                    values = {name: convert(text) for name, convert, text in zip(header, converters, fields)}
                except _NotANumber as clash:
                    column = next(h for h, k, t in zip(header, kinds, fields) if k == _NUMBER and t == clash.args[0])
                    yield self._bad(f"expected a number (the column held numbers before), got {clash.args[0]!r}",
                                    line, column)
                    continue
                self.rows_read += 1
                yield Row(self.rows_read, line, values)
                continue
            values = {}
            problem = None
            learned = []  # (column index, kind) fixed by this row, kept only if the row is good
            for i, text in enumerate(fields):
                kind = kinds[i]
                if kind == _STRING:
                    values[header[i]] = as_string(text)
                    continue
                value = parse_value(text, na_values)
                if type(value) is str:
                    if kind == _NUMBER:
                        problem = (f"expected a number (the column held numbers before), got {text!r}", header[i])
                        break
                    learned.append((i, _STRING))
                elif kind == 0 and value == value:  # a missing value does not fix the kind
                    learned.append((i, _NUMBER))
                values[header[i]] = value
            if problem:
                yield self._bad(problem[0], line, problem[1])
                continue
            for i, kind in learned:
                kinds[i] = kind
            if 0 not in kinds:
                converters = [as_number if k == _NUMBER else as_string for k in kinds]
            self.rows_read += 1
            yield Row(self.rows_read, line, values)

    def _jsonl_rows(self) -> Iterator[Row]:
        import orjson

        lines = self._lines
        kinds = self._kinds
        na_values = self.na_values
        while True:
            text = lines.readline()
            if not text:
                return
            line = lines.lines_read
            if line in lines.bad_lines:
                message = lines.bad_lines.pop(line)
                yield self._bad(message, line)
                continue
            if not text.strip():
                continue
            try:
                obj = orjson.loads(text)
            except orjson.JSONDecodeError as error:
                yield self._bad(f"not valid JSON ({error})", line)
                continue
            if type(obj) is not dict:
                yield self._bad(f"expected a JSON object, got {type(obj).__name__ if obj is not None else 'null'}",
                                line)
                continue
            problem = None
            learned = []  # (key, kind) fixed by this row, kept only if the row is good
            for key, value in obj.items():
                if value is None:
                    obj[key] = MISSING
                    continue
                kind = kinds.get(key, 0)
                is_text = type(value) is str
                if is_text and (value in na_values or (value.strip() or "\x00") in na_values):
                    obj[key] = MISSING
                    continue
                if isinstance(value, (dict, list)):
                    problem = ("nested objects and arrays are not supported as values", key)
                    break
                if kind == _NUMBER and is_text:
                    problem = (f"expected a number (the column held numbers before), got {value!r}", key)
                    break
                if kind == _STRING and not is_text:
                    problem = (f"expected a string (the column held strings before), got {value!r}", key)
                    break
                if kind == 0:
                    learned.append((key, _STRING if is_text else _NUMBER))
            if problem:
                yield self._bad(problem[0], line, problem[1])
                continue
            kinds.update(learned)
            self.rows_read += 1
            if self._columns is None:
                self._columns = list(obj)
            yield Row(self.rows_read, line, obj)

    # -- column kinds (for a run that continues in another input) ----------------------------
    def column_kinds(self) -> dict[str, str]:
        """Each column's kind so far: ``"number"`` or ``"text"`` (columns not yet fixed are left out)."""
        if self._csv_kinds is not None and self._columns is not None:
            kinds = dict(zip(self._columns, self._csv_kinds))
        else:
            kinds = dict(self._kinds)
        return {name: "number" if k == _NUMBER else "text" for name, k in kinds.items() if k}

    def assume_kinds(self, kinds: dict[str, str]) -> None:
        """Start with these column kinds, as if earlier rows had fixed them (before reading rows)."""
        self._kinds.update({name: _NUMBER if kind == "number" else _STRING for name, kind in kinds.items()})

    # -- micro-batches ----------------------------------------------------------------------
    def ready(self, timeout: float = 0.0) -> bool:
        """True when the next row (or the end) can be read without waiting.

        (A quoted CSV field spanning lines may still wait for its closing line.)
        """
        return bool(self._peeked) or self._lines.ready(timeout)

    def batches(self, max_rows: int = 1000, *, idle: Callable[[], None] | None = None,
                idle_interval: float = 0.25) -> Iterator[list[Row]]:
        """Lists of rows: wait for one row, then add rows while more are available at once.

        ``idle`` is called about every ``idle_interval`` seconds while waiting for input
        (e.g. to refresh a display). A batch never holds more than ``max_rows`` rows.
        """
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        rows = iter(self)
        while True:
            if idle is not None:
                while not self.ready(idle_interval):
                    idle()
            try:
                batch = [next(rows)]
            except StopIteration:
                return
            while len(batch) < max_rows and self.ready():
                try:
                    batch.append(next(rows))
                except StopIteration:
                    yield batch
                    return
            yield batch

    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> RowReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_rows(path: str | None, *, format: str | None = None, hint: bool = True,
              na_values: frozenset[str] = DEFAULT_NA_VALUES, delimiter: str | None = None) -> RowReader:
    """Open ``path`` (``None`` or ``-``: stdin) for reading rows.

    When reading a terminal, prints csvkit's hint to stderr so a user who forgot the
    input knows why nothing happens. Raises :class:`InputError` when the file cannot
    be opened.
    """
    fmt = detect_format(path, format)
    options: dict[str, Any] = {"na_values": na_values, "delimiter": delimiter or delimiter_for(path)}
    if not path or path == "-":
        if hint and _stdin_is_tty():
            print(TTY_HINT, file=sys.stderr, flush=True)
        try:
            fd: BinaryIO | int = sys.stdin.fileno()
        except (AttributeError, OSError, ValueError):
            fd = sys.stdin.buffer  # e.g. a test runner's in-memory stdin
        return RowReader(fd, name=STDIN_NAME, format=fmt, **options)
    try:
        if os.path.isdir(path):
            raise InputError("is a directory, not a data file", source=path)
        stream = open(path, "rb", buffering=0)
    except FileNotFoundError:
        raise InputError("no such file", source=path) from None
    except PermissionError:
        raise InputError("permission denied", source=path) from None
    except OSError as error:
        raise InputError(f"cannot open the file ({error.strerror or error})", source=path) from None
    return RowReader(stream, name=path, format=fmt, close=True, **options)


def _stdin_is_tty() -> bool:
    try:
        return sys.stdin is not None and sys.stdin.isatty()
    except (AttributeError, ValueError):
        return False
