"""``ipfi pdp``: long-format curve records on stdout, the class a classifier needs, errors by row and column."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import parse_csv


def _sklearn_takes_a_grid() -> bool:
    import inspect

    from sklearn.inspection import partial_dependence

    return "custom_values" in inspect.signature(partial_dependence).parameters


def test_pdp_records_are_the_core_curves(run, agrawal_small, hgb):
    import joblib

    from ipfi_cli.core.pdp import IPDPEstimator
    from ipfi_cli.models import as_predictor

    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "age,salary", "--class", "1", "--every", "100",
                 "--grid-size", "4", "--smoothing", "mean")
    assert result.exit_code == 0, result.output
    records = parse_csv(result.stdout)
    # rows 100, 200, 300: 2 features x 4 grid points each
    assert [r["row"] for r in records] == ["100"] * 8 + ["200"] * 8 + ["300"] * 8
    assert [r["feature"] for r in records[:8]] == ["age"] * 4 + ["salary"] * 4
    model = joblib.load(hgb)
    frame = pd.read_csv(agrawal_small)
    columns = list(model.feature_names_in_)
    core = IPDPEstimator(as_predictor(model), columns, ["age", "salary"], grid_size=4, smoothing="mean",
                          target_class=1)
    core.explain_many(frame[columns].to_numpy(dtype=np.float64))
    last = records[-8:]
    for f, name in enumerate(["age", "salary"]):
        grid, curve = core.curves[name]
        assert [float(r["grid"]) for r in last[4 * f:4 * f + 4]] == grid.tolist()
        assert [float(r["pd"]) for r in last[4 * f:4 * f + 4]] == curve.tolist()
        assert all(0.0 <= v <= 1.0 for v in curve)   # probabilities of class 1


def test_a_fixed_grid_gives_the_brute_force_partial_dependence(run, agrawal_small, hgb):
    """With --grid, the running mean over every row is scikit-learn's brute-force partial dependence
    at those values (the model's mean probability with the feature set to each), to float rounding."""
    import joblib

    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "age,salary", "--class", "1", "--smoothing", "mean",
                 "--warm-up", "0", "--grid", "age=25,45,65", "--grid", "salary=30000,80000,130000")
    assert result.exit_code == 0, result.output
    records = parse_csv(result.stdout)
    model = joblib.load(hgb)
    frame = pd.read_csv(agrawal_small)[list(model.feature_names_in_)]
    for record in records:
        changed = frame.assign(**{record["feature"]: float(record["grid"])})
        expected = model.predict_proba(changed)[:, list(model.classes_).index(1)].mean()
        assert float(record["pd"]) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    assert [(r["feature"], float(r["grid"])) for r in records] == [
        ("age", 25.0), ("age", 45.0), ("age", 65.0), ("salary", 30000.0), ("salary", 80000.0), ("salary", 130000.0)]


@pytest.mark.parametrize("grid, message", [
    (["age=25,x"], "expected numbers after age="), (["salary=1,2"], "'salary' is not a --feature"),
    (["age=3,2"], "increasing order"), (["age=1"], "at least two"), (["age=1,inf"], "finite"),
    (["age=1,2", "age=3,4"], "given twice"), (["age1,2"], "expected FEATURE=V1,V2")])
def test_a_bad_grid_is_a_usage_error(run, agrawal_small, hgb, grid, message):
    options = [part for spec in grid for part in ("--grid", spec)]
    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "age", "--class", "1", *options)
    assert result.exit_code == 2 and message in " ".join(result.stderr.split()), result.stderr


def test_pdp_says_what_is_wrong(run, agrawal_small, hgb):
    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "age")
    assert result.exit_code == 1 and "give --class LABEL" in result.stderr and "0, 1" in result.stderr
    assert result.stdout == ""
    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "nope", "--class", "1")
    assert result.exit_code == 1 and "--feature nope is not among the model's inputs" in result.stderr
    bad = "salary,commission,age,elevel,car,zipcode,hvalue,hyears,loan,class\n1,2,abc,4,5,6,7,8,9,0\n"
    result = run("pdp", "-", "-m", hgb, "--feature", "age", "--class", "1", input=bad)
    assert result.exit_code == 1
    assert "row 1 (line 2), column 'age': partial dependence needs numbers, got 'abc'" in result.stderr


def test_plot_draws_the_curves(run, agrawal_small, hgb, tmp_path):
    pytest.importorskip("matplotlib")
    curves, image = tmp_path / "curves.jsonl", tmp_path / "curves.png"
    assert run("pdp", agrawal_small, "-m", hgb, "--feature", "age,salary", "--class", "1", "--every", "100",
               "-o", curves).exit_code == 0
    result = run("plot", curves, "-o", image)
    assert result.exit_code == 0, result.output
    assert image.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "2 partial-dependence panel(s)" in result.stderr
    result = run("plot", curves, "-o", image, "--features", "loan")
    assert result.exit_code == 2


@pytest.mark.parametrize(("column", "text"), [("age", "1e400"), ("salary", "inf"), ("loan", "-inf"),
                                              ("hvalue", "1" * 400)])
def test_pdp_refuses_an_infinite_value(run, agrawal_small, hgb, column, text):
    # an infinite value in the curve's column made its grid NaN, and in another column it moved the
    # curve; both exited 0 (row 25 is past the warm-up of 20 rows)
    lines = agrawal_small.read_text().splitlines()[:31]
    header = lines[0].split(",")
    fields = lines[25].split(",")
    fields[header.index(column)] = text
    lines[25] = ",".join(fields)
    result = run("pdp", "-", "-m", hgb, "--feature", "age", "--class", "1", input="\n".join(lines) + "\n")
    assert result.exit_code == 1
    assert f"row 25 (line 26), column '{column}': " in result.stderr
    assert "too large for a float" in result.stderr


def test_pdp_drop_leaves_out_a_column_a_model_fitted_on_an_array_does_not_take(run, tmp_path):
    """scikit-learn's diabetes data with an id column in front: without --drop the model would get
    11 columns for its 10 and ipfi says so; with --drop id the records are the core's curves on
    the 10 columns the model was fitted on (the core is checked against scikit-learn in
    tests/core/test_pdp.py)."""
    import joblib
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    from ipfi_cli.core.pdp import IPDPEstimator
    from ipfi_cli.models import as_predictor

    data = load_diabetes(as_frame=True)
    model_path = tmp_path / "ridge.joblib"
    joblib.dump(Ridge().fit(data.data.to_numpy(), data.target), model_path)
    frame = data.data.copy()
    frame.insert(0, "id", range(len(frame)))
    frame["target"] = data.target
    csv = tmp_path / "diabetes_id.csv"
    frame.to_csv(csv, index=False)

    refused = run("pdp", str(csv), "-m", str(model_path), "-t", "target", "--feature", "bmi")
    assert refused.exit_code == 1
    assert "10 unnamed features" in refused.stderr and "would get 11" in refused.stderr
    assert "--drop" in refused.stderr and refused.stdout == ""

    result = run("pdp", str(csv), "-m", str(model_path), "-t", "target", "--feature", "bmi", "--drop", "id",
                 "--every", "442", "--grid-size", "3", "--smoothing", "mean")
    assert result.exit_code == 0, result.output
    records = parse_csv(result.stdout)
    core = IPDPEstimator(as_predictor(joblib.load(model_path)), list(data.data.columns), ["bmi"], grid_size=3,
                         smoothing="mean")
    core.explain_many(data.data.to_numpy())
    grid, curve = core.curves["bmi"]
    assert [float(r["grid"]) for r in records] == grid.tolist()
    assert [float(r["pd"]) for r in records] == curve.tolist()


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the forest's own cast
def test_pdp_names_the_row_and_column_the_model_fails_on(run, agrawal_small, tmp_path):
    """A value the model refuses (1e300: a forest takes float32) was an unexpected ValueError, then the model's
    error with no row; it is the row and column, after the records due before it, as a run that ends there."""
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    frame = pd.read_csv(agrawal_small)
    features = [c for c in frame.columns if c != "class"]
    model = tmp_path / "forest.joblib"
    joblib.dump(RandomForestClassifier(n_estimators=3, random_state=0).fit(frame[features], frame["class"]), model)
    frame.loc[49, "salary"] = 1e300
    path, before = tmp_path / "huge.csv", tmp_path / "before.csv"
    frame.to_csv(path, index=False)
    frame.iloc[:49].to_csv(before, index=False)
    common = ("-m", model, "-t", "class", "--feature", "age", "--class", "1", "--every", "20")
    result = run("pdp", path, *common)
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("ipfi: error:")]
    assert errors == [f"ipfi: error: {path}: row 50 (line 51), column 'salary': 1e+300 is too large for this model "
                      "(ValueError: Input X contains infinity or a value too large for dtype('float32').)"]
    due = [r for r in parse_csv(run("pdp", before, *common).stdout) if int(r["row"]) % 20 == 0]
    assert [int(r["row"]) for r in due] == [40] * 10  # row 20 is the warm-up's last
    assert parse_csv(result.stdout) == due


def test_an_input_without_rows_is_said_as_the_other_commands_say_it(run, agrawal_small, hgb, tmp_path):
    """An empty JSONL file said "no column 'class' (the --target); the columns are:" with no list; explain,
    batch and compare say the input has no rows, and so does pdp now (also for a header without rows)."""
    empty, header = tmp_path / "empty.jsonl", tmp_path / "header.csv"
    empty.write_text("")
    header.write_text(agrawal_small.read_text().splitlines()[0] + "\n")
    for source in (empty, header):
        for target in (["-t", "class"], []):
            result = run("pdp", source, "-m", hgb, *target, "--feature", "salary", "--class", "1")
            assert result.exit_code == 1 and result.stdout.strip() in ("", "row,feature,grid,pd")
            assert result.stderr == f"ipfi: error: {source}: no curve point: the input has no rows\n", result.stderr
        explained = run("explain", source, "-m", hgb, "-t", "class", "--no-live")
        assert explained.exit_code == 1 and "the input has no rows" in explained.stderr
    bad = tmp_path / "bad.jsonl"
    bad.write_text('{"age":\n')
    result = run("pdp", bad, "-m", hgb, "--feature", "age", "--class", "1")
    assert result.exit_code == 1 and "row 1 (line 1): not valid JSON" in result.stderr


def test_quiet_and_threads_as_in_the_other_commands(run, agrawal_small, hgb):
    """pdp has -q/--quiet and --threads, the same options as explain's; its notes go to stderr unless quiet."""
    import typer.main

    from ipfi_cli.cli.app import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ("quiet", "threads"):
        mine, explains = ([(p.opts, p.secondary_opts, p.default, p.help) for p in commands[c].params if p.name == name]
                          for c in ("pdp", "explain"))
        assert mine and mine == explains, name
    common = ["pdp", agrawal_small, "-m", hgb, "--feature", "age", "--class", "1", "--every", "100", "--drop", "class"]
    said = run(*common)
    assert said.exit_code == 0
    assert said.stderr == ("ipfi: note: --drop class: not an input of the model, which never gets it anyway\n")
    quiet = run(*common, "-q", "--threads", "1")
    assert quiet.exit_code == 0 and quiet.stderr == "" and quiet.stdout == said.stdout


@pytest.fixture
def linear_csv(tmp_path):
    """The trial's set-up, smaller: a, b, c ~ N(0, 1), y = 3 a + 2 b - c + noise, a least-squares fit."""
    import joblib
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(600, 3)), columns=["a", "b", "c"])
    frame["y"] = 3 * frame.a + 2 * frame.b - frame.c + 0.5 * rng.normal(size=len(frame))
    model = LinearRegression().fit(frame[["a", "b", "c"]], frame.y)
    path, model_path = tmp_path / "lin.csv", tmp_path / "lin.joblib"
    frame.to_csv(path, index=False)
    joblib.dump(model, model_path)
    return path, model_path, frame, model


@pytest.mark.skipif(not _sklearn_takes_a_grid(), reason="partial_dependence takes custom_values from scikit-learn 1.7")
def test_every_record_is_sklearns_partial_dependence_with_the_smoothings_weights(run, linear_csv):
    """The trial: with the default grid, a's curve had slope 3.35 at row 150 for a coefficient of 2.99 and its
    low end was 1.08 from scikit-learn's PD at that grid value, exit 0. Now every record's curve is a line of
    slope the coefficient (rel 1e-9: rounding) and equals scikit-learn's brute-force PD at the printed grid on
    rows 21..row weighted (1 - alpha) ** age, as exponential smoothing weighs them (abs 1e-9)."""
    from sklearn.inspection import partial_dependence

    path, model_path, frame, model = linear_csv
    result = run("pdp", path, "-m", model_path, "-t", "y", "--feature", "a,b", "--every", "50", "-q", "--alpha", "0.01")
    assert result.exit_code == 0, result.output
    records = pd.DataFrame(parse_csv(result.stdout)).astype({"row": int, "grid": float, "pd": float})
    assert sorted(set(records.row)) == list(range(50, 601, 50))
    X = frame[["a", "b", "c"]]
    for (row, feature), curve in records.groupby(["row", "feature"]):
        grid, pd_values = curve.grid.to_numpy(), curve.pd.to_numpy()
        slope = model.coef_[["a", "b"].index(feature)]
        assert np.diff(pd_values) / np.diff(grid) == pytest.approx(np.full(9, slope), rel=1e-9), (row, feature)
        rows = X.iloc[20:row]
        weights = 0.99 ** np.arange(len(rows))[::-1]
        reference = partial_dependence(model, rows, [feature], custom_values={feature: grid}, kind="average",
                                       method="brute", sample_weight=weights)["average"][0]
        assert pd_values == pytest.approx(reference, abs=1e-9), (row, feature)


def test_a_grid_from_quantiles_needs_a_warm_up_of_two_rows(run, agrawal_small, hgb):
    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "age,salary", "--class", "1", "--warm-up", "1",
                 "--grid", "age=20,40")
    assert result.exit_code == 2 and "--warm-up" in result.stderr and "at least 2" in " ".join(result.stderr.split())
    result = run("pdp", agrawal_small, "-m", hgb, "--feature", "age", "--class", "1", "--warm-up", "0",
                 "--grid", "age=20,40")
    assert result.exit_code == 0, result.output
