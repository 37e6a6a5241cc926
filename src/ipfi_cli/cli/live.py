"""The importance table on stderr: live while the stream runs, or once at the end.

Only this module (and Typer's help) draws with Rich. The live view is used only when
stderr is a terminal (see :func:`ipfi_cli.cli.common.live_display_allowed`); it never
touches stdout (``redirect_stdout=False``), so the data written there is never swallowed.
The caller passes a :class:`Snapshot` at most a few times per second (``Dashboard.due``);
rendering cost is therefore independent of the row rate.
"""

from __future__ import annotations

import collections
import math
import time
from dataclasses import dataclass, field
from typing import Any, Sequence

SPARK = "▁▂▃▄▅▆▇█"
BAR = " ▏▎▍▌▋▊▉█"
HISTORY = 24  # sparkline points
HISTORY_INTERVAL = 0.5  # seconds between sparkline points (the trend covers the last ~12 s)
MAX_ROWS = 20  # features shown; the rest are summarised in one line


@dataclass
class Snapshot:
    """The state a table shows."""

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
    extra: dict[str, Any] = field(default_factory=dict)


def sparkline(values: Sequence[float], low: float, high: float) -> str:
    """Values as block characters scaled to ``[low, high]``; NaN as a space.

    >>> sparkline([0.0, 0.5, 1.0], 0.0, 1.0)
    '▁▅█'
    """
    span = high - low
    out = []
    for v in values:
        if v != v:
            out.append(" ")
        elif span <= 0:
            out.append(SPARK[len(SPARK) // 2])
        else:
            out.append(SPARK[min(len(SPARK) - 1, max(0, int((v - low) / span * (len(SPARK) - 1) + 0.5)))])
    return "".join(out)


def _trend(history: Sequence[float], floor: float) -> str:
    """A sparkline on the history's own range, but never narrower than ``floor``."""
    values = [v for v in history if v == v]
    if not values:
        return ""
    low, high = min(values), max(values)
    if high - low < floor:
        middle = (low + high) / 2
        low, high = middle - floor / 2, middle + floor / 2
    return sparkline(history, low, high)


def bar(value: float, top: float, width: int = 10) -> str:
    """A horizontal bar of ``value / top`` of ``width`` cells (eighths for the last cell)."""
    if not (value > 0) or not (top > 0):
        return ""
    eighths = int(round(min(1.0, value / top) * width * 8))
    return "█" * (eighths // 8) + (BAR[eighths % 8] if eighths % 8 else "")


def _fmt(value: float, digits: int = 4) -> str:
    if value != value:
        return "–"
    return f"{value:.{digits}f}"


def _count(n: int) -> str:
    return f"{n:,}"


class Dashboard:
    """Builds the table; shows it live (``live=True``) or prints it once (:meth:`print_final`).

    Parameters
    ----------
    title
        Shown above the table.
    live
        Draw a refreshing table on stderr (only pass True for a terminal).
    refresh_interval
        Seconds between refreshes; :meth:`due` tells the caller when one is wanted.
    """

    def __init__(self, title: str, *, live: bool, refresh_interval: float = 0.25) -> None:
        self.title = title
        self.live_enabled = live
        self.refresh_interval = refresh_interval
        self._history: dict[str, collections.deque[float]] = {}
        self._live: Any = None
        self._console: Any = None
        self._next = 0.0
        self._next_point = 0.0

    # -- console --------------------------------------------------------------------------
    def _get_console(self) -> Any:
        if self._console is None:
            from rich.console import Console

            self._console = Console(stderr=True, highlight=False)
        return self._console

    def start(self) -> None:
        if not self.live_enabled or self._live is not None:
            return
        from rich.live import Live
        from rich.text import Text

        self._live = Live(Text("ipfi: waiting for the first rows…"), console=self._get_console(),
                          auto_refresh=False, redirect_stdout=False, redirect_stderr=False, transient=False)
        self._live.start(refresh=True)

    def due(self) -> bool:
        """True when a refresh is wanted (at most every ``refresh_interval`` seconds)."""
        return time.monotonic() >= self._next

    def update(self, snapshot: Snapshot) -> None:
        """Record the snapshot in the trend history and, when live, redraw."""
        now = time.monotonic()
        self._next = now + self.refresh_interval
        if now >= self._next_point:
            self._next_point = now + HISTORY_INTERVAL
            for name, value in zip(snapshot.names, snapshot.importances):
                self._history.setdefault(name, collections.deque(maxlen=HISTORY)).append(value)
        if self._live is not None:
            self._live.update(self.render(snapshot), refresh=True)

    def stop(self, snapshot: Snapshot | None = None) -> None:
        """End the live view, leaving its last frame (updated with ``snapshot``) on screen."""
        if self._live is None:
            return
        try:
            if snapshot is not None:
                self._live.update(self.render(snapshot), refresh=True)
        finally:
            self._live.stop()
            self._live = None

    def print_final(self, snapshot: Snapshot) -> None:
        """Print the table once to stderr (the summary when there was no live view)."""
        self._get_console().print(self.render(snapshot))

    # -- rendering ------------------------------------------------------------------------
    def render(self, s: Snapshot) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        order = sorted(range(len(s.names)),
                       key=lambda i: (math.isnan(s.importances[i]), -s.importances[i] if s.importances[i] == s.importances[i] else 0.0))
        values = [v for v in s.importances if v == v]
        top = max(values) if values else float("nan")
        histories = [list(self._history.get(name, ())) for name in s.names]
        points = [abs(v) for h in histories for v in h if v == v]
        floor = 0.1 * max(points) if points else 0.0  # smallest span drawn: noise on small values stays flat

        table = Table(show_edge=False, pad_edge=False, expand=False)
        table.add_column("#", justify="right", style="dim")
        table.add_column("feature", no_wrap=True, overflow="ellipsis", max_width=28)
        table.add_column("importance", justify="right")
        table.add_column("± bound", justify="right", style="dim")
        table.add_column("", no_wrap=True, style="cyan", min_width=10)
        trend = any(len(h) > 1 for h in histories)
        if trend:
            table.add_column("trend", no_wrap=True, style="magenta")
        for rank, i in enumerate(order[:MAX_ROWS], 1):
            cells = [str(rank), str(s.names[i]), _fmt(s.importances[i]), _fmt(s.bounds[i]),
                     bar(s.importances[i], top)]
            table.add_row(*cells, *([_trend(histories[i], floor)] if trend else []))
        if len(order) > MAX_ROWS:
            table.add_row("", f"… {len(order) - MAX_ROWS} more", *[""] * (4 if trend else 3))
        # title and caption on lines of their own, so they do not wrap to the table's width
        return Group(Text(self.title, style="italic"), table, Text(self._caption(s), style="dim"))

    def _caption(self, s: Snapshot) -> str:
        parts = [f"{_count(s.rows)} rows"]
        if s.rate == s.rate:
            parts.append(f"{s.rate:,.0f} rows/s")
        parts.append(f"{s.elapsed:.1f} s")
        if s.loss == s.loss:
            loss = f"loss {s.loss:.4f}"
            if s.recent_loss == s.recent_loss:
                loss += f" (recent {s.recent_loss:.4f})"
            parts.append(loss)
        if s.skipped:
            parts.append(f"{_count(s.skipped)} skipped")
        if s.learning:
            parts.append("learning")
        if s.seed is not None:
            parts.append(f"seed {s.seed}")
        parts += [f"{k} {v}" for k, v in s.extra.items()]
        return " · ".join(parts)
