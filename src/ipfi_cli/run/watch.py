"""Watching a run for changes: ``--detect``, ``--events``, ``--reference``, ``--fail-on-change``.

A :class:`ChangeWatch` feeds every explained row's contributions and loss to a
:class:`~ipfi_cli.core.changes.ChangeDetector`, returns the events it finds (the session
hands them to its observers: ``--events`` is :class:`~ipfi_cli.run.observers.EventsFile`),
and keeps what the live table and the final summary show. It is part of the run's
``--state``: a resumed run reports the same events as an uninterrupted one (the events
file is cut back to the ``written`` events of the checkpoint).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import InputError
from ipfi_cli.io.readers import open_rows

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer


@dataclass
class WatchSettings:
    """The detection options of a run."""

    delta: float = 0.002
    min_change: float = 0.01
    events: str | None = None  # a JSONL file, or "-" for stderr
    reference: str | None = None  # a batch CSV (feature,importance) or a trace file (its last record)
    ndcg_threshold: float = 0.9
    top_k: int | None = None
    fail_on_change: bool = False
    stop_on_change: bool = False


def read_reference(path: str, names: Sequence[str]) -> list[float]:
    """An importance vector in ``names`` order from ``ipfi batch``'s CSV (``feature,importance``)
    or from a trace file (``row`` and one column per feature: its last record)."""
    with open_rows(path, hint=False) as reader:
        columns = reader.columns
        rows = []
        for row in reader:
            if row.error is not None:
                raise row.error
            rows.append(row.values or {})
    if not rows:
        raise InputError("no rows: expected the CSV of `ipfi batch` or a trace file", source=path)
    if "feature" in columns and "importance" in columns:
        vector = {str(r["feature"]): r["importance"] for r in rows}
    elif "row" in columns:
        vector = {k: v for k, v in rows[-1].items() if k != "row"}
    else:
        raise InputError("expected the CSV of `ipfi batch` (feature,importance) or a trace file (row,...)",
                         source=path)
    missing = [n for n in names if n not in vector]
    if missing:
        raise InputError(f"no importance for {', '.join(missing)} (it has: {', '.join(map(str, vector))})",
                         source=path)
    values = []
    for name in names:
        value = vector[name]
        if not isinstance(value, (int, float)) or value != value:
            raise InputError(f"the importance of {name!r} is not a number ({value!r})", source=path)
        values.append(float(value))
    return values


class ChangeWatch:
    """The change detector of one run, and what the display and the summary show of it."""

    def __init__(self, settings: WatchSettings, explainer: Explainer, loss: Any) -> None:
        from ipfi_cli.core.changes import ChangeDetector, default_ranges

        self.settings = settings
        reference = read_reference(settings.reference, explainer.names) if settings.reference else None
        value_range, loss_range = default_ranges(loss)
        self.detector = ChangeDetector(explainer.names, delta=settings.delta, min_change=settings.min_change,
                                       value_range=value_range, loss_range=loss_range, reference=reference,
                                       k=settings.top_k, ndcg_threshold=settings.ndcg_threshold)
        self.written = 0  # events in the events file at the last checkpoint (set when saving)

    # -- feeding it ------------------------------------------------------------------------------
    def rows(self, numbers: Sequence[int], contributions: Any, losses: Any, estimates: Any) -> list[Any]:
        """A static micro-batch's rows (from ``explain_many(..., return_contributions=True)``)."""
        return self.detector.update_many(list(numbers), contributions, losses, estimates)

    def row(self, number: int, explainer: Explainer) -> list[Any]:
        """One row just explained with ``explain_one``."""
        return self.detector.update(number, explainer.last_contribution, explainer.last_loss,
                                    explainer.importance_array())

    # -- what is shown -------------------------------------------------------------------------------
    @property
    def events(self) -> list[Any]:
        return self.detector.events

    def marks(self) -> dict[str, str]:
        """Feature -> ``↑ row N`` / ``↓ row N`` of its latest importance change (for the live table)."""
        marks: dict[str, str] = {}
        event: Any
        for event in self.detector.events:
            if getattr(event, "kind", "") == "importance":
                marks[event.feature] = f"{'↑' if event.direction == 'up' else '↓'} row {event.row:,}"
        return marks

    def summary_lines(self, estimates: Any) -> list[str]:
        """One line per event, then the reference check: the final summary."""
        lines = []
        event: Any
        for event in self.detector.events:
            if event.kind == "ranking":
                lines.append(f"ranking at row {event.row:,}: nDCG@{event.k} {event.ndcg:.3f} < {event.threshold} "
                             f"(top now {', '.join(event.top_current[:3])}; reference "
                             f"{', '.join(event.top_reference[:3])})")
                continue
            what = "loss" if event.kind == "loss" else event.feature
            line = (f"change at row {event.row:,} (from row {event.start_row:,}): {what} {event.direction}, "
                    f"{event.before:.4f} ± {event.before_bound:.4f} -> {event.after:.4f} ± {event.after_bound:.4f}")
            if event.kind == "importance":
                line += f", rank {event.rank_before} -> {event.rank_after}"
            elif event.features:
                line += f"; with it: {', '.join(event.features)}"
            lines.append(line)
        summary = self.detector.summary(estimates)
        if "reference" in summary:
            ref = summary["reference"]
            lines.append(f"against the reference: nDCG@{ref['k']} {ref['ndcg']:.3f}, error {ref['error']:.4f} "
                         "(the paper's: shares, L1 distance)")
        if not self.detector.events:
            lines.insert(0, f"no change detected in {self.detector.n_rows:,} rows (delta {self.settings.delta}, "
                            f"min change {self.settings.min_change})")
        return lines

    def state_dict(self) -> dict[str, Any]:
        """The watch's state as plain data: the detector's, and how many events the file holds."""
        return {"written": self.written, "detector": self.detector.state_dict()}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data (the events file is reopened by :meth:`open`)."""
        self.written = int(state["written"])
        self.detector.load_state_dict(state["detector"])
