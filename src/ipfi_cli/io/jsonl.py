"""JSONL rows for :class:`~ipfi_cli.io.readers.RowReader`: one JSON object per line, blank lines skipped.

A key's kind (number or text) is fixed by its first non-missing value in a good row; ``null`` and
strings that are ``na_values`` tokens are missing; a nested object or array is kept as a
:class:`~ipfi_cli.io.values.Nested` value; a key given twice in one object is a bad row naming it
(which value is meant?), as are lines that are not a JSON object.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

from ipfi_cli.io.values import MISSING, NOT_PANDAS_NA, NUMBER, STRING, Nested, Row
from ipfi_cli.text import quoted

if TYPE_CHECKING:
    from ipfi_cli.io.lines import LineBuffer


class JsonlRows:
    """The JSONL rows of a :class:`~ipfi_cli.io.readers.RowReader` (a mixin: the reader holds the state)."""

    _lines: LineBuffer
    _kinds: dict[str, int]
    _columns: list[str] | None
    na_values: frozenset[str]
    noted_missing: dict[str, dict[str, int]]
    rows_read: int

    def _bad(self, message: str, line: int, column: str | None = None) -> Row:
        raise NotImplementedError  # the reader's

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
