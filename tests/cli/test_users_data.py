"""Users' data and models as they come: each case once answered wrongly with exit 0, or failed
without saying where. Every case runs through the real command, on data the test generates."""

from __future__ import annotations

import pickle

import joblib
import numpy as np
import pandas as pd
import pytest

from .conftest import parse_csv

BASE = ["--seed", "3", "-M", "3"]


def error_line(result, *fragments):
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    lines = [line for line in result.stderr.strip().splitlines() if line.startswith("ipfi: error: ")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])
    return lines[0]


def importances(stdout: str) -> dict[str, float]:
    last = parse_csv(stdout)[-1]
    return {k: float(v) for k, v in last.items() if k != "row"}


# -- missing-value tokens ------------------------------------------------------------------------
@pytest.fixture(scope="module")
def air(tmp_path_factory):
    """An hourly air-quality export: NA for missing readings, in the label too (the first row's)."""
    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({"No": np.arange(1, n + 1), "DEWP": rng.normal(0, 10, n), "TEMP": rng.normal(10, 8, n),
                          "Iws": rng.exponential(5, n)})
    frame["pm25"] = np.round(80 + 3 * frame.DEWP - 2 * frame.TEMP + rng.normal(0, 5, n), 1)
    model = __import__("sklearn.ensemble", fromlist=["x"]).HistGradientBoostingRegressor(max_iter=30, random_state=0)
    model.fit(frame[["DEWP", "TEMP", "Iws"]], frame.pm25)
    folder = tmp_path_factory.mktemp("air")
    joblib.dump(model, folder / "model.joblib")
    text = frame.astype(object)
    text.loc[[0, 5, 17], "pm25"] = "NA"
    text.loc[[3, 40], "TEMP"] = "NA"
    text.loc[[8], "Iws"] = "N/A"
    text.to_csv(folder / "air.csv", index=False)
    clean = frame.drop(index=[0, 5, 17])
    clean.loc[[3, 40], "TEMP"] = np.nan
    clean.loc[[8], "Iws"] = np.nan
    clean.to_csv(folder / "clean.csv", index=False)
    return folder


def test_na_tokens_are_missing_and_a_missing_label_is_a_bad_row(run, air):
    common = ["-m", air / "model.joblib", "-t", "pm25", *BASE, "--no-live"]
    result = run("explain", air / "air.csv", *common, "--on-bad-row", "skip")
    assert result.exit_code == 0, result.stderr
    assert "skipped 3 bad row(s); the first: " in result.stderr and "row 1 (line 2), column 'pm25': missing label" \
        in result.stderr
    rows = parse_csv(result.stdout)
    assert len(rows) == 397 and rows[0]["row"] == "2"
    # the same numbers as the file without those rows and with empty fields for NA
    clean = run("explain", air / "clean.csv", *common)
    assert [r for r in parse_csv(clean.stdout)][-1] == {**rows[-1], "row": "397"}
    error_line(run("explain", air / "air.csv", *common), "row 1 (line 2), column 'pm25': missing label")


@pytest.mark.parametrize("command", ["batch", "compare"])
def test_batch_and_compare_skip_the_same_rows(run, air, command):
    common = ["-m", air / "model.joblib", "-t", "pm25", "--seed", "3", "-M", "3", "-q"]
    skipped = run(command, air / "air.csv", *common, "--on-bad-row", "skip")
    clean = run(command, air / "clean.csv", *common)
    assert skipped.exit_code == 0 and clean.exit_code == 0, skipped.stderr
    assert skipped.stdout == clean.stdout
    error_line(run(command, air / "air.csv", *common), "row 1 (line 2), column 'pm25': missing label")
    noisy = run(command, air / "air.csv", *common[:-1], "--on-bad-row", "skip")
    assert "skipped 3 bad row(s); the first: " in noisy.stderr


def test_extra_and_replaced_missing_tokens(run, air, tmp_path):
    path = tmp_path / "sentinel.csv"
    path.write_text((air / "clean.csv").read_text().replace(",,", ",-999,"))
    common = ["-m", air / "model.joblib", "-t", "pm25", *BASE, "-q"]
    plain = run("explain", air / "clean.csv", *common)
    assert run("explain", path, *common, "--na-values", "-999").stdout == plain.stdout
    # without the default list NA stays text: in a number column that is a bad row
    error_line(run("explain", air / "air.csv", *common, "--no-default-na"), "row 1 (line 2)")


# -- labels of another type than the model's -------------------------------------------------------
@pytest.fixture(scope="module")
def bool_labels(tmp_path_factory):
    from river import linear_model, preprocessing, tree

    rng = np.random.default_rng(1)
    X = rng.normal(size=(600, 3))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0)
    folder = tmp_path_factory.mktemp("bools")
    river_tree = tree.HoeffdingTreeClassifier(grace_period=50)
    for row, label in zip(X[:300], y[:300]):
        river_tree.learn_one(dict(zip("abc", map(float, row))), bool(label))
    with open(folder / "tree.pkl", "wb") as f:
        pickle.dump(river_tree, f)
    with open(folder / "logistic.pkl", "wb") as f:
        pickle.dump(preprocessing.StandardScaler() | linear_model.LogisticRegression(), f)
    frame = pd.DataFrame(X, columns=list("abc"))
    frame["label"] = np.where(y, "True", "False")
    frame.iloc[300:].to_csv(folder / "bools.csv", index=False)
    return folder


def test_text_labels_match_a_river_models_bool_classes(run, bool_labels):
    result = run("explain", bool_labels / "bools.csv", "-m", bool_labels / "tree.pkl", "-t", "label", *BASE,
                 "--alpha", "0.01", "--no-live")
    assert result.exit_code == 0, result.stderr
    final = importances(result.stdout)
    assert final["a"] > 0.1 and abs(final["c"]) < 0.05   # a carries the rule; c is noise
    batch = run("batch", bool_labels / "bools.csv", "-m", bool_labels / "tree.pkl", "-t", "label", "-q")
    assert float(parse_csv(batch.stdout)[0]["baseline_loss"]) < 0.3


def test_text_labels_learned_as_bools(run, bool_labels):
    result = run("explain", bool_labels / "bools.csv", "-m", bool_labels / "logistic.pkl", "-t", "label", "--learn",
                 *BASE, "--alpha", "0.01", "-q")
    assert result.exit_code == 0, result.stderr
    assert importances(result.stdout)["a"] > 0.1


def test_labels_the_model_never_predicts_are_reported(run, hgb, static_csv, tmp_path):
    text = static_csv.read_text().splitlines()

    def renamed(lines):
        return [line.rsplit(",", 1)[0] + ",group_" + line.rsplit(",", 1)[1] for line in lines]
    some = tmp_path / "some.csv"  # the first 30 rows' labels renamed, the other 9 as the model's
    some.write_text("\n".join([text[0], *renamed(text[1:31]), *text[31:40]]) + "\n")
    result = run("explain", some, "-m", hgb, "-t", "class", *BASE, "--no-live")
    assert result.exit_code == 0, result.stderr
    assert "30 row(s) have a label the model never predicts: 'group_" in result.stderr
    every = tmp_path / "every.csv"  # no label at all is a class of the model: nothing can be measured
    every.write_text("\n".join([text[0], *renamed(text[1:40])]) + "\n")
    error_line(run("explain", every, "-m", hgb, "-t", "class", *BASE), "no label is one of the model's classes")


# -- a loss that does not fit the model ------------------------------------------------------------
@pytest.mark.parametrize("options", [["--loss", "zero-one"], ["--task", "classification"], ["--loss", "log"]])
def test_losses_for_classes_are_refused_for_a_regressor(run, air, options):
    line = error_line(run("explain", air / "clean.csv", "-m", air / "model.joblib", "-t", "pm25", *options),
                      "regressor", "use --loss absolute or squared")
    assert "zero-one" not in line.split("use")[-1]


def test_absolute_error_is_refused_for_text_classes(run, bool_labels, tmp_path):
    from sklearn.linear_model import LogisticRegression

    frame = pd.read_csv(bool_labels / "bools.csv")
    model = LogisticRegression().fit(frame[list("abc")], frame.label.map({True: "yes", False: "no"}))
    joblib.dump(model, tmp_path / "m.joblib")
    error_line(run("explain", bool_labels / "bools.csv", "-m", tmp_path / "m.joblib", "-t", "label",
                   "--loss", "absolute"), "needs numeric labels", "'no', 'yes'", "use --loss zero-one or log")


# -- the columns the model needs, no more --------------------------------------------------------
@pytest.fixture(scope="module")
def dated(tmp_path_factory, bool_labels):
    frame = pd.read_csv(bool_labels / "bools.csv")
    frame.insert(0, "Date", pd.date_range("2024-01-01", periods=len(frame), freq="h").astype(str))
    frame.insert(0, "id", np.arange(len(frame)))
    path = tmp_path_factory.mktemp("dated") / "dated.csv"
    frame.to_csv(path, index=False)
    return path


def test_dropped_columns_never_reach_a_river_model(run, dated, bool_labels):
    common = ["-m", bool_labels / "logistic.pkl", "-t", "label", "--learn", *BASE, "-q"]
    error_line(run("explain", dated, *common), "row 1 (line 2)", "column 'Date'", "'2024-01-01 00:00:00'")
    dropped = run("explain", dated, *common, "--drop", "Date,id")
    assert dropped.exit_code == 0, dropped.stderr
    assert dropped.stdout == run("explain", bool_labels / "bools.csv", *common).stdout
    chosen = run("explain", dated, *common, "--features", "a,b,c")
    assert chosen.stdout == dropped.stdout


def test_a_model_fitted_on_an_array_takes_columns_by_position(run, static_csv, unnamed_model, tmp_path):
    result = run("explain", static_csv, "-m", unnamed_model, "-t", "class", *BASE, "-v")
    assert result.exit_code == 0
    assert result.stderr.count("fitted without column names") == 1
    assert "x0 <- salary, x1 <- commission" in result.stderr
    error_line(run("explain", static_csv, "-m", unnamed_model, "-t", "class", "--drop", "loan"),
               "fitted on 9 unnamed features", "would get 8")


# -- other delimiters ------------------------------------------------------------------------------
@pytest.mark.parametrize("separator, name", [(";", "data.csv"), ("\t", "data.tsv"), ("|", "data.txt")])
def test_other_separators(run, static_csv, hgb, tmp_path, separator, name):
    path = tmp_path / name
    path.write_text(static_csv.read_text().replace(",", separator))
    common = ["-m", hgb, "-t", "class", *BASE, "-q"]
    assert run("explain", path, *common).stdout == run("explain", static_csv, *common).stdout
    assert run("batch", path, *common).stdout == run("batch", static_csv, *common).stdout


def test_a_wrong_separator_gets_a_hint(run, static_csv, hgb, tmp_path):
    path = tmp_path / "data.csv"
    path.write_text(static_csv.read_text().replace(",", ";"))
    error_line(run("explain", path, "-m", hgb, "-t", "class", "--delimiter", ","),
               "no column 'class'", "the header holds ';'", "--delimiter")


# -- a model failure inside a micro-batch -----------------------------------------------------------
@pytest.fixture(scope="module")
def categories(tmp_path_factory):
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(2)
    n = 300
    frame = pd.DataFrame({"x": rng.normal(size=n), "colour": rng.choice(["red", "green", "blue"], n)})
    frame["y"] = ((frame.x > 0) ^ (frame.colour == "red")).astype(int)
    model = make_pipeline(make_column_transformer((OneHotEncoder(handle_unknown="error"), ["colour"]),
                                                  remainder="passthrough"), LogisticRegression())
    model.fit(frame[["x", "colour"]], frame.y)
    folder = tmp_path_factory.mktemp("categories")
    joblib.dump(model, folder / "model.joblib")
    bad = frame.copy()
    bad.loc[149, "colour"] = "XX"
    bad.to_csv(folder / "bad.csv", index=False)
    frame.drop(index=149).to_csv(folder / "without.csv", index=False)
    return folder


def test_a_failing_row_in_a_micro_batch_is_named_and_skipped_alone(run, categories):
    common = ["-m", categories / "model.joblib", "-t", "y", *BASE]
    failed = run("explain", categories / "bad.csv", *common, "-q")
    error_line(failed, "row 150 (line 151), column 'colour'", "'XX'", "unknown categories")
    assert len(parse_csv(failed.stdout)) == 149   # the rows before it are written
    skipped = run("explain", categories / "bad.csv", *common, "--on-bad-row", "skip", "--no-live")
    assert skipped.exit_code == 0 and "skipped 1 bad row(s); the first: " in skipped.stderr
    rows = parse_csv(skipped.stdout)
    without = parse_csv(run("explain", categories / "without.csv", *common, "-q").stdout)
    assert len(rows) == len(without) == 299
    assert [{k: v for k, v in r.items() if k != "row"} for r in rows] == \
        [{k: v for k, v in r.items() if k != "row"} for r in without]


# -- nothing explained is not success -------------------------------------------------------------
@pytest.mark.parametrize("command", ["explain", "batch"])
def test_every_row_bad_fails(run, air, tmp_path, command):
    path = tmp_path / "labels.csv"
    lines = (air / "clean.csv").read_text().splitlines()
    path.write_text("\n".join([lines[0], *(line.rsplit(",", 1)[0] + ",NA" for line in lines[1:])]) + "\n")
    error_line(run(command, path, "-m", air / "model.joblib", "-t", "pm25", "--on-bad-row", "skip", "-q"),
               "all 397 row(s) were bad")


# -- help ----------------------------------------------------------------------------------------------
def test_help_names_the_extras_in_full(run):
    assert "ipfi-cli[safe]" in run("explain", "--help").stdout.replace("\n", " ").replace("│", " ")
    assert "ipfi-cli[plot]" in run("plot", "--help").stdout.replace("\n", " ").replace("│", " ")
