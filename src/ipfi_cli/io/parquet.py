"""Rows of Parquet input: one file, a folder of partitions, or a glob, read in record batches.

The rows come out as the CSV/JSONL reader's (:class:`~ipfi_cli.io.readers.RowReader`) do, so
every command treats them alike:

* **Values** keep their Parquet types, as JSON values do: integers are ``int``, floating point
  and decimals ``float``, booleans ``bool``, strings ``str``; dates and times become their ISO
  text (``2024-05-01 13:00:00``), as a CSV export writes them.
* **Missing values** are :data:`~ipfi_cli.io.values.MISSING` (NaN): a null, a floating point
  NaN, and a string that is one of the ``na_values`` tokens (surrounding spaces ignored), as in
  CSV and JSONL. ``?`` read as missing is counted for the same note.
* **Column rules**: a column's kind (number or text) is fixed by its first non-missing value.
  Within one file a column has one type; when the files of a folder disagree (``age`` holds
  numbers in one part and text in another), a row whose value clashes is a bad row with the
  CSV reader's message (``expected a number (the column held numbers before), got 'x'``), and
  reading goes on.
* **Files**: a folder is searched recursively for ``*.parquet`` files (``_``/``.`` names, such as
  ``_SUCCESS``, left out), a glob (``logs/2024-*.parquet``) is expanded; the files are read in
  the order of their sorted paths. Hive partition folders (``region=eu/``, below the folder or
  below a glob's fixed part: ``logs/*/*.parquet``) add their key as a
  column (after the file's columns) with the value read by the CSV rules, once pyarrow's
  partitioning has decoded the folder name as pandas and pyarrow do (``region=s%C3%BCd/`` is
  ``süd``, ``a%20b`` is ``a b``, ``__HIVE_DEFAULT_PARTITION__`` is missing). Every file must have
  the first file's columns: a file that lacks one (or has one more) is refused before any row
  is read.

Memory is one record batch (:data:`BATCH_ROWS` rows) and its rows, whatever the file's size:
the files are read with ``pyarrow.parquet.ParquetFile.iter_batches``. Parquet needs a seekable
file (its schema is at the end), so it cannot come from stdin.

A bad row's message names the row (1-based over all files) and, for a folder or glob, the
file; Parquet has no lines, so messages name no line.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.io.blocks import RowBlock
from ipfi_cli.io.parquet_files import decode_partitions, parquet_files, pyarrow_for_parquet
from ipfi_cli.io.values import (
    DEFAULT_NA_VALUES,
    MISSING,
    NOT_PANDAS_NA,
    NUMBER,
    STRING,
    Row,
    noted_missing_summary,
    parse_value,
)
from ipfi_cli.text import quoted

if TYPE_CHECKING:
    from ipfi_cli.io.blocks import RowBlock


def _same(value: Any) -> Any:
    return value


def _micro_batch(pieces: list[Row | RowBlock]) -> list[Row] | RowBlock:
    """One micro-batch from rows and blocks: a block when it is blocks alone that join, else rows."""
    if all(isinstance(p, RowBlock) for p in pieces):
        joined = RowBlock.join(pieces)  # type: ignore[arg-type]
        if joined is not None:
            return joined
    rows: list[Row] = []
    for piece in pieces:
        if isinstance(piece, Row):
            rows.append(piece)
        else:
            rows.extend(piece.rows())
    return rows


#: rows per Arrow record batch: memory is bounded by one batch, not by the file
BATCH_ROWS = 8192
class ParquetRowReader:
    """Rows of Parquet files, with the interface of :class:`~ipfi_cli.io.readers.RowReader`.

    Parameters
    ----------
    path
        A ``.parquet`` file, a folder of partitions or a glob (see :func:`~ipfi_cli.io.parquet_files.parquet_files`).
    na_values
        Strings read as missing values (see :func:`~ipfi_cli.io.values.na_tokens`).
    batch_rows
        Rows per Arrow record batch.

    Examples
    --------
    >>> import pyarrow as pa, pyarrow.parquet as pq, tempfile, os
    >>> path = os.path.join(tempfile.mkdtemp(), "demo.parquet")
    >>> pq.write_table(pa.table({"a": [1, None], "b": ["x", "NA"], "label": ["yes", "no"]}), path)
    >>> with ParquetRowReader(path) as reader:
    ...     [(row.number, row.values) for row in reader]
    [(1, {'a': 1, 'b': 'x', 'label': 'yes'}), (2, {'a': nan, 'b': nan, 'label': 'no'})]
    """

    format = known_format = "parquet"
    delimiter = None
    supports_blocks = True

    def __init__(self, path: str, *, na_values: frozenset[str] = DEFAULT_NA_VALUES,
                 batch_rows: int = BATCH_ROWS) -> None:
        self._pa = pyarrow_for_parquet()
        self.name = path
        self.na_values = na_values
        self.batch_rows = int(batch_rows)
        self._files = decode_partitions(parquet_files(path))
        self._kinds: dict[str, int] = {}
        self._as_text: set[str] = set()
        self._open: Any = None  # the ParquetFile being read
        self.rows_read = 0
        self.noted_missing: dict[str, dict[str, int]] = {}
        self.unreadable: dict[str, str] = {}  # column -> why ipfi cannot read it (lists, structs, bytes)
        self._columns = self._check_schemas()
        self._read = [c for c in self._columns if c not in self.unreadable]  # the columns rows hold
        self._iterator: Iterator[Row | RowBlock] | None = None
        self._blocks_wanted = False  # clean record batches come as blocks (batches(blocks=True))

    # -- set-up -------------------------------------------------------------------------------
    def _schema(self, file: str) -> Any:
        pq = self._pa.parquet
        try:
            return pq.read_schema(file)
        except OSError as error:
            raise InputError(f"cannot read the file as Parquet ({error})", source=file) from None
        except Exception as error:  # noqa: BLE001 - pyarrow's errors for a damaged footer vary
            raise InputError(f"not a readable Parquet file ({type(error).__name__}: {error})", source=file) from None

    def _check_schemas(self) -> list[str]:
        """The columns (the first file's, then its partition keys); every file must have the same."""
        pa = self._pa
        first, first_parts = self._files[0]
        schema = self._schema(first)
        names = list(schema.names)
        for field in schema:
            self._check_type(field, first)
        columns = names + [k for k in first_parts if k not in names]
        for file, parts in self._files[1:]:
            other = self._schema(file)
            got = list(other.names) + [k for k in parts if k not in other.names]
            if set(got) != set(columns):
                missing, extra = [c for c in columns if c not in got], [c for c in got if c not in columns]
                what = "; ".join(part for part in (
                    f"lacks {', '.join(map(repr, missing))}" if missing else "",
                    f"has {', '.join(map(repr, extra))} in addition" if extra else "") if part)
                raise InputError(f"the files do not have the same columns: this one {what} (the first, {first}, "
                                 f"has {', '.join(columns)})", source=file)
            for field in other:
                self._check_type(field, file)
        del pa
        return columns

    def _check_type(self, field: Any, file: str) -> None:
        """Note a column of a type ipfi cannot read; it is refused only if the run uses it."""
        types = self._pa.types
        t = field.type
        if types.is_dictionary(t):
            t = t.value_type
        if (types.is_nested(t) or types.is_binary(t) or types.is_large_binary(t)
                or types.is_fixed_size_binary(t)) and field.name not in self.unreadable:
            self.unreadable[field.name] = (
                f"{file}: column {field.name!r} holds {t} values; ipfi reads numbers, booleans, text, dates and "
                f"times (leave it out with --drop {field.name!r}, or flatten it)")

    @property
    def columns(self) -> list[str]:
        """The column names: the first file's, then its Hive partition keys."""
        return self._columns

    # -- rows ---------------------------------------------------------------------------------
    def __iter__(self) -> Iterator[Row]:
        if self._iterator is None:
            self._iterator = self._rows()
        return self._iterator  # type: ignore[return-value]  # blocks only after batches(blocks=True)

    def _rows(self) -> Iterator[Row | RowBlock]:
        pq = self._pa.parquet
        several = len(self._files) > 1
        for file, parts in self._files:
            source = file if several else self.name
            try:
                # no pre-buffering: it would read a whole row group's bytes ahead (16 MB measured for
                # 400,000 x 4 doubles), where decoding page by page keeps about one batch
                self._open = opened = pq.ParquetFile(file, pre_buffer=False)
                wanted = [c for c in opened.schema_arrow.names if c not in self.unreadable]
                batches = opened.iter_batches(batch_size=self.batch_rows, use_threads=False, columns=wanted)
                partition = {k: parse_value("" if v is None else v, self.na_values) for k, v in parts.items()}
                for batch in batches:
                    yield from self._batch_rows(batch, partition, source)
            except OSError as error:  # a file damaged inside (pyarrow raises OSError subclasses)
                raise InputError(f"cannot read the file as Parquet ({error})", source=file) from None
            finally:
                if self._open is not None:
                    self._open.close()
                    self._open = None

    def _numeric_type(self, array: Any) -> bool:
        """An integer, floating point or decimal column (not bool: a model may take True as such)."""
        types = self._pa.types
        t = array.type.value_type if types.is_dictionary(array.type) else array.type
        return bool(types.is_integer(t) or types.is_floating(t) or types.is_decimal(t))

    def _column_values(self, array: Any, name: str) -> tuple[list[Any], int]:
        """One column of a batch as Python values (missing -> ``MISSING``), and its kind."""
        pa = self._pa
        types = pa.types
        t = array.type
        if types.is_dictionary(t):
            array = array.dictionary_decode()
            t = array.type
        if name in self._as_text and not (types.is_string(t) or types.is_large_string(t)):
            array = array.cast(pa.string())
            t = array.type
        values = array.to_pylist()
        is_string_view = getattr(types, "is_string_view", None)  # pyarrow >= 16
        if types.is_string(t) or types.is_large_string(t) or (is_string_view is not None and is_string_view(t)):
            na, noted = self.na_values, self.noted_missing
            for i, v in enumerate(values):
                if v is None:
                    values[i] = MISSING
                elif v in na or (v.strip() or "\x00") in na:
                    values[i] = MISSING
                    if v.strip() in NOT_PANDAS_NA:
                        counts = noted.setdefault(name, {})
                        counts[v.strip()] = counts.get(v.strip(), 0) + 1
            return values, STRING
        if types.is_null(t):
            return [MISSING] * len(values), 0
        if types.is_temporal(t):
            return [MISSING if v is None else str(v) for v in values], STRING
        if types.is_decimal(t):
            return [MISSING if v is None else float(v) for v in values], NUMBER
        if None in values:
            values = [MISSING if v is None else v for v in values]
        return values, NUMBER

    def _batch_rows(self, batch: Any, partition: dict[str, Any], source: str) -> Iterator[Row | RowBlock]:
        names = batch.schema.names
        n = batch.num_rows
        columns: dict[str, list[Any]] = {}
        kinds: dict[str, int] = {}
        numeric: set[str] = set()  # int, float and decimal columns
        for i, name in enumerate(names):
            columns[name], kinds[name] = self._column_values(batch.column(i), name)
            if kinds[name] == NUMBER and self._numeric_type(batch.column(i)):
                numeric.add(name)
        for key, value in partition.items():
            if key not in columns:
                columns[key] = [value] * n
                kinds[key] = 0 if value != value else (STRING if type(value) is str else NUMBER)
                if type(value) in (int, float):
                    numeric.add(key)
        order = self._read
        known = self._kinds
        clashing = [c for c in order if kinds[c] and known.get(c, kinds[c]) != kinds[c]]
        lists = [columns[c] for c in order]
        start = self.rows_read
        if not clashing:
            for c in order:
                if kinds[c] and c not in known and any(v == v for v in columns[c]):
                    known[c] = kinds[c]
            if self._blocks_wanted and n:
                yield from self._blocks(order, lists, kinds, numeric)
                return
            for i, values in enumerate(zip(*lists)):
                yield Row(start + i + 1, None, dict(zip(order, values)))
            self.rows_read += n
            return
        for values in zip(*lists):
            self.rows_read += 1
            row = dict(zip(order, values))
            bad = next((c for c in clashing if row[c] == row[c]), None)
            if bad is not None:
                expected = "a number (the column held numbers before)" if known[bad] == NUMBER \
                    else "a string (the column held strings before)"
                error = InputError(f"expected {expected}, got {quoted(row[bad])}", source=source, row=self.rows_read,
                                   column=bad)
                yield Row(self.rows_read, None, None, error)
                continue
            for c in order:
                if kinds[c] and c not in known and row[c] == row[c]:
                    known[c] = kinds[c]
            yield Row(self.rows_read, None, row)

    def _blocks(self, order: list[str], lists: list[list[Any]], kinds: dict[str, int],
                numeric: set[str]) -> Iterator[Row | RowBlock]:
        """The rows of a record batch without clashes as :class:`~ipfi_cli.io.blocks.RowBlock` s:
        values as the rows hold them, number columns also as float64. A row holding an infinite
        number stays a row (the row checks name it)."""
        import numpy as np

        from ipfi_cli.io.blocks import RowBlock

        n = len(lists[0])
        kind_list = [NUMBER if c in numeric else STRING for c in order]
        floats = {c: np.array(f, dtype=np.float64) for c, f, k in zip(order, lists, kind_list) if k == NUMBER}
        block = RowBlock(order, lists, floats, _same, kind_list, self.rows_read + 1, None)
        infinite = np.zeros(n, dtype=bool)
        for values in floats.values():
            infinite |= np.isinf(values)
        # runs of rows without an infinite number are blocks; a row with one is a row
        edges = np.flatnonzero(infinite).tolist()
        begin = 0
        for edge in [*edges, n]:
            if edge > begin:
                yield block.slice(begin, edge)
            if edge < n:
                yield Row(self.rows_read + edge + 1, None, dict(zip(order, (values[edge] for values in lists))))
            begin = edge + 1
        self.rows_read += n

    def batches(self, max_rows: int = 1000, *, idle: Callable[[], None] | None = None,
                idle_interval: float = 0.25, blocks: bool = False) -> Iterator[list[Row] | RowBlock]:
        """Lists of at most ``max_rows`` rows (a file never waits, so ``idle`` is not called).

        With ``blocks``, a micro-batch whose rows all come from record batches without anything
        unusual is one :class:`~ipfi_cli.io.blocks.RowBlock` (it iterates as the same rows); the
        micro-batches are the same ``max_rows`` rows either way, across files and record batches.
        """
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        self._blocks_wanted = blocks
        pieces: list[Row | RowBlock] = []
        size = 0
        for item in iter(self):
            rest: Row | RowBlock | None = item
            while rest is not None:
                if isinstance(rest, Row):
                    pieces.append(rest)
                    size += 1
                    rest = None
                else:  # a block: as much of it as the micro-batch has room for
                    room = max_rows - size
                    head, rest = (rest, None) if len(rest) <= room else (rest.slice(0, room),
                                                                        rest.slice(room, len(rest)))
                    pieces.append(head)
                    size += len(head)
                if size == max_rows:
                    yield _micro_batch(pieces)
                    pieces, size = [], 0
        if pieces:
            yield _micro_batch(pieces)
    def ready(self, timeout: float = 0.0) -> bool:
        """Always true: a file's next row never waits."""
        return True

    def noted_missing_summary(self) -> str | None:
        """The note about ``?`` read as missing (see :meth:`RowReader.noted_missing_summary`)."""
        return noted_missing_summary(self.name, self.noted_missing)

    # -- column kinds (for a run that continues in another input) -----------------------------
    def column_kinds(self) -> dict[str, str]:
        """Each column's kind so far: ``"number"`` or ``"text"`` (columns not yet fixed are left out)."""
        return {name: "number" if k == NUMBER else "text" for name, k in self._kinds.items() if k}

    def keep_as_text(self, names: Iterable[str] | None) -> None:
        """Read these columns as text: a numeric column's values become their text (Arrow's cast,
        ``2139`` -> ``'2139'``; a code stored as a number has lost its leading zeros already)."""
        names = list(names or [])
        unknown = [n for n in names if n not in self.columns]
        if unknown:
            raise UsageError(f"no such input column: {', '.join(unknown)} (the columns: {', '.join(self.columns)})",
                             "--text")
        self._as_text.update(names)

    def assume_kinds(self, kinds: dict[str, str]) -> None:
        """Start with these column kinds, as if earlier rows had fixed them (before reading rows)."""
        self._kinds.update({name: NUMBER if kind == "number" else STRING for name, kind in kinds.items()})

    def close(self) -> None:
        if self._open is not None:
            self._open.close()
            self._open = None
        if self._iterator is not None:
            self._iterator.close()  # type: ignore[attr-defined]

    def __enter__(self) -> ParquetRowReader:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def open_parquet(path: str | None, *, na_values: frozenset[str] = DEFAULT_NA_VALUES) -> ParquetRowReader:
    """A :class:`ParquetRowReader` for ``path``; stdin is refused (Parquet needs a seekable file)."""
    if not path or path == "-":
        raise UsageError("Parquet cannot be read from stdin (its schema is at the end of the file): give the file, "
                         "folder or glob as INPUT", "--format")
    return ParquetRowReader(path, na_values=na_values)
