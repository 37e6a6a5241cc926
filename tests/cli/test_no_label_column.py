"""``--loss prediction-shift`` on a stream with no label column at all: ``--target`` is left out.

The label-free loss never reads a label, so a run without the column gives the bytes of the same run
with it (``-t class``): that is the expected value, from the path that reads labels. Every other loss
needs labels: leaving ``--target`` out is a usage error (exit 2, one line) before the model is loaded.

The last two tests are about what the importances find. A static model's prediction-shift importance is
how much its output moves when a feature is permuted *on the rows it gets*: it changes when the
inputs' distribution changes (here: from row 4,001 only people under 40, a real sub-population of
agrawal_drift.csv's rows), not when only the labelling changes (agrawal_drift.csv's drift at row
10,000 changes the labelling function, its inputs are drawn alike before and after): that needs labels.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import pytest

from tests.cli.conftest import SAMPLE, head_lines

MODEL = str(SAMPLE / "agrawal_hgb.joblib")
FEATURES = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]


def without_label(text: str) -> str:
    """The CSV text without its last column (class)."""
    return "".join(line.rsplit(",", 1)[0] + "\n" for line in text.splitlines())


@pytest.fixture(scope="module")
def inputs(tmp_path_factory) -> dict[str, Path]:
    folder = tmp_path_factory.mktemp("nolabel")
    labelled = head_lines(SAMPLE / "agrawal_drift.csv", 300, start=9850)  # across the drift at row 10,000
    paths = {"labelled": folder / "labelled.csv", "unlabelled": folder / "unlabelled.csv",
             "jsonl": folder / "unlabelled.jsonl"}
    paths["labelled"].write_text(labelled)
    paths["unlabelled"].write_text(without_label(labelled))
    with paths["jsonl"].open("w") as out:
        for row in csv.DictReader(paths["unlabelled"].open()):
            out.write(json.dumps({k: float(v) for k, v in row.items()}) + "\n")
    return paths


OPTIONS = ["--loss", "prediction-shift", "--seed", "3", "-M", "2"]


def test_explain_without_a_label_column_gives_the_bytes_of_the_run_with_it(run, inputs, tmp_path):
    outputs = {}
    for name, extra in (("labelled", ["-t", "class"]), ("unlabelled", []), ("jsonl", [])):
        outputs[name] = tmp_path / f"{name}.csv"
        result = run("explain", inputs[name], "-m", MODEL, *OPTIONS, *extra, "--no-live", "-q",
                     "-o", outputs[name])
        assert result.exit_code == 0, result.stderr
    traces = outputs["labelled"].read_text()
    assert traces.splitlines()[0] == "row," + ",".join(FEATURES)
    assert len(traces.splitlines()) == 301
    assert outputs["unlabelled"].read_text() == traces
    assert outputs["jsonl"].read_text() == traces  # JSONL objects without the key: the same


@pytest.mark.parametrize("command", ["batch", "compare"])
def test_batch_and_compare_without_a_label_column_give_the_results_with_it(run, inputs, tmp_path, command):
    outputs = {}
    for name, extra in (("labelled", ["-t", "class"]), ("unlabelled", [])):
        outputs[name] = tmp_path / f"{name}.csv"
        result = run(command, inputs[name], "-m", MODEL, *OPTIONS, *extra, "-q", "-o", outputs[name])
        assert result.exit_code == 0, result.stderr
    assert outputs["unlabelled"].read_text() == outputs["labelled"].read_text()
    assert "salary" in outputs["labelled"].read_text()


@pytest.mark.parametrize(("args", "expected"), [
    ([], "the default loss compares predictions with labels"),
    (["--loss", "log"], "the log loss compares predictions with labels"),
    (["--loss", "zero-one"], "the zero-one loss compares predictions with labels"),
])
@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_no_target_with_a_loss_that_needs_labels_is_a_usage_error_before_the_model_loads(run, inputs, command,
                                                                                          args, expected):
    result = run(command, inputs["unlabelled"], "-m", "no-such-model.joblib", *args, "-q", "-o", "/dev/null")
    assert result.exit_code == 2
    (line,) = result.stderr.splitlines()
    assert line.startswith("ipfi: usage error: Missing option '--target': ") and expected in line, line
    assert "--loss prediction-shift" in line


def test_no_target_refuses_learning_and_late_labels(run, inputs, tmp_path):
    result = run("explain", inputs["unlabelled"], "-m", str(SAMPLE / "agrawal_hoeffding.pkl"),
                 "--loss", "prediction-shift", "--learn", "-q", "-o", "/dev/null")
    assert result.exit_code == 2
    assert "Missing option '--target': --learn learns from labels" in result.stderr
    result = run("explain", inputs["unlabelled"], "-m", MODEL, "--loss", "prediction-shift", "--labels",
                 inputs["unlabelled"], "--id", "car", "-q", "-o", "/dev/null")
    assert result.exit_code == 2
    assert "Missing option '--target': --labels gives the labels" in result.stderr


def drift_rows(first: int, last: int, keep=lambda row: True) -> list[list[str]]:
    """Rows ``first`` to ``last - 1`` of agrawal_drift.csv without the class column, those ``keep`` keeps."""
    with (SAMPLE / "agrawal_drift.csv").open() as source:
        rows = list(csv.reader(source))[1 + first:1 + last]
    return [row[:-1] for row in rows if keep(row)]


def explain(run, rows: list[list[str]], folder: Path) -> tuple[list[dict[str, float]], list[dict]]:
    data, traces, events = folder / "input.csv", folder / "traces.csv", folder / "events.jsonl"
    with data.open("w", newline="") as out:
        csv.writer(out).writerows([FEATURES, *rows])
    result = run("explain", data, "-m", MODEL, "--loss", "prediction-shift", "--seed", "1", "-M", "2", "--every",
                 "500", "--detect", "--events", events, "--no-live", "-q", "-o", traces)
    assert result.exit_code == 0, result.stderr
    records = [{k: float(v) for k, v in row.items()} for row in csv.DictReader(traces.open())]
    return records, [json.loads(line) for line in events.read_text().splitlines()]


def test_a_shift_of_the_inputs_moves_the_feature_it_shifted_without_any_label(run, tmp_path):
    """4,000 rows of everyone, then only the rows of people under 40 (3,317 of rows 10,000-19,999): the
    model (function 1: salary bands by age band) no longer varies with age on these rows. Criterion:
    age's importance at the end is below a tenth of what it was at row 4,000 and its change is the largest
    of all features; the first change event is age going down, within 500 rows of the shift (seed 1)."""
    before = drift_rows(6000, 10000)
    after = drift_rows(10000, 20000, keep=lambda row: int(row[2]) < 40)
    assert len(after) == 3317
    records, events = explain(run, [*before, *after], tmp_path)
    at_shift = next(r for r in records if r["row"] == 4000)
    end = records[-1]
    assert end["row"] == 4000 + len(after)
    changes = {f: end[f] - at_shift[f] for f in FEATURES}
    assert at_shift["age"] > 0.25  # before: one of the two features the model uses most (0.34)
    assert end["age"] < at_shift["age"] / 10  # 0.014 at the end
    assert max(changes, key=lambda f: abs(changes[f])) == "age", changes
    first = events[0]
    assert (first["kind"], first["feature"], first["direction"]) == ("importance", "age", "down"), first
    assert 4000 < first["row"] <= 4500, first


def test_a_drift_of_the_labelling_alone_leaves_a_static_models_label_free_importances_alike(run, tmp_path):
    """agrawal_drift.csv's drift at row 10,000 changes how labels are made (salary/age to age/elevel), the
    inputs are drawn alike: without labels the static model's prediction-shift importances are the same
    before and after (within 0.05: before the drift, at every 1,000th row of rows 1,000-10,000, each
    importance spans at most 0.04, age 0.330-0.363), and elevel stays below 0.01; no change event (seed 1). The
    labelling drift needs labels (a loss that reads them, or the model's learning) to be seen."""
    records, events = explain(run, drift_rows(8000, 12000), tmp_path)
    at_drift = next(r for r in records if r["row"] == 2000)
    end = records[-1]
    for feature in FEATURES:
        assert abs(end[feature] - at_drift[feature]) < 0.05, feature
    assert max(r["elevel"] for r in records) < 0.01
    assert events == []
