"""How a run reports: the :class:`Reporter` interface, the :class:`Snapshot` it is shown, and
a plain reporter that writes lines to a stream.

The run layer never draws: it hands messages to a reporter, and snapshots and its end to
it as its first observer (see :mod:`ipfi_cli.run.observers`). The command line chooses
the reporter (a live Rich table on a terminal, a summary table at the end, or nothing but
errors; see :mod:`ipfi_cli.cli.ui`) and tests or Python callers replace it (a
:class:`PlainReporter` on a ``StringIO``), as httpie injects its ``Environment``.

>>> import io
>>> out = io.StringIO()
>>> reporter = PlainReporter(out)
>>> reporter.message("skipped 2 bad row(s)", "warning")
>>> out.getvalue()
'ipfi: warning: skipped 2 bad row(s)\\n'
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import IO, Any, Protocol

from ipfi_cli.run.observers import ENDED, RunEnd, RunStart, Snapshot
from ipfi_cli.text import message_line

__all__ = ["ENDED", "PROG", "RECENT_ROWS", "PlainReporter", "RateMeter", "RecentLoss", "Reporter", "RunClock", "RunEnd",
           "RunStart", "Snapshot"]

PROG = "ipfi"


class Reporter(Protocol):
    """What a run tells the person watching it: messages, and (as the run's first observer,
    :class:`~ipfi_cli.run.observers.RunObserver`) its start, snapshots, events and end."""

    def message(self, text: str, kind: str | None = None) -> None:
        """One line: ``kind`` is ``None`` (information), ``"note"``, ``"warning"``, ``"error"`` or
        ``"status"`` (how the run ended: shown, like errors, even when quiet)."""
        ...

    def on_start(self, start: RunStart) -> None: ...

    def on_snapshot(self, snapshot: Snapshot) -> None: ...

    def on_events(self, events: Sequence[Any]) -> None: ...

    def on_end(self, end: RunEnd) -> None:
        """The run ended: say its ``end.notes``, and show its last snapshot (a summary)."""
        ...


class PlainReporter:
    """Lines on a text stream (stderr by default): messages, and the final importances as
    ``name value`` lines. ``quiet`` keeps only errors."""

    live = False

    def __init__(self, stream: IO[str] | None = None, *, quiet: bool = False) -> None:
        self.stream = stream
        self.quiet = quiet

    def _write(self, text: str) -> None:
        stream = self.stream if self.stream is not None else sys.stderr

        try:
            print(message_line(text), file=stream, flush=True)
        except (OSError, ValueError):  # the stream is closed: nothing more to do
            pass

    def message(self, text: str, kind: str | None = None) -> None:
        if self.quiet and kind not in ("error", "status"):
            return
        self._write(f"{PROG}: {kind}: {text}" if kind in ("note", "warning", "error") else f"{PROG}: {text}")

    def on_start(self, start: RunStart) -> None:
        pass

    def on_snapshot(self, snapshot: Snapshot) -> None:
        pass

    def on_events(self, events: Sequence[Any]) -> None:
        pass

    def on_end(self, end: RunEnd) -> None:
        """The end-of-run notes, then the final importances (unless the run failed or explained
        no row: then its one line says why, with no empty table before it)."""
        for text, kind in end.notes:
            self.message(text, kind)
        if end.snapshot is not None and end.status in ENDED and end.snapshot.explained:
            self.summary(end.title, end.snapshot)

    def summary(self, title: str, snapshot: Snapshot) -> None:
        """The final importances as ``name value ± bound`` lines, most important first (``--by``:
        for each key, under a line naming it)."""
        if self.quiet:
            return
        if snapshot.per_key:
            self._write(f"{title}: {snapshot.rows:,} rows, {len(snapshot.per_key):,} keys")
            for label, one in snapshot.per_key:
                self._lines(f"key {label}", one)
            return
        self._lines(title, snapshot)

    def _lines(self, title: str, snapshot: Snapshot) -> None:
        self._write(f"{title}: {snapshot.rows:,} rows, loss {snapshot.loss:.4f}")
        order = sorted(range(len(snapshot.names)), key=lambda j: -snapshot.importances[j]
                       if snapshot.importances[j] == snapshot.importances[j] else float("inf"))
        for j in order:
            self._write(f"  {snapshot.names[j]} {snapshot.importances[j]:.4f} ± {snapshot.bounds[j]:.4f}")


#: the rows the live view's recent loss is the mean over (the last explained ones)
RECENT_ROWS = 1000


class RateMeter:
    """Rows per second, smoothed over refreshes (for the live view)."""

    def __init__(self) -> None:
        self.rate = float("nan")
        self._mark: tuple[float, int] | None = None  # time, rows

    def update(self, rows: int) -> None:
        now = time.monotonic()
        if self._mark is None:
            self._mark = (now, rows)
            return
        t0, rows0 = self._mark
        if now - t0 < 0.2:
            return
        rate = (rows - rows0) / (now - t0)
        self.rate = rate if self.rate != self.rate else 0.5 * self.rate + 0.5 * rate
        self._mark = (now, rows)


class RunClock:
    """A run's times: when it started (wall clock, ``--meta``'s), when its first row came (the elapsed
    time is counted from it), its rate, and when the next snapshot is due."""

    def __init__(self) -> None:
        self.started = time.time()
        self.first_row: float | None = None  # time.monotonic() at the first micro-batch of rows
        self.meter = RateMeter()
        self.next_snapshot = 0.0  # time.monotonic() from which a snapshot is due

    def elapsed(self) -> float:
        """Seconds since the first row (0 before it)."""
        return time.monotonic() - self.first_row if self.first_row is not None else 0.0


class RecentLoss:
    """The model's mean loss over the last ``rows`` explained rows, exactly: each row's loss is
    kept (``rows`` floats) and :attr:`value` is their correctly rounded sum over ``rows``; NaN
    until ``rows`` rows have been added (before that it is the loss over all of them).

    >>> recent = RecentLoss(3)
    >>> for loss in (1.0, 0.0, 0.0, 0.5):
    ...     recent.add(loss)
    >>> recent.value  # (0 + 0 + 0.5) / 3
    0.16666666666666666
    """

    def __init__(self, rows: int = RECENT_ROWS) -> None:
        from collections import deque

        self.rows = rows
        self._losses: deque[float] = deque(maxlen=rows)

    def add(self, loss: float) -> None:
        self._losses.append(float(loss))

    @property
    def value(self) -> float:
        if len(self._losses) < self.rows:
            return float("nan")
        import math

        return math.fsum(self._losses) / self.rows
