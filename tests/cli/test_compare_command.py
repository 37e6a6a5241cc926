"""``ipfi compare``: static (orderings vs batch PFI) and --learn (vs interval PFI)."""

from __future__ import annotations

import csv
import io

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
