"""Rows given as Python objects, read by the one reader: an iterable of dicts as a JSONL stream.

:class:`JsonlRows` turns each mapping (column -> value) into one JSON line when the reader
asks for it, so rows from a Python iterable go through exactly the reading and checks of
a JSONL file (the same values, the same bad rows, the same messages). Numbers, text and
booleans pass as they are; numpy scalars pass as their Python value; ``None`` and NaN are
missing (NaN, as the reader marks missing values, as ``NaN`` is in a CSV file).

>>> from ipfi_cli.io.readers import RowReader
>>> reader = RowReader(JsonlRows([{"a": 1.5, "b": "x"}, {"a": 2, "b": None}]), name="<rows>", format="jsonl")
>>> [row.values for row in reader]
[{'a': 1.5, 'b': 'x'}, {'a': 2, 'b': nan}]
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from ipfi_cli.errors import InputError


def _plain(value: Any) -> Any:
    item = getattr(value, "item", None)  # a numpy scalar
    if callable(item):
        return item()
    raise TypeError(f"cannot pass a {type(value).__name__} ({value!r}) as a value")


class JsonlRows:
    """A byte stream of JSON lines, one per mapping of ``rows``, made as they are read."""

    def __init__(self, rows: Iterable[Mapping[str, Any]], *, source: str = "<rows>") -> None:
        self._rows = iter(rows)
        self._source = source
        self._count = 0
        self.closed = False

    def read1(self, size: int = -1) -> bytes:
        """The next row's line (``b''`` at the end of the rows)."""
        import orjson

        try:
            row = next(self._rows)
        except StopIteration:
            return b""
        self._count += 1
        try:
            return orjson.dumps(dict(row), default=_plain, option=orjson.OPT_NON_STR_KEYS) + b"\n"
        except (TypeError, ValueError, orjson.JSONEncodeError) as error:
            raise InputError(f"row {self._count}: {error}", source=self._source) from None

    read = read1

    def close(self) -> None:
        self.closed = True
