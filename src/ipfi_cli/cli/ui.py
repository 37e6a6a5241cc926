"""The terminal UI: every table ipfi draws on stderr, and the reporters that draw them.

Only this module (and Typer's help) draws with Rich. :class:`TerminalReporter` implements
the run layer's :class:`~ipfi_cli.run.report.Reporter`: a live, refreshing importance table
when stderr is a terminal (:func:`live_display_allowed`), else one summary table at the end.
The live view never touches stdout (``redirect_stdout=False``), so the data written there is
never swallowed. The run passes a snapshot at most a few times per second
(:meth:`Dashboard.due`); rendering cost is therefore independent of the row rate. The
tables of ``ipfi batch`` and ``ipfi compare`` are here too.
"""

from __future__ import annotations

import collections
import math
import os
import sys
import time
from collections.abc import Sequence
from typing import Any

from ipfi_cli.run.observers import ENDED, RunEnd, RunStart
from ipfi_cli.run.report import PlainReporter, Snapshot
from ipfi_cli.text import terminal_safe

SPARK = "▁▂▃▄▅▆▇█"
BAR = " ▏▎▍▌▋▊▉█"
HISTORY = 24  # sparkline points
HISTORY_INTERVAL = 0.5  # seconds between sparkline points (the trend covers the last ~12 s)
MAX_ROWS = 20  # features shown; the rest are summarised in one line
MAX_KEYS = 20  # explain --by: keys in the summary table (every key's figures go to --meta)


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


def rich_safe(text: object) -> str:
    r"""Text from data for Rich: control characters escaped (:func:`ipfi_cli.text.terminal_safe`),
    then Rich markup, so ``[link=...]`` in a column name is shown, never obeyed.

    >>> print(rich_safe("[link=https://x.example]age[/link]\x1b[2J"))
    \[link=https://x.example]age\[/link]\x1b[2J
    """
    from rich.markup import escape

    return escape(terminal_safe(text))


def safe_cell(text: object) -> Any:
    """A table cell of text from data: a Rich ``Text`` (never parsed as markup), control characters escaped."""
    from rich.text import Text

    return Text(terminal_safe(text))


def bar(value: float, top: float, width: int = 10) -> str:
    """A horizontal bar of ``value / top`` of ``width`` cells (eighths for the last cell)."""
    if not (value > 0) or not (top > 0):
        return ""
    eighths = int(round(min(1.0, value / top) * width * 8))
    return "█" * (eighths // 8) + (BAR[eighths % 8] if eighths % 8 else "")


def number(value: float, digits: int = 4) -> str:
    """A number for a table: ``digits`` decimals, NaN as a dash."""
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
        self._history_key: str | None = None
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
        if snapshot.key != self._history_key:  # explain --by: the trend is the shown key's
            self._history_key = snapshot.key
            self._history.clear()
        if now >= self._next_point:
            self._next_point = now + HISTORY_INTERVAL
            for name, value in zip(snapshot.names, snapshot.importances):
                self._history.setdefault(name, collections.deque(maxlen=HISTORY)).append(value)
        if self._live is not None:
            self._live.update(self.render(snapshot), refresh=True)

    def stop(self, snapshot: Snapshot | None = None, *, clear: bool = False) -> None:
        """End the live view, leaving its last frame (updated with ``snapshot``) on screen, or
        none with ``clear`` (a run that explained no row leaves no empty table)."""
        if self._live is None:
            return
        try:
            if clear:
                self._live.transient = True  # Rich erases a transient view as it stops
            elif snapshot is not None:
                self._live.update(self.render(snapshot), refresh=True)
        finally:
            self._live.stop()
            self._live = None

    def print_final(self, snapshot: Snapshot) -> None:
        """Print the table once to stderr (the summary when there was no live view)."""
        self._get_console().print(self.render(snapshot))

    def print_keys(self, snapshot: Snapshot) -> None:
        """``--by``'s summary: one table, each key's rows and loss, then its features, most important first."""
        from rich.table import Table
        from rich.text import Text

        table = Table(show_edge=False, pad_edge=False, expand=False)
        for name, justify in (("key", "left"), ("rows", "right"), ("loss", "right"), ("feature", "left"),
                              ("importance", "right"), ("± bound", "right")):
            table.add_column(name, justify=justify, no_wrap=name != "key",  # type: ignore[arg-type]
                             overflow="ellipsis", max_width=28)
        shown = snapshot.per_key[:MAX_KEYS]
        for label, one in shown:
            order = sorted(range(len(one.names)), key=lambda i: (math.isnan(one.importances[i]),
                                                                 -one.importances[i] if one.importances[i] == one.importances[i] else 0.0))  # noqa: E501
            for rank, i in enumerate(order[:MAX_ROWS]):
                first = rank == 0
                table.add_row(safe_cell(label) if first else "", _count(one.rows) if first else "",
                              number(one.loss) if first else "", safe_cell(one.names[i]), number(one.importances[i]),
                              number(one.bounds[i]), end_section=rank == min(len(order), MAX_ROWS) - 1)
        console = self._get_console()
        console.print(Text(terminal_safe(f"{self.title}: {_count(snapshot.rows)} rows, "
                                         f"{_count(len(snapshot.per_key))} key"
                                         + ("s" if len(snapshot.per_key) != 1 else "")), style="italic"))
        console.print(table)
        if len(snapshot.per_key) > MAX_KEYS:
            console.print(Text(f"… {len(snapshot.per_key) - MAX_KEYS:,} more keys (every key's figures: --meta)",
                               style="dim"))

    # -- rendering ------------------------------------------------------------------------
    def render(self, s: Snapshot) -> Any:
        from rich.console import Group
        from rich.table import Table
        from rich.text import Text

        order = sorted(range(len(s.names)),
                       key=lambda i: (math.isnan(s.importances[i]), -s.importances[i] if s.importances[i] == s.importances[i] else 0.0))  # noqa: E501
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
            name: Any = safe_cell(s.names[i])
            if s.names[i] in s.marks:  # a detected change: the arrow and the row
                name = name.append(f" {s.marks[s.names[i]]}", style="bold yellow")
            cells = [str(rank), name, number(s.importances[i]), number(s.bounds[i]), bar(s.importances[i], top)]
            table.add_row(*cells, *([_trend(histories[i], floor)] if trend else []))
        if len(order) > MAX_ROWS:
            table.add_row("", f"… {len(order) - MAX_ROWS} more", *[""] * (4 if trend else 3))
        # title and caption on lines of their own, so they do not wrap to the table's width
        return Group(Text(terminal_safe(self.title), style="italic"), table,
                     Text(terminal_safe(self._caption(s)), style="dim"))

    def _caption(self, s: Snapshot) -> str:
        parts = [f"{_count(s.rows)} rows"]
        if s.n_keys:  # explain --by: the table is the key last explained
            parts.append(f"{_count(s.n_keys)} key" + ("s" if s.n_keys != 1 else ""))
            if s.key is not None:
                parts.append(f"key {s.key} ({_count(s.key_rows)} rows)")
        if s.rate == s.rate:
            parts.append(f"{s.rate:,.0f} rows/s")
        parts.append(f"{s.elapsed:.1f} s")
        if s.loss == s.loss:
            loss = f"loss {s.loss:.4f}"
            if s.recent_loss == s.recent_loss:
                loss += f" (last {_count(s.recent_rows)} rows {s.recent_loss:.4f})"
            parts.append(loss)
        if s.skipped:
            parts.append(f"{_count(s.skipped)} skipped")
        if s.learning:
            parts.append("learning")
        if s.seed is not None:
            parts.append(f"seed {s.seed}")
        return " · ".join(parts)


# -- where the UI may draw ----------------------------------------------------------------------
def stream_is_terminal(stream: Any) -> bool:
    try:
        return bool(stream.isatty())
    except (AttributeError, ValueError):
        return False


def live_display_allowed(quiet: bool) -> bool:
    """A live display on stderr only for a real terminal, not ``TERM=dumb``, not quiet."""
    return not quiet and stream_is_terminal(sys.stderr) and os.environ.get("TERM", "") != "dumb"


def stderr_console() -> Any:
    from rich.console import Console

    return Console(stderr=True, highlight=False)


# -- the run's reporter -------------------------------------------------------------------------
class TerminalReporter(PlainReporter):
    """The run layer's reporter on stderr: messages as lines; the importances in a live
    table (``live=True``) or in one summary table at the end. ``quiet`` keeps only errors."""

    def __init__(self, *, live: bool, quiet: bool = False) -> None:
        super().__init__(quiet=quiet)
        self.live = live and not quiet
        self.dashboard: Dashboard | None = None

    def on_start(self, start: RunStart) -> None:
        if self.live:
            self.dashboard = Dashboard(start.title, live=True)
            self.dashboard.start()

    def on_snapshot(self, snapshot: Snapshot) -> None:
        if self.dashboard is not None and self.dashboard.due():
            self.dashboard.update(snapshot)

    def on_end(self, end: RunEnd) -> None:
        """Stop the live table on its last state (then the end-of-run notes), or the notes and a summary table."""
        if self.dashboard is None:
            super().on_end(end)
            return
        try:
            self.dashboard.stop(end.snapshot, clear=end.snapshot is not None and not end.snapshot.explained)
        finally:
            for text, kind in end.notes:
                self.message(text, kind)
        if end.snapshot is not None and end.snapshot.per_key and end.status in ENDED:  # the live table showed one key
            self.summary(end.title, end.snapshot)

    def summary(self, title: str, snapshot: Snapshot) -> None:
        if self.quiet:
            return
        if snapshot.per_key:
            Dashboard(title, live=False).print_keys(snapshot)
        else:
            Dashboard(title, live=False).print_final(snapshot)


# -- ipfi batch ---------------------------------------------------------------------------------
def show_batch_table(result: Any, loss_name: str, seconds: float) -> None:
    """Batch PFI per feature, most important first."""
    from rich.table import Table

    console = stderr_console()
    console.print(f"batch PFI: {result.n_rows:,} rows, {result.n_repeats} repeats, {loss_name} loss "
                  f"(baseline {number(result.baseline_loss)}), {seconds:.1f} s")
    table = Table()
    table.add_column("feature")
    table.add_column("importance", justify="right")
    table.add_column("std", justify="right")
    for j in sorted(range(len(result.names)), key=lambda j: -result.mean[j]):
        table.add_row(safe_cell(result.names[j]), number(result.mean[j]), number(result.std[j]))
    console.print(table)


def show_sage_table(result: Any, loss_name: str, n_rows: int, seconds: float, game: str) -> None:
    """Batch SAGE per feature, largest first, with the game it estimated and the explained loss they add up to."""
    from rich.table import Table

    console = stderr_console()
    console.print(f"batch SAGE: {n_rows:,} rows, {result.n_permutations:,} permutations, {loss_name} loss; "
                  f"explained loss {number(result.explained_loss)} (no feature {number(result.marginal_loss)}, "
                  f"model {number(result.model_loss)}), {seconds:.1f} s")
    console.print(f"game: {game}", highlight=False)
    table = Table()
    table.add_column("feature")
    table.add_column("SAGE", justify="right")
    table.add_column("std error", justify="right")
    for j in sorted(range(len(result.names)), key=lambda j: -result.values[j]):
        table.add_row(result.names[j], number(result.values[j]), number(result.std_errors[j]))
    console.print(table)


# -- ipfi compare -------------------------------------------------------------------------------
def show_static_comparison(results: list[Any], batch_seconds: float, seconds: float) -> None:
    """iPFI's error against batch PFI per sampling and alpha, then the features side by side."""
    import numpy as np
    from rich.table import Table

    first = results[0]
    console = stderr_console()
    n_runs = sum(len(r.runs) for r in results)
    sage = first.settings.get("method") == "sage"
    batch, online, spread = ("batch SAGE", "iSAGE", "std error") if sage else ("batch PFI", "iPFI", "std")
    console.print(f"compare: {first.batch.n_rows:,} rows, {first.settings['orderings']} ordering(s), "
                  f"{first.settings['loss']} loss; {batch} {batch_seconds:.1f} s, {n_runs} {online} run(s), "
                  f"{seconds:.1f} s in all.")
    console.print(f"Error: {first.normalisation}-normalised L1 distance of each run's final estimate to {batch}.")
    table = Table()
    for column in ("sampling", "alpha", "runs", "median error", "IQR", "Q1", "Q3"):
        table.add_column(column, justify="left" if column == "sampling" else "right")
    for result in results:
        for sampling, s in result.summary().items():
            table.add_row(sampling, f"{result.settings['alpha']:g}", str(s.n), number(s.median), number(s.iqr),
                          number(s.q1), number(s.q3))
    console.print(table)
    features = Table()
    features.add_column("feature")
    features.add_column(f"{batch} ({spread})", justify="right")
    columns = [(result, s) for result in results for s in result.samplings]
    for result, s in columns:
        median = " (median)" if len(result.runs) > 2 else ""
        features.add_column(f"{online} {s} {result.settings['alpha']:g}{median}", justify="right")
    medians = {(id(result), s): np.median([run.estimates for run in result.runs if run.sampling == s], axis=0)
               for result, s in columns}
    for j in sorted(range(len(first.names)), key=lambda j: -first.batch.mean[j]):
        features.add_row(safe_cell(first.names[j]), f"{number(first.batch.mean[j])} ({number(first.batch.std[j])})",
                         *(number(float(medians[(id(result), s)][j])) for result, s in columns))
    console.print(features)


def show_learning_comparison(result: Any) -> None:
    """iPFI's error against interval PFI per sampling and alpha, before and after the drift."""
    from rich.table import Table

    console = stderr_console()
    console.print(f"compare --learn: {result.n_rows:,} rows, {len(result.intervals)} window(s) of "
                  f"{result.settings['interval']:,} rows, {result.settings['loss']} loss, {result.seconds:.1f} s.")
    console.print(f"Error: {result.normalisation}-normalised L1 distance to interval PFI at each window's end, "
                  "median (IQR).")
    parts = ["whole", "before", "after"] if result.drift_at is not None else ["whole"]
    label = result.traces[0].label if result.traces else ""
    counts = {p: len(result.errors(label, p)) for p in parts} if label else {p: 0 for p in parts}
    table = Table()
    table.add_column("sampling")
    table.add_column("alpha", justify="right")
    titles = {"whole": "whole", "before": f"before (<= {result.drift_at})", "after": f"after (> {result.drift_at})"}
    for part in parts:
        table.add_column(f"{titles[part]}, n={counts[part]}", justify="right")
    summary = result.summary()
    for trace in result.traces:
        table.add_row(trace.sampling, f"{trace.alpha:g}",
                      *(f"{number(summary[trace.label][p].median, 3)} ({number(summary[trace.label][p].iqr, 3)})"
                        for p in parts))
    console.print(table)
