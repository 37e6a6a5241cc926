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
    error with no row; it is the row and column, after the records due before it and the last good row's, as a
    run that ends there."""
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
    whole = parse_csv(run("pdp", before, *common).stdout)   # the run on the 49 rows before: its end too
    assert [int(r["row"]) for r in whole] == [40] * 10 + [49] * 10  # row 20 is the warm-up's last
    assert parse_csv(result.stdout) == whole


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
    """pdp has -q/--quiet, --threads and --on-bad-row, the same options as explain's; its notes go to stderr unless
    quiet."""
    import typer.main

    from ipfi_cli.cli.app import app

    commands = typer.main.get_command(app).commands  # type: ignore[attr-defined]
    for name in ("quiet", "threads", "on_bad_row"):
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


def _weighted_pd(model, frame, feature, grid, rows, alpha=0.001):
    """The closed form of a linear model's partial dependence at ``grid`` over ``rows`` weighted
    ``(1 - alpha) ** age``: the intercept, the others' weighted means times their coefficients, and
    the feature's coefficient times the grid value."""
    X = frame[["a", "b", "c"]].to_numpy()[rows]
    means = np.average(X, axis=0, weights=(1 - alpha) ** np.arange(len(X))[::-1])
    f = ["a", "b", "c"].index(feature)
    return model.intercept_ + means @ model.coef_ - means[f] * model.coef_[f] + model.coef_[f] * np.asarray(grid)


def _with_text_at(linear_csv, row):
    path, _, frame, _ = linear_csv
    lines = path.read_text().splitlines()
    fields = lines[row].split(",")
    fields[2] = "abc"   # column c of row `row` (line row + 1)
    lines[row] = ",".join(fields)
    bad = path.with_name("bad.csv")
    bad.write_text("\n".join(lines) + "\n")
    return bad


def test_a_bad_row_keeps_the_curves_before_it_in_the_output_file(run, linear_csv, tmp_path):
    """The trial: row 650 with 'abc' in c stopped pdp naming it (exit 1), but -o's file was never made and
    stdout had only the header: the curves of rows 100..600 were lost. Now the file holds the records due
    before the bad row and the last good row's, as explain's output does; their values are the weighted
    PD over the rows before (closed form, abs 1e-9)."""
    _, model_path, frame, model = linear_csv
    bad = _with_text_at(linear_csv, 450)
    out = tmp_path / "out.csv"
    result = run("pdp", bad, "-m", model_path, "-t", "y", "--feature", "a", "--grid-size", "3", "--every", "100",
                 "-o", out)
    assert result.exit_code == 1
    assert f"{bad}: row 450 (line 451), column 'c': expected a number" in " ".join(result.stderr.split())
    records = pd.read_csv(out)
    assert sorted(set(records.row)) == [100, 200, 300, 400, 449]
    for row, curve in records.groupby("row"):
        expected = _weighted_pd(model, frame, "a", curve.grid, slice(20, row))
        assert curve.pd.to_numpy() == pytest.approx(expected, abs=1e-9), row
    on_stdout = run("pdp", bad, "-m", model_path, "-t", "y", "--feature", "a", "--grid-size", "3", "--every", "100")
    assert on_stdout.stdout == out.read_text()


def test_on_bad_row_skip_leaves_bad_rows_out_and_says_how_many(run, linear_csv):
    """--on-bad-row skip, as explain, batch and compare have it: the unreadable row 450 and a row with no
    value of b (row 475) are left out of the curves (closed form over the other rows, abs 1e-9), the run
    goes on to the end (exit 0) and says how many it skipped and the first."""
    path, model_path, frame, model = linear_csv
    bad = _with_text_at(linear_csv, 450)
    lines = bad.read_text().splitlines()
    fields = lines[475].split(",")
    fields[1] = ""
    lines[475] = ",".join(fields)
    bad.write_text("\n".join(lines) + "\n")
    result = run("pdp", bad, "-m", model_path, "-t", "y", "--feature", "a,b", "--grid-size", "3", "--every", "100",
                 "--on-bad-row", "skip")
    assert result.exit_code == 0, result.output
    assert result.stderr == (f"ipfi: warning: skipped 2 bad row(s); the first: {bad}: row 450 (line 451), column "
                             "'c': expected a number (the column held numbers before), got 'abc'\n")
    records = pd.DataFrame(parse_csv(result.stdout)).astype({"row": int, "grid": float, "pd": float})
    assert sorted(set(records.row)) == [100, 200, 300, 400, 500, 600]
    kept = np.array([i for i in range(len(frame)) if i not in (449, 474)])   # rows 450 and 475, 0-based
    for (row, feature), curve in records.groupby(["row", "feature"]):
        rows = kept[(kept >= 20) & (kept < row)]
        expected = _weighted_pd(model, frame, feature, curve.grid, rows)
        assert curve.pd.to_numpy() == pytest.approx(expected, abs=1e-9), (row, feature)


def test_an_interrupted_pdp_keeps_its_output_file(run, linear_csv, tmp_path, monkeypatch):
    """Ctrl-C said "every record written is complete", but with -o the file was thrown away (written
    aside and renamed at the end). Interrupted during its second batch of 1,000 rows, the file has the
    records due in the first and row 1,000's, which are the weighted PD over rows 21..1000 (closed form)."""
    from ipfi_cli.core.pdp import IPDPEstimator

    _, model_path, frame, model = linear_csv
    frame = pd.concat([frame, frame], ignore_index=True)
    path = tmp_path / "twice.csv"
    frame.to_csv(path, index=False)
    calls = []
    explain_many = IPDPEstimator.explain_many

    def interrupted_second_time(self, *args, **kwargs):
        calls.append(1)
        if len(calls) == 2:
            raise KeyboardInterrupt
        return explain_many(self, *args, **kwargs)

    monkeypatch.setattr(IPDPEstimator, "explain_many", interrupted_second_time)
    out = tmp_path / "out.csv"
    result = run("pdp", path, "-m", model_path, "-t", "y", "--feature", "a", "--grid-size", "3", "--every", "300",
                 "-o", out)
    assert result.exit_code == 130 and "interrupted after 1,000 rows" in result.stderr
    records = pd.read_csv(out)
    assert sorted(set(records.row)) == [300, 600, 900, 1000]
    last = records[records.row == 1000]
    assert last.pd.to_numpy() == pytest.approx(_weighted_pd(model, frame, "a", last.grid, slice(20, 1000)), abs=1e-9)


@pytest.mark.filterwarnings("ignore:overflow encountered in cast:RuntimeWarning")  # the forest's own cast
def test_on_bad_row_skip_leaves_out_a_row_the_model_fails_on(run, agrawal_small, tmp_path):
    """A forest takes float32, so 1e300 in row 50 fails the model call: with --on-bad-row skip that row is
    left out and said, and the rest are folded in: the last curve is the forest's mean probability of class 1
    over rows 21..end but row 50, with age set to each grid value (computed here, rel 1e-12)."""
    import joblib
    from sklearn.ensemble import RandomForestClassifier

    frame = pd.read_csv(agrawal_small)
    features = [c for c in frame.columns if c != "class"]
    forest = RandomForestClassifier(n_estimators=3, random_state=0).fit(frame[features], frame["class"])
    model = tmp_path / "forest.joblib"
    joblib.dump(forest, model)
    frame.loc[49, "salary"] = 1e300
    path = tmp_path / "huge.csv"
    frame.to_csv(path, index=False)
    result = run("pdp", path, "-m", model, "-t", "class", "--feature", "age", "--class", "1", "--every", "20",
                 "--grid-size", "4", "--smoothing", "mean", "--on-bad-row", "skip")
    assert result.exit_code == 0, result.output
    assert result.stderr.startswith(f"ipfi: warning: skipped 1 bad row(s); the first: {path}: row 50 (line 51), "
                                    "column 'salary': 1e+300 is too large for this model")
    records = parse_csv(result.stdout)
    last = [r for r in records if int(r["row"]) == len(frame)]
    assert len(last) == 4
    rows = frame.drop(index=49).iloc[20:][features]
    for record in last:
        probability = forest.predict_proba(rows.assign(age=float(record["grid"])))[:, 1].mean()
        assert float(record["pd"]) == pytest.approx(probability, rel=1e-12)


def test_class_is_found_by_the_rule_labels_follow(tmp_path, run, agrawal_small):
    """`pdp --class 1` did not find the class 1.0, nor `--class dole` the class Dole, though labels find them:
    the curves are those of the class's own spelling; a class that is none of the model's is still refused."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    frame = pd.read_csv(agrawal_small)
    X = frame.drop(columns="class")
    for name, y, spellings in [("float", frame["class"].astype(float), ["1.0", "1", "yes", "True"]),
                               ("text", frame["class"].map({1: "Dole", 0: "Lab"}), ["Dole", "dole", " DOLE"])]:
        joblib.dump(LogisticRegression(max_iter=2000).fit(X, y), tmp_path / f"{name}.joblib")
        outputs = [run("pdp", agrawal_small, "-m", tmp_path / f"{name}.joblib", "-t", "class", "--feature", "age",
                       "--class", spelling, "--every", "100") for spelling in spellings]
        assert [o.exit_code for o in outputs] == [0] * len(spellings), [o.stderr for o in outputs]
        assert all(o.stdout == outputs[0].stdout for o in outputs) and outputs[0].stdout
    wrong = run("pdp", agrawal_small, "-m", tmp_path / "text.joblib", "-t", "class", "--feature", "age",
                "--class", "Green")
    assert wrong.exit_code == 1
    assert "--class 'Green' is not one of the model's classes: Dole, Lab" in wrong.stderr


def test_text_and_missing_values_the_models_pipeline_takes_reach_it(tmp_path, run):
    """A pipeline that imputes and one-hot encodes UCI Adult's text columns (some empty) was refused at
    row 1 ("partial dependence needs numbers, got 'State-gov'"); so was a missing value of a tracked
    feature. Each curve point is scikit-learn's brute-force partial dependence (the model's mean
    probability of >50K over every row, the feature set to the grid value), to float rounding; a model
    that cannot take text still stops at a bad row naming its column."""
    import joblib
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    from tests.cli.conftest import ROOT

    frame = pd.read_csv(ROOT / "tests" / "data" / "adult_300.csv")
    frame.loc[9, "age"] = np.nan  # a tracked feature's missing value: the curve replaces it
    X, y = frame.drop(columns="class"), frame["class"]
    text = [c for c in X if X[c].dtype.kind not in "biuf"]
    numbers = [c for c in X if c not in text]
    assert X[text].isna().any().any()
    model = make_pipeline(make_column_transformer(
        (make_pipeline(SimpleImputer(strategy="most_frequent"), OneHotEncoder(handle_unknown="ignore")), text),
        (make_pipeline(SimpleImputer(), StandardScaler()), numbers)), LogisticRegression(max_iter=1000)).fit(X, y)
    joblib.dump(model, tmp_path / "adult.joblib")
    frame.to_csv(tmp_path / "adult.csv", index=False)
    result = run("pdp", tmp_path / "adult.csv", "-m", tmp_path / "adult.joblib", "-t", "class", "--feature",
                 "age,hours-per-week", "--class", ">50K", "--smoothing", "mean", "--warm-up", "0",
                 "--grid", "age=25,45,65", "--grid", "hours-per-week=20,40,60")
    assert result.exit_code == 0, result.stderr
    records = parse_csv(result.stdout)
    assert len(records) == 6 and {r["row"] for r in records} == {"300"}
    column = list(model.classes_).index(">50K")
    for record in records:
        changed = X.assign(**{record["feature"]: float(record["grid"])})
        expected = model.predict_proba(changed)[:, column].mean()
        assert float(record["pd"]) == pytest.approx(expected, rel=1e-12, abs=1e-12)
    # the grid from the warm-up rows leaves the missing age out of its quantiles
    result = run("pdp", tmp_path / "adult.csv", "-m", tmp_path / "adult.joblib", "-t", "class", "--feature", "age",
                 "--class", ">50K", "--warm-up", "20", "--grid-size", "3")
    assert result.exit_code == 0, result.stderr
    ages = frame["age"][:20].dropna().to_numpy()
    assert [float(r["grid"]) for r in parse_csv(result.stdout)] == pytest.approx(
        np.linspace(*np.quantile(ages, [0.05, 0.95]), 3).tolist(), rel=1e-12)
    # a model that takes numbers only: the first row with text is a bad row naming the column
    coded = X.assign(**{c: X[c].astype("category").cat.codes for c in text}).fillna(0)
    from sklearn.tree import DecisionTreeClassifier

    joblib.dump(DecisionTreeClassifier(max_depth=3, random_state=0).fit(coded, y), tmp_path / "plain.joblib")
    result = run("pdp", tmp_path / "adult.csv", "-m", tmp_path / "plain.joblib", "-t", "class", "--feature", "age",
                 "--class", ">50K")
    assert result.exit_code == 1 and "row 1 (line 2)" in result.stderr and "'State-gov'" in result.stderr
