"""Streaming readers: rows of a CSV or JSONL file, stdin or pipe, one at a time.

* ``INPUT`` is a path, ``-`` or ``None`` (stdin). gzip, bz2 and xz are recognised by their
  magic bytes; text is UTF-8 and a byte-order mark is ignored; a zip archive or UTF-16 text is
  refused naming what it is (:mod:`ipfi_cli.io.sources`).
* CSV has a header line; fields follow the stdlib ``csv`` rules (quoted fields may hold
  commas, quotes and newlines); a row whose every field is empty (``,,,,``, as spreadsheets
  export) is skipped as a blank line, and counted; Excel's first line ``sep=;`` names the
  separator. JSONL is one JSON object per line; blank lines are skipped. A
  nested object or array in a JSONL object is kept as a :class:`~ipfi_cli.io.values.Nested`
  value, which the run refuses only in a column it uses.
  How a field becomes a number, a string or missing, and the separator, are the rules of
  :mod:`ipfi_cli.io.values`.
* A column's kind is fixed by its first non-missing value: once a column has held a
  number, a later non-numeric value in it is a bad row (``column 'age': expected a
  number``); once it has held a string, later number-like fields keep their text
  (``"07"`` stays ``"07"``). Only good rows fix a column's kind.

Rows come out as :class:`~ipfi_cli.io.values.Row` objects that know their 1-based data row
number and the line they start on. A row that cannot be read comes out with ``row.error``
set instead of raising, so the caller decides whether to stop or skip it; only problems
with the file as a whole (cannot be opened, no header, duplicate column names) raise
:class:`~ipfi_cli.errors.InputError`.

:meth:`RowReader.batches` groups rows into micro-batches of *whatever is already
available*, and hands regular CSV lines on as blocks parsed in bulk
(:mod:`ipfi_cli.io.batching`); JSONL rows are read by :mod:`ipfi_cli.io.jsonl`.

>>> import io
>>> reader = RowReader(io.BytesIO(b"a,b,label\\n1,x,yes\\n2.5,,no\\n"), name="demo.csv")
>>> reader.columns
['a', 'b', 'label']
>>> [(row.number, row.line, row.values) for row in reader]
[(1, 2, {'a': 1, 'b': 'x', 'label': 'yes'}), (2, 3, {'a': 2.5, 'b': nan, 'label': 'no'})]
"""

from __future__ import annotations

import collections
import csv
import os
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.io.batching import MicroBatches
from ipfi_cli.io.jsonl import JsonlRows
from ipfi_cli.io.lines import LineBuffer
from ipfi_cli.io.sources import ByteSource, stdin_is_tty
from ipfi_cli.io.values import (
    DEFAULT_NA_VALUES,
    NOT_PANDAS_NA,
    NUMBER,
    STRING,
    NotANumber,
    Row,
    decimal_comma_hint,
    decimal_point_hint,
    delimiter_for,
    detect_format,
    noted_missing_summary,
    number_parser,
    parse_value,
    sniff_delimiter,
    string_parser,
)
from ipfi_cli.text import quoted

if TYPE_CHECKING:
    from ipfi_cli.io.blocks import RowBlock

STDIN_NAME = "<stdin>"
TTY_HINT = "No input file or piped data provided. Waiting for standard input:"


def _csv_problem(error: csv.Error) -> str:
    """The csv module's message in the user's terms."""
    text = str(error)
    if "new-line character seen in unquoted field" in text:
        return ("a carriage return (CR) inside an unquoted field: quote the field, or, if the lines end with CR "
                "alone (old Mac style), convert the line ends to LF or CRLF")
    if "field larger than field limit" in text:
        return f"a field is longer than {csv.field_size_limit():,} characters, the csv module's limit"
    return text


class RowReader(JsonlRows, MicroBatches):
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
    decimal
        The CSV numbers' decimal mark, ``.`` or ``,`` (``12,8``); JSON numbers are typed.
    skip_initial_space
        CSV: spaces right after a separator are not part of the field (``39, State-gov`` is
        ``'State-gov'``, as UCI's files are written), as ``pandas.read_csv(skipinitialspace=True)``.
    """

    supports_blocks = True  # batches(blocks=True) may give RowBlocks

    def __init__(self, stream: BinaryIO | int, *, name: str = STDIN_NAME, format: str | None = None,
                 close: bool = False, na_values: frozenset[str] = DEFAULT_NA_VALUES,
                 delimiter: str | None = None, decimal: str = ".", skip_initial_space: bool = False) -> None:
        self.name = name
        self.na_values = na_values
        self.delimiter = delimiter
        self.decimal = decimal
        self.skip_initial_space = skip_initial_space
        self._source = ByteSource(stream, close, name=None if name.startswith("<") else name)
        self._lines = LineBuffer(self._source, name=self.name)
        self._format = detect_format(None, format) if format else None
        self._columns: list[str] | None = None
        self._kinds: dict[str, int] = {}  # JSONL: the kinds; CSV: kinds assumed before the first row
        self._csv_kinds: list[int] | None = None
        self._csv_converters: list[Callable[[str], Any]] | None = None  # once every CSV column's kind is known
        self._csv_strings: list[Callable[[str], Any]] = []
        self._block_lines = 0  # lines not read by the csv reader: an Excel `sep=` line, those read_block parsed
        self._span: RowBlock | None = None  # lines parsed in bulk ahead, handed out by read_block
        self._span_at = 0
        self._small_until = 0  # a span ahead needed the row reader: micro-batch spans until this line
        self._number_tokens: frozenset[str] | None = None  # missing-value tokens that look like numbers
        self._rows_started = False
        self._peeked: collections.deque[Row] = collections.deque()
        self._csv: Any = None
        self.rows_read = 0  # data rows handed out, bad ones included
        #: column -> {token: count} of the fields read as missing through a token pandas keeps as text
        self.noted_missing: dict[str, dict[str, int]] = {}
        #: (1-based field, name given) for each CSV header field that had no name
        self.unnamed: list[tuple[int, str]] = []
        #: CSV rows whose every field is empty (skipped as blank lines), and the line of the first
        self.empty_rows = 0
        self.first_empty_line: int | None = None

    # -- set-up ---------------------------------------------------------------------------
    @property
    def known_format(self) -> str | None:
        """The format if it is known yet (given, or sniffed already), without reading."""
        return self._format

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
            given = self.delimiter is not None
            stated = excel_separator(self._lines.peek_nonblank())
            if stated is not None:  # Excel's `sep=;` line: not the header; it names the separator
                while not self._lines.readline().strip():  # the blank lines before it, and it
                    pass
                self._block_lines = self._lines.lines_read
                if not given:
                    self.delimiter = stated
            if self.delimiter is None:
                first = self._lines.peek_nonblank()
                self.delimiter = sniff_delimiter(first or "")
            if self.decimal == "," and self.delimiter == ",":
                why = "--delimiter is ','" if given else "the header is separated by ',' (give --delimiter)"
                raise UsageError("the decimal mark ',' needs fields separated by something else (';', a tab): "
                                 + why, "--decimal")
            self._csv = csv.reader(iter(self._lines), delimiter=self.delimiter,
                                   skipinitialspace=self.skip_initial_space)
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
                             line=self._csv.line_num + self._block_lines) from None
        line = self._csv.line_num + self._block_lines
        bad = [n for n in self._lines.bad_lines if n <= line]
        if bad:
            raise InputError(self._lines.bad_lines[bad[0]], source=self.name, line=bad[0])
        names = [h.strip() for h in header]
        for i, n in enumerate(names, 1):
            if not n:  # named as pandas names it: "Unnamed: 0" is the index of a frame written with its index
                given = f"Unnamed: {i - 1}"
                if given in names or len(names) == 1:
                    raise InputError(f"the header's field {i} is empty; every column needs a name",
                                     source=self.name, line=line)
                names[i - 1] = given
                self.unnamed.append((i, given))
        seen: set[str] = set()
        duplicates = [n for n in names if n in seen or seen.add(n)]  # type: ignore[func-returns-value]
        if duplicates:
            raise InputError(f"duplicate column name(s) in the header: {', '.join(sorted(set(duplicates)))}",
                             source=self.name, line=line)
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
        assert header is not None, "the header is read before the rows"
        n_fields = len(header)
        bad_lines = self._lines.bad_lines
        # 0 until the column's first non-missing value (or as assumed by ``assume_kinds``)
        kinds = self._csv_kinds = [self._kinds.get(h, 0) for h in header]
        converters: list[Callable[[str], Any]] | None = None  # once every kind is known
        self._csv_converters = None
        na_values = self.na_values
        noted = self.noted_missing
        decimal = self.decimal
        as_number = number_parser(na_values, decimal)
        # a decimal comma read with the decimal point: refused with the hint, not learned as text
        comma_hint = decimal == "." and self.delimiter != ","

        def number_hint(text: str) -> str | None:
            """Why a number-like field is refused: a decimal comma read with the point, or a point read
            with the comma (refused, not learned as text, which a model would read as a number)."""
            if comma_hint:
                return decimal_comma_hint(text, self.delimiter)
            return decimal_point_hint(text) if decimal == "," else None
        as_strings = self._csv_strings = [string_parser(na_values, noted.setdefault(h, {})) for h in header]
        while True:
            if self._span is not None:  # parsed in bulk ahead: they come first, as rows
                yield from self.read_block(len(self._span))  # type: ignore[misc]
            # lines taken by read_block are not the csv reader's: it counts only its own
            line = reader.line_num + self._block_lines + 1
            try:
                fields = next(reader)
            except StopIteration:
                return
            except csv.Error as error:
                last_line = reader.line_num + self._block_lines
                yield self._bad(f"cannot parse the line: {_csv_problem(error)}", line)
                continue
            last_line = reader.line_num + self._block_lines
            if not fields or (n_fields > 1 and len(fields) == 1 and not fields[0].strip()):
                continue  # a blank line, or one of spaces only (as editors and exports leave at the end)
            if n_fields > 1 and not fields[0] and not any(fields):
                # every field empty (',,,,', as a spreadsheet exports rows below its data): a blank line too
                # (in a file of one column, a quoted "" is a missing value; a field of spaces is text or missing
                # by its column's kind, as in any other row)
                self.empty_rows += 1
                self.first_empty_line = self.first_empty_line or line
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
                elif len(fields) == n_fields + 1 and not fields[-1]:  # '1,2,x,' under 'a,b,c'
                    hint = "; the last one is empty: does each row end with a separator the header does not?"
                yield self._bad(f"expected {n_fields} fields (as in the header), got {len(fields)}{hint}", line)
                continue
            if converters is not None:  # fast path: every column's kind is known
                try:
                    values = {name: convert(text) for name, convert, text in zip(header, converters, fields)}
                except NotANumber as clash:
                    column = next(h for h, k, t in zip(header, kinds, fields) if k == NUMBER and t == clash.args[0])
                    comma = number_hint(clash.args[0])
                    yield self._bad(f"expected a number (the column held numbers before), got {quoted(clash.args[0])}"
                                    + (f"; {comma}" if comma else ""), line, column)
                    continue
                self.rows_read += 1
                yield Row(self.rows_read, line, values)
                continue
            values = {}
            problem = None
            learned = []  # (column index, kind) fixed by this row, kept only if the row is good
            for i, text in enumerate(fields):
                kind = kinds[i]
                if kind == STRING:
                    values[header[i]] = as_strings[i](text)
                    continue
                value = parse_value(text, na_values, decimal)
                if value != value and text.strip() in NOT_PANDAS_NA:  # read as missing, where pandas keeps it
                    as_strings[i](text)  # counts it
                if type(value) is str:
                    comma = number_hint(text)
                    if kind == NUMBER:
                        problem = (f"expected a number (the column held numbers before), got {quoted(text)}"
                                   + (f"; {comma}" if comma else ""), header[i])
                        break
                    if comma:
                        problem = (comma, header[i])
                        break
                    learned.append((i, STRING))
                elif kind == 0 and value == value:  # a missing value does not fix the kind
                    learned.append((i, NUMBER))
                values[header[i]] = value
            if problem:
                yield self._bad(problem[0], line, problem[1])
                continue
            for i, kind in learned:
                kinds[i] = kind
            if 0 not in kinds:
                converters = [as_number if k == NUMBER else as_strings[i] for i, k in enumerate(kinds)]
                self._csv_converters = converters
            self.rows_read += 1
            yield Row(self.rows_read, line, values)

    def noted_missing_summary(self) -> str | None:
        """One line about values read as missing through a token pandas keeps as text (``?``),
        or ``None``: a model trained on data pandas read may have learned them as a category."""
        return noted_missing_summary(self.name, self.noted_missing)

    def empty_rows_summary(self) -> str | None:
        """One line about the CSV rows skipped because every field was empty, or ``None``."""
        if not self.empty_rows:
            return None
        return (f"{self.name}: skipped {self.empty_rows:,} row(s) whose every field is empty (the first at line "
                f"{self.first_empty_line:,}), as blank lines: a spreadsheet exports such rows below its data")

    # -- column kinds (for a run that continues in another input) ----------------------------
    def column_kinds(self) -> dict[str, str]:
        """Each column's kind so far: ``"number"`` or ``"text"`` (columns not yet fixed are left out)."""
        if self._csv_kinds is not None and self._columns is not None:
            kinds = dict(zip(self._columns, self._csv_kinds))
        else:
            kinds = dict(self._kinds)
        return {name: "number" if k == NUMBER else "text" for name, k in kinds.items() if k}

    def keep_as_text(self, names: Iterable[str] | None) -> None:
        """Read these CSV columns as text, even where a field looks like a number (``02139``
        stays ``'02139'``); a name that is not a column is a :class:`~ipfi_cli.errors.UsageError`.
        JSON values keep their own types, so for JSONL this does nothing. Call before reading rows."""
        names = list(names or [])
        if not names or self.format != "csv":
            return
        unknown = [n for n in names if n not in self.columns]
        if unknown:
            raise UsageError(f"no such input column: {', '.join(unknown)} (the columns: {', '.join(self.columns)})",
                             "--text")
        self.assume_kinds({name: "text" for name in names})

    def assume_kinds(self, kinds: dict[str, str]) -> None:
        """Start with these column kinds, as if earlier rows had fixed them (before reading rows)."""
        self._kinds.update({name: NUMBER if kind == "number" else STRING for name, kind in kinds.items()})

    # -- micro-batches ----------------------------------------------------------------------
    def close(self) -> None:
        self._source.close()

    def __enter__(self) -> RowReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_rows(path: str | None, *, format: str | None = None, hint: bool = True,
              na_values: frozenset[str] = DEFAULT_NA_VALUES, delimiter: str | None = None,
              decimal: str = ".", skip_initial_space: bool = False) -> RowReader:
    """Open ``path`` (``None`` or ``-``: stdin) for reading rows.

    When reading a terminal, prints csvkit's hint to stderr so a user who forgot the
    input knows why nothing happens. Raises :class:`InputError` when the file cannot
    be opened. Parquet (a file, a folder of partitions or a glob) is read by
    :class:`~ipfi_cli.io.parquet.ParquetRowReader`, which has the same interface
    (``delimiter``, ``decimal`` and ``skip_initial_space`` do not apply to its typed columns).
    """
    from ipfi_cli.io.parquet import open_parquet
    from ipfi_cli.io.parquet_files import is_parquet_input

    if is_parquet_input(path, format):
        return open_parquet(path, na_values=na_values)  # type: ignore[return-value]
    fmt = detect_format(path, format)
    options: dict[str, Any] = {"na_values": na_values, "delimiter": delimiter or delimiter_for(path),
                               "decimal": decimal, "skip_initial_space": skip_initial_space}
    if not path or path == "-":
        if hint and stdin_is_tty():
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


def excel_separator(line: str | None) -> str | None:
    """The separator an Excel CSV's first line names (``sep=;``), or ``None`` for any other line.

    >>> [excel_separator(t) for t in ["sep=;\\r\\n", '"sep=,"\\n', "sep=\\t\\n", "sep,x\\n", "sep=ab\\n", None]]
    [';', ',', '\\t', None, None, None]
    """
    if line is None:
        return None
    text = line.strip(" \r\n")
    if len(text) >= 2 and text[0] == text[-1] == '"':
        text = text[1:-1]
    if len(text) == 5 and text[:4].lower() == "sep=" and text[4] not in "\"\r\n":
        return text[4]
    return None
