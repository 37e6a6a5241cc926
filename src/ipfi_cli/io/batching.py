"""Micro-batches of a :class:`~ipfi_cli.io.readers.RowReader`, and rows parsed in bulk blocks.

:meth:`MicroBatches.batches` groups rows into micro-batches of *whatever is already available*: it
blocks for the first row, then takes more rows only while they can be read without waiting, so a
fast pipe gives large batches and a slow writer's row is handed on at once. Once every CSV
column's kind is known, the lines available at that moment are parsed in bulk instead
(:mod:`ipfi_cli.io.blocks`: from their bytes, with pyarrow a span of up to :data:`SPAN_ROWS` lines
per call) and handed out as :class:`~ipfi_cli.io.blocks.RowBlock` micro-batches (JSONL objects
likewise, once every key's kind is known: :func:`ipfi_cli.io.jsonl.parse_jsonl_block`); lines holding
anything the row reader treats specially go to it, so rows, values, numbers and messages are
the row reader's either way. Nothing waits for more input than is there: a pipe's lines are
parsed as they arrive.
"""

from __future__ import annotations

import collections
import re
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError
from ipfi_cli.io.values import NUMBER, Row, number_parser

if TYPE_CHECKING:
    from ipfi_cli.io.blocks import RowBlock
    from ipfi_cli.io.lines import LineBuffer

#: with pyarrow, lines available at once are parsed in bulk this many at a time (then handed out a
#: micro-batch at a time): one call costs about 0.3 ms more than its lines
SPAN_ROWS = 8192
#: ... and no more than this many bytes of them at a time (unless a micro-batch's lines take more)
SPAN_BYTES = 1 << 22


class MicroBatches:
    """:meth:`batches` and :meth:`read_block` of a :class:`~ipfi_cli.io.readers.RowReader` (a mixin:
    the reader holds the state)."""

    _lines: LineBuffer
    _columns: list[str] | None
    _peeked: collections.deque[Row]
    _csv_kinds: list[int] | None
    _csv_converters: list[Callable[[str], Any]] | None
    _csv_strings: list[Callable[[str], Any]]
    _block_lines: int
    _number_tokens: frozenset[str] | None
    _kinds: dict[str, int]
    _read_jsonl_block: Callable[[int], RowBlock | None]  # io.jsonl's
    _span: RowBlock | None
    _span_at: int
    _small_until: int  # spans of one micro-batch until this line (lines ahead needed the row reader)
    na_values: frozenset[str]
    delimiter: str | None
    decimal: str
    skip_initial_space: bool
    rows_read: int

    @property
    def format(self) -> str:
        raise NotImplementedError  # the reader's

    def __iter__(self) -> Iterator[Row]:
        raise NotImplementedError  # the reader's

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
        if self.format == "jsonl":
            return self._read_jsonl_block(max_rows) if not self._peeked else None
        if self._span is None:
            from ipfi_cli.io.blocks import BLOCK_DELIMITERS

            header = self._columns
            if (self._csv_converters is None or header is None or self._peeked or self.decimal != "."
                    or self.delimiter not in BLOCK_DELIMITERS or self.skip_initial_space):
                return None
            size = max_rows
            if sys.modules.get("pyarrow") is not None and self._lines.lines_read >= self._small_until:
                size = max(max_rows, SPAN_ROWS)
            self._span = self._parse_span(size, header, max_rows)
            if self._span is None and size > max_rows:  # lines ahead need the row reader: smaller spans past them
                self._small_until = self._lines.lines_read + size
                self._span = self._parse_span(max_rows, header, max_rows)
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

    def _parse_span(self, max_rows: int, header: list[str], least: int) -> RowBlock | None:
        """Up to ``max_rows`` CSV lines available now as a block, or ``None`` (nothing is consumed then)."""
        from ipfi_cli.io.blocks import parse_block

        kinds = self._csv_kinds or []
        if self._number_tokens is None:
            plain = re.compile(r"[0-9.eE+\-]+")
            self._number_tokens = frozenset(t for t in self.na_values if plain.fullmatch(t))
        tokens = self._number_tokens
        return self._take_block(max_rows, least, lambda data, n_lines, first_line: parse_block(
            data, n_lines, header, kinds, [None if k == NUMBER else self._csv_strings[i] for i, k in enumerate(kinds)],
            self.delimiter or ",", self.na_values, first_number=self.rows_read + 1, first_line=first_line,
            number_of=number_parser(self.na_values, self.decimal), number_tokens=tokens, convert=False))

    def _take_block(self, max_rows: int, least: int,
                    parse: Callable[[bytes, int, int], RowBlock | None]) -> RowBlock | None:
        """Up to ``max_rows`` lines available now (their bytes, how many, the first's number) through
        ``parse``, no more than :data:`SPAN_BYTES` of them unless fewer than ``least`` lines fit; when
        ``parse`` gives ``None`` (or a line was marked bad), nothing is consumed."""
        buffer = self._lines
        lines = buffer.take_decoded(max_rows)  # lines a row read decoded already, then the input's bytes
        room = SPAN_BYTES - sum(map(len, lines))
        raw, count = buffer.take_raw(max_rows - len(lines), min_lines=max(1, least - len(lines)),
                                     max_bytes=max(0, room)) if len(lines) < max_rows else (b"", 0)
        n_lines = len(lines) + count
        block = None
        if n_lines and not any(n <= buffer.lines_read for n in buffer.bad_lines):
            block = parse("".join(lines).encode() + raw if lines else raw, n_lines, buffer.lines_read - n_lines + 1)
        if block is None:
            if count:
                buffer.give_back_raw(raw, count)
            buffer.give_back(lines)
        return block

    def _blocks_ready(self) -> bool:
        """Every column's kind is known (CSV), or every key's (JSONL): blocks may be tried."""
        if self.format == "jsonl":
            return self._columns is not None and all(self._kinds.get(k) for k in self._columns)
        return self._csv_converters is not None

    def batches(self, max_rows: int = 1000, *, idle: Callable[[], None] | None = None,
                idle_interval: float = 0.25, blocks: bool = False) -> Iterator[list[Row] | RowBlock]:
        """Lists of rows: wait for one row, then add rows while more are available at once.

        ``idle`` is called about every ``idle_interval`` seconds while waiting for input
        (e.g. to refresh a display). A batch never holds more than ``max_rows`` rows.
        With ``blocks``, a batch of a CSV or JSONL input may be a :class:`~ipfi_cli.io.blocks.RowBlock`
        (parsed in bulk; it iterates as the same rows): after a batch that needed the row
        reader, blocks are tried again after 1, 2, 4, ... up to 64 batches. Within the batch of
        rows whose first rows fix the columns' kinds, the rest of the batch is tried as a block
        once they are (its rows join the batch's list).
        """
        if max_rows < 1:
            raise ValueError(f"max_rows must be at least 1, got {max_rows}")
        rows = iter(self)
        blocks = blocks and self.format in ("csv", "jsonl")
        wait, backoff = 0, 1
        while True:
            if idle is not None:
                while not self.ready(idle_interval):
                    idle()
            if blocks and wait == 0 and self._blocks_ready():
                block = self.read_block(max_rows)
                if block is not None:
                    backoff = 1
                    yield block
                    continue
                wait, backoff = backoff, min(64, 2 * backoff)
            tried = not blocks or wait > 0 or self._blocks_ready()
            wait = max(0, wait - 1)
            try:
                batch = [next(rows)]
            except StopIteration:
                return
            while len(batch) < max_rows and self.ready():
                if not tried and self._blocks_ready():  # the kinds just became known
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
