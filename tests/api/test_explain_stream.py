"""``ipfi_cli.explain_stream``: the command's run from Python, set by the values the command builds
from its options; the same rows through it and through ``ipfi explain`` give the same bytes. And
``IncrementalPFI.explain_many``: the estimates of ``explain_one`` row by row, to the bit."""

from __future__ import annotations

import csv
import json
import pickle
import warnings
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from typer.testing import CliRunner

import ipfi_cli
from ipfi_cli.api import (
    IncrementalPFI,
    MethodSpec,
    OutputSpec,
    PFIParams,
    Selection,
    StateSpec,
    WatchSettings,
    explain_stream,
)
from ipfi_cli.cli.app import app
from ipfi_cli.run.report import PlainReporter

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"
HGB = str(SAMPLE / "agrawal_hgb.joblib")
HOEFFDING = str(SAMPLE / "agrawal_hoeffding.pkl")


@pytest.fixture(scope="module")
def records() -> list[dict[str, float]]:
    """The first 300 rows of the drifting Agrawal stream, every value a number (the label too)."""
    with open(SAMPLE / "agrawal_drift.csv") as f:
        return [{k: float(v) for k, v in row.items()} for _, row in zip(range(300), csv.DictReader(f))]


@pytest.fixture
def jsonl(records, tmp_path) -> Path:
    """The same rows as the command reads them: JSONL, the same numbers."""
    path = tmp_path / "rows.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in records))
    return path


def load(path: str):
    if path.endswith(".pkl"):
        with open(path, "rb") as f:
            return pickle.load(f)
    return joblib.load(path)


# name: (model, the options as flags, the same options as values)
CASES = {
    "static": (HGB, ["-M", "2", "--seed", "8", "--every", "20"],
               dict(params=PFIParams(n_repeats=2), seed=8, output=OutputSpec(every=20))),
    "learning, bounds": (HOEFFDING,
                         ["--learn", "--alpha", "0.01", "-M", "3", "--seed", "1", "--bounds", "--every", "7"],
                         dict(learn=True, params=PFIParams(alpha=0.01, n_repeats=3), seed=1,
                              output=OutputSpec(every=7, bounds=True))),
    "features, group, jsonl, change watch": (
        HGB, ["--features", "age,salary,car", "--group", "money=commission,loan", "-F", "jsonl", "--detect",
              "--seed", "2", "-M", "2", "--sampling", "uniform", "--reservoir-size", "20"],
        dict(target=Selection(target="class", features=["age", "salary", "car"],
                              groups={"money": ["commission", "loan"]}),
             params=PFIParams(n_repeats=2, sampling="uniform", reservoir_size=20), seed=2,
             output=OutputSpec(format="jsonl"), watch=WatchSettings())),
    "mean smoothing, normal bounds": (
        HGB, ["--smoothing", "mean", "--bounds", "--bounds-method", "normal", "--delta", "0.1", "--seed", "4",
              "-M", "2", "--every", "25"],
        dict(method=MethodSpec(smoothing="mean"), params=PFIParams(n_repeats=2), seed=4,
             output=OutputSpec(every=25, bounds=True, bounds_method="normal", delta=0.1))),
    "running mean": (HGB, ["--running-mean", "--seed", "5", "-M", "2", "--every", "30"],
                     dict(method=MethodSpec(running_mean=True), params=PFIParams(n_repeats=2), seed=5,
                          output=OutputSpec(every=30))),
}


@pytest.mark.parametrize("case", CASES)
def test_explain_stream_writes_the_commands_bytes(case, records, jsonl, tmp_path):
    model, flags, values = CASES[case]
    out = tmp_path / "traces"
    values = dict(values)
    output = values.pop("output")
    target = values.pop("target", "class")
    session = explain_stream(load(model), records, target=target, output=OutputSpec(**{**output.__dict__,
                                                                                     "path": str(out)}),
                             reporter=PlainReporter(quiet=True), **values)
    assert session.status.value == "ok" and session.parts is not None and session.parts.progress.rows == 300
    command = CliRunner().invoke(app, ["explain", str(jsonl), "-m", model, "-t", "class", "-q", *flags],
                                 catch_exceptions=False)
    assert command.exit_code == 0, command.stderr
    assert command.stdout.count("\n") > 5
    assert out.read_bytes() == command.stdout.encode()


def test_explain_stream_with_a_state_continues_to_the_commands_bytes(records, jsonl, tmp_path):
    """``state=StateSpec(...)`` is ``--state``: a run stopped after 200 rows and given the whole stream
    again continues where it stopped, and the traces are the command's in one run."""
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    for rows in (records[:200], records):
        session = explain_stream(load(HGB), rows, target="class", params=PFIParams(n_repeats=2), seed=3,
                                 output=OutputSpec(path=str(out), every=10),
                                 state=StateSpec(str(state), checkpoint_every=50), reporter=PlainReporter(quiet=True))
        assert session.status.value == "ok"
    assert session.parts is not None and session.parts.progress.input_rows == 300
    command = CliRunner().invoke(app, ["explain", str(jsonl), "-m", HGB, "-t", "class", "-q", "-M", "2", "--seed",
                                       "3", "--every", "10"], catch_exceptions=False)
    assert command.exit_code == 0, command.stderr
    assert out.read_bytes() == command.stdout.encode()


def test_the_package_root_exports_it():
    assert ipfi_cli.explain_stream is explain_stream
    assert "explain_stream" in ipfi_cli.__all__


def test_explain_many_gives_explain_ones_estimates_to_the_bit(records):
    model = load(HGB)
    frame = pd.DataFrame(records)
    X, y = frame.drop(columns="class"), frame["class"]
    one_by_one = IncrementalPFI(model, n_repeats=3, alpha=0.01, seed=11)
    expected = [json.dumps(one_by_one.explain_one(x, label))
                for x, label in zip(X.to_dict("records"), y.tolist())]
    for rows in (X, X.to_dict("records"), X.to_numpy()):
        many = IncrementalPFI(model, list(X.columns), n_repeats=3, alpha=0.01, seed=11)
        got = many.explain_many(rows[:120], y[:120]) + many.explain_many(rows[120:], y[120:].to_numpy())
        assert [json.dumps(g) for g in got] == expected
        assert many.n_explained == one_by_one.n_explained == 299
    assert not np.isnan(json.loads(expected[-1])["age"])


def test_explain_many_refuses_a_label_count_that_is_not_the_rows(records):
    explainer = IncrementalPFI(load(HGB), seed=0)
    rows = [{k: v for k, v in r.items() if k != "class"} for r in records[:5]]
    with pytest.raises(ValueError, match="X has 5 rows and y 4 labels"):
        explainer.explain_many(rows, [0.0] * 4)
    with pytest.raises(ValueError, match="X has 2 columns: pass the model's columns="):
        IncrementalPFI(lambda X: X[:, 0], seed=0).explain_many(np.zeros((3, 2)), [0.0, 0.0, 0.0])


def _counting(fail_at: float | None = None):
    """A regression function of a 2-D array that counts its calls (and fails on a row whose x is ``fail_at``)."""
    calls = []

    def model(X):
        X = np.asarray(X, dtype=float)
        calls.append(len(X))
        if fail_at is not None and (X[:, 0] == fail_at).any():
            raise ValueError("cannot take this x")
        return 2.0 * X[:, 0] + 0.0 * X[:, 1]
    return model, calls


def _rows(n: int, seed: int = 0) -> tuple[list[dict[str, float]], list[float]]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 2))
    return [{"x": float(a), "z": float(b)} for a, b in X], [float(2.0 * a + 0.1 * e) for a, e in
                                                               zip(X[:, 0], rng.normal(size=n))]


def _state(explainer) -> tuple:
    return explainer.n_explained, json.dumps(explainer.importances), explainer._rows


def test_explain_many_asks_the_model_for_many_rows_at_once():
    rows, y = _rows(400)
    model, calls = _counting()
    one = IncrementalPFI(model, ["x", "z"], n_repeats=3, seed=1, loss="absolute")
    expected = [json.dumps(one.explain_one(x, t)) for x, t in zip(rows, y)]
    row_calls = len(calls)
    calls.clear()
    many = IncrementalPFI(model, ["x", "z"], n_repeats=3, seed=1, loss="absolute")
    assert [json.dumps(e) for e in many.explain_many(rows, y)] == expected
    assert row_calls >= 400 and len(calls) <= 10, (row_calls, len(calls))


@pytest.mark.parametrize("bad", ["model fails", "label missing"])
def test_explain_many_stops_where_explain_one_stops_with_its_error(bad):
    """A row the model fails on (or a row without a label) in the middle of a batch: the same error
    naming the same row, and the explainer holds the rows before it, as row by row."""
    rows, y = _rows(120)
    fail_at = rows[70]["x"] if bad == "model fails" else None
    if bad == "label missing":
        y[70] = None
    results = []
    for many in (False, True):
        model, _ = _counting(fail_at)
        explainer = IncrementalPFI(model, ["x", "z"], n_repeats=2, seed=4, loss="absolute")
        with pytest.raises(Exception) as error:
            if many:
                explainer.explain_many(rows, y)
            else:
                for x, t in zip(rows, y):
                    explainer.explain_one(x, t)
        results.append((type(error.value), str(error.value), _state(explainer)))
    assert results[0] == results[1]
    assert "row 71" in results[0][1] and results[0][2][0] == 69


def test_explain_many_checks_the_labels_after_the_rows_explain_one_checks_them():
    """Labels none of which are the model's classes: the same error after the same 25 explained rows."""
    from sklearn.linear_model import LogisticRegression

    rows, _ = _rows(100)
    model = LogisticRegression().fit([[r["x"], r["z"]] for r in rows], [int(r["x"] > 0) for r in rows])
    labels = ["maybe"] * 100
    results = []
    for many in (False, True):
        explainer = IncrementalPFI(model, ["x", "z"], n_repeats=2, seed=0)
        with pytest.raises(Exception) as error:
            if many:
                explainer.explain_many(rows, labels)
            else:
                for x, t in zip(rows, labels):
                    explainer.explain_one(x, t)
        results.append((type(error.value), str(error.value), _state(explainer)))
    assert results[0] == results[1] and results[0][2][0] == 25


def test_explain_many_warns_of_a_late_key_as_explain_one_does():
    rows, y = _rows(60)
    rows[40] = {**rows[40], "late": 1.0}
    heard = []
    for many in (False, True):
        model, _ = _counting()
        explainer = IncrementalPFI(model, n_repeats=2, seed=0, loss="absolute")
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            if many:
                explainer.explain_many(rows, y)
            else:
                for x, t in zip(rows, y):
                    explainer.explain_one(x, t)
        heard.append([(str(w.message), Path(w.filename).name) for w in caught])
    assert heard[0] == heard[1] and len(heard[0]) == 1 and "row 41 has the key 'late'" in heard[0][0][0]
    assert heard[0][0][1] == "test_explain_stream.py"
