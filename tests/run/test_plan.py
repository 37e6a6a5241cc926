"""The run's set-up as one value (RunPlan), resume returning what it restores, and the
Python entry point that streams rows given as objects, driven without the command line."""

from __future__ import annotations

import csv
import dataclasses
import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.core.params import PFIParams
from ipfi_cli.models.loading import load_predictor
from ipfi_cli.run.explain import ExplainSession, explain_stream
from ipfi_cli.run.plan import InputSpec, Selection, plan_run
from ipfi_cli.run.report import PlainReporter
from ipfi_cli.run.settings import ExplainSettings, ModelSpec, OutputSpec, Progress, RunParts, StateSpec

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
HGB = str(SAMPLE / "agrawal_hgb.joblib")
HOEFFDING = str(SAMPLE / "agrawal_hoeffding.pkl")


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()[:201]
    path = tmp_path_factory.mktemp("plan") / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_one_plan_for_the_streaming_and_the_batch_commands(rows):
    heard: list[tuple[str, str | None]] = []
    selection = Selection(target="class", features=["age", "salary", "car"], groups={"money": ["commission", "loan"]})
    plans = []
    for streaming in (True, False):
        plan, reader = plan_run(load_predictor(HGB), InputSpec(path=str(rows)), selection, learn=False,
                                say=lambda text, kind=None: heard.append((text, kind)), streaming=streaming)
        reader.close()
        plans.append(plan)
    stream, whole = plans
    for field in ("source", "input_format", "input_columns", "columns", "features", "groups", "classification",
                  "target", "known_keys"):
        assert getattr(stream, field) == getattr(whole, field), field
    assert stream.loss.name == whole.loss.name == "zero-one" and stream.classification
    assert stream.columns == ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
    assert stream.features == ["age", "salary", "car"] and stream.groups == {"money": ["commission", "loan"]}
    with pytest.raises(dataclasses.FrozenInstanceError):
        stream.columns = []  # type: ignore[misc]


def test_rows_as_objects_give_the_commands_exact_traces(rows, tmp_path):
    import joblib

    model = joblib.load(HGB)
    with open(rows) as f:
        records = [{k: float(v) for k, v in r.items()} for r in csv.DictReader(f)]
    out = tmp_path / "traces.csv"
    session = explain_stream(model, iter(records), target="class", params=PFIParams(n_repeats=2), seed=8,
                             output=OutputSpec(path=str(out), every=20))
    assert session.status.value == "ok" and session.parts is not None and session.parts.progress.rows == 200
    command = CliRunner().invoke(app, ["explain", str(rows), "-m", HGB, "-t", "class", "-M", "2", "--seed", "8",
                                       "--every", "20", "-q"], catch_exceptions=False)
    assert command.exit_code == 0
    assert out.read_text() == command.stdout


def test_resume_returns_what_it_restores_and_leaves_the_given_pieces_alone(tmp_path):
    from ipfi_cli.core.explainer import make_explainer
    from ipfi_cli.run.resume import StateKeeper

    lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()
    data = tmp_path / "first.csv"
    data.write_text("\n".join(lines[:301]) + "\n")
    state = tmp_path / "run.state"
    settings = ExplainSettings(ModelSpec(HOEFFDING, learn=True), Selection(target="class"),
                               inputs=InputSpec(path=str(data)), params=PFIParams(n_repeats=2), seed=5,
                               output=OutputSpec(path=str(tmp_path / "t.csv")), state=StateSpec(str(state)))
    first = ExplainSession(settings, PlainReporter(io.StringIO()))
    first.run()
    assert first.explainer is not None
    saved = first.explainer.importance_array().tolist()

    keeper = StateKeeper.open(str(state), skip_seen=True)
    plan, reader = plan_run(load_predictor(HOEFFDING, learn=True), settings.inputs, settings.selection, learn=True,
                            say=lambda text, kind=None: None)
    with reader:
        fresh = make_explainer("pfi", plan.predictor, plan.columns, loss=plan.loss, n_repeats=2, seed=5)
        given = RunParts(explainer=fresh, progress=Progress(), checker=plan.row_checker(on_bad_row="fail",
                                                                                        on_skip=None))
        said: list[str] = []
        restored = keeper.begin(plan, settings, given, seed=5, reader=reader, say=said.append)
    assert restored is not None and restored is not given
    assert restored.progress.rows == 300 and restored.progress.input_rows == 300
    assert restored.explainer.importance_array().tolist() == saved and restored.explainer.model is plan.predictor
    assert given.progress == Progress() and given.explainer is fresh and fresh.n_seen == 0
    assert said and said[0].startswith(f"continuing from {state}: 300 input row(s) already handled")
