"""Importance-over-rows figures in the paper's style (matplotlib, Agg backend).

One panel per iPFI trace (e.g. uniform and geometric sampling side by side): each
feature's iPFI estimate as a solid line, interval PFI (when given) as a dashed step
line holding each window's value over that window, a dotted vertical line at the drift
point, the ``top_k`` most important features in colour with a legend and the others in
thin grey. matplotlib is optional (``pip install 'ipfi-cli[plot]'``); it is imported
only when a figure is drawn, and :class:`PlottingUnavailable` says how to install it.

Text from data (feature names, method names, the title) is drawn as :func:`figure_text` shows it:
control characters escaped (a font has no glyph for ESC), ``$`` literal (not mathtext). Given
``warn``, matplotlib's warnings while drawing go to it as text, once each, instead of being printed.
"""

from __future__ import annotations

import contextlib
import os
import warnings
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from ipfi_cli.text import terminal_safe

INSTALL_HINT = "plotting needs matplotlib: pip install 'ipfi-cli[plot]'"
#: colours for the top features (colour-blind-safe Okabe-Ito, then tab10's)
COLOURS = ["#E69F00", "#56B4E9", "#009E73", "#CC79A7", "#0072B2", "#D55E00", "#F0E442", "#000000",
           "#8c564b", "#7f7f7f"]
GREY = "#b0b0b0"


def figure_path(path: str | os.PathLike[str]) -> Path:
    """Where a figure asked for at ``path`` is saved: as given, or, for a name without an extension
    (which picks the format), with ``.png``, as matplotlib's default saves it (``drift`` and
    ``drift.`` as ``drift.png``), so a message names the file there is.

    >>> [str(figure_path(p)) for p in ("drift", "drift.", "out/d.svg", "run.v2.pdf")]
    ['drift.png', 'drift.png', 'out/d.svg', 'run.v2.pdf']
    """
    text = os.fspath(path)
    if os.path.splitext(text)[1][1:]:
        return Path(text)
    return Path(text.rstrip(".") + ".png")


class PlottingUnavailable(RuntimeError):
    """matplotlib is not installed."""


@dataclass(frozen=True)
class Series:
    """Importance estimates of ``names`` after the given rows: ``values[i, j]`` after ``rows[i]``."""

    label: str
    rows: np.ndarray
    values: np.ndarray

    def __post_init__(self) -> None:
        if self.values.ndim != 2 or len(self.rows) != self.values.shape[0]:
            raise ValueError(f"{self.label}: {len(self.rows)} rows but values of shape {self.values.shape}")


def pyplot() -> Any:
    """matplotlib.pyplot on the Agg backend, or :class:`PlottingUnavailable`."""
    try:
        import matplotlib
    except ImportError:
        raise PlottingUnavailable(INSTALL_HINT) from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def figure_text(text: object) -> str:
    """Text from data as a figure draws it: control characters shown escaped, ``$`` literal.

    >>> figure_text("age\\x1b[31m $5 $")
    'age\\\\x1b[31m \\\\$5 \\\\$'
    """
    return terminal_safe(text).replace("$", "\\$")


@contextlib.contextmanager
def _warnings_to(warn: Callable[[str], None] | None) -> Iterator[None]:
    """matplotlib's warnings while drawing, to ``warn`` (each text once) rather than printed;
    ``None``: left as they are."""
    if warn is None:
        yield
        return
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            yield
        finally:
            for message in dict.fromkeys(str(w.message) for w in caught):
                warn(message)


def top_features(names: Sequence[str], series: Sequence[Series], k: int) -> list[str]:
    """The ``k`` names with the largest mean importance over all series (NaNs ignored)."""
    if k <= 0 or not series:
        return []
    stacked = np.concatenate([s.values for s in series if s.values.size], axis=0)
    if stacked.size == 0:
        return []
    with np.errstate(all="ignore"):
        import warnings

        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            score = np.nanmean(stacked, axis=0)
    score = np.where(np.isnan(score), -np.inf, score)
    order = np.argsort(-score, kind="stable")
    return [names[j] for j in order[:k]]


def _interval_steps(interval: Series) -> tuple[np.ndarray, np.ndarray]:
    """Step coordinates: each window's value held from the previous window's end to its own end."""
    rows = np.asarray(interval.rows, dtype=float)
    starts = np.concatenate([[0.0], rows[:-1]])
    x = np.empty(2 * len(rows))
    x[0::2], x[1::2] = starts, rows
    y = np.repeat(interval.values, 2, axis=0)
    return x, y


def plot_importance(
    path: str | Path,
    names: Sequence[str],
    panels: Sequence[Series],
    *,
    interval: Series | None = None,
    drift_at: int | None = None,
    top_k: int = 5,
    title: str | None = None,
    performance: Series | None = None,
    performance_label: str = "loss",
    dpi: int = 120,
    warn: Callable[[str], None] | None = None,
) -> Path:
    """Draw one panel per series in ``panels`` and save a PNG (or any format matplotlib infers) at ``path``.

    ``performance`` (one column) adds a small panel above each importance panel, e.g.
    the model's rolling loss; ``warn`` receives matplotlib's warnings. Returns the path written.
    """
    if not panels:
        raise ValueError("nothing to plot: no iPFI trace")
    with _warnings_to(warn):
        return _plot_importance(path, names, panels, interval, drift_at, top_k, title, performance,
                                performance_label, dpi)


def _plot_importance(path: str | Path, names: Sequence[str], panels: Sequence[Series], interval: Series | None,
                     drift_at: int | None, top_k: int, title: str | None, performance: Series | None,
                     performance_label: str, dpi: int) -> Path:
    plt = pyplot()
    names = list(names)
    highlight = top_features(names, list(panels) + ([interval] if interval is not None else []), top_k)
    colour = {name: COLOURS[i % len(COLOURS)] for i, name in enumerate(highlight)}
    n = len(panels)
    rows = 2 if performance is not None else 1
    fig, axes = plt.subplots(rows, n, figsize=(6.2 * n, 4.2 + 1.3 * (rows - 1)), squeeze=False, sharex="col", sharey="row",  # noqa: E501
                             gridspec_kw={"height_ratios": [1, 3.2] if rows == 2 else [1]})
    steps = _interval_steps(interval) if interval is not None and len(interval.rows) else None
    for i, series in enumerate(panels):
        ax = axes[-1, i]
        order = [j for j, name in enumerate(names) if name not in colour] + [names.index(h) for h in highlight]
        for j in order:
            name = names[j]
            top = name in colour
            style = dict(color=colour.get(name, GREY), lw=1.6 if top else 0.8, alpha=1.0 if top else 0.7,
                         zorder=3 if top else 1)
            # one finite point (a one-row trace) draws no line: a marker shows it
            alone = int(np.isfinite(np.asarray(series.values[:, j], dtype=float)).sum()) == 1
            ax.plot(series.rows, series.values[:, j], ls="-", marker="o" if alone else None,
                    label=figure_text(name) if top else None, **style)
            if steps is not None:
                ax.plot(steps[0], steps[1][:, j], ls="--", **style)
        if drift_at is not None:
            ax.axvline(drift_at, color="black", ls=":", lw=1.2, zorder=4)
        ax.axhline(0.0, color="black", lw=0.4, zorder=0)
        ax.set_title(figure_text(series.label), fontsize=10)
        ax.set_xlabel("rows")
        if i == 0:
            ax.set_ylabel("permutation feature importance")
        handles, labels = ax.get_legend_handles_labels()
        if i == 0 and handles:
            from matplotlib.lines import Line2D

            handles.append(Line2D([], [], color="black", ls="-", lw=1.2))
            labels.append("iPFI")
            if steps is not None:
                handles.append(Line2D([], [], color="black", ls="--", lw=1.2))
                labels.append(figure_text(interval.label) if interval is not None else "interval PFI")
            ax.legend(handles, labels, fontsize=8, loc="best", ncol=2 if len(labels) > 6 else 1)
        if performance is not None:
            top_ax = axes[0, i]
            top_ax.plot(performance.rows, performance.values[:, 0], color="#c0392b", lw=1.0)
            if drift_at is not None:
                top_ax.axvline(drift_at, color="black", ls=":", lw=1.2)
            if i == 0:
                top_ax.set_ylabel(figure_text(performance_label))
    if title:
        fig.suptitle(figure_text(title), fontsize=11)
    fig.tight_layout()
    path = figure_path(path)
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path


def rolling_mean(values: Sequence[float], window: int) -> np.ndarray:
    """Mean of the last ``window`` values at each position (fewer at the start), NaNs ignored."""
    v = np.asarray(values, dtype=np.float64)
    ok = ~np.isnan(v)
    sums = np.cumsum(np.where(ok, v, 0.0))
    counts = np.cumsum(ok)
    sums[window:] = sums[window:] - sums[:-window]
    counts[window:] = counts[window:] - counts[:-window]
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(counts > 0, sums / np.maximum(counts, 1), np.nan)


def plot_partial_dependence(path: str | Path, curves: dict[str, list[tuple[int, np.ndarray, np.ndarray]]], *,
                            title: str | None = None, dpi: int = 120,
                            warn: Callable[[str], None] | None = None) -> Path:
    """One panel per feature: its PD curve after each recorded row, older rows lighter, the last dark.

    ``curves[feature]`` lists ``(row, grid values, PD values)`` in row order (the records of
    ``ipfi pdp``); ``warn`` receives matplotlib's warnings. Returns the path written.
    """
    with _warnings_to(warn):
        return _plot_partial_dependence(path, curves, title, dpi)


def _plot_partial_dependence(path: str | Path, curves: dict[str, list[tuple[int, np.ndarray, np.ndarray]]],
                             title: str | None, dpi: int) -> Path:
    plt = pyplot()
    path = figure_path(path)
    fig, axes = plt.subplots(1, len(curves), figsize=(4.0 * len(curves), 3.2), squeeze=False)
    for ax, (name, points) in zip(axes[0], curves.items()):
        for i, (row, grid, values) in enumerate(points):
            last = i == len(points) - 1
            shade = 0.25 + 0.6 * (i + 1) / len(points)
            ax.plot(grid, values, color="black" if last else (0.2, 0.4, 0.8, shade), lw=2.0 if last else 1.0,
                    label=f"row {row:,}" if last or i == 0 else None)
        ax.set_title(figure_text(name))
        ax.set_xlabel(figure_text(name))
        ax.set_ylabel("partial dependence")
        ax.legend(fontsize="small")
    if title:
        fig.suptitle(figure_text(title))
    fig.tight_layout()
    fig.savefig(path, dpi=dpi)
    plt.close(fig)
    return path
