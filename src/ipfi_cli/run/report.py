"""How a run reports: the :class:`Reporter` interface, the :class:`Snapshot` it is shown, and
a plain reporter that writes lines to a stream.

The run layer never draws: it hands messages and snapshots to a reporter, which the
command line chooses (a live Rich table on a terminal, a summary table at the end, or
nothing but errors; see :mod:`ipfi_cli.cli.ui`) and tests or Python callers replace (a
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
from dataclasses import dataclass, field
from typing import IO, Protocol

PROG = "ipfi"


@dataclass
class Snapshot:
    """What a run shows of itself at one moment."""

    names: Sequence[str]
    importances: Sequence[float]
    bounds: Sequence[float]
    rows: int = 0  # rows read and explained (the first row of a stream is only stored)
    explained: int = 0
    skipped: int = 0
    elapsed: float = 0.0
    rate: float = float("nan")  # recent rows per second
    loss: float = float("nan")  # the model's mean loss over the explained rows
    recent_loss: float = float("nan")  # ... over recent rows
    seed: int | None = None
    learning: bool = False
    marks: dict[str, str] = field(default_factory=dict)  # feature -> its latest change ("↓ row 10,231")


class Reporter(Protocol):
    """What a run tells the person watching it.

    ``live`` reporters are updated while the stream runs (:meth:`update` when :meth:`due`)
    and stopped at the end; the others show one :meth:`summary` at the end.
    """

    live: bool

    def message(self, text: str, kind: str | None = None) -> None:
        """One line: ``kind`` is ``None`` (information), ``"note"``, ``"warning"``, ``"error"`` or
        ``"status"`` (how the run ended: shown, like errors, even when quiet)."""
        ...

    def start(self, title: str) -> None:
        """The stream starts (a live view appears)."""
        ...

    def due(self) -> bool:
        """True when an :meth:`update` is wanted now."""
        ...

    def update(self, snapshot: Snapshot) -> None:
        """The run's state while it streams."""
        ...

    def stop(self, snapshot: Snapshot | None) -> None:
        """The stream ended (or failed); ``snapshot`` is its last state (``None``: show nothing more)."""
        ...

    def summary(self, title: str, snapshot: Snapshot) -> None:
        """The final importances, for a reporter that was not live."""
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
            print(text, file=stream, flush=True)
        except (OSError, ValueError):  # the stream is closed: nothing more to do
            pass

    def message(self, text: str, kind: str | None = None) -> None:
        if self.quiet and kind not in ("error", "status"):
            return
        self._write(f"{PROG}: {kind}: {text}" if kind in ("note", "warning", "error") else f"{PROG}: {text}")

    def start(self, title: str) -> None:
        pass

    def due(self) -> bool:
        return False

    def update(self, snapshot: Snapshot) -> None:
        pass

    def stop(self, snapshot: Snapshot | None) -> None:
        pass

    def summary(self, title: str, snapshot: Snapshot) -> None:
        if self.quiet:
            return
        self._write(f"{title}: {snapshot.rows:,} rows, loss {snapshot.loss:.4f}")
        order = sorted(range(len(snapshot.names)), key=lambda j: -snapshot.importances[j]
                       if snapshot.importances[j] == snapshot.importances[j] else float("inf"))
        for j in order:
            self._write(f"  {snapshot.names[j]} {snapshot.importances[j]:.4f} ± {snapshot.bounds[j]:.4f}")


class RateMeter:
    """Rows per second and the recent loss, smoothed over refreshes (for the live view)."""

    def __init__(self) -> None:
        self.rate = float("nan")
        self.recent_loss = float("nan")
        self._mark: tuple[float, int, int, float] | None = None  # time, rows, explained, loss sum

    def update(self, rows: int, explained: int, mean_loss: float) -> None:
        now = time.monotonic()
        loss_sum = mean_loss * explained if explained else 0.0
        if self._mark is None:
            self._mark = (now, rows, explained, loss_sum)
            return
        t0, rows0, explained0, loss0 = self._mark
        if now - t0 < 0.2:
            return
        rate = (rows - rows0) / (now - t0)
        self.rate = rate if self.rate != self.rate else 0.5 * self.rate + 0.5 * rate
        if explained > explained0:
            recent = (loss_sum - loss0) / (explained - explained0)
            self.recent_loss = recent if self.recent_loss != self.recent_loss else 0.5 * self.recent_loss + 0.5 * recent
        self._mark = (now, rows, explained, loss_sum)
