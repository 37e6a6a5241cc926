"""JSONL rows for :class:`~ipfi_cli.io.readers.RowReader`: one JSON object per line, blank lines skipped.

A key's kind (number or text) is fixed by its first non-missing value in a good row; ``null`` and
strings that are ``na_values`` tokens are missing; a nested object or array is kept as a
:class:`~ipfi_cli.io.values.Nested` value; a key given twice in one object is a bad row naming it
(which value is meant?), as are lines that are not a JSON object.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ipfi_cli.io.values import MISSING, NOT_PANDAS_NA, NUMBER, STRING, Nested, Row
from ipfi_cli.text import quoted

if TYPE_CHECKING:
    from ipfi_cli.io.blocks import RowBlock
    from ipfi_cli.io.lines import LineBuffer


class JsonlRows:
    """The JSONL rows of a :class:`~ipfi_cli.io.readers.RowReader` (a mixin: the reader holds the state)."""

    _lines: LineBuffer
    _kinds: dict[str, int]
    _columns: list[str] | None
    na_values: frozenset[str]
    noted_missing: dict[str, dict[str, int]]
    rows_read: int
    _take_block: Callable[[int, int, Callable[[bytes, int, int], RowBlock | None]], RowBlock | None]  # io.batching's

    def _bad(self, message: str, line: int, column: str | None = None) -> Row:
        raise NotImplementedError  # the reader's


    def _read_jsonl_block(self, max_rows: int) -> RowBlock | None:
        """Up to ``max_rows`` JSONL rows available now, read in bulk, or ``None`` when they need
        the row reader (nothing is consumed then): see :func:`parse_jsonl_block`."""
        columns = self._columns
        if columns is None:
            return None
        block = self._take_block(max_rows, max_rows, lambda data, n_lines, first_line: parse_jsonl_block(
            data, n_lines, columns, self._kinds, self.na_values, self.noted_missing, first_number=self.rows_read + 1,
            first_line=first_line))
        if block is not None:
            self.rows_read += len(block)
        return block

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
            if (text.count('":') != len(obj) or " :" in text or "\t:" in text) and (key := repeated_key(text)):
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



def repeated_key(text: str) -> str | None:
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


def _same(value: Any) -> Any:
    return value


def parse_jsonl_block(data: bytes, n_lines: int, names: list[str], kinds: dict[str, int], na_values: frozenset[str],
                      noted: dict[str, dict[str, int]], *, first_number: int, first_line: int) -> RowBlock | None:
    """``n_lines`` complete JSONL lines (their bytes) as a :class:`~ipfi_cli.io.blocks.RowBlock`, or
    ``None`` when any needs the row reader: a blank line or one that is not a JSON object, an
    object whose keys are not ``names`` in that order, a key that may be given twice, a carriage
    return, bytes that are not UTF-8, a key whose kind is not known yet, a value of another kind
    than its key's (a bool, a nested object or array, a string in a number key, a number in a text
    key), or a number that is not finite as a float. Number keys' values are float64 arrays as
    well (``null``: NaN); text keys' ``na_values`` strings are missing and ``?`` is counted in
    ``noted``, as the row reader does."""
    import numpy as np
    import orjson

    from ipfi_cli.io.blocks import RowBlock

    if not n_lines or b"\r" in data or b"\x00" in data or b" :" in data or b"\t:" in data:
        return None
    keys = len(names) * n_lines
    # one `":` per key: no key given twice, none nested (one ':' per key says so sooner)
    if data.count(b":") != keys and data.count(b'":') != keys:
        return None
    if not data.isascii():
        try:
            data.decode("utf-8")
        except UnicodeDecodeError:
            return None
    lines = data.split(b"\n")
    if lines[-1] == b"":
        lines.pop()
    if len(lines) != n_lines:
        return None
    try:
        objects = list(map(orjson.loads, lines))
    except orjson.JSONDecodeError:  # a blank line, or not JSON: the row reader says which
        return None
    if any(type(obj) is not dict or list(obj) != names for obj in objects):
        return None
    fields: list[list[Any]] = []
    floats: dict[str, np.ndarray] = {}
    counted: dict[str, dict[str, int]] = {}  # added to ``noted`` once the block is taken
    table = zip(*map(operator.itemgetter(*names), objects)) if len(names) > 1 else (
        [obj[names[0]] for obj in objects],)
    for name, column in zip(names, table):
        values = list(column)
        types = set(map(type, values))
        if kinds.get(name) == NUMBER and types <= {int, float, type(None)}:
            if type(None) in types:
                values = [MISSING if v is None else v for v in values]
            try:
                array = np.array(values, dtype=np.float64)
            except OverflowError:  # an integer too large for a float: the row reader names it
                return None
            with np.errstate(invalid="ignore"):
                if (np.abs(array) >= 1e308).any():  # the row reader refuses an integer that large, names infinity
                    return None
            floats[name] = array
        elif kinds.get(name) == STRING and types <= {str, type(None)}:
            values = _texts(values, na_values, counted.setdefault(name, {}))
        else:
            return None
        fields.append(values)
    for name, counts in counted.items():
        for token, count in counts.items():
            into = noted.setdefault(name, {})
            into[token] = into.get(token, 0) + count
    return RowBlock(names, fields, floats, _same, [kinds[name] for name in names], first_number, first_line)


def _texts(values: list[Any], na_values: frozenset[str], counts: dict[str, int]) -> list[Any]:
    """A text key's values as the row reader gives them: ``null`` and ``na_values`` strings (surrounding
    spaces ignored) missing, ``?`` counted in ``counts``; each distinct string looked at once."""
    distinct: dict[Any, Any] = {}
    for value in dict.fromkeys(values):
        if value is None or value in na_values or (value.strip() or "\x00") in na_values:
            distinct[value] = MISSING
        else:
            distinct[value] = value
    for value, got in distinct.items():
        if value is not None and got is not value and value.strip() in NOT_PANDAS_NA:
            counts[value.strip()] = counts.get(value.strip(), 0) + values.count(value)
    return [distinct[v] for v in values]
