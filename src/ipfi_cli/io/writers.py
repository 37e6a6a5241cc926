"""Trace writers (CSV, JSONL) and flat record writers (atomic file writes: :mod:`ipfi_cli.io.targets`).

A trace is one record per explained row (or per ``every`` rows): the input's 1-based
data row number, then the current importance of each feature or group, then, when
asked, the confidence bound of each (``<name>_bound``). The header is fixed when the
writer is made, so every record has the same fields in the same order.

* CSV: a header line, ``\\n`` line ends, floats as Python's ``repr`` (the shortest text
  that reads back to the same float), NaN as an empty field (a missing value, as in the
  input). Names holding a comma, quote or newline are quoted.
* JSONL: one flat JSON object per line, strict JSON: NaN and infinities become ``null``.

With ``key_columns`` (``explain --by``) each record starts with its key's values, in fields
named as the key columns, before ``row``; ``row`` then counts the key's own rows. A key that is
a number but not finite (``inf``, ``1e400``) is written as the CSV writes it, ``inf``/``-inf``
(as text in JSON, which has no such number: ``null`` would read as a missing key), see
:func:`key_value`.

Writers write bytes to a binary stream and flush on :meth:`TraceWriter.flush`; the
caller flushes after each record or micro-batch, so ``tail -f`` follows the file and an
interrupted run leaves only complete records.

>>> import io
>>> out = io.BytesIO()
>>> writer = CsvTraceWriter(out, ["age", "salary"], bounds=True)
>>> writer.write(1, [float("nan"), float("nan")], [float("nan"), float("nan")])
>>> writer.write(2, [0.25, 0.1], [0.5, 0.125])
>>> print(out.getvalue().decode(), end="")
row,age,salary,age_bound,salary_bound
1,,,,
2,0.25,0.1,0.5,0.125
>>> out = io.BytesIO()
>>> JsonlTraceWriter(out, ["age"]).write(7, [float("nan")])
>>> out.getvalue()
b'{"row":7,"age":null}\\n'
"""

from __future__ import annotations

import math
import os
import sys
from collections.abc import Callable, Iterable, Sequence
from typing import IO, Any, BinaryIO, Protocol

from ipfi_cli.errors import IpfiError, OutputError
from ipfi_cli.io.targets import NamedOutput, atomic_write, cannot_write
from ipfi_cli.text import terminal_safe


def trace_columns(names: Sequence[str], bounds: bool = False, key_columns: Sequence[str] = ()) -> list[str]:
    """The trace header: the key columns (``--by``), ``row``, each name, then ``<name>_bound`` for
    each name if ``bounds``."""
    columns = [*key_columns, "row", *names]
    if bounds:
        columns += [f"{name}_bound" for name in names]
    return columns


def key_value(value: Any) -> Any:
    """A key column's value (``explain --by``) as JSON outputs write it (the JSONL trace, ``--meta``,
    the events file): a number that is not finite as the text the CSV trace writes for it (strict
    JSON has no such number, and ``null`` would read as a missing key); any other value as it is.

    >>> key_value(float("inf")), key_value(float("-inf")), key_value(7), key_value("eu")
    ('inf', '-inf', 7, 'eu')
    """
    if isinstance(value, float) and not math.isfinite(value):
        return repr(float(value))
    return value


def key_values(key: dict[str, Any]) -> dict[str, Any]:
    """A key as ``{column: value}`` with each value as :func:`key_value` writes it."""
    return {column: key_value(value) for column, value in key.items()}


def _csv_field(text: str) -> str:
    if any(c in text for c in ',"\n\r'):
        return '"' + text.replace('"', '""') + '"'
    return text


def _csv_number(value: float) -> str:
    if value != value:  # NaN: missing
        return ""
    return repr(value)


def _csv_cell(value: Any) -> str:
    """Any value as a CSV field: missing (None, NaN) empty, floats as repr, text quoted when needed."""
    if value is None or (isinstance(value, float) and value != value):
        return ""
    if isinstance(value, float):
        return repr(value)
    return _csv_field(str(value))


def terminal_text(stream: Any) -> Callable[[str], str] | None:
    """How text from data (feature names, key values, labels) is written to ``stream``: the one
    decision point. On a terminal, :func:`~ipfi_cli.text.terminal_safe` (control characters shown
    escaped, so a name cannot move the cursor or write the clipboard); to a pipe or a file,
    ``None``: the bytes stay the data's.

    >>> import io
    >>> terminal_text(io.BytesIO()) is None
    True
    """
    try:
        tty = bool(stream.isatty())
    except (AttributeError, OSError, ValueError):
        return None
    if not tty:
        return None

    return terminal_safe


def _cell_writer(safe: Callable[[str], str] | None) -> Callable[[Any], str]:
    """:func:`_csv_cell`, with text made safe first when ``safe`` (see :func:`terminal_text`)."""
    if safe is None:
        return _csv_cell
    return lambda value: _csv_field(safe(value)) if isinstance(value, str) else _csv_cell(value)


class ByteSink(Protocol):
    """Where writers write: a binary file, stdout's buffer, or a tracked output."""

    def write(self, data: bytes, /) -> int | None: ...

    def flush(self) -> None: ...

    def close(self) -> None: ...


class TraceWriter:
    """Base class: fixed header, one record per :meth:`write`, explicit :meth:`flush`."""

    format = ""

    def __init__(self, stream: ByteSink, names: Sequence[str], *, bounds: bool = False,
                 close: bool = False, key_columns: Sequence[str] = ()) -> None:
        self.stream = stream
        self.names = [str(n) for n in names]
        self.bounds = bounds
        self.key_columns = [str(c) for c in key_columns]
        self._safe = terminal_text(stream)
        shown = (lambda names: names) if self._safe is None else (lambda names: list(map(self._safe, names)))
        #: the header's fields, as written (made safe on a terminal, see :func:`terminal_text`)
        self.columns = trace_columns(shown(self.names), bounds, shown(self.key_columns))
        self._cell = _cell_writer(self._safe)
        self._close = close
        self.records = 0
        self._write = stream.write
        self._start()

    def _start(self) -> None:
        """Write whatever precedes the first record (the CSV header)."""

    def write(self, row: int, values: Sequence[float], bounds: Sequence[float] | None = None,
              key: Sequence[Any] = ()) -> None:
        """Write one record; ``values`` (and ``bounds``) in ``names`` order, as Python floats;
        ``key``: the values of the key columns."""
        raise NotImplementedError

    def write_many(self, rows: Sequence[int], values: Any, bounds: Any = None) -> None:
        """:meth:`write` for several records (no key columns): ``values`` is a 2-D float array,
        one line per row; in one write where the format allows. ``bounds``: one record's (the
        same for every record), or a 2-D array with one row per record."""
        import numpy as np

        per_record = bounds is not None and np.ndim(bounds) == 2
        records = np.asarray(values, dtype=np.float64).tolist()
        each = np.asarray(bounds, dtype=np.float64).tolist() if per_record else [bounds] * len(records)
        for row, record, bound in zip(rows, records, each):
            self.write(row, record, bound)

    def flush(self) -> None:
        self.stream.flush()

    def close(self) -> None:
        try:
            self.flush()
        finally:
            if self._close:
                self.stream.close()


class CsvTraceWriter(TraceWriter):
    format = "csv"

    def _start(self) -> None:
        self._write((",".join(_csv_field(c) for c in self.columns) + "\n").encode())

    def write(self, row: int, values: Sequence[float], bounds: Sequence[float] | None = None,
              key: Sequence[Any] = ()) -> None:
        if self.bounds:
            values = [*values, *(bounds if bounds is not None else [float("nan")] * len(self.names))]
        text = ",".join(map(repr, values))
        if "nan" in text:  # only NaN's repr holds "nan": write it as an empty field
            text = ",".join(map(_csv_number, values))
        prefix = "".join(self._cell(v) + "," for v in key)
        self._write(f"{prefix}{row},{text}\n".encode())
        self.records += 1


    def write_many(self, rows: Sequence[int], values: Any, bounds: Any = None) -> None:
        """:meth:`write` for several records in one write.

        Floats of magnitude in [1e-4, 1e15), and zeros, are formatted by orjson in one call: its
        text for them is ``repr``'s (both the shortest text that reads back, written out
        positionally; checked on millions of floats in the tests). The others (NaN, and tiny or
        huge values, which ``repr`` writes with an exponent) are formatted as :meth:`write` does.
        """
        import numpy as np

        if self.bounds or self.key_columns:
            super().write_many(rows, values, bounds)
            return
        array = np.ascontiguousarray(values, dtype=np.float64)
        if not array.size:
            return
        import orjson

        magnitude = np.abs(array)
        positional = (magnitude < 1e15) & ((magnitude >= 1e-4) | (array == 0))
        # one line of text per row: "[[a,b],[c,d]]" cut at "],["
        lines = orjson.dumps(array, option=orjson.OPT_SERIALIZE_NUMPY)[2:-2].split(b"],[")
        other_rows, other_columns = np.nonzero(~positional)  # row by row, in order
        if len(other_rows):
            texts = [_csv_number(value).encode() for value in array[other_rows, other_columns].tolist()]
            starts = np.flatnonzero(np.r_[True, other_rows[1:] != other_rows[:-1]]).tolist()
            columns = other_columns.tolist()
            for begin, end in zip(starts, [*starts[1:], len(columns)]):
                t = int(other_rows[begin])
                fields = lines[t].split(b",")
                for k in range(begin, end):
                    fields[columns[k]] = texts[k]
                lines[t] = b",".join(fields)
        self._write(b"".join([b"%d,%s\n" % (row, line) for row, line in zip(rows, lines)]))
        self.records += len(array)


class JsonlTraceWriter(TraceWriter):
    format = "jsonl"

    def _start(self) -> None:
        import orjson

        self._dumps = orjson.dumps

    def write(self, row: int, values: Sequence[float], bounds: Sequence[float] | None = None,
              key: Sequence[Any] = ()) -> None:
        keys, width = len(self.key_columns), len(self.names)
        key = [key_value(v) for v in key]
        if self._safe is not None:
            key = [self._safe(v) if isinstance(v, str) else v for v in key]
        record: dict[str, Any] = dict(zip(self.columns[:keys], key))
        record["row"] = row
        record.update(zip(self.columns[keys + 1:keys + 1 + width], values))
        if self.bounds:
            record.update(zip(self.columns[keys + 1 + width:],
                              bounds if bounds is not None else [float("nan")] * width))
        self._write(self._dumps(record) + b"\n")  # orjson writes NaN and inf as null
        self.records += 1


WRITERS: dict[str, type[TraceWriter]] = {"csv": CsvTraceWriter, "jsonl": JsonlTraceWriter}


def trace_header(names: Sequence[str], bounds: bool, fmt: str, key_columns: Sequence[str] = ()) -> bytes:
    """The header line a trace writer starts with (CSV), or ``b""`` (JSONL has none).

    >>> trace_header(["a", "b,c"], False, "csv")
    b'row,a,"b,c"'
    """
    if fmt != "csv":
        return b""
    return ",".join(_csv_field(c) for c in trace_columns(names, bounds, key_columns)).encode()


def output_format_for(path: str | None, explicit: str | None = None) -> str:
    """The trace format: ``explicit``, else from ``path``'s extension (``.jsonl``/``.ndjson``), else csv."""
    if explicit:
        if explicit not in WRITERS:
            raise ValueError(f"unknown output format {explicit!r}; choose csv or jsonl")
        return explicit
    if path and path != "-" and path.lower().endswith((".jsonl", ".ndjson", ".json")):
        return "jsonl"
    return "csv"


def open_trace_writer(path: str | None, names: Sequence[str], *, format: str | None = None,
                      bounds: bool = False, key_columns: Sequence[str] = ()) -> TraceWriter:
    """A writer to ``path`` (``None`` or ``-``: stdout), truncating an existing file."""
    fmt = output_format_for(path, format)
    if not path or path == "-":
        stream: Any = NamedOutput(sys.stdout.buffer, None)
        close = False
    else:
        try:
            stream = NamedOutput(open(path, "wb"), path)
        except OSError as error:
            raise cannot_write(path, error) from None
        close = True
    return WRITERS[fmt](stream, names, bounds=bounds, close=close, key_columns=key_columns)


# -- flat records (batch and compare results) ------------------------------------------------
class RecordWriter:
    """Flat records with a fixed header as CSV (``\\n``, floats as repr, missing empty) or JSONL (NaN as null).

    >>> import io
    >>> out = io.BytesIO()
    >>> writer = RecordWriter(out, ["feature", "importance"], "csv")
    >>> writer.write({"feature": "a,b", "importance": 0.5})
    >>> print(out.getvalue().decode(), end="")
    feature,importance
    "a,b",0.5
    """

    def __init__(self, stream: BinaryIO | IO[bytes], fields: Sequence[str], fmt: str) -> None:
        self.stream = stream
        self.fields = list(fields)
        self.fmt = fmt
        self._safe = terminal_text(stream)
        self._cell = _cell_writer(self._safe)
        #: the fields' names as written (made safe on a terminal, see :func:`terminal_text`)
        self._shown = self.fields if self._safe is None else [self._safe(f) for f in self.fields]
        if fmt == "csv":
            stream.write((",".join(_csv_cell(f) for f in self._shown) + "\n").encode())

    def write(self, record: dict[str, Any]) -> None:
        if self.fmt == "csv":
            self.stream.write((",".join(self._cell(record.get(f)) for f in self.fields) + "\n").encode())
        else:
            import orjson

            safe = self._safe
            values = [record.get(f) for f in self.fields]
            if safe is not None:
                values = [safe(v) if isinstance(v, str) else v for v in values]
            self.stream.write(orjson.dumps(dict(zip(self._shown, values)), option=orjson.OPT_SERIALIZE_NUMPY)
                              + b"\n")


def write_records(output: str | None, fmt: str | None, fields: Sequence[str],
                  records: Iterable[dict[str, Any]], *, keep_on_error: bool = False) -> None:
    """Write records to ``output`` (a file, atomically; the format from its name unless ``fmt``)
    or to stdout (``None`` or ``-``). Raises :class:`~ipfi_cli.errors.OutputError`.

    ``keep_on_error``: when ``records`` stops with an :class:`~ipfi_cli.errors.IpfiError` (a bad
    row) or ``KeyboardInterrupt``, the records before it are still written to ``output`` (as a
    whole file, as explain's output keeps them), and then the error is raised; otherwise an
    error leaves ``output`` as it was."""
    chosen = output_format_for(output, fmt)
    stopped: list[BaseException] = []

    def write(stream: Any) -> None:
        writer = RecordWriter(stream, fields, chosen)
        iterator = iter(records)
        while True:
            try:
                record = next(iterator)
            except StopIteration:
                break
            except (IpfiError, KeyboardInterrupt) as error:
                if not keep_on_error or isinstance(error, OutputError):
                    raise
                stopped.append(error)
                break
            writer.write(record)
        stream.flush()

    if output and output != "-":
        try:
            atomic_write(output, write)
        except OSError as error:
            raise OutputError(f"{output}: cannot write ({error.strerror or error})") from None
    else:
        write(NamedOutput(sys.stdout.buffer, None))
    if stopped:
        raise stopped[0]


def silence_stdout() -> None:
    """After EPIPE on stdout (``| head``): point stdout at /dev/null so the interpreter's final
    flush is silent."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):
        pass
