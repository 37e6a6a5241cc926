"""``ipfi compare``: static (orderings vs batch PFI) and --learn (vs interval PFI)."""

from __future__ import annotations

import csv
import io

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.evaluation import RECORD_FIELDS

runner = CliRunner()


def invoke(*args):
    return runner.invoke(app, [str(a) for a in args])


def records(text):
    return list(csv.DictReader(io.StringIO(text)))


def test_static_compare_records_summary_and_traces(agrawal_small, hgb, tmp_path):
    traces = tmp_path / "traces.csv"
    result = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "-K", "2", "-M", "2",
                    "--seed", "3", "--traces", traces, "--trace-every", "10")
    assert result.exit_code == 0, result.output
    rows = records(result.stdout)
    assert list(rows[0]) == RECORD_FIELDS
    assert [r["method"] for r in rows].count("batch") == 9
    ipfi = [r for r in rows if r["method"] == "ipfi"]
    assert len(ipfi) == 2 * 2 * 9  # samplings x orderings x features
    assert {(r["sampling"], r["ordering"]) for r in ipfi} == {("uniform", "0"), ("uniform", "1"),
                                                            ("geometric", "0"), ("geometric", "1")}
    one_run = [r for r in ipfi if r["sampling"] == "uniform" and r["ordering"] == "0"]
    assert abs(sum(float(r["abs_diff"]) for r in one_run) - float(one_run[0]["error"])) < 1e-9
    assert "median error" in result.stderr and "uniform" in result.stderr
    header, *lines = traces.read_text().splitlines()
    assert header.startswith("method,row,salary")
    assert {line.split(",")[0] for line in lines} == {"ipfi-uniform-0.001", "ipfi-geometric-0.001", "batch"}
    again = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "-K", "2", "-M", "2", "--seed", "3",
                   "-q")
    assert again.stdout == result.stdout and again.stderr == ""


def test_static_compare_options(agrawal_small, hgb):
    result = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "-M", "2", "--seed", "1",
                    "--sampling", "geometric", "--alpha", "0.01", "--alpha", "0.05", "--keep-order",
                    "--features", "salary,age", "-F", "jsonl", "-q")
    assert result.exit_code == 0, result.output
    import json

    rows = [json.loads(line) for line in result.stdout.splitlines()]
    ipfi = [r for r in rows if r["method"] == "ipfi"]
    assert {(r["alpha"], r["feature"]) for r in ipfi} == {(0.01, "salary"), (0.01, "age"), (0.05, "salary"),
                                                         (0.05, "age")}
    assert all(r["sampling"] == "geometric" for r in ipfi)


def test_usage_errors(agrawal_small, hgb):
    base = ["compare", agrawal_small, "-m", hgb, "-t", "class"]
    assert invoke(*base, "--drift-at", "100").exit_code == 2
    assert invoke(*base, "--keep-order", "-K", "2").exit_code == 2
    assert invoke(*base, "--alpha", "0").exit_code == 2
    assert invoke(*base, "--normalisation", "softmax").exit_code == 2


@pytest.mark.parametrize("output", [(), ("-o", "-")], ids=["default", "dash"])
def test_traces_to_stdout_beside_the_records_are_refused(agrawal_small, hgb, output):
    """--traces - with the records on stdout too: refused before any work (before, exit 0 and two
    tables of different columns one after the other on stdout, which no CSV reader takes)."""
    result = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "-K", "1", "-M", "1", "--seed", "0",
                    "--traces", "-", *output)
    assert result.exit_code == 2, result.output
    assert result.stdout == ""
    assert result.stderr.strip().splitlines() == [
        "ipfi: usage error: Invalid value for '--traces': '-' is standard output, where the records go "
        "already; give --traces a file, or the records one with -o; see 'ipfi compare -h'"]


def test_traces_to_stdout_with_the_records_in_a_file(agrawal_small, hgb, tmp_path):
    out = tmp_path / "records.csv"
    result = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "-K", "1", "-M", "1", "--seed", "0",
                    "--traces", "-", "-o", out, "-q")
    assert result.exit_code == 0, result.output
    assert result.stdout.startswith("method,row,salary")
    assert out.read_text().startswith("method,feature,importance")


def test_learning_compare_needs_a_learning_model(agrawal_small, hgb):
    result = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "--learn")
    assert result.exit_code == 1 and "--learn needs a model that learns" in result.stderr


def test_learning_compare_with_drift(drift_small, hoeffding, tmp_path):
    traces = tmp_path / "traces.jsonl"
    result = invoke("compare", drift_small, "-m", hoeffding, "-t", "class", "--learn", "--interval", "100",
                    "--drift-at", "200", "-M", "2", "--alpha", "0.01", "--alpha", "0.05", "--seed", "0",
                    "--traces", traces, "--trace-every", "20")
    assert result.exit_code == 0, result.output
    rows = records(result.stdout)
    assert sorted({int(r["row"]) for r in rows}) == [100, 200, 300, 400]
    assert len([r for r in rows if r["method"] == "interval"]) == 4 * 9
    assert len([r for r in rows if r["method"] == "ipfi"]) == 4 * 2 * 9
    assert "before (<= 200)" in result.stderr and "after (> 200)" in result.stderr
    import json

    methods = {json.loads(line)["method"] for line in traces.read_text().splitlines()}
    assert methods == {"ipfi-geometric-0.01", "ipfi-geometric-0.05", "interval"}
    bad = invoke("compare", drift_small, "-m", hoeffding, "-t", "class", "--learn", "--drift-at", "400")
    assert bad.exit_code == 2


@pytest.mark.parametrize("options, a_value, b_value", [
    ((), 4.0, 0.0),
    (("--empty-coalition", "mean", "--inner", "1"), 6.0, -2.0),
])
def test_compare_sage_against_the_known_values_of_a_linear_model(tmp_path, options, a_value, b_value):
    """A model 2a + 0b on independent normal columns, squared loss, labels 2a.

    By default (the empty coalition imputed like the others, two imputations per coalition for the
    squared loss, each coalition's loss corrected by the imputations' variance / 2): Covert et al.'s
    SAGE, a gets the explained loss 4 Var(a) and b, which the model ignores, 0.

    iXAI's game (--empty-coalition mean --inner 1), over the two orderings: a first takes the empty
    coalition's loss, that of the mean prediction, E[(2a - 0)^2] = 4 Var(a), down to 0; b first leaves
    a imputed by one background row, loss E[(2a - 2a')^2] = 8 Var(a), down to 0 when a comes. So a
    gets (4 + 8) / 2 = 6 Var(a), and b (0 + 4 - 8) / 2 = -2 Var(a).
    Tolerances: batch SAGE within 4 of its standard errors; iSAGE (alpha 0.002, about 1,000 rows
    weigh) within 1.0, about 4 of its standard deviations (contributions with a standard deviation
    near 10 over about 1,000 rows: 0.3, more for the exponential weights' smaller effective count)."""
    import joblib
    import numpy as np
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(5)
    X = rng.normal(size=(4000, 2))
    y = 2 * X[:, 0]
    data = tmp_path / "linear.csv"
    data.write_text("a,b,y\n" + "\n".join(f"{a!r},{b!r},{t!r}" for (a, b), t in zip(X.tolist(), y.tolist())))
    model = tmp_path / "linear.joblib"
    joblib.dump(LinearRegression().fit(X, y), model)
    result = invoke("compare", data, "-m", model, "-t", "y", "--method", "sage", "--loss", "squared", "--seed", "3",
                    "--alpha", "0.002", "--sampling", "uniform", "--permutations", "3000", "-q", *options)
    assert result.exit_code == 0, result.stderr
    found = records(result.stdout)
    truth = {"a": a_value * X[:, 0].var(), "b": b_value * X[:, 0].var()}
    batch = {r["feature"]: r for r in found if r["method"] == "batch-sage"}
    online = {r["feature"]: float(r["importance"]) for r in found if r["method"] == "isage"}
    for name, value in truth.items():
        assert abs(float(batch[name]["importance"]) - value) <= 4 * float(batch[name]["std"]) + 1e-9, batch[name]
        assert abs(online[name] - value) < 1.0, (name, online[name], value)


def test_compare_sage_refusals(agrawal_small, hgb, drift_small, hoeffding):
    learning = invoke("compare", drift_small, "-m", hoeffding, "-t", "class", "--learn", "--method", "sage")
    assert learning.exit_code == 2 and "static model" in learning.stderr
    subset = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--features", "age")
    assert subset.exit_code == 2 and "drop --features" in subset.stderr


def test_learn_first_needs_learn_and_changes_what_is_measured(drift_small, hoeffding, agrawal_small, hgb):
    refused = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "--learn-first")
    assert refused.exit_code == 2 and "--learn" in refused.stderr
    base = ("compare", drift_small, "-m", hoeffding, "-t", "class", "--learn", "--interval", "100", "-M", "2",
            "--seed", "0", "-q")
    prequential, first = invoke(*base), invoke(*base, "--learn-first")
    assert prequential.exit_code == 0 and first.exit_code == 0, first.output
    interval = [[r for r in records(out.stdout) if r["method"] == "interval"] for out in (prequential, first)]
    assert interval[0] == interval[1]  # the same model at each window's end, the same interval PFI
    ipfi = [[r["importance"] for r in records(out.stdout) if r["method"] == "ipfi"] for out in (prequential, first)]
    assert ipfi[0] != ipfi[1]


def test_trace_every_keeps_the_rows_explain_every_keeps(agrawal_small, hgb, tmp_path):
    """--trace-every 300 kept rows 1, 301, 601 while explain --every 300 keeps 300, 600 (and the last)."""
    every = 70  # on 300 rows: 70, 140, 210, 280 and the last, 300
    n_rows = len(agrawal_small.read_text().splitlines()) - 1
    expected = [*range(every, n_rows + 1, every)] + ([n_rows] if n_rows % every else [])
    traces = tmp_path / "traces.csv"
    result = invoke("compare", agrawal_small, "-m", hgb, "-t", "class", "-M", "1", "--seed", "0", "--keep-order",
                    "--sampling", "uniform", "-q", "--traces", traces, "--trace-every", str(every))
    assert result.exit_code == 0, result.output
    kept = [int(r["row"]) for r in records(traces.read_text()) if r["method"] != "batch"]
    assert kept == expected
    explained = invoke("explain", agrawal_small, "-m", hgb, "-t", "class", "-M", "1", "--seed", "0", "-q",
                       "--every", str(every))
    assert [int(r["row"]) for r in records(explained.stdout)] == expected


def test_windows_whose_interval_pfi_is_all_zero_are_noted(tmp_path):
    """A model that uses no feature (river's running mean): interval PFI is exactly 0 in every window, and the
    error against it was given without a word (1.0 whenever iPFI is not 0 too)."""
    import pickle

    import numpy as np
    from river import dummy, stats

    rng = np.random.default_rng(0)
    X = rng.normal(size=(120, 2))
    data = tmp_path / "d.csv"
    data.write_text("a,b,y\n" + "".join(f"{a!r},{b!r},{a + b!r}\n" for a, b in X.tolist()))
    (tmp_path / "mean.pkl").write_bytes(pickle.dumps(dummy.StatisticRegressor(stats.Mean())))
    result = invoke("compare", data, "-m", tmp_path / "mean.pkl", "-t", "y", "--learn", "--loss", "squared",
                    "--interval", "40", "-M", "2", "--seed", "0")
    assert result.exit_code == 0, result.output
    assert {float(r["importance"]) for r in records(result.stdout) if r["method"] == "interval"} == {0.0}
    warned = [line for line in result.stderr.splitlines() if line.startswith("ipfi: warning: interval PFI is 0")]
    assert len(warned) == 1 and "ending at row 40, 80, 120" in warned[0], result.stderr
