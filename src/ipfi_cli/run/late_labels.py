"""Labels that arrive late: ``--labels SOURCE --id COLUMN --label-wait N``.

The features stream (the input) and the labels stream (``SOURCE``: a file, a named pipe, or
with ``--labels-follow`` a file that grows, as ``tail -f`` reads it) are joined by the id
column. :class:`JoinedReader` hands the session the features rows **in the features stream's
order**, each with its label put in the target column, once that label has arrived: a row whose
label has come waits for the rows before it. The estimates depend on the order of the rows
(the smoothing and the reservoir), so this is the order that gives exactly the traces of the
same rows with their labels inline, whatever order the labels come in.

Memory is bounded by ``N`` (``--label-wait``): at most ``N`` rows wait for their labels (the
features stream is not read further while they do), and at most ``N`` labels wait for their
rows (the labels stream is not read further). When both are full, the oldest waiting row's
label is not among the next ``N`` labels: that row is given up (counted, never explained with
a guessed label), and the join goes on; its label, if it comes later, is dropped and counted
(kept, such labels would fill the labels' room and stop the join). This depends only on the two
streams' contents, not
on timing: a file replayed gives the same traces every time. With ``--label-wait 30s`` a row
is given up after waiting 30 seconds instead (at most 100,000 rows wait then). At the end of
the features, rows still waiting get the labels that still come until the labels stream ends
(or, when followed, has been quiet for 5 seconds); the rest are given up.
"""

from __future__ import annotations

import collections
import queue
import re
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.io.labels import END, LabelStream, MissingLabel
from ipfi_cli.io.readers import RowReader
from ipfi_cli.io.values import Row

#: with --label-wait in seconds: at most this many rows wait (and labels)
SECONDS_CAP = 100_000
#: after the features end: give up on the waiting rows when a followed labels file has been quiet this long
END_QUIET_SECONDS = 5.0


@dataclass(frozen=True)
class LabelWait:
    """How long a row waits for its label: ``rows`` (a count) or ``seconds``.

    >>> LabelWait.parse("5000"), LabelWait.parse("30s").seconds, LabelWait.parse("2m").seconds
    (LabelWait(rows=5000, seconds=None), 30.0, 120.0)
    """

    rows: int | None = None
    seconds: float | None = None

    @classmethod
    def parse(cls, text: str) -> LabelWait:
        found = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*(s|m|h)?\s*", text)
        if not found:
            raise UsageError(f"expected a number of rows (5000) or of seconds (30s, 5m, 1h), got {text!r}",
                             "--label-wait")
        number, unit = float(found.group(1)), found.group(2)
        if unit is None:
            if number != int(number) or number < 1:
                raise UsageError(f"a number of rows is a whole number >= 1, got {text!r}", "--label-wait")
            return cls(rows=int(number))
        seconds = number * {"s": 1, "m": 60, "h": 3600}[unit]
        if seconds <= 0:
            raise UsageError(f"must be more than 0 seconds, got {text!r}", "--label-wait")
        return cls(seconds=seconds)

    @property
    def capacity(self) -> int:
        return self.rows if self.rows is not None else SECONDS_CAP


class RecentIds:
    """The last ``size`` ids added, counted (a multiset of bounded memory).

    >>> ids = RecentIds(2)
    >>> for ident in ("a", "b", "a"):
    ...     ids.add(ident)
    >>> "a" in ids, "b" in ids, ids.take("a"), ids.take("a")
    (True, True, True, False)
    """

    def __init__(self, size: int) -> None:
        self._order: collections.deque[str] = collections.deque()
        self._counts: collections.Counter[str] = collections.Counter()
        self._size = size

    def add(self, ident: str) -> None:
        if len(self._order) >= self._size:
            old = self._order.popleft()
            if self._counts[old] > 0:
                self._counts[old] -= 1
        self._order.append(ident)
        self._counts[ident] += 1

    def __contains__(self, ident: str) -> bool:
        return self._counts.get(ident, 0) > 0

    def take(self, ident: str) -> bool:
        """Count one of ``ident`` as used; False if none is left."""
        if self._counts.get(ident, 0) > 0:
            self._counts[ident] -= 1
            return True
        return False


class JoinedReader:
    """The features reader, with each row's label from the labels stream (see the module docstring).

    It stands in for the :class:`~ipfi_cli.io.readers.RowReader` of the features: the columns
    are the features' and the target, and :meth:`batches` yields rows in the features' order.
    """

    def __init__(self, features: RowReader, labels: LabelStream, id_column: str, target: str,
                 wait: LabelWait) -> None:
        self.features = features
        self.labels = labels
        self.id_column = id_column
        self.target = target
        self.wait = wait
        self.given_up = 0  # rows whose label did not come in time: not explained
        self.unmatched = 0  # labels whose row never came
        self.matched = 0
        self.max_waiting = 0  # the most rows that waited at once (memory)
        self._pending: collections.deque[list[Any]] = collections.deque()  # [row, id, label, arrived]
        self._waiting: dict[str, collections.deque[list[Any]]] = {}  # id -> its waiting rows
        self._early: dict[str, collections.deque[Any]] = {}  # id -> labels that came before their row
        self._early_count = 0
        self.late = 0  # labels that came after their row was given up
        self.repeated = 0  # labels of an id whose row already had its label
        keep = max(4 * wait.capacity, 10_000)  # ids remembered, for the counts above (bounded memory)
        self._given_up_ids = RecentIds(keep)
        self._matched_ids = RecentIds(keep)
        self._labels_done = False
        self._features_done = False
        self._last_label = time.monotonic()
        if features.columns and id_column not in features.columns:
            raise InputError(f"no column {id_column!r} (the --id); the columns are: {', '.join(features.columns)}",
                             source=features.name)
        unreadable = getattr(features, "unreadable", {})
        if id_column in unreadable:
            raise InputError(unreadable[id_column])
        features.keep_as_text([id_column])

    # -- the RowReader surface the session uses -------------------------------------------------
    @property
    def name(self) -> str:
        return self.features.name

    @property
    def format(self) -> str:
        return self.features.format

    @property
    def known_format(self) -> str | None:
        return self.features.known_format

    @property
    def columns(self) -> list[str]:
        columns = self.features.columns
        if self.target in columns:
            raise InputError(f"the input has a column {self.target!r} and --labels gives it too: drop one",
                             source=self.name)
        if columns and self.id_column not in columns:
            raise InputError(f"no column {self.id_column!r} (the --id); the columns are: {', '.join(columns)}",
                             source=self.name)
        return [*columns, self.target] if columns else []

    def keep_as_text(self, names: Any) -> None:
        self.features.keep_as_text(names)

    @property
    def unreadable(self) -> dict[str, str]:
        return dict(getattr(self.features, "unreadable", {}))

    def noted_missing_summary(self) -> str | None:
        return self.features.noted_missing_summary()

    def empty_rows_summary(self) -> str | None:
        summary = getattr(self.features, "empty_rows_summary", None)
        return summary() if summary is not None else None

    def column_kinds(self) -> dict[str, str]:
        return self.features.column_kinds()

    def close(self) -> None:
        self.labels.close()
        self.features.close()

    def __iter__(self) -> Iterator[Row]:
        for batch in self.batches():
            yield from batch

    def summary(self) -> list[str]:
        """Lines for the end of the run: rows given up, labels without a row."""
        lines = []
        if self.given_up:
            how = (f"{self.wait.rows:,} rows" if self.wait.rows is not None else f"{self.wait.seconds:g} s")
            lines.append(f"{self.given_up:,} row(s) got no label within --label-wait ({how}) and were not explained")
        unmatched = self.unmatched + self._early_count
        if unmatched:
            lines.append(f"{self.labels.path}: {unmatched:,} label(s) matched no row of {self.name}")
        if self.late:
            lines.append(f"{self.labels.path}: {self.late:,} label(s) came after their row had been given up")
        if self.repeated:
            lines.append(f"{self.labels.path}: {self.repeated:,} label(s) gave again the id of a row that had its "
                         "label already (the first one was used)")
        return lines

    def counts(self) -> dict[str, int]:
        """The join's counts (``--meta``'s ``"labels"``): matched, given up (rows never explained),
        late (labels after their row was given up), unmatched (labels of no row), repeated."""
        return {"matched": self.matched, "given_up": self.given_up, "late": self.late,
                "unmatched": self.unmatched + self._early_count, "repeated": self.repeated}

    # -- the join -------------------------------------------------------------------------------------
    def _take_label(self, item: Any) -> None:
        if isinstance(item, Exception):
            raise item
        if item is END:
            self._labels_done = True
            return
        ident, label = item
        self._last_label = time.monotonic()
        rows = self._waiting.get(ident)
        if rows:
            entry = rows.popleft()
            if not rows:
                del self._waiting[ident]
            entry[2] = label
            self.matched += 1
            self._matched_ids.add(ident)
            return
        if self._given_up_ids.take(ident):  # its row was given up: kept, it would block the join for good
            self.late += 1
            return
        self._early.setdefault(ident, collections.deque()).append(label)
        self._early_count += 1

    def _take_row(self, row: Row) -> None:
        entry: list[Any] = [row, None, None, time.monotonic()]
        if row.error is None:
            values = row.values or {}
            ident = values.get(self.id_column)
            if ident is None or ident == "" or ident != ident:
                entry[0] = Row(row.number, row.line, None,
                               InputError("the id is missing", source=self.name, row=row.number, line=row.line,
                                          column=self.id_column))
            else:
                ident = str(ident)
                entry[1] = ident
                early = self._early.get(ident)
                if early:
                    entry[2] = early.popleft()
                    self._early_count -= 1
                    if not early:
                        del self._early[ident]
                    self.matched += 1
                    self._matched_ids.add(ident)
                else:
                    entry[2] = _WAITING
                    self._waiting.setdefault(ident, collections.deque()).append(entry)
        self._pending.append(entry)
        self.max_waiting = max(self.max_waiting, len(self._pending))

    def _count_unmatched(self, ident: str) -> None:
        if ident in self._matched_ids:
            self.repeated += 1
        else:
            self.unmatched += 1

    def _release(self, out: list[Row]) -> None:
        while self._pending and self._pending[0][2] is not _WAITING:
            row, ident, label, _ = self._pending.popleft()
            if ident is None:  # a bad row: the checker reports it, in its place
                out.append(row)
                continue
            if isinstance(label, MissingLabel):  # a bad row, named where the label is missing
                out.append(Row(row.number, row.line, None, label.error))
                continue
            values = dict(row.values)
            values[self.target] = label
            out.append(Row(row.number, row.line, values))

    def _give_up_head(self) -> None:
        entry = self._pending.popleft()
        rows = self._waiting.get(entry[1])
        if rows is not None:
            rows.remove(entry)
            if not rows:
                del self._waiting[entry[1]]
        self.given_up += 1
        if entry[1] is not None:  # its label, if it comes, is dropped (see _take_label)
            self._given_up_ids.add(entry[1])

    def batches(self, max_rows: int = 1000, *, idle: Callable[[], None] | None = None,
                idle_interval: float = 0.25) -> Iterator[list[Row]]:
        """Lists of joined rows, in the features' order, as their labels arrive."""
        capacity = self.wait.capacity
        rows = iter(self.features)
        last_idle = time.monotonic()
        out: list[Row] = []
        while True:
            progressed = False
            while self._early_count < capacity:  # labels (not further than capacity ahead of their rows)
                try:
                    item = self.labels.queue.get_nowait()
                except queue.Empty:
                    break
                self._take_label(item)
                progressed = True
            taken = 0
            while (not self._features_done and len(self._pending) < capacity and taken < max_rows
                   and self.features.ready(0.0)):
                row = next(rows, None)
                if row is None:
                    self._features_done = True
                    break
                self._take_row(row)
                taken += 1
                progressed = True
            self._release(out)
            while len(out) >= max_rows:
                yield out[:max_rows]
                out = out[max_rows:]
            if progressed:
                continue  # rows already available go into one batch (one model call)
            if self._pending and self._stuck():
                self._give_up_head()
                continue
            if out:
                yield out
                out = []
                continue
            if not self._pending and self._features_done:
                self._drain_rest()
                return
            # nothing to do now: wait a little for either stream
            if not self._features_done and len(self._pending) < capacity:
                if self.features.ready(0.02):
                    continue
            try:
                self._take_label(self.labels.queue.get(timeout=0.02))
            except queue.Empty:
                pass
            if idle is not None and time.monotonic() - last_idle >= idle_interval:
                last_idle = time.monotonic()
                idle()

    def _stuck(self) -> bool:
        """The oldest waiting row is given up now (see the module docstring)."""
        capacity = self.wait.capacity
        if self.wait.seconds is not None and time.monotonic() - self._pending[0][3] > self.wait.seconds:
            return True
        if self._labels_done:
            return True  # no label will come any more (the head's did not match an earlier one)
        features_blocked = self._features_done or len(self._pending) >= capacity
        if features_blocked and self._early_count >= capacity:
            return True  # neither stream can move: its label is not among the next N
        if self._features_done and self.labels.followed is not None:
            return time.monotonic() - self._last_label > END_QUIET_SECONDS
        return False

    def _drain_rest(self) -> None:
        """The features ended and every row is done: the labels read but never matched are counted
        (the labels stream is not waited for any longer)."""
        while True:
            try:
                item = self.labels.queue.get_nowait()
            except queue.Empty:
                break
            if item is END:
                self._labels_done = True
            elif not isinstance(item, Exception):
                if self._given_up_ids.take(item[0]):
                    self.late += 1
                else:
                    self._count_unmatched(item[0])
        for ident, labels in self._early.items():  # labels whose row never came
            for _ in labels:
                self._count_unmatched(ident)
        self._early.clear()
        self._early_count = 0
        self.labels.close()


_WAITING = object()
