"""The run layer's seams, driven from Python: observers hear a run's start, every snapshot
(without a terminal), its change events and its end; a second explaining method plugs in
through the :class:`~ipfi_cli.core.explainer.Explainer` protocol and the method registry."""

from __future__ import annotations

import csv
import io
import json
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from ipfi_cli.core.explainer import METHODS, Explainer
from ipfi_cli.core.params import PFIParams
from ipfi_cli.run.explain import ExplainSession
from ipfi_cli.run.observers import RunEnd, RunObserver, RunStart
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.report import PlainReporter, Snapshot
from ipfi_cli.run.settings import ExplainSettings, MethodSpec, ModelSpec, OutputSpec, ReadSpec, RunStatus, StateSpec
from ipfi_cli.run.watch import WatchSettings

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
STATIC_MODEL = str(SAMPLE / "agrawal_hgb.joblib")


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()[:301]
    path = tmp_path_factory.mktemp("observers") / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


class Recorder:
    """An observer that keeps what it hears, in order."""

    def __init__(self) -> None:
        self.heard: list[tuple[str, Any]] = []

    def on_start(self, start: RunStart) -> None:
        self.heard.append(("start", start))

    def on_snapshot(self, snapshot: Snapshot) -> None:
        self.heard.append(("snapshot", snapshot))

    def on_events(self, events: Any) -> None:
        self.heard.append(("events", list(events)))

    def on_end(self, end: RunEnd) -> None:
        self.heard.append(("end", end))

    def of(self, kind: str) -> list[Any]:
        return [what for k, what in self.heard if k == kind]


def test_an_observer_hears_the_start_every_micro_batch_and_the_end(rows, tmp_path):
    recorder = Recorder()
    assert isinstance(recorder, RunObserver)
    settings = ExplainSettings(ModelSpec(STATIC_MODEL), Selection(target="class"), inputs=InputSpec(path=str(rows)),
                               params=PFIParams(n_repeats=2), seed=3, reading=ReadSpec(batch_size=100),
                               output=OutputSpec(path=str(tmp_path / "t.csv")))
    status = ExplainSession(settings, PlainReporter(io.StringIO()), observers=[recorder]).run()
    assert status is RunStatus.OK
    kinds = [k for k, _ in recorder.heard]
    assert kinds[0] == "start" and kinds[-1] == "end" and kinds.count("start") == kinds.count("end") == 1
    start, end = recorder.of("start")[0], recorder.of("end")[0]
    assert start.seed == 3 and start.method == "pfi" and not start.learning and start.names[0] == "salary"
    snapshots = recorder.of("snapshot")
    # a file is read in micro-batches of --batch-size rows: one snapshot after each of the three
    assert [s.rows for s in snapshots] == [100, 200, 300]
    assert end.status == "ok" and end.snapshot.rows == 300 and end.snapshot.explained == 299
    final = next(csv.reader(io.StringIO((tmp_path / "t.csv").read_text().splitlines()[-1])))
    assert [float(v) for v in final[1:]] == pytest.approx(end.snapshot.importances, abs=1e-12)


def test_change_events_reach_the_observers_and_the_events_file(tmp_path):
    lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()[:4001]
    data = tmp_path / "drift.csv"
    data.write_text("\n".join(lines) + "\n")
    recorder = Recorder()
    events_path = tmp_path / "events.jsonl"
    settings = ExplainSettings(ModelSpec(STATIC_MODEL), Selection(target="class"), inputs=InputSpec(path=str(data)),
                               params=PFIParams(n_repeats=2), seed=1,
                               output=OutputSpec(path=str(tmp_path / "t.csv"), every=1000),
                               watch=WatchSettings(events=str(events_path)))
    ExplainSession(settings, PlainReporter(io.StringIO()), observers=[recorder]).run()
    heard = [event.to_dict() for events in recorder.of("events") for event in events]
    written = [json.loads(line) for line in events_path.read_text().splitlines()]
    assert heard == written


class FirstDifferences:
    """A second "method" for the test: per column, the exponentially smoothed absolute
    difference between a row's value and the previous row's (no model involved)."""

    def __init__(self, predictor: Any, columns: Any, *, loss: Any, features: Any = None, groups: Any = None,
                 seed: int | None = None, alpha: float = 0.5, **ignored: Any) -> None:
        self.model = predictor
        self.columns = list(columns)
        self.names = list(features or columns)
        self.alpha = alpha
        self.seed = seed
        self.loss_name = getattr(loss, "name", loss)
        self.n_seen = 0
        self.last_loss = float("nan")
        self._previous: np.ndarray | None = None
        self._mean = np.full(len(self.names), np.nan)
        self._last = np.full(len(self.names), np.nan)
        self._count = 0

    def explain_one(self, x: Any, y: Any) -> np.ndarray:
        row = np.array([float(x[name]) for name in self.names])
        if self._previous is not None:
            self._last = np.abs(row - self._previous)
            self._mean = self._last if self._count == 0 else (1 - self.alpha) * self._mean + self.alpha * self._last
            self._count += 1
            self.last_loss = 0.0
        self._previous = row
        self.n_seen += 1
        return self._mean.copy()

    def explain_many(self, block: Any, targets: Any, *, return_contributions: bool = False) -> Any:
        out = np.array([self.explain_one(x, y) for x, y in zip(block, targets)])
        return (out, None, None) if return_contributions else out

    def importance_array(self) -> np.ndarray:
        return self._mean.copy()

    def bound_array(self, delta: float = 0.05) -> np.ndarray:
        return np.zeros(len(self.names))

    @property
    def last_contribution(self) -> np.ndarray:
        return self._last

    @property
    def n_explained(self) -> int:
        return self._count

    @property
    def mean_loss(self) -> float:
        return 0.0 if self._count else float("nan")

    def params(self) -> dict[str, Any]:
        return {"method": "first-differences", "columns": self.columns, "names": self.names,
                "groups": {n: [n] for n in self.names}, "loss": self.loss_name, "alpha": self.alpha,
                "seed": self.seed}

    def state_dict(self) -> dict[str, Any]:  # plain data, as the protocol asks
        return {"previous": self._previous, "mean": self._mean, "last": self._last, "count": self._count,
                "n_seen": self.n_seen, "last_loss": self.last_loss}

    def load_state_dict(self, state: Any) -> None:
        self._previous, self._mean, self._last = state["previous"], state["mean"], state["last"]
        self._count, self.n_seen, self.last_loss = state["count"], state["n_seen"], state["last_loss"]


def test_a_second_method_plugs_in_through_the_protocol_and_the_registry(rows, tmp_path, monkeypatch):
    monkeypatch.setitem(METHODS, "first-differences", FirstDifferences)
    assert isinstance(FirstDifferences(None, ["a"], loss="squared"), Explainer)
    out, meta, state = tmp_path / "t.csv", tmp_path / "meta.json", tmp_path / "run.state"
    recorder = Recorder()
    settings = ExplainSettings(ModelSpec(STATIC_MODEL), Selection(target="class", features=["age", "car"]),
                               inputs=InputSpec(path=str(rows)), method=MethodSpec(name="first-differences"),
                               params=PFIParams(alpha=0.5), seed=2, output=OutputSpec(path=str(out), meta=str(meta)),
                               state=StateSpec(str(state)))
    assert ExplainSession(settings, PlainReporter(io.StringIO()), observers=[recorder]).run() is RunStatus.OK
    # the expected values straight from the file, by hand
    with open(rows) as f:
        table = [(float(r["age"]), float(r["car"])) for r in csv.DictReader(f)]
    mean = None
    for previous, current in zip(table, table[1:]):
        diff = [abs(c - p) for c, p in zip(current, previous)]
        mean = diff if mean is None else [0.5 * m + 0.5 * d for m, d in zip(mean, diff)]
    lines = out.read_text().splitlines()
    assert lines[0] == "row,age,car" and len(lines) == 301
    assert [float(v) for v in lines[-1].split(",")[1:]] == pytest.approx(mean, rel=1e-12)
    assert recorder.of("start")[0].method == "first-differences"
    written = json.loads(meta.read_text())
    assert written["settings"]["method"] == "first-differences"
    assert written["final"]["importances"] == pytest.approx(dict(zip(["age", "car"], mean)), rel=1e-12)
    # the state of a method resumes like pfi's: the same command again has nothing left to read
    more = replace(settings, output=replace(settings.output, path=str(out)))
    assert ExplainSession(more, PlainReporter(io.StringIO())).run() is RunStatus.OK
    assert out.read_text().splitlines() == lines
