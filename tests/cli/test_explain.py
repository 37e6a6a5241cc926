"""``ipfi explain`` driven in-process with Typer's CliRunner: options, numbers, messages, exit codes."""

from __future__ import annotations

import gzip
import json
import math
import os
import pickle

import joblib
import numpy as np
import pytest

from ipfi_cli.cli.app import app
from ipfi_cli.io.readers import RowReader

from .conftest import FEATURES, parse_csv

STATIC = ("-M", "2", "--seed", "7")


def core_traces(csv_path, model_path, *, every=1, bounds=False, delta=0.05, **kw):
    """The core's numbers for the same rows: explain_one row by row, as the CLI promises."""
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import as_predictor

    predictor = as_predictor(joblib.load(model_path))
    explainer = IPFIEstimator(predictor, predictor.columns, **kw)
    with open(csv_path, "rb") as f:
        rows = list(RowReader(f))
    out = []
    for i, row in enumerate(rows, 1):
        estimates = explainer.explain_one(row.values, row.values["class"])
        if i % every == 0 or i == len(rows):
            record = [row.number, *estimates.tolist()]
            if bounds:
                record += explainer.bound_array(delta).tolist()
            out.append(record)
    return explainer.names, out


def as_numbers(records):
    return [[int(r["row"])] + [float(v) if v != "" else math.nan for k, v in r.items() if k != "row"]
            for r in records]


def same(a, b):
    return len(a) == len(b) and all(
        len(x) == len(y) and all((u == v) or (u != u and v != v) for u, v in zip(x, y)) for x, y in zip(a, b))


# -- help ---------------------------------------------------------------------------------------
def test_every_command_and_option_has_help():
    import typer

    group = typer.main.get_command(app)
    assert group.help and "trust" in group.help
    for name, command in group.commands.items():
        assert command.help, name
        for param in command.params:
            if param.param_type_name == "option" or param.name == "input":
                assert getattr(param, "help", None), f"{name} {param.name}"


def test_help_mentions_pickle_risk_and_exit_codes(run):
    result = run("--help")
    assert result.exit_code == 0
    assert "runs code" in result.stdout and "Exit codes" in result.stdout and "130" in result.stdout
    result = run("explain", "--help")
    assert result.exit_code == 0
    for text in ("runs code", "--learn", "--on-bad-row", "--meta", "Exit codes"):
        assert text in result.stdout


def test_version(run):
    result = run("--version")
    assert result.exit_code == 0 and result.stdout.startswith("ipfi ")


# -- output -------------------------------------------------------------------------------------
def test_static_output_equals_the_core_row_by_row(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q")
    assert result.exit_code == 0, result.stderr
    assert result.stderr == ""
    records = parse_csv(result.stdout)
    names, expected = core_traces(static_csv, hgb, n_repeats=2, seed=7)
    assert list(records[0]) == ["row", *names]
    assert [r["row"] for r in records] == [str(i) for i in range(1, 41)]
    assert all(v == "" for k, v in records[0].items() if k != "row")  # nothing earlier to draw from
    assert same(as_numbers(records), expected)


def test_micro_batch_size_does_not_change_the_numbers(run, static_csv, hgb):
    reference = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q").stdout
    for batch_size in ("1", "6"):
        result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--batch-size", batch_size)
        assert result.stdout == reference


def test_threads_caps_the_model_libraries_without_changing_the_numbers(run, static_csv, hgb, monkeypatch):
    from threadpoolctl import threadpool_info

    from ipfi_cli.cli.options import THREAD_VARIABLES

    for name in THREAD_VARIABLES:
        monkeypatch.delenv(name, raising=False)  # restored after the test
    reference = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q").stdout
    capped = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--threads", "1")
    assert capped.exit_code == 0 and capped.stdout == reference
    assert all(os.environ[name] == "1" for name in THREAD_VARIABLES)  # for libraries loaded later
    assert all(pool["num_threads"] == 1 for pool in threadpool_info())  # and the ones already loaded
    assert run("explain", static_csv, "-m", hgb, "-t", "class", "--threads", "0").exit_code == 2


def test_stdin_gives_the_same_output_as_the_file(run, static_csv, hgb):
    from_file = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q").stdout
    from_stdin = run("explain", "-m", hgb, "-t", "class", *STATIC, "-q", input=static_csv.read_bytes())
    dash = run("explain", "-", "-m", hgb, "-t", "class", *STATIC, "-q", input=static_csv.read_bytes())
    assert from_stdin.exit_code == 0 and from_stdin.stdout == from_file == dash.stdout


def test_gzip_input(run, static_csv, hgb, tmp_path):
    path = tmp_path / "static.csv.gz"
    path.write_bytes(gzip.compress(static_csv.read_bytes()))
    plain = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q").stdout
    assert run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q").stdout == plain


def test_jsonl_input_gives_the_same_numbers_as_csv(run, static_csv, hgb, tmp_path):
    rows = parse_csv(static_csv.read_text())
    path = tmp_path / "static.jsonl"
    path.write_text("".join(json.dumps({k: float(v) if "." in v else int(v) for k, v in r.items()}) + "\n"
                            for r in rows))
    from_csv = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q").stdout
    from_jsonl = run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q")
    assert from_jsonl.exit_code == 0, from_jsonl.stderr
    assert from_jsonl.stdout == from_csv
    sniffed = run("explain", "-m", hgb, "-t", "class", *STATIC, "-q", input=path.read_bytes())
    assert sniffed.stdout == from_csv


def test_same_seed_same_bytes_other_seed_other_numbers(run, static_csv, hgb):
    a = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "2", "--seed", "1", "-q").stdout
    b = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "2", "--seed", "1", "-q").stdout
    c = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "2", "--seed", "2", "-q").stdout
    assert a == b and a != c


def test_every_writes_multiples_and_always_the_last_row(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--every", "15")
    records = parse_csv(result.stdout)
    assert [r["row"] for r in records] == ["15", "30", "40"]
    _, expected = core_traces(static_csv, hgb, every=15, n_repeats=2, seed=7)
    assert same(as_numbers(records), expected)


def test_bounds_are_those_after_each_written_row(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--bounds", "--every", "7")
    records = parse_csv(result.stdout)
    names, expected = core_traces(static_csv, hgb, every=7, bounds=True, n_repeats=2, seed=7)
    assert list(records[0]) == ["row", *names, *[f"{n}_bound" for n in names]]
    assert [r["row"] for r in records] == ["7", "14", "21", "28", "35", "40"]
    assert same(as_numbers(records), expected)


@pytest.mark.parametrize("method", ["chebyshev", "normal"])
def test_bounds_at_every_row_take_one_model_call_per_micro_batch(run, static_csv, hgb, tmp_path, method):
    """--bounds --every 1: each record's bounds are those after its own row (the core row by row),
    and the rows still go to the model together (they were cut at every record: a call per row)."""
    metrics = tmp_path / "m.prom"
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--bounds", "--bounds-method",
                 method, "--metrics-textfile", metrics)
    assert result.exit_code == 0, result.stderr
    names, expected = core_traces(static_csv, hgb, every=1, bounds=True, n_repeats=2, seed=7, bounds_method=method)
    assert same(as_numbers(parse_csv(result.stdout)), expected)
    calls = [line for line in metrics.read_text().splitlines() if line.startswith("ipfi_model_calls_total")]
    assert calls and float(calls[0].split()[-1]) <= 3  # 40 rows: the first alone, then one micro-batch


@pytest.mark.parametrize("method", ["normal", "realisations"])
def test_bounds_method_gives_the_cores_half_widths(run, static_csv, hgb, method):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--bounds", "--every", "13",
                 "--bounds-method", method)
    names, expected = core_traces(static_csv, hgb, every=13, bounds=True, n_repeats=2, seed=7, bounds_method=method)
    chebyshev = parse_csv(run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--bounds",
                              "--every", "13").stdout)
    records = parse_csv(result.stdout)
    assert same(as_numbers(records), expected)
    # the estimates are the Chebyshev run's; only the bound columns differ
    assert [r[names[0]] for r in records] == [r[names[0]] for r in chebyshev]
    assert records[-1][f"{names[0]}_bound"] != chebyshev[-1][f"{names[0]}_bound"]


def test_realisations_bounds_need_two_repeats(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "1", "--bounds",
                 "--bounds-method", "realisations")
    assert result.exit_code == 2 and "--repeats 2" in result.output and result.stdout == ""


def test_jsonl_output_is_strict_json(run, static_csv, hgb, tmp_path):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "-F", "jsonl", "--bounds")
    lines = result.stdout.splitlines()
    assert len(lines) == 40

    def refuse(name):
        raise AssertionError(f"not strict JSON: {name}")
    records = [json.loads(line, parse_constant=refuse) for line in lines]
    assert records[0]["row"] == 1 and records[0]["age"] is None
    assert list(records[1]) == ["row", *FEATURES, *[f"{f}_bound" for f in FEATURES]]
    # --output with a .jsonl name picks JSONL by itself, and stdout stays empty
    out = tmp_path / "t.jsonl"
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "-o", out)
    assert result.stdout == "" and out.read_text().splitlines() == lines[:0] + [
        line for line in out.read_text().splitlines()]
    assert json.loads(out.read_text().splitlines()[-1])["row"] == 40


def test_features_drop_and_groups(run, static_csv, hgb):
    def header(*args):
        result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", *args)
        assert result.exit_code == 0, result.stderr
        return result.stdout.splitlines()[0]
    assert header("--features", "age,salary") == "row,salary,age"
    assert header("--features", "age", "--features", "elevel") == "row,age,elevel"
    assert header("--drop", "commission,car,zipcode,hvalue,hyears,loan") == "row,salary,age,elevel"
    assert header("--group", "money=salary,commission", "--features", "age") == "row,money,age"
    assert header("-g", "money=salary,commission", "-g", "home=hvalue,hyears", "--drop",
                  "car,zipcode,loan,elevel") == "row,money,age,home"


def test_meta_sidecar_records_seed_settings_versions_rows(run, static_csv, hgb, tmp_path):
    meta = tmp_path / "run.json"
    result = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "2", "-q", "--meta", meta)
    assert result.exit_code == 0
    data = json.loads(meta.read_text())
    assert data["status"] == "ok" and isinstance(data["seed"], int)
    assert data["settings"]["repeats"] == 2 and data["settings"]["loss"] == "zero-one"
    assert data["settings"]["task"] == "classification"
    assert data["rows"] == {"processed": 40, "skipped": 0, "explained": 39, "records_written": 40}
    assert {"python", "numpy", "scikit-learn", "river"} <= set(data["versions"])
    assert set(data["final"]["importances"]) == set(FEATURES)
    # the recorded seed reproduces the run
    again = run("explain", static_csv, "-m", hgb, "-t", "class", "-M", "2", "-q", "--seed", str(data["seed"]))
    assert again.stdout == result.stdout


def test_summary_table_on_stderr_when_not_a_terminal(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC)
    assert result.exit_code == 0
    assert "importance" in result.stderr and "40 rows" in result.stderr and "seed 7" in result.stderr
    assert "age" in result.stderr
    assert "importance" not in result.stdout  # the table never goes to stdout


def test_verbose_prints_settings_and_seed(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "--verbose", "--drop", "car")
    assert result.exit_code == 0
    assert "seed 7" in result.stderr and "alpha 0.001" in result.stderr and "HistGradientBoostingClassifier" in result.stderr  # noqa: E501
    assert "explaining (8)" in result.stderr


# -- learning -----------------------------------------------------------------------------------
def test_learn_with_river_and_save_model(run, drift_csv, hoeffding, tmp_path):
    saved = tmp_path / "learned.pkl"
    result = run("explain", drift_csv, "-m", hoeffding, "-t", "class", "--learn", "-M", "2", "--seed", "3",
                 "--save-model", saved, "-q", "--every", "20", "--bounds")
    assert result.exit_code == 0, result.stderr
    records = parse_csv(result.stdout)
    assert [r["row"] for r in records] == ["20", "40", "60"]
    model = joblib.load(saved)
    untrained = joblib.load(hoeffding)
    assert model.summary["n_nodes"] >= 1 and pickle.dumps(model) != pickle.dumps(untrained)
    assert sorted(os.listdir(tmp_path)) == ["learned.pkl"]  # no temporary file left behind
    again = run("explain", drift_csv, "-m", hoeffding, "-t", "class", "--learn", "-M", "2", "--seed", "3", "-q",
                "--every", "20", "--bounds")
    assert again.stdout == result.stdout


def test_learn_matches_the_core_prequential_loop(run, drift_csv, hoeffding):
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import as_predictor

    result = run("explain", drift_csv, "-m", hoeffding, "-t", "class", "--learn", "-M", "2", "--seed", "3", "-q")
    predictor = as_predictor(joblib.load(hoeffding))
    explainer = IPFIEstimator(predictor, FEATURES, n_repeats=2, seed=3)
    expected = []
    with open(drift_csv, "rb") as f:
        for row in RowReader(f):
            x = {c: row.values[c] for c in FEATURES}
            expected.append([row.number, *explainer.explain_one(x, row.values["class"]).tolist()])
            predictor.learn_one(x, row.values["class"])
    assert same(as_numbers(parse_csv(result.stdout)), expected)


def test_river_model_without_learn_gets_a_note(run, drift_csv, hoeffding):
    result = run("explain", drift_csv, "-m", hoeffding, "-t", "class", "-M", "1", "--seed", "1", "--no-live")
    # an untrained river model answers None: every row has the maximal loss, so the run cannot be right
    assert result.exit_code == 1 and "add --learn" in result.stderr
    assert "has the maximal zero-one loss" in result.stderr.strip().splitlines()[-1]


def test_regression_defaults_to_absolute_loss(run, static_csv, regressor, tmp_path):
    meta = tmp_path / "m.json"
    result = run("explain", static_csv, "-m", regressor, "-t", "loan", *STATIC, "-q", "--meta", meta)
    assert result.exit_code == 0, result.stderr
    settings = json.loads(meta.read_text())["settings"]
    assert settings["loss"] == "absolute" and settings["task"] == "regression"
    assert "class" not in result.stdout.splitlines()[0]


def test_log_loss(run, static_csv, hgb, regressor):
    assert run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q", "--loss", "log").exit_code == 0
    result = run("explain", static_csv, "-m", regressor, "-t", "loan", *STATIC, "--loss", "log")
    assert result.exit_code == 1 and "regressor" in result.stderr and "use --loss absolute" in result.stderr


# -- errors: one line, file/row/column named, exit 1 --------------------------------------------
def one_error_line(result, *fragments):
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert lines[0].startswith("ipfi: error: "), lines[0]
    assert "Traceback" not in result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def bad_file(tmp_path, static_csv, line_number, new_line, name="bad.csv"):
    lines = static_csv.read_text().splitlines()
    lines[line_number - 1] = new_line
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return path


def test_missing_model(run, static_csv, tmp_path):
    one_error_line(run("explain", static_csv, "-m", tmp_path / "nope.pkl", "-t", "class"), "nope.pkl", "no such")


def test_model_that_is_a_directory_or_not_a_model_file(run, static_csv, tmp_path):
    one_error_line(run("explain", static_csv, "-m", tmp_path, "-t", "class"), str(tmp_path), "directory")
    one_error_line(run("explain", static_csv, "-m", static_csv, "-t", "class"), str(static_csv),
                   "not a joblib/pickle model file")


def test_model_without_predict(run, static_csv, tmp_path):
    path = tmp_path / "dict.joblib"
    joblib.dump({"not": "a model"}, path)
    one_error_line(run("explain", static_csv, "-m", path, "-t", "class"), str(path), "predict")


def test_learn_with_a_model_that_cannot_learn(run, static_csv, hgb):
    one_error_line(run("explain", static_csv, "-m", hgb, "-t", "class", "--learn"), "learn_one", hgb)


def test_missing_target_column(run, static_csv, hgb):
    one_error_line(run("explain", static_csv, "-m", hgb, "-t", "klass"), str(static_csv), "'klass'", "--target")


def test_missing_model_column(run, static_csv, hgb, tmp_path):
    lines = [",".join(line.split(",")[1:]) for line in static_csv.read_text().splitlines()]
    path = tmp_path / "no_salary.csv"
    path.write_text("\n".join(lines) + "\n")
    one_error_line(run("explain", path, "-m", hgb, "-t", "class"), str(path), "salary")


def test_wrong_number_of_features_for_an_unnamed_model(run, static_csv, unnamed_model, tmp_path):
    assert run("explain", static_csv, "-m", unnamed_model, "-t", "class", *STATIC, "-q").exit_code == 0
    lines = [line + ",1" for line in static_csv.read_text().splitlines()]
    lines[0] = lines[0][:-2] + ",extra"
    path = tmp_path / "extra.csv"
    path.write_text("\n".join(lines) + "\n")
    one_error_line(run("explain", path, "-m", unnamed_model, "-t", "class"), "fitted on 9 unnamed features", "would get 10")  # noqa: E501


def test_wrong_number_of_fields(run, static_csv, hgb, tmp_path):
    path = bad_file(tmp_path, static_csv, 12, "1,2,3")
    line = one_error_line(run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q"), str(path),
                          "row 11 (line 12)", "expected 10 fields")
    assert line  # exit 1 after writing the complete records before the bad row


def test_records_before_a_bad_row_are_kept(run, static_csv, hgb, tmp_path):
    path = bad_file(tmp_path, static_csv, 12, "1,2,3")
    result = run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q")  # one batch holds them all
    assert result.exit_code == 1
    assert [r["row"] for r in parse_csv(result.stdout)] == [str(i) for i in range(1, 11)]


def test_non_numeric_value(run, static_csv, hgb, tmp_path):
    fields = static_csv.read_text().splitlines()[5].split(",")
    fields[2] = "old"
    path = bad_file(tmp_path, static_csv, 6, ",".join(fields))
    one_error_line(run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q"), str(path), "row 5 (line 6)",
                   "column 'age'", "'old'")


def test_non_numeric_value_in_the_first_row(run, static_csv, hgb, tmp_path):
    fields = static_csv.read_text().splitlines()[1].split(",")
    fields[2] = "old"
    path = bad_file(tmp_path, static_csv, 2, ",".join(fields))
    one_error_line(run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q"), str(path), "row 1 (line 2)",
                   "column 'age'", "needs a number", "'old'")


def test_missing_label(run, static_csv, hgb, tmp_path):
    line = static_csv.read_text().splitlines()[8]
    path = bad_file(tmp_path, static_csv, 9, line[: line.rindex(",") + 1])
    one_error_line(run("explain", path, "-m", hgb, "-t", "class", *STATIC, "-q"), str(path), "row 8 (line 9)",
                   "column 'class'", "missing label")


def test_regression_label_must_be_a_number(run, static_csv, regressor, tmp_path):
    fields = static_csv.read_text().splitlines()[0].split(",")
    data = static_csv.read_text().splitlines()
    loan = fields.index("loan")
    row = data[3].split(",")
    row[loan] = "lots"
    path = bad_file(tmp_path, static_csv, 4, ",".join(row))
    one_error_line(run("explain", path, "-m", regressor, "-t", "loan", *STATIC, "-q"), "row 3 (line 4)",
                   "column 'loan'")


def test_jsonl_row_without_a_model_column(run, static_csv, hgb, tmp_path):
    """The model names its inputs: a key left out of a row is that row's missing value, as null is."""
    rows = parse_csv(static_csv.read_text())[:5]
    records = [{k: float(v) for k, v in r.items()} for r in rows]
    null = [dict(r) for r in records]
    null[3]["age"] = None
    del records[3]["age"]
    for name, objects in (("left_out", records), ("null", null)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in objects))
    left_out, with_null = (run("explain", tmp_path / f"{name}.jsonl", "-m", hgb, "-t", "class", *STATIC, "-q")
                           for name in ("left_out", "null"))
    assert left_out.exit_code == 0 and with_null.exit_code == 0, left_out.stderr
    assert left_out.stdout == with_null.stdout


def test_skip_bad_rows_and_report_the_count(run, static_csv, hgb, tmp_path):
    path = bad_file(tmp_path, static_csv, 12, "1,2,3")
    line = static_csv.read_text().splitlines()[20]
    lines = path.read_text().splitlines()
    lines[20] = line[: line.rindex(",") + 1]
    path.write_text("\n".join(lines) + "\n")
    result = run("explain", path, "-m", hgb, "-t", "class", *STATIC, "--on-bad-row", "skip")
    assert result.exit_code == 0
    rows = [r["row"] for r in parse_csv(result.stdout)]
    assert "11" not in rows and "20" not in rows and len(rows) == 38
    assert "skipped 2 bad row(s)" in result.stderr and "row 11 (line 12)" in result.stderr
    verbose = run("explain", path, "-m", hgb, "-t", "class", *STATIC, "--on-bad-row", "skip", "-v")
    assert verbose.stderr.count("ipfi: warning: skipped") == 3  # each row, then the count


def test_unreadable_output_file(run, static_csv, hgb, tmp_path):
    one_error_line(run("explain", static_csv, "-m", hgb, "-t", "class", "-o", tmp_path / "no" / "dir.csv"),
                   "cannot write")


def test_debug_shows_the_traceback(run, static_csv, tmp_path):
    result = run("explain", static_csv, "-m", tmp_path / "nope.pkl", "-t", "class", "--debug")
    assert result.exit_code == 1 and "Traceback" in result.stderr


def test_sklearn_version_warning_is_one_line(run, static_csv, hgb, tmp_path):
    from sklearn import __version__

    fake = "0.0." + "9" * (len(__version__) - 4)
    path = tmp_path / "old.joblib"
    path.write_bytes(pickle.dumps(joblib.load(hgb)).replace(__version__.encode(), fake.encode()))
    result = run("explain", static_csv, "-m", path, "-t", "class", *STATIC, "--no-live")
    assert result.exit_code == 0
    warnings = [line for line in result.stderr.splitlines() if "scikit-learn" in line]
    assert len(warnings) == 1 and fake in warnings[0] and __version__ in warnings[0]
    assert warnings[0].startswith("ipfi: warning: ")
    assert "warning" not in run("explain", static_csv, "-m", path, "-t", "class", *STATIC, "-q").stderr


# -- usage errors: exit 2 -----------------------------------------------------------------------
@pytest.mark.parametrize("args, fragment", [
    (["--group", "money"], "NAME=col1,col2"),
    (["--group", "x=salary", "--group", "x=age"], "twice"),
    (["--features", "nope"], "nope"),
    (["--drop", "nope"], "nope"),
    (["--alpha", "0"], "(0, 1]"),
    (["--alpha", "1.5"], "(0, 1]"),
    (["--delta", "1"], "[1e-10, 1)"),
    (["--delta", "1e-17"], "[1e-10, 1)"),
    (["--bounds", "--alpha", "1"], "need alpha at most 0.5"),
    (["--bounds", "--bounds-method", "realisations", "-M", "3", "--alpha", "0.9"], "need alpha at most 0.5"),
    (["--bounds", "--bounds-method", "normal", "--method", "sage"], "normal is measured for --method pfi"),
    (["--bounds", "--bounds-method", "realisations", "-M", "2", "--smoothing", "mean"],
     "realisations is measured for --method"),
    (["--repeats", "0"], "repeats"),
    (["--every", "0"], "every"),
    (["--quiet", "--verbose"], "either"),
    (["--save-model", "m.pkl"], "--learn"),
    (["--sampling", "random"], "sampling"),
    (["--task", "ranking"], "task"),
])
def test_usage_errors_exit_2(run, static_csv, hgb, args, fragment):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *args)
    assert result.exit_code == 2, result.stderr
    assert fragment in result.stderr
    assert result.stdout == ""


def test_missing_required_options_exit_2(run, static_csv):
    assert run("explain", static_csv).exit_code == 2
    assert run("explain", static_csv, "-m", "x.pkl").exit_code == 2


def test_empty_input_writes_the_header_and_fails(run, hgb):
    # nothing explained is not success: exit 1 with one line saying so (the header is already out)
    result = run("explain", "-m", hgb, "-t", "class", "-q", input=",".join([*FEATURES, "class"]) + "\n")
    assert result.exit_code == 1 and result.stdout == "row," + ",".join(FEATURES) + "\n"
    assert result.stderr.strip().endswith("no row was explained: the input has no rows")


def test_numbers_are_float_repr(run, static_csv, hgb):
    result = run("explain", static_csv, "-m", hgb, "-t", "class", *STATIC, "-q")
    for record in parse_csv(result.stdout)[1:]:
        for key, value in record.items():
            if key != "row":
                assert repr(float(value)) == value
    assert np.isfinite(float(parse_csv(result.stdout)[-1]["age"]))
