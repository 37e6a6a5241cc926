"""CSV lines parsed a block at a time, for files whose rows hold nothing unusual.

:class:`~ipfi_cli.io.readers.RowReader` reads a CSV row by row, one Python call per field
(:mod:`ipfi_cli.io.values` has the rules). Once every column's kind is known, a run of
complete lines can often be parsed in bulk instead: split at the delimiter, each numeric
column converted with one ``float`` map and checked with one regular-expression scan.
:func:`parse_block` does that, and gives up (returns ``None``) on anything the row reader
would treat specially, so the caller hands those lines to the row reader instead: a quote,
a carriage return inside a line, a NUL, a blank line or one of separators only (``,,,,``), a
wrong number of fields, a line the decoder marked bad, a number field that is not a plain
decimal number (a missing-value token other than the empty field, a bool, ``inf``, digit
separators), a number too large
for a float, a field longer than ``int()`` reads (4,300 digits by default), or ``-0``. So a
block holds exactly the rows, values and errors (none) that the row reader gives for the same
lines.

A :class:`RowBlock` is a sequence of :class:`~ipfi_cli.io.values.Row`: code that knows
nothing of blocks iterates it and gets the row reader's rows; code that does uses
:attr:`RowBlock.floats` (the numeric columns as float64 arrays) and :meth:`RowBlock.column`.

>>> block = parse_block(b"1,x,2.5\\n3,y,\\n", 2, ["a", "b", "c"], [1, 2, 1],
...                     [None, str, None], ",", frozenset({""}), first_number=1, first_line=2)
>>> block.floats["c"].tolist(), block.column("b")
([2.5, nan], ['x', 'y'])
>>> [row.values for row in block]
[{'a': 1, 'b': 'x', 'c': 2.5}, {'a': 3, 'b': 'y', 'c': nan}]
"""

from __future__ import annotations

import csv
import re
import sys
from collections.abc import Callable, Iterator, Sequence
from typing import Any

import numpy as np

from ipfi_cli.io.values import NOT_PANDAS_NA, NUMBER, Row, number_parser

#: characters a plain decimal number field is made of (one field per line of the scanned text)
_NOT_PLAIN = re.compile(r"[^0-9.eE+\-\n]")
#: delimiters a block may be split at (none of them can be part of a plain number)
BLOCK_DELIMITERS = frozenset({",", ";", "\t", "|"})


class RowBlock:
    """Consecutive good rows of a CSV, parsed in bulk (see the module docstring).

    ``fields[i]`` are column ``i``'s texts (number columns) or values (text columns, already
    through their converter), as a list or as a pyarrow array of the texts (made a list the
    first time it is needed); ``floats`` maps each number column to its values as float64
    (missing: NaN). Rows are numbered ``first_number, first_number + 1, ...`` and start on
    lines ``first_line, first_line + 1, ...`` (a block has no blank or multi-line rows;
    Parquet has no lines: ``None``). ``number_of`` turns a number column's field into the
    row's value (CSV: its text's parser; Parquet: the value itself). ``converters[i]`` turns a
    text column's field, given as a pyarrow array of texts, into its value when the block is
    taken (:meth:`convert_texts`), so a token it counts is counted then.
    """

    def __init__(self, names: Sequence[str], fields: list[Any], floats: dict[str, np.ndarray],
                 number_of: Callable[[Any], Any], kinds: Sequence[int], first_number: int,
                 first_line: int | None, converters: Sequence[Callable[[str], Any] | None] | None = None) -> None:
        self.names = list(names)
        self._fields = fields
        self._converters = converters
        self.floats = floats
        self._number_of = number_of
        self._kinds = list(kinds)
        self.first_number = first_number
        self.first_line = first_line
        self._rows: list[Row] | None = None

    def __len__(self) -> int:
        return len(self._fields[0]) if self._fields else 0

    def _field(self, i: int) -> list[Any]:
        """Column ``i``'s fields as a list (texts not converted yet are converted once)."""
        fields = self._fields[i]
        if isinstance(fields, list):
            return fields
        # texts as a tuple (Python's split) or a pyarrow array
        convert = self._converters[i] if self._converters is not None else None
        texts: list[Any] = list(fields) if isinstance(fields, tuple) else fields.to_pylist()
        if convert is not None and self._kinds[i] != NUMBER:
            texts = _converted(texts, convert)
        self._fields[i] = texts
        return texts

    def convert_texts(self) -> RowBlock:
        """Convert the text columns' fields now (the block is taken: their tokens are counted)."""
        for i, kind in enumerate(self._kinds):
            if kind != NUMBER:
                self._field(i)
        return self

    @property
    def numbers(self) -> range:
        """The rows' numbers among the input's data rows."""
        return range(self.first_number, self.first_number + len(self))

    def column(self, name: str) -> list[Any]:
        """One column's values as the row reader reads them (ints stay ints)."""
        i = self.names.index(name)
        if self._kinds[i] == NUMBER:
            fields = self._field(i)
            if fields and type(fields[0]) is str:  # CSV: each distinct text parsed once (a label column has few)
                parsed = {text: self._number_of(text) for text in dict.fromkeys(fields)}
                return [parsed[text] for text in fields]
            return list(map(self._number_of, fields))
        return list(self._field(i))

    def row_values(self, offset: int) -> dict[str, Any]:
        """Row ``offset``'s values, as the row reader gives them (a number column's one field is
        taken where it is: the whole column is not made a list for it)."""
        return {name: self._number_of(self._one_field(i, offset)) if kind == NUMBER else self._field(i)[offset]
                for i, (name, kind) in enumerate(zip(self.names, self._kinds))}

    def _one_field(self, i: int, offset: int) -> Any:
        """Field ``offset`` of column ``i`` as :meth:`_field` would give it (a number column's:
        no converter applies)."""
        fields = self._fields[i]
        if isinstance(fields, (list, tuple)):
            return fields[offset]
        return fields[offset].as_py()

    def rows(self) -> list[Row]:
        """The block as the row reader's rows (built once)."""
        if self._rows is None:
            columns = [self.column(name) for name in self.names]
            names = self.names
            first_line = self.first_line
            self._rows = [Row(self.first_number + t, None if first_line is None else first_line + t,
                              dict(zip(names, values))) for t, values in enumerate(zip(*columns))]
        return self._rows

    def slice(self, begin: int, end: int) -> RowBlock:
        """Rows ``begin`` to ``end`` (offsets) as a block of their own."""
        return RowBlock(self.names, [f[begin:end] for f in self._fields],
                        {name: values[begin:end] for name, values in self.floats.items()}, self._number_of,
                        self._kinds, self.first_number + begin,
                        None if self.first_line is None else self.first_line + begin, self._converters)

    @staticmethod
    def join(blocks: Sequence[RowBlock]) -> RowBlock | None:
        """Consecutive blocks with the same columns and kinds as one block, else ``None``."""
        first = blocks[0]
        if len(blocks) == 1:
            return first
        if any(b.names != first.names or b._kinds != first._kinds or b.floats.keys() != first.floats.keys()
               or b._number_of is not first._number_of for b in blocks):
            return None
        fields = [sum((b._field(i) for b in blocks), []) for i in range(len(first.names))]
        floats = {name: np.concatenate([b.floats[name] for b in blocks]) for name in first.floats}
        return RowBlock(first.names, fields, floats, first._number_of, first._kinds, first.first_number,
                        first.first_line)

    def __iter__(self) -> Iterator[Row]:
        return iter(self.rows())

    def __getitem__(self, index: int) -> Row:
        return self.rows()[index]


def _arrow_floats(texts: list[str]) -> np.ndarray | None:
    """The texts as float64 through pyarrow's parser when pyarrow is loaded already (pandas loads
    it where it is installed), else ``None``. On texts made of digits, ``.``, ``e``, ``E``, ``+``
    and ``-`` it accepts exactly what ``float`` accepts, with the same values (both round
    correctly; every such text of up to 6 characters and a million random floats are compared
    in the tests) and it is about four times faster."""
    arrow = sys.modules.get("pyarrow")
    if arrow is None or len(texts) < 64:
        return None
    try:
        return np.asarray(arrow.array(texts, type=arrow.string()).cast(arrow.float64())
                          .to_numpy(zero_copy_only=False), dtype=np.float64)
    except Exception:  # noqa: BLE001 - not a number to pyarrow: float() decides (and refuses it too)
        return None


def _floats(texts: list[str], empty_is_missing: bool, number_tokens: frozenset[str]) -> np.ndarray | None:
    """A number column's fields as float64, or ``None`` when one is not a plain decimal number."""
    joined = "\n".join(texts)
    if _NOT_PLAIN.search(joined) is not None:
        return None
    digits = sys.get_int_max_str_digits()
    if digits and max(map(len, texts)) > digits:  # int() refuses that many digits: the row reader says so
        return None
    if number_tokens and not number_tokens.isdisjoint(texts):  # a missing-value token that looks like a number
        return None
    if "" in texts:
        if not empty_is_missing:
            return None
        texts = [t if t else "nan" for t in texts]  # letters were refused above: only these are NaN
    values = _arrow_floats(texts)
    if values is None:
        try:
            values = np.array(list(map(float, texts)), dtype=np.float64)
        except ValueError:  # "1e", "+-", "." ...
            return None
    finite = values[values == values]
    # a number too large for a float (the row reader names it), and -0 (it reads "-0" as the int 0)
    if finite.size and (np.abs(finite).max() >= 1e308 or (np.signbit(finite) & (finite == 0)).any()):
        return None
    return values


def parse_block(data: bytes, n_lines: int, names: Sequence[str], kinds: Sequence[int],
                text_converters: Sequence[Callable[[str], Any] | None], delimiter: str,
                na_values: frozenset[str], *, first_number: int, first_line: int,
                number_of: Callable[[str], Any] | None = None, number_tokens: frozenset[str] = frozenset(),
                convert: bool = True) -> RowBlock | None:
    """``n_lines`` complete lines, as the input's bytes (the last line may lack its line end), as a
    :class:`RowBlock`, or ``None`` if any of them needs the row reader (see the module docstring).
    Text columns go through ``text_converters[i]`` only when the block is taken (they count
    missing-value tokens as they go): here, or with ``convert=False`` (pyarrow's split) at
    :meth:`RowBlock.convert_texts` of the block or of its slices.

    The checks are scans of the bytes, so no line becomes a Python object: a quote, a NUL, a
    carriage return not followed by a line end, a blank line or one of separators only, bytes that
    are not UTF-8, or a line longer than the csv module's field limit leave the lines to the row
    reader. ``number_tokens``: the missing-value tokens made of number characters only (``-999``);
    a column holding one is left to the row reader.
    """
    if not n_lines or b'"' in data or b"\x00" in data:
        return None
    if b"\r" in data:
        if data.count(b"\r") != data.count(b"\r\n"):  # a carriage return inside a line
            return None
        data = data.replace(b"\r\n", b"\n")
    n_fields = len(names)
    # a blank line (with more than one column, pyarrow's split finds it: a line of one field)
    if n_fields == 1 and (data.startswith(b"\n") or b"\n\n" in data):
        return None
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:  # the row reader names the line
            return None
    if data.endswith(b"\n"):
        data = data[:-1]
    if n_lines >= _ARROW_MIN_ROWS and sys.modules.get("pyarrow") is not None:
        block = _parse_with_arrow(data, n_lines, names, kinds, text_converters, delimiter, na_values,
                                  first_number=first_number, first_line=first_line, number_of=number_of,
                                  number_tokens=number_tokens)
        return block.convert_texts() if block is not None and convert else block
    text = data.decode("utf-8")
    if text.startswith("\n") or "\n\n" in text or max(map(len, text.split("\n"))) > csv.field_size_limit():
        return None  # a blank line, or a field longer than the row reader reads
    if n_fields > 1 and f"\n{delimiter * (n_fields - 1)}\n" in f"\n{text}\n":
        return None  # ',,,,': the row reader skips it as a blank line
    empty_is_missing = "" in na_values
    split = [line.split(delimiter) for line in text.split("\n")]
    if len(split) != n_lines or any(len(fields) != n_fields for fields in split):
        return None
    columns: list[Any] = [list(c) if kind == NUMBER else c for kind, c in zip(kinds, zip(*split))]
    floats: dict[str, np.ndarray] = {}
    for name, kind, texts in zip(names, kinds, columns):
        if kind == NUMBER:
            values = _floats(texts, empty_is_missing, number_tokens)
            if values is None:
                return None
            floats[name] = values

    block = RowBlock(names, columns, floats, number_of or number_parser(na_values), kinds, first_number, first_line,
                     text_converters)
    return block.convert_texts() if convert else block


#: blocks of at least this many lines are split and converted by pyarrow when it is loaded
_ARROW_MIN_ROWS = 64


def _parse_with_arrow(data: bytes, n_lines: int, names: Sequence[str], kinds: Sequence[int],
                      text_converters: Sequence[Callable[[str], Any] | None], delimiter: str,
                      na_values: frozenset[str], *, first_number: int, first_line: int,
                      number_of: Callable[[str], Any] | None, number_tokens: frozenset[str]) -> RowBlock | None:
    """:func:`parse_block`'s work on checked ``data`` (no quote, NUL, carriage return or blank
    line; UTF-8; its last line end removed) done by pyarrow: its CSV reader splits the lines into
    columns of texts (quoting off: every character but the delimiter and ``\\n`` is a field's),
    and each number column is checked and converted with array operations, by the rules of
    :func:`_floats` (plain decimal numbers, the same tokens, lengths and missing fields), so the
    block is the one the Python split gives. Number columns keep their texts as arrays; a
    row's values are made from them only when asked for."""
    import pyarrow as pa
    import pyarrow.compute as pc
    import pyarrow.csv as pa_csv

    n_fields = len(names)
    all_numbers = all(kind == NUMBER for kind in kinds)
    if all_numbers and data.translate(None, _NUMBER_BYTES + delimiter.encode() + b"\n"):
        return None  # one scan of the whole text instead of one per column
    try:
        table = pa_csv.read_csv(
            pa.BufferReader(data),  # not a Python file: pyarrow 14 can hang on one after an error
            read_options=pa_csv.ReadOptions(autogenerate_column_names=True, use_threads=False),
            parse_options=pa_csv.ParseOptions(delimiter=delimiter, quote_char=False, double_quote=False,
                                              escape_char=False, newlines_in_values=False, ignore_empty_lines=False),
            convert_options=pa_csv.ConvertOptions(column_types={f"f{i}": pa.string() for i in range(n_fields)},
                                                  strings_can_be_null=False, quoted_strings_can_be_null=False,
                                                  check_utf8=False))
    except (pa.ArrowInvalid, pa.ArrowKeyError):  # a line with another number of fields
        return None
    if table.num_columns != n_fields or table.num_rows != n_lines:
        return None
    columns: list[Any] = [table.column(i).combine_chunks() for i in range(n_fields)]
    lengths = [np.diff(_offsets(texts)) for texts in columns]
    if max(int(n.max()) for n in lengths) > csv.field_size_limit():  # the row reader names a field that long
        return None  # (its limit counts characters: a field of fewer but more bytes is left to it too)
    if n_fields > 1 and all(int(n.min()) == 0 for n in lengths) and not np.logical_or.reduce(lengths).all():
        return None  # ',,,,': a line of separators only, which the row reader skips as a blank line
    floats: dict[str, np.ndarray] = {}
    empty_is_missing = "" in na_values
    digits = sys.get_int_max_str_digits()
    tokens = pa.array(sorted(number_tokens), type=pa.string()) if number_tokens else None
    for name, kind, texts, length in zip(names, kinds, columns, lengths):
        if kind != NUMBER:
            continue
        if not all_numbers and _joined(texts).translate(None, _NUMBER_BYTES):
            return None
        shortest, longest = int(length.min()), int(length.max())
        if digits and longest > digits:  # int() refuses that many digits: the row reader says so
            return None
        if tokens is not None and pc.any(pc.is_in(texts, value_set=tokens)).as_py():
            return None
        parsed = texts
        if shortest == 0:  # an empty field: missing, or the row reader's to refuse
            if not empty_is_missing:
                return None
            parsed = pc.if_else(pc.equal(pc.binary_length(texts), 0), "nan", texts)
        try:
            values = np.asarray(parsed.cast(pa.float64()).to_numpy(zero_copy_only=False), dtype=np.float64)
        except pa.ArrowInvalid:  # "1e", "+-", "." ...: the row reader refuses them
            return None
        if not _plain_floats(values):
            return None
        floats[name] = values
    from ipfi_cli.io.values import number_parser

    return RowBlock(names, columns, floats, number_of or number_parser(na_values), kinds, first_number, first_line,
                    text_converters)


#: the bytes a plain decimal number is written with
_NUMBER_BYTES = b"0123456789.eE+-"


def _offsets(texts: Any) -> np.ndarray:
    """A pyarrow string array's offsets: where each text starts in its data, and where the last ends."""
    return np.frombuffer(texts.buffers()[1], dtype=np.int32, count=len(texts) + 1, offset=texts.offset * 4)


def _joined(texts: Any) -> bytes:
    """A pyarrow string array's texts joined, as bytes."""
    offsets, data = _offsets(texts), texts.buffers()[2]
    return bytes(memoryview(data)[int(offsets[0]):int(offsets[-1])]) if data is not None else b""


def _plain_floats(values: np.ndarray) -> bool:
    """No value too large for a float (the row reader names it) and no -0 (it reads ``-0`` as the int 0)."""
    with np.errstate(invalid="ignore"):
        big = np.abs(values) >= 1e308  # NaN compares False
    return not big.any() and not (np.signbit(values) & (values == 0)).any()


def _converted(texts: list[str], convert: Callable[[str], Any]) -> list[Any]:
    """A text column's fields through its converter, called once per distinct text where the same
    texts repeat (a category column), as often as each occurs where it counts them (``?``)."""
    distinct = dict.fromkeys(texts)
    if len(distinct) * 4 > len(texts):
        return list(map(convert, texts))
    for text in distinct:
        distinct[text] = convert(text)
    counted = [t for t, v in distinct.items() if v != v and t.strip() in NOT_PANDAS_NA]
    for text in counted:  # counted once above; the rest of its occurrences
        for _ in range(texts.count(text) - 1):
            convert(text)
    return [distinct[t] for t in texts]
