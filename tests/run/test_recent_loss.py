"""The live view's recent loss is the mean loss of the last 1,000 explained rows, exactly.

It was an average of the mean loss between refreshes, each refresh weighing half of what came
before whatever number of rows it held: on agrawal_drift.csv it showed 0.1068 where the last
1,000 rows' loss was 0.1960 (just after the drift), a row window of no fixed size."""

from __future__ import annotations

import csv
import io
import math
import pickle
from pathlib import Path
from typing import Any

from ipfi_cli.cli.ui import Dashboard
from ipfi_cli.core.params import PFIParams
from ipfi_cli.run.explain import ExplainSession
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.report import RECENT_ROWS, PlainReporter, RecentLoss, Snapshot
from ipfi_cli.run.settings import Display, ExplainSettings, ModelSpec, OutputSpec, ReadSpec

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


class Snapshots:
    def __init__(self) -> None:
        self.seen: list[Snapshot] = []
        self.final: Snapshot | None = None

    def on_start(self, start: Any) -> None:
        pass

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.seen.append(snapshot)

    def on_events(self, events: Any) -> None:
        pass

    def on_end(self, end: Any) -> None:
        self.final = end.snapshot


def by_hand_losses(path: Path) -> list[float]:
    """Each explained row's zero-one loss, as ``explain --learn`` sees it: the model's prediction
    before it learns the row (the stream's first row is only stored, and learned)."""
    with open(SAMPLE / "agrawal_hoeffding.pkl", "rb") as f:
        model = pickle.load(f)  # noqa: S301 - the project's own sample model
    losses = []
    with open(path, newline="") as f:
        for i, row in enumerate(csv.DictReader(f)):
            y = int(row.pop("class"))
            x = {k: float(v) for k, v in row.items()}
            if i:
                losses.append(float(model.predict_one(x) != y))
            model.learn_one(x, y)
    return losses


def test_the_recent_loss_is_the_mean_loss_of_the_last_rows(tmp_path):
    lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()[:1601]
    rows = tmp_path / "rows.csv"
    rows.write_text("\n".join(lines) + "\n")
    snapshots = Snapshots()
    settings = ExplainSettings(ModelSpec(str(SAMPLE / "agrawal_hoeffding.pkl"), learn=True), Selection(target="class"),
                               inputs=InputSpec(path=str(rows)), params=PFIParams(n_repeats=2), seed=4,
                               output=OutputSpec(path=str(tmp_path / "t.csv"), every=1000),
                               display=Display(quiet=True), reading=ReadSpec(batch_size=50))
    ExplainSession(settings, PlainReporter(io.StringIO(), quiet=True), [snapshots]).run()
    losses = by_hand_losses(rows)
    assert len(losses) == 1599
    shown = [s for s in snapshots.seen if s.recent_loss == s.recent_loss]
    assert len(shown) >= 10  # a snapshot after each micro-batch of 50 rows past the first 1,000
    for s in shown:
        assert s.loss == math.fsum(losses[:s.explained]) / s.explained  # the by-hand losses are the run's
        assert s.recent_rows == RECENT_ROWS == 1000
        assert s.recent_loss == math.fsum(losses[s.explained - 1000:s.explained]) / 1000
    # none before the window is full (it would be the loss above), none in the final figures
    assert all(s.recent_loss != s.recent_loss for s in snapshots.seen if s.explained < 1000)
    final = snapshots.final
    assert final is not None and final.explained == 1599 and math.isnan(final.recent_loss)


def test_the_window_keeps_the_last_rows_only():
    recent = RecentLoss(4)
    for loss in (1.0, 1.0, 1.0):
        recent.add(loss)
    assert math.isnan(recent.value)
    for loss in (0.1, 0.2, 0.3, 0.4):
        recent.add(loss)
    assert recent.value == math.fsum([0.1, 0.2, 0.3, 0.4]) / 4


def test_the_caption_names_the_window():
    s = Snapshot(names=["a"], importances=[0.1], bounds=[0.0], rows=5000, explained=4999, loss=0.3,
                 recent_loss=0.125, recent_rows=1000, learning=True)
    caption = Dashboard("t", live=False)._caption(s)
    assert "loss 0.3000 (last 1,000 rows 0.1250)" in caption
