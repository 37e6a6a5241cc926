"""The session's collaborators stand alone: the metrics exporter hears a run through the observer
events and the values it is given (no session), the run's end and the keyed strategy are objects the
session is given, not classes it inherits."""

from __future__ import annotations

import math

from prometheus_client.parser import text_string_to_metric_families

from ipfi_cli.io.prometheus import exposition
from ipfi_cli.run.ending import RunEnding
from ipfi_cli.run.explain import ExplainSession, explaining_for
from ipfi_cli.run.explaining import SingleExplainer
from ipfi_cli.run.keyed import PerKeyExplainers
from ipfi_cli.run.monitor import MetricsExporter, MonitorSettings
from ipfi_cli.run.observers import Ranking, RunEnd, RunStart, Snapshot
from ipfi_cli.run.plan import Selection
from ipfi_cli.run.settings import Display, ExplainSettings, ModelSpec, OutputSpec


def _samples(exporter: MetricsExporter) -> dict[str, list[tuple[dict[str, str], float]]]:
    text = exposition(exporter.metrics).decode()
    return {f.name: [(dict(s.labels), s.value) for s in f.samples] for f in text_string_to_metric_families(text)}


def test_the_exporter_needs_only_the_observer_events():
    """Fed a RunStart and snapshots by hand (no session anywhere), the exporter publishes the run's
    loss, the importances and their ranks, the model calls, every change series at 0 and the nDCG@k of
    the ranking against the reference: here the current ranking is the reference's own order, so 1."""
    run = ExplainSettings(ModelSpec("m.joblib"), Selection(target="y"), output=OutputSpec(delta=0.1),
                          display=Display(verbose=False))
    said: list[str] = []
    exporter = MetricsExporter(MonitorSettings(metrics_textfile=None), run)
    exporter.serve(lambda text, kind=None: said.append(text))
    assert said == []  # no port asked for: nothing served, nothing said
    exporter.watch(None, None)
    exporter.on_start(RunStart(title="t", names=["a", "b"], seed=1, loss="log", detect=True,
                               ranking=Ranking((0.5, 0.1), k=2, threshold=0.9)))
    exporter.on_snapshot(Snapshot(names=["a", "b"], importances=[0.3, 0.2], bounds=[0.01, 0.02], rows=11,
                                  explained=10, loss=0.25, loss_sum=2.5, model_calls=4, predictions=40))
    got = _samples(exporter)
    assert got["ipfi_run_info"][0][0]["loss"] == "log"
    assert {labels["feature"]: value for labels, value in got["ipfi_feature_importance"]} == {"a": 0.3, "b": 0.2}
    assert {labels["feature"]: value for labels, value in got["ipfi_feature_rank"]} == {"a": 1.0, "b": 2.0}
    assert got["ipfi_model_calls"] == [({}, 4.0)] and got["ipfi_model_predictions"] == [({}, 40.0)]
    assert got["ipfi_ranking_ndcg"] == [({}, 1.0)]
    changes = {(labels["kind"], labels["feature"], labels["direction"]): value
               for labels, value in got["ipfi_change_events"]}
    assert changes == {("importance", "a", "up"): 0.0, ("importance", "a", "down"): 0.0,
                       ("importance", "b", "up"): 0.0, ("importance", "b", "down"): 0.0,
                       ("loss", "", "up"): 0.0, ("loss", "", "down"): 0.0, ("ranking", "", "down"): 0.0}
    exporter.on_end(RunEnd(title="t", status="ok", snapshot=None))
    assert not math.isnan(got["ipfi_start_timestamp_seconds"][0][1])


def test_the_session_is_given_its_strategy_and_inherits_no_mixin():
    """One class, no mixin; the strategy is what the settings ask for, or the one given."""
    assert ExplainSession.__mro__ == (ExplainSession, object)
    plain = ExplainSettings(ModelSpec("m.joblib"), Selection(target="y"))
    keyed = ExplainSettings(ModelSpec("m.joblib"), Selection(target="y", by=("k",)))
    assert type(explaining_for(plain, print)) is SingleExplainer
    assert type(explaining_for(keyed, print)) is PerKeyExplainers
    given = PerKeyExplainers(keyed, print)
    session = ExplainSession(keyed, _Quiet(), explaining=given)
    assert session.explaining is given and session.ending is None  # made once the run is set up
    assert RunEnding.__mro__ == (RunEnding, object)


class _Quiet:
    def message(self, text: str, kind: str | None = None) -> None:
        pass

    def on_start(self, start: RunStart) -> None:
        pass

    def on_snapshot(self, snapshot: Snapshot) -> None:
        pass

    def on_events(self, events: object) -> None:
        pass

    def on_end(self, end: RunEnd) -> None:
        pass
