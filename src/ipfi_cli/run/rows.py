"""Rows checked with one rule for every command: ``explain``, ``batch`` and ``compare``.

A row read without error is *good* when its label matches the model (see
:mod:`ipfi_cli.run.labels`), it has a value for every model input (JSONL objects need not
share keys) and no input value is unusable: infinity never is usable, nor a nested JSON object
or array (a key the run does not use may hold one), and a missing value (NaN) is not when the
model learns from the row (a river linear model would learn NaN weights). A static model gets
NaN for a missing value and may handle it or say so.

Bad rows stop the command (``on_bad_row="fail"``: the rows before it are still used) or
are counted and left out (``"skip"``), with the same one-line messages everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, NamedTuple

from ipfi_cli.errors import InputError
from ipfi_cli.io.values import MISSING, Nested, Row
from ipfi_cli.text import quoted

if TYPE_CHECKING:
    from ipfi_cli.io.blocks import RowBlock
    from ipfi_cli.run.checks import CategoryCheck


class GoodRow(NamedTuple):
    """A row to explain: its number and line in the input, its values and its label."""

    number: int
    line: int | None  # None for Parquet, which has no lines
    values: dict[str, Any]
    label: Any


@dataclass(frozen=True)
class GoodBlock:
    """A block of good rows: the block, its model inputs (floats, in the model's column order)
    and its labels as the model means them."""

    block: RowBlock
    inputs: Any  # numpy array, shape (rows, columns)
    labels: list[Any]

    def __len__(self) -> int:
        return len(self.block)

    def good_rows(self) -> list[GoodRow]:
        """The rows as :meth:`RowChecker.check` gives them."""
        return [GoodRow(row.number, row.line, row.values or {}, label)
                for row, label in zip(self.block.rows(), self.labels)]


class RowChecker:
    """Split micro-batches of read rows into good rows and the error to stop with.

    Parameters
    ----------
    source : str
        How messages name the input.
    target : str or None
        The label column; ``None``: the rows have no label (a label-free loss), each row's is ``no_label``.
    columns : list of str
        The model's inputs.
    to_label : callable
        Label as read -> label as the model means it; raises ``ValueError`` with a message.
    check_columns : bool
        Check that each row has every model input (JSONL).
    learn : bool
        The model learns from the rows: a missing input value is a bad row.
    on_bad_row : {"fail", "skip"}
    on_skip : callable, optional
        Called with each skipped row's error (``--verbose`` prints it).
    on_first_row : callable, optional
        Called once with the first good row's values, before its label is converted (a
        river classifier tells its classes there).
    known_keys : set of str, optional
        JSONL: the keys the model's inputs were taken from (the first row's). The first later
        row with another key is remembered, for :meth:`late_keys_summary`.
    key_columns : sequence of str
        ``explain --by``: a row without a value in one of them (missing, or absent from a JSONL
        object) is a bad row naming the column.
    can_drop : bool
        ``--drop`` leaves a column out of the model's inputs (a model that does not name them):
        the message for a nested JSON value in one says so.
    categories : CategoryCheck, optional
        Compares the first good rows' values with the categories the model's encoders learned
        (it may refuse the run before they are explained).
    no_label : object
        Every row's label when ``target`` is ``None`` (prediction-shift on probabilities: the class
        whose probability is compared).
    """

    def __init__(self, *, source: str, target: str | None, columns: Sequence[str], to_label: Callable[[Any], Any],
                 check_columns: bool, learn: bool, on_bad_row: str = "fail",
                 on_skip: Callable[[InputError], None] | None = None,
                 on_first_row: Callable[[dict[str, Any]], None] | None = None,
                 known_keys: set[str] | None = None, key_columns: Sequence[str] = (),
                 can_drop: bool = False, categories: CategoryCheck | None = None, no_label: Any = None) -> None:
        self.source = source
        self.target = target
        self.no_label = no_label
        self.columns = list(columns)
        self.to_label = to_label
        self.check_columns = check_columns
        self.learn = learn
        self.on_bad_row = on_bad_row
        self.on_skip = on_skip
        self.on_first_row = on_first_row
        self.skipped = 0
        self.first_skip: str | None = None
        self.known_keys = known_keys
        self.late_key: tuple[int, str] | None = None  # (row, key) of the first key the first row lacked
        self.key_columns = list(key_columns)
        self.can_drop = can_drop
        self.categories = categories if categories is not None and not categories.done else None

    def check(self, batch: Iterable[Row]) -> tuple[list[GoodRow], InputError | None]:
        """The batch's good rows, and the error to stop with (``fail``: the first bad row's)."""
        good, error = self._check(batch)
        if self.categories is not None:
            self.categories.check(good)
            if self.categories.done:
                self.categories = None
        return good, error

    def _check(self, batch: Iterable[Row]) -> tuple[list[GoodRow], InputError | None]:
        good: list[GoodRow] = []
        for row in batch:
            error = row.error
            if error is None:
                values = row.values or {}
                if self.on_first_row is not None:
                    hook, self.on_first_row = self.on_first_row, None
                    hook(values)
                label = values.get(self.target, MISSING) if self.target is not None else self.no_label
                try:
                    if type(label) is Nested:
                        raise ValueError(self._nested(label, "the label"))
                    if self.target is not None:
                        label = self.to_label(label)
                except ValueError as problem:
                    error = self._error(str(problem), row, self.target)
                else:
                    error = self._problem(row, values)
                    if error is None:
                        if self.known_keys is not None and values.keys() - self.known_keys:
                            # not a bad row to skip: every later row would lose the key; the rows before
                            # are explained, then the run stops
                            return good, self._late_key(row, sorted(values.keys() - self.known_keys)[0])
                        good.append(GoodRow(row.number, row.line, values, label))
                        continue
            if self.on_bad_row == "fail":
                return good, error
            self.skip(error)
        return good, None

    def check_block(self, block: RowBlock) -> GoodBlock | None:
        """A block of rows parsed in bulk (:mod:`ipfi_cli.io.blocks`) as a :class:`GoodBlock`
        when every row of it is good; ``None`` when they need :meth:`check` (a label that
        cannot be used, a model input that is text, keys, a model that learns, the first row):
        nothing is counted then."""
        import numpy as np

        if (self.on_first_row is not None or self.categories is not None or self.key_columns
                or self.known_keys is not None or self.learn
                or (self.target is not None and self.target not in block.names) or not len(block)
                or any(c not in block.floats for c in self.columns)):
            return None
        if self.target is None:
            labels: list[Any] | None = [self.no_label] * len(block)
        else:
            many = getattr(self.to_label, "many", None)
            labels = many(block.column(self.target)) if many is not None else None
        if labels is None:
            return None
        floats = block.floats
        matrix = np.empty((len(block), len(self.columns)))
        for j, c in enumerate(self.columns):
            matrix[:, j] = floats[c]
        return GoodBlock(block, matrix, labels)

    def skip(self, error: InputError | str) -> None:
        """Count a bad row that is left out."""
        self.skipped += 1
        if self.first_skip is None:
            self.first_skip = str(error)
        if self.on_skip is not None:
            self.on_skip(error)  # type: ignore[arg-type]

    def _late_key(self, row: Row, key: str) -> InputError:
        """A key that the first object lacked: the run gives a model that names no inputs the first
        object's keys, so this one would be dropped from every row: refused, naming it."""
        return self._error(f"a key the first row lacks; a model that does not name its inputs is given the first "
                           f"row's keys, so it would never get {quoted(key)}: give the first row every key (null "
                           "where a value is missing), or name the model's inputs with --features", row, key)

    def late_keys_summary(self) -> str | None:
        """One line about a key that rows have but the first row lacked (JSONL), or ``None``."""
        if self.late_key is None:
            return None
        row, key = self.late_key
        return (f"{self.source}: row {row} has the key {key!r}, which the first row lacks, so the model does not get "
                "it (a model that does not name its inputs gets the first row's keys); name its inputs with "
                "--features")

    def skipped_summary(self) -> str | None:
        if not self.skipped:
            return None
        return f"skipped {self.skipped:,} bad row(s); the first: {self.first_skip}"

    def all_bad(self) -> str:
        """Why nothing was explained when every row was skipped: how many, and the first's reason."""
        first = self.first_skip or ""
        if first.startswith(f"{self.source}: "):  # the message that ends the run names the source once
            first = first[len(self.source) + 2:]
        return f"all {self.skipped:,} row(s) were bad" + (f"; the first: {first}" if first else "")

    def _error(self, message: str, row: Row, column: str | None) -> InputError:
        return InputError(message, source=self.source, row=row.number, line=row.line, column=column)

    def _problem(self, row: Row, values: dict[str, Any]) -> InputError | None:
        for c in self.key_columns:
            if type(values.get(c)) is Nested:
                return self._error(self._nested(values[c], "a --by key"), row, c)
            if missing_key(values.get(c)):
                return self._error("no value in this --by key column: a row belongs to no key without one (fill "
                                   "it in, or skip such rows with --on-bad-row skip)", row, c)
        if self.check_columns:
            missing = [c for c in self.columns if c not in values]
            if missing and (self.known_keys is not None or self.learn):
                return self._error("no value for this model input" + (
                    "" if self.known_keys is not None else " (a missing value, which a model that learns cannot "
                    "learn from: fill it in, or skip such rows with --on-bad-row skip)"), row, missing[0])
            for c in missing:  # a model that names its inputs: a key left out is a missing value, as null is
                values[c] = math.nan
        isfinite = math.isfinite
        for c in self.columns:
            v = values[c]
            if type(v) is int and not -1e308 < v < 1e308:  # 400 digits: no float holds it
                return self._error(f"a number of {len(str(abs(v)))} digits, too large for a float; models cannot "
                                   "use it", row, c)
            if type(v) is float and not isfinite(v):
                if v != v:
                    if not self.learn:
                        continue
                    return self._error("missing value, which a model that learns cannot learn from (fill it in, "
                                       "or skip such rows with --on-bad-row skip)", row, c)
                return self._error(f"{v} is not a finite number (a number too large for a float, such as 1e400, "
                                   "reads as inf); models cannot use it", row, c)
            if type(v) is Nested:
                return self._error(self._nested(v, "a model input") + (
                    f"; leave the key out with --drop {c}" if self.can_drop else
                    " (the model takes this column: it is among its named inputs)"), row, c)
        return None

    @staticmethod
    def _nested(value: Nested, what: str) -> str:
        return (f"a nested JSON {value.kind} ({quoted(str(value))}), which {what} cannot be: it is a number, a "
                "string, a bool or null")


def missing_key(value: Any) -> bool:
    """A key column's value that makes no key: absent (``None``) or missing (NaN).

    >>> missing_key(float("nan")), missing_key(None), missing_key(""), missing_key(0)
    (True, True, False, False)
    """
    return value is None or (isinstance(value, float) and value != value)


def rows_frame(rows: Sequence[GoodRow], columns: Sequence[str]) -> Any:
    """The rows' model inputs as a DataFrame in ``columns`` order (values exactly as read)."""
    import pandas as pd

    return pd.DataFrame.from_records([[r.values[c] for c in columns] for r in rows], columns=list(columns))
