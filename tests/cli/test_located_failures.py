"""Model failures located to a row (and column) in every command, and other new-user findings.

Each test runs the real command on data it generates.
"""

from __future__ import annotations

import gzip
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from tests.cli.conftest import parse_csv


def error_line(result) -> str:
    lines = [line for line in result.stderr.splitlines() if line.startswith("ipfi: error:")]
    assert len(lines) == 1, result.stderr
    return lines[0]


@pytest.fixture(scope="module")
def numeric_model(tmp_path_factory) -> tuple[Path, pd.DataFrame]:
    """A logistic regression on three numeric columns (fitted on a DataFrame), and its data."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(1300, 3)), columns=["x1", "x2", "x3"])
    frame["label"] = np.where(frame.x1 > 0, "yes", "no")
    path = tmp_path_factory.mktemp("models") / "lr.joblib"
    joblib.dump(LogisticRegression().fit(frame[["x1", "x2", "x3"]], frame["label"]), path)
    return path, frame


# -- F-A: thousands of leading rows the model cannot take ------------------------------------------
def _leading_text(frame: pd.DataFrame, bad: int, rows: int) -> pd.DataFrame:
    data = frame.iloc[:rows].copy()
    data["x1"] = data["x1"].astype(object)
    data.loc[:bad - 1, "x1"] = "1,5"  # a decimal comma: text the model cannot take
    return data


def test_many_leading_bad_rows_all_bad(run, tmp_path, numeric_model):
    model, frame = numeric_model
    path = tmp_path / "all_bad.csv"
    _leading_text(frame, 1200, 1200).to_csv(path, index=False)
    result = run("explain", path, "-m", model, "-t", "label", "--on-bad-row", "skip", "-q")
    assert result.exit_code == 1
    assert error_line(result) == (f"ipfi: error: {path}: no row was explained: all 1,200 row(s) were bad"
                                  "; the first: row 1 (line 2), column 'x1': the model needs a number, got '1,5' "
                                  "(ValueError: could not convert string to float: '1,5')")


def test_many_leading_bad_rows_then_good_rows(run, tmp_path, numeric_model):
    model, frame = numeric_model
    path = tmp_path / "bad_lead.csv"
    _leading_text(frame, 1200, 1300).to_csv(path, index=False)
    result = run("explain", path, "-m", model, "-t", "label", "--on-bad-row", "skip")
    assert result.exit_code == 0, result.stderr
    records = parse_csv(result.stdout)
    assert [int(r["row"]) for r in records] == list(range(1201, 1301))
    assert "skipped 1,200 bad row(s); the first:" in result.stderr
    assert "row 1 (line 2), column 'x1'" in result.stderr


# -- F-I: a data file given as --model ---------------------------------------------------------------
@pytest.mark.parametrize("name, text, zipped", [
    ("s.csv", "x1,x2,label\n1,2,yes\n2,1,no\n", False),  # 'x' looks like zlib to joblib
    ("s2.csv.gz", "id,x1,label\n1,2,yes\n2,1,no\n", True),  # gzip whose text starts with the INST opcode
    ("s2.csv", "id,x1,label\n1,2,yes\n2,1,no\n", False),  # 'i' is pickle's INST opcode
    ("s.jsonl", '{"x1": 1, "label": "yes"}\n', False),
])
def test_data_file_given_as_model(run, tmp_path, name, text, zipped):
    data = tmp_path / "data.csv"
    data.write_text("id,x1,x2,label\n1,1,2,yes\n2,2,1,no\n")
    model = tmp_path / name
    model.write_bytes(gzip.compress(text.encode()) if zipped else text.encode())
    result = run("batch", data, "-m", model, "-t", "label")
    assert result.exit_code == 1
    assert error_line(result) == (f"ipfi: error: {model}: not a joblib/pickle model file nor a .skops one: "
                                  "it looks like a data file (is --model given the data?)")


@pytest.mark.parametrize("compress", [0, ("zlib", 3), ("gzip", 3), "protocol0"])
def test_model_files_still_load(run, tmp_path, numeric_model, compress):
    import pickle

    import joblib

    path, frame = numeric_model
    model = joblib.load(path)
    saved = tmp_path / "model.joblib"
    if compress == "protocol0":
        saved.write_bytes(pickle.dumps(model, protocol=0))
    else:
        joblib.dump(model, saved, compress=compress)
    data = tmp_path / "data.csv"
    frame.iloc[:50].to_csv(data, index=False)
    result = run("batch", data, "-m", saved, "-t", "label", "-q")
    assert result.exit_code == 0, result.stderr
    assert [r["feature"] for r in parse_csv(result.stdout)] == ["x1", "x2", "x3"]


# -- F-N: --drop of input columns a model that names its inputs does not take ------------------------------
@pytest.mark.parametrize("command", ["explain", "batch", "compare"])
def test_drop_accepts_input_columns_the_model_does_not_take(run, tmp_path, numeric_model, command):
    model, frame = numeric_model
    data = frame.iloc[:60].copy()
    data.insert(0, "id", range(len(data)))
    data["date"] = "2024-01-01"
    path = tmp_path / "with_id.csv"
    data.to_csv(path, index=False)
    result = run(command, path, "-m", model, "-t", "label", "--drop", "id,date,x3", "--seed", "1")
    assert result.exit_code == 0, result.stderr
    assert "ipfi: note: --drop id, date: not inputs of the model, which never gets them anyway" in result.stderr
    plain = run(command, path, "-m", model, "-t", "label", "--drop", "x3", "--seed", "1")
    assert plain.exit_code == 0 and plain.stdout == result.stdout


def test_drop_of_a_name_in_neither_is_a_usage_error(run, tmp_path, numeric_model):
    model, frame = numeric_model
    path = tmp_path / "data.csv"
    frame.iloc[:20].to_csv(path, index=False)
    result = run("batch", path, "-m", model, "-t", "label", "--drop", "nope")
    assert result.exit_code == 2
    assert "no such column: nope" in result.stderr


# -- F-B: batch and compare locate a row the model cannot take, and skip just it ----------------------
@pytest.fixture(scope="module")
def one_hot(tmp_path_factory) -> tuple[Path, Path, Path]:
    """A one-hot pipeline that refuses unseen categories; a file with two of them (rows 51, 301),
    and the same file without those rows."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    n = 400
    frame = pd.DataFrame({"color": rng.choice(["red", "green", "blue"], n), "x1": rng.normal(size=n)})
    frame["y"] = np.where((frame.color == "red") ^ (frame.x1 > 1), "yes", "no")
    pipe = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(), ["color"])], remainder="passthrough"),
                         LogisticRegression())
    folder = tmp_path_factory.mktemp("one_hot")
    joblib.dump(pipe.fit(frame[["color", "x1"]], frame.y), folder / "oh.joblib")
    unseen = frame.copy()
    unseen.loc[50, "color"] = "purple"
    unseen.loc[300, "color"] = "pink"
    unseen.to_csv(folder / "unseen.csv", index=False)
    frame.drop(index=[50, 300]).to_csv(folder / "clean.csv", index=False)
    return folder / "oh.joblib", folder / "unseen.csv", folder / "clean.csv"


PURPLE = ("row 51 (line 52), column 'color': the model cannot take the value 'purple' "
          "(ValueError: Found unknown categories ['purple'] in column 0 during transform)")


@pytest.mark.parametrize("command", ["batch", "compare"])
def test_model_failure_is_located(run, one_hot, command):
    model, unseen, _ = one_hot
    result = run(command, unseen, "-m", model, "-t", "y", "-q")
    assert result.exit_code == 1
    assert error_line(result) == f"ipfi: error: {unseen}: {PURPLE}"
    assert result.stdout == ""


@pytest.mark.parametrize("command", ["batch", "compare"])
def test_skip_leaves_out_just_the_rows_the_model_cannot_take(run, one_hot, command):
    model, unseen, clean = one_hot
    skipped = run(command, unseen, "-m", model, "-t", "y", "--on-bad-row", "skip", "--seed", "3")
    assert skipped.exit_code == 0, skipped.stderr
    assert f"ipfi: warning: skipped 2 bad row(s); the first: {unseen}: {PURPLE}" in skipped.stderr
    expected = run(command, clean, "-m", model, "-t", "y", "--seed", "3", "-q")
    assert expected.exit_code == 0 and skipped.stdout == expected.stdout


def test_batch_on_text_where_the_model_needs_numbers(run, tmp_path, numeric_model):
    model, frame = numeric_model
    path = tmp_path / "decimal_comma.csv"
    _leading_text(frame, 1200, 1200).to_csv(path, index=False)
    result = run("batch", path, "-m", model, "-t", "label")
    assert error_line(result) == (f"ipfi: error: {path}: row 1 (line 2), column 'x1': the model needs a number, "
                                  "got '1,5' (ValueError: could not convert string to float: '1,5')")
    result = run("batch", path, "-m", model, "-t", "label", "--on-bad-row", "skip")
    assert result.exit_code == 1
    assert error_line(result) == (f"ipfi: error: {path}: no data to explain: all 1,200 row(s) were bad"
                                  "; the first: row 1 (line 2), column 'x1': the model needs a number, got '1,5' "
                                  "(ValueError: could not convert string to float: '1,5')")


# -- F-D: a model fitted on pandas' names with spaces (' workclass'), a header read without them ---------------
@pytest.fixture(scope="module")
def spaced(tmp_path_factory) -> tuple[Path, Path, float]:
    """A file written with ', ' separators, a pipeline fitted on ``pd.read_csv`` of it (names ' workclass', ...),
    and the model's zero-one loss on it."""
    import joblib
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    rng = np.random.default_rng(1)
    n = 300
    frame = pd.DataFrame({"age": rng.integers(18, 80, n), "workclass": rng.choice(["Private", "State-gov"], n),
                          "hours": rng.normal(40, 5, n)})
    frame["class"] = np.where((frame.age > 40) ^ (frame.workclass == "Private"), ">50K", "<=50K")
    folder = tmp_path_factory.mktemp("spaced")
    data = folder / "adult_raw.csv"
    data.write_text(", ".join(frame.columns) + "\n" + frame.to_csv(index=False, header=False).replace(",", ", "))
    raw = pd.read_csv(data)
    assert list(raw.columns) == ["age", " workclass", " hours", " class"]
    X, y = raw.drop(columns=[" class"]), raw[" class"]
    pipe = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(), [" workclass"]),
                                            ("num", StandardScaler(), ["age", " hours"])]), LogisticRegression())
    pipe.fit(X, y)
    joblib.dump(pipe, folder / "model.joblib")
    return data, folder / "model.joblib", 1 - pipe.score(X, y)


def test_model_names_with_spaces_are_matched(run, spaced):
    data, model, loss = spaced
    result = run("batch", data, "-m", model, "-t", "class", "--seed", "0")
    assert result.exit_code == 0, result.stderr
    assert ("ipfi: note: the model's column names have surrounding spaces (' workclass', ' hours'); they are "
            "matched to the input's header names, which are read without them") in result.stderr
    records = parse_csv(result.stdout)
    assert [r["feature"] for r in records] == ["age", "workclass", "hours"]
    assert float(records[0]["baseline_loss"]) == pytest.approx(loss)
    assert float(records[1]["importance"]) > 0.05
    explained = run("explain", data, "-m", model, "-t", "class", "-q")
    assert explained.exit_code == 0, explained.stderr
    assert parse_csv(explained.stdout)[0].keys() == {"row", "age", "workclass", "hours"}


def test_target_with_spaces_names_the_fix(run, spaced):
    data, model, _ = spaced
    result = run("batch", data, "-m", model, "-t", " class")
    assert result.exit_code == 1
    assert error_line(result).endswith("(the header's names are read without surrounding spaces: "
                                       "use --target 'class')")


def test_missing_names_are_quoted(run, tmp_path, spaced):
    data, model, _ = spaced
    other = tmp_path / "other.csv"
    other.write_text("age,hours,class\n30,40,>50K\n50,38,<=50K\n")
    result = run("batch", other, "-m", model, "-t", "class")
    assert result.exit_code == 1
    assert error_line(result) == (f"ipfi: error: {other}: the model needs column(s) ' workclass', which the input "
                                  "lacks (the model's inputs: 'age', ' workclass', ' hours'); the model's names "
                                  "have surrounding spaces, the input's header names are read without them")


# -- F-K: a river binary classifier learning text labels other than the bool spellings -------------------
@pytest.fixture(scope="module")
def elec(tmp_path_factory) -> tuple[Path, Path, Path]:
    """elec2-like rows (labels UP/DOWN), the same with yes/no, and a fresh river scaled logistic regression."""
    import pickle

    from river import linear_model, preprocessing

    rng = np.random.default_rng(0)
    n = 200
    frame = pd.DataFrame({"date": rng.random(n), "day": rng.integers(1, 8, n), "period": rng.random(n),
                          "nswprice": rng.random(n), "nswdemand": rng.random(n)})
    frame["class"] = np.where(frame.nswprice > 0.5, "UP", "DOWN")
    folder = tmp_path_factory.mktemp("elec")
    frame.to_csv(folder / "elec.csv", index=False)
    frame.assign(**{"class": np.where(frame.nswprice > 0.5, "yes", "no")}).to_csv(folder / "yes_no.csv", index=False)
    (folder / "lr.pkl").write_bytes(pickle.dumps(preprocessing.StandardScaler() | linear_model.LogisticRegression()))
    return folder / "elec.csv", folder / "yes_no.csv", folder / "lr.pkl"


@pytest.mark.parametrize("command", [["explain", "--learn"], ["compare", "--learn", "--interval", "50"]])
def test_binary_river_classifier_with_text_labels_names_the_fix(run, elec, command):
    data, _, model = elec
    result = run(command[0], data, "-m", model, "-t", "class", *command[1:], "-q")
    assert result.exit_code == 1
    assert error_line(result) == (
        f"ipfi: error: {model}: river's LogisticRegression is a binary classifier that learns True/False labels; "
        "the labels read like 'DOWN': map them to true/false, or use a multi-class model such as "
        "tree.HoeffdingTreeClassifier")
    assert "invalid literal" not in result.stderr


def test_binary_river_classifier_with_bool_spellings_learns(run, elec):
    _, yes_no, model = elec
    result = run("explain", yes_no, "-m", model, "-t", "class", "--learn", "-q")
    assert result.exit_code == 0, result.stderr
    assert len(parse_csv(result.stdout)) == 200


# -- F-N: the column is named also when the first row fails and several columns hold text ------------------
@pytest.mark.parametrize("command", ["explain", "batch"])
def test_first_row_failure_names_the_text_column(run, tmp_path, one_hot, command):
    model, _, clean = one_hot
    data = pd.read_csv(clean)
    data["x1"] = data["x1"].astype(object)
    data.loc[0, "x1"] = "1,5"  # 'color' holds text too: the error's words alone cannot tell which
    path = tmp_path / "comma.csv"
    data.to_csv(path, index=False)
    result = run(command, path, "-m", model, "-t", "y", "-q")
    assert result.exit_code == 1
    assert error_line(result) == (f"ipfi: error: {path}: row 1 (line 2), column 'x1': the model needs a number, "
                                  "got '1,5' (ValueError: could not convert string to float: '1,5')")


# -- conditional removal: a value its sampler cannot take is the row's, named with its column ------------------
@pytest.fixture(scope="module")
def nan_taking_model(tmp_path_factory, numeric_model) -> Path:
    """A gradient-boosting classifier on the same three columns: it takes NaN (as missing)."""
    import joblib
    from sklearn.ensemble import HistGradientBoostingClassifier

    _, frame = numeric_model
    path = tmp_path_factory.mktemp("models") / "hgb.joblib"
    model = HistGradientBoostingClassifier(max_iter=10, random_state=0).fit(frame[["x1", "x2", "x3"]], frame["label"])
    joblib.dump(model, path)
    return path


def _conditional(run, path, model, *extra):
    return run("explain", path, "-m", model, "-t", "label", "--removal", "conditional", "--seed", "0", "-M", "2",
               "--batch-size", "50", "--no-live", *extra)


def test_conditional_removal_names_a_text_value(run, tmp_path, numeric_model):
    """Text among numbers read as text (--text): conditional removal cannot draw it. The row is named with its
    column (it was an unexpected ValueError, and before that said to be the model's failure)."""
    model, frame = numeric_model
    data = frame.iloc[:120].copy()
    data["x2"] = data["x2"].astype(object)
    data.loc[69, "x2"] = "n/a?"
    path = tmp_path / "text.csv"
    data.to_csv(path, index=False)
    failed = _conditional(run, path, model, "--text", "x2")
    assert failed.exit_code == 1
    assert error_line(failed) == (f"ipfi: error: {path}: row 70 (line 71), column 'x2': conditional removal needs "
                                  "numbers, got 'n/a?' (marginal removal takes any value)")
    skipped = _conditional(run, path, model, "--text", "x2", "--on-bad-row", "skip")
    assert skipped.exit_code == 0, skipped.stderr
    assert [int(r["row"]) for r in parse_csv(skipped.stdout)] == [n for n in range(1, 121) if n != 70]


def test_conditional_removal_refuses_a_missing_value_the_model_takes(run, tmp_path, numeric_model, nan_taking_model):
    """A model that takes NaN must not hand it to the conditional sampler: one NaN learned made every later draw
    NaN, and the run went on with wrong importances and exit 0. The row is refused, or skipped exactly."""
    _, frame = numeric_model
    data = frame.iloc[:120].copy()
    data.loc[69, "x3"] = np.nan
    path, clean = tmp_path / "nan.csv", tmp_path / "clean.csv"
    data.to_csv(path, index=False)
    data.drop(index=69).to_csv(clean, index=False)
    failed = _conditional(run, path, nan_taking_model)
    assert failed.exit_code == 1
    assert error_line(failed) == (f"ipfi: error: {path}: row 70 (line 71), column 'x3': missing value, which "
                                  "conditional removal cannot take")
    skipped = _conditional(run, path, nan_taking_model, "--on-bad-row", "skip")
    assert skipped.exit_code == 0, skipped.stderr
    expected = _conditional(run, clean, nan_taking_model)
    assert expected.exit_code == 0, expected.stderr
    # the same importances as without the row, every one a number
    drop_row = lambda records: [{k: v for k, v in r.items() if k != "row"} for r in records]  # noqa: E731
    assert drop_row(parse_csv(skipped.stdout)) == drop_row(parse_csv(expected.stdout))
    assert all(np.isfinite(float(v)) for r in parse_csv(skipped.stdout)[1:] for k, v in r.items() if k != "row")


def test_a_true_false_column_the_model_learned_as_text_is_named_with_text(run, tmp_path):
    """pandas reads a True/False column as bool, but a frame built from strings gives an encoder
    'True' / 'False': given booleans, it fails on every row. The line names the column and --text,
    which reads it as the model learned it."""
    import joblib
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OrdinalEncoder

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"x": rng.normal(size=200), "flag": rng.choice(["True", "False"], 200)})
    frame["y"] = ((frame["x"] > 0) ^ (frame["flag"] == "True")).astype(int)
    model = make_pipeline(make_column_transformer((OrdinalEncoder(), ["flag"]), remainder="passthrough"),
                          LogisticRegression()).fit(frame[["x", "flag"]], frame["y"])
    joblib.dump(model, tmp_path / "model.joblib")
    frame.to_csv(tmp_path / "data.csv", index=False)
    failed = run("batch", tmp_path / "data.csv", "-m", tmp_path / "model.joblib", "-t", "y", "-M", "2")
    assert failed.exit_code == 1
    said = " ".join(failed.stderr.split())
    assert "'flag' was read as true/false" in said and "--text" in said, said
    fixed = run("batch", tmp_path / "data.csv", "-m", tmp_path / "model.joblib", "-t", "y", "-M", "2",
                "--text", "flag")
    assert fixed.exit_code == 0, fixed.stderr


def test_conditional_removal_on_a_column_of_text_is_one_set_up_error(run, tmp_path, numeric_model):
    """A text column among the model's inputs (here a category it ignores) fails every row alike:
    said once as the set-up's problem (exit 2), not as every row bad and skipped."""
    model, frame = numeric_model
    data = frame.iloc[:60].copy()
    data["colour"] = np.where(np.arange(60) % 2, "green", "red")
    path = tmp_path / "colour.csv"
    data.to_csv(path, index=False)
    for extra in ((), ("--on-bad-row", "skip"), ("--removal", "both")):
        failed = _conditional(run, path, model, "--drop", "colour", *extra)  # the model does not take it
        assert failed.exit_code == 0, failed.stderr
    import joblib
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    piped = make_pipeline(make_column_transformer((OneHotEncoder(), ["colour"]), remainder="passthrough"),
                          LogisticRegression()).fit(data[["x1", "x2", "x3", "colour"]], data["label"])
    joblib.dump(piped, tmp_path / "piped.joblib")
    for extra in ((), ("--on-bad-row", "skip"), ("--removal", "both")):
        failed = _conditional(run, path, tmp_path / "piped.joblib", "--features", "x1,x2", *extra)
        assert failed.exit_code == 2, failed.stderr
        said = " ".join(failed.stderr.split())
        assert "column 'colour' holds text ('red' in row 1)" in said and "marginal removal" in said, said
        assert "bad" not in said
