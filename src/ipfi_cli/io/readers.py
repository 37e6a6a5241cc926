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
available*: it blocks for the first row, then takes more rows only while they can be
read without waiting, so a fast pipe gives large batches and a slow writer's row is
handed on at once.

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
import re
import sys
from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any, BinaryIO

from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.io.sources import ByteSource, LineBuffer, stdin_is_tty
from ipfi_cli.io.values import (
    DEFAULT_NA_VALUES,
    MISSING,
    NOT_PANDAS_NA,
    NUMBER,
    STRING,
    Nested,
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
#: with pyarrow, lines available at once are parsed in bulk this many at a time (then handed out a
#: micro-batch at a time): one call costs about 0.3 ms more than its lines
SPAN_ROWS = 8192


def _csv_problem(error: csv.Error) -> str:
    """The csv module's message in the user's terms."""
    text = str(error)
    if "new-line character seen in unquoted field" in text:
        return ("a carriage return (CR) inside an unquoted field: quote the field, or, if the lines end with CR "
                "alone (old Mac style), convert the line ends to LF or CRLF")
    if "field larger than field limit" in text:
        return f"a field is longer than {csv.field_size_limit():,} characters, the csv module's limit"
    return text


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
                # the parser's own "line 2 column 1" would count lines of this one line (its newline)
                yield self._bad(f"not valid JSON ({error.msg} at character {error.pos + 1} of the line)", line)
                continue
            if type(obj) is not dict:
                yield self._bad(f"expected a JSON object, got {type(obj).__name__ if obj is not None else 'null'}",
                                line)
                continue
            # a key given twice would leave its last value silently (as json and pandas do): one `":` per
            # key is the usual line; any other line is parsed again to find a repeated key exactly
            if (text.count('":') != len(obj) or " :" in text or "\t:" in text) and (key := _repeated_key(text)):
                yield self._bad(f"the key {quoted(key)} is given twice in this object (which value is meant?)", line,
                                key)
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
                    if value.strip() in NOT_PANDAS_NA:
                        counts = self.noted_missing.setdefault(key, {})
                        counts[value.strip()] = counts.get(value.strip(), 0) + 1
                    continue
                if isinstance(value, (dict, list)):  # kept: refused only where the run uses the key
                    obj[key] = Nested(value)
                    continue
                if kind == NUMBER and is_text:
                    problem = (f"expected a number (the column held numbers before), got {quoted(value)}", key)
                    break
                if kind == STRING and not is_text:
                    problem = (f"expected a string (the column held strings before), got {quoted(value)}", key)
                    break
                if kind == 0:
                    learned.append((key, STRING if is_text else NUMBER))
            if problem:
                yield self._bad(problem[0], line, problem[1])
                continue
            kinds.update(learned)
            self.rows_read += 1
            if self._columns is None:
                self._columns = list(obj)
            yield Row(self.rows_read, line, obj)

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
    def ready(self, timeout: float = 0.0) -> bool:
        """True when the next row (or the end) can be read without waiting.

        (A quoted CSV field spanning lines may still wait for its closing line.)
        """
        return bool(self._peeked) or self._span is not None or self._lines.ready(timeout)

    def read_block(self, max_rows: int) -> RowBlock | None:
        """Up to ``max_rows`` CSV rows that are available now, parsed in bulk, or ``None`` when
        they need the row reader (see :mod:`ipfi_cli.io.blocks`; nothing is consumed then).

        Only once every column's kind is known (rows read one at a time fix them). With pyarrow,
        the lines available now are parsed a span of up to :data:`SPAN_ROWS` at a time (one call has
        a fixed cost of about 0.3 ms), and handed out ``max_rows`` at a time; a span that needs the
        row reader somewhere is tried again as ``max_rows`` lines alone."""
        if self._span is None:
            from ipfi_cli.io.blocks import BLOCK_DELIMITERS

            header = self._columns
            if (self._csv_converters is None or header is None or self._peeked or self.decimal != "."
                    or self.delimiter not in BLOCK_DELIMITERS or self.skip_initial_space):
                return None
            span = max(max_rows, SPAN_ROWS) if sys.modules.get("pyarrow") is not None else max_rows
            self._span = self._parse_span(span, header)
            if self._span is None and span > max_rows:
                self._span = self._parse_span(max_rows, header)
            if self._span is None:
                return None
            self._span_at = 0
        span, begin = self._span, self._span_at
        end = min(len(span), begin + max_rows)
        block = span if (begin, end) == (0, len(span)) else span.slice(begin, end)
        self._span_at = end
        if end == len(span):
            self._span = None
        self._block_lines += len(block)
        self.rows_read += len(block)
        return block.convert_texts()

    def _parse_span(self, max_rows: int, header: list[str]) -> RowBlock | None:
        """Up to ``max_rows`` lines available now as a block, or ``None`` (nothing is consumed then)."""
        from ipfi_cli.io.blocks import parse_block

        buffer = self._lines
        lines = buffer.take_decoded(max_rows)  # lines a row read decoded already, then the input's bytes
        raw, count = buffer.take_raw(max_rows - len(lines)) if len(lines) < max_rows else (b"", 0)
        n_lines = len(lines) + count
        block = None
        if n_lines and not any(n <= buffer.lines_read for n in buffer.bad_lines):
            kinds = self._csv_kinds or []
            if self._number_tokens is None:
                plain = re.compile(r"[0-9.eE+\-]+")
                self._number_tokens = frozenset(t for t in self.na_values if plain.fullmatch(t))
            block = parse_block("".join(lines).encode() + raw if lines else raw, n_lines, header, kinds,
                                [None if k == NUMBER else self._csv_strings[i] for i, k in enumerate(kinds)],
                                self.delimiter or ",", self.na_values, first_number=self.rows_read + 1,
                                first_line=buffer.lines_read - n_lines + 1,
                                number_of=number_parser(self.na_values, self.decimal),
                                number_tokens=self._number_tokens, convert=False)
        if block is None:
            if count:
                buffer.give_back_raw(raw, count)
            buffer.give_back(lines)
        return block

    def batches(self, max_rows: int = 1000, *, idle: Callable[[], None] | None = None,
                idle_interval: float = 0.25, blocks: bool = False) -> Iterator[list[Row] | RowBlock]:
        """Lists of rows: wait for one row, then add rows while more are available at once.

        ``idle`` is called about every ``idle_interval`` seconds while waiting for input
        (e.g. to refresh a display). A batch never holds more than ``max_rows`` rows.
        With ``blocks``, a batch of a CSV may be a :class:`~ipfi_cli.io.blocks.RowBlock`
        (parsed in bulk; it iterates as the same rows): after a batch that needed the row
        reader, blocks are tried again after 1, 2, 4, ... up to 64 batches. Within the batch of
        rows whose first rows fix the columns' kinds, the rest of the batch is tried as a block
        once they are (its rows join the batch's list).
        """
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        rows = iter(self)
        blocks = blocks and self.format == "csv"
        wait, backoff = 0, 1
        while True:
            if idle is not None:
                while not self.ready(idle_interval):
                    idle()
            if blocks and wait == 0 and self._csv_converters is not None:
                block = self.read_block(max_rows)
                if block is not None:
                    backoff = 1
                    yield block
                    continue
                wait, backoff = backoff, min(64, 2 * backoff)
            tried = not blocks or wait > 0 or self._csv_converters is not None
            wait = max(0, wait - 1)
            try:
                batch = [next(rows)]
            except StopIteration:
                return
            while len(batch) < max_rows and self.ready():
                if not tried and self._csv_converters is not None:  # the kinds just became known
                    tried = True
                    block = self.read_block(max_rows - len(batch))
                    if block is not None:
                        batch.extend(block)
                        continue
                try:
                    batch.append(next(rows))
                except StopIteration:
                    yield batch
                    return
                except InputError:  # the input ended in error (a gzip cut short): the rows before it first
                    yield batch
                    raise
            yield batch

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
    from ipfi_cli.io.parquet import is_parquet_input, open_parquet

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


def _repeated_key(text: str) -> str | None:
    """The first key any object of the JSON ``text`` gives twice, or ``None``."""
    import json

    repeated: list[str] = []

    def pairs(items: list[tuple[str, Any]]) -> dict[str, Any]:
        seen: set[str] = set()
        for key, _ in items:
            if key in seen and not repeated:
                repeated.append(key)
            seen.add(key)
        return dict(items)

    json.loads(text, object_pairs_hook=pairs)
    return repeated[0] if repeated else None

