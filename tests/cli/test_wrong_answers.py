"""Cases a new user met where ipfi once printed numbers that could not be right, with exit 0.
Each now gives the right answer, or one line saying why it cannot. Through the real command,
on data the test generates."""

from __future__ import annotations

import json
import pickle
from pathlib import Path

import joblib
import numpy as np
import pandas as pd
import pytest
from river import compose, linear_model, preprocessing, stream
from sklearn.dummy import DummyClassifier
from sklearn.ensemble import RandomForestClassifier

from .conftest import parse_csv

BASE = ["--seed", "0", "-M", "3"]


def one_error(result, *fragments):
    assert result.exit_code == 1, (result.exit_code, result.stderr)
    lines = [line for line in result.stderr.splitlines() if line.startswith("ipfi: error: ")]
    assert len(lines) == 1, result.stderr
    for fragment in fragments:
        assert fragment in lines[0], (fragment, lines[0])


def batch_importances(stdout: str) -> dict[str, float]:
    return {row["feature"]: float(row["importance"]) for row in parse_csv(stdout)}


@pytest.fixture(scope="module")
def store(tmp_path_factory):
    """A river pipeline that one-hot encodes an int-coded store id: the label is store 1 (or a rare x1)."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"store": rng.choice([1, 2, 3], 600), "x1": rng.normal(size=600)})
    frame["y"] = (frame.store == 1) | (frame.x1 > 1.5)
    folder = tmp_path_factory.mktemp("store")
    frame.to_csv(folder / "store.csv", index=False)

    def make():
        return compose.Pipeline(compose.TransformerUnion(compose.Select("store") | preprocessing.OneHotEncoder(),
                                                         compose.Select("x1") | preprocessing.StandardScaler()),
                                linear_model.LogisticRegression())
    (folder / "fresh.pkl").write_bytes(pickle.dumps(make()))
    model = make()
    for x, y in zip(frame[["store", "x1"]].to_dict("records"), frame.y.tolist()):
        model.learn_one(x, y)
    (folder / "trained.pkl").write_bytes(pickle.dumps(model))
    return folder


def test_batch_and_compare_give_a_river_model_the_ints_it_learned(run, store):
    """Batch PFI once turned the int store ids into floats, which the encoder never saw: store 0."""
    stream_result = run("explain", store / "store.csv", "-m", store / "trained.pkl", "-t", "y", *BASE, "-q")
    streamed = float(parse_csv(stream_result.stdout)[-1]["store"])
    batch = run("batch", store / "store.csv", "-m", store / "trained.pkl", "-t", "y", *BASE, "-q")
    assert batch.exit_code == 0, batch.stderr
    found = batch_importances(batch.stdout)
    # store decides about a third of the labels: its importance is far from 0 (tolerance: the
    # two estimators average different permutations of 600 rows, so they agree only roughly)
    assert found["store"] > 0.25 and streamed > 0.25 and abs(found["store"] - streamed) < 0.1
    learning = run("compare", store / "store.csv", "-m", store / "fresh.pkl", "-t", "y", "--learn",
                   "--interval", "200", "--alpha", "0.01", *BASE, "-q")
    assert learning.exit_code == 0, learning.stderr
    interval = [float(r["importance"]) for r in parse_csv(learning.stdout)
                if r["method"] == "interval" and r["feature"] == "store"]
    assert min(interval[1:]) > 0.2  # once learned, interval PFI sees the store too


def test_a_river_model_trained_on_other_names_is_refused(run, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    y = X[:, 0] > 0
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    for x, label in stream.iter_array(X, y):  # int keys 0, 1, 2
        model.learn_one(x, label)
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    pd.DataFrame(X).assign(label=y).to_csv(tmp_path / "data.csv", index=False)  # header '0','1','2'
    for command in ("explain", "batch"):
        one_error(run(command, tmp_path / "data.csv", "-m", tmp_path / "model.pkl", "-t", "label", *BASE),
                  "learned the features 0, 1, 2", "none of them is an input column", "iter_array")


def test_a_river_pipeline_whose_first_step_renames_its_inputs_is_explained(run, tmp_path):
    """OneHotEncoder | LogisticRegression learns weights for 'city_paris', ...: only the first step
    sees the input columns. It was refused ("none of them is an input column"), so a --state run of
    it could not continue after any stop, nor its --save-model output be explained."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"city": rng.choice(["paris", "oslo", "rome"], 400), "plan": rng.choice(["a", "b"], 400)})
    frame["y"] = frame.city == "paris"
    model = preprocessing.OneHotEncoder() | linear_model.LogisticRegression()
    for x, label in zip(frame[["city", "plan"]].to_dict("records"), frame["y"]):
        model.learn_one(x, label)
    assert model.predict_proba_one({"city": "paris", "plan": "a"})[True] > 0.5  # it works on these columns
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(model))
    frame.to_csv(tmp_path / "data.csv", index=False)
    result = run("batch", tmp_path / "data.csv", "-m", tmp_path / "model.pkl", "-t", "y", *BASE, "-q")
    assert result.exit_code == 0, result.stderr
    importances = batch_importances(result.stdout)
    assert importances["city"] > 0.1 and importances["plan"] == pytest.approx(0, abs=0.02)  # y is city alone


@pytest.fixture(scope="module")
def bool_labels(tmp_path_factory):
    rng = np.random.default_rng(1)
    X = pd.DataFrame({"x1": rng.normal(size=400), "x2": rng.normal(size=400)})
    truth = X.x1 > 0
    folder = tmp_path_factory.mktemp("labels")
    X.assign(y=truth).to_csv(folder / "data.csv", index=False)  # pandas writes True/False
    joblib.dump(RandomForestClassifier(20, random_state=0).fit(X, truth.astype(int)), folder / "zero_one.joblib")
    joblib.dump(RandomForestClassifier(20, random_state=0).fit(X, np.where(truth, "a", "b")), folder / "ab.joblib")
    return folder


def test_true_and_false_find_the_classes_one_and_zero(run, bool_labels):
    result = run("explain", bool_labels / "data.csv", "-m", bool_labels / "zero_one.joblib", "-t", "y", *BASE, "-q")
    assert result.exit_code == 0, result.stderr
    last = parse_csv(result.stdout)[-1]
    assert float(last["x1"]) > 0.3 and abs(float(last["x2"])) < 0.05  # y is x1 > 0


def test_labels_that_are_no_class_of_the_model_exit_1(run, bool_labels):
    for command in ("explain", "batch"):
        one_error(run(command, bool_labels / "data.csv", "-m", bool_labels / "ab.joblib", "-t", "y", *BASE),
                  "no label is one of the model's classes ('a', 'b')", "the labels read like True")


def test_a_feature_named_like_a_trace_field_is_refused(run, tmp_path):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"row": rng.normal(size=200), "x": rng.normal(size=200)})
    y = np.where(X.row > 0, "yes", "no")
    joblib.dump(RandomForestClassifier(10, random_state=0).fit(X, y), tmp_path / "m.joblib")
    X.assign(label=y).to_csv(tmp_path / "d.csv", index=False)
    one_error(run("explain", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "label", *BASE),
              "'row' has the name of the traces' row-number field", "--group NEW=row")
    renamed = run("explain", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "label", *BASE, "-q",
                  "--group", "first=row", "-F", "jsonl")
    assert renamed.exit_code == 0, renamed.stderr
    record = json.loads(renamed.stdout.splitlines()[-1])
    assert record["row"] == 200 and record["first"] > 0.3


@pytest.fixture(scope="module")
def method_feature(tmp_path_factory):
    """A linear model on a feature named ``method``, the field compare's traces name their method by."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    X = pd.DataFrame(rng.normal(size=(120, 3)), columns=["method", "b", "c"])
    y = 3 * X["method"] + 2 * X.b - X.c
    folder = tmp_path_factory.mktemp("method")
    joblib.dump(LinearRegression().fit(X, y), folder / "m.joblib")
    X.assign(y=y).to_csv(folder / "d.csv", index=False)
    return folder


@pytest.mark.parametrize("command", ["explain", "compare --traces", "compare --learn", "explain --by"])
def test_a_feature_or_key_named_method_is_refused_before_anything_is_written(run, method_feature, command, tmp_path):
    """compare --traces once wrote the header method,row,method,b,c (its method column then held importances)
    and exit 0; ipfi plot took explain's feature 'method' for compare's method column."""
    data, model = method_feature / "d.csv", method_feature / "m.joblib"
    traces = tmp_path / "tr.csv"
    args = ["--loss", "squared", *BASE, "-q"]
    if command == "explain --by":
        from sklearn.linear_model import LinearRegression

        frame = pd.read_csv(data).rename(columns={"method": "a"})
        joblib.dump(LinearRegression().fit(frame[["a", "b", "c"]], frame.y), tmp_path / "abc.joblib")
        frame.assign(method="k").to_csv(tmp_path / "keyed.csv", index=False)
        result = run("explain", tmp_path / "keyed.csv", "-m", tmp_path / "abc.joblib", "-t", "y", "--by", "method",
                     *args, "-o", traces)
        one_error(result, "the key column 'method' has the name of", "compare's traces")
    elif command == "compare --learn":
        (tmp_path / "m.pkl").write_bytes(pickle.dumps(linear_model.LinearRegression()))
        result = run("compare", data, "-m", tmp_path / "m.pkl", "-t", "y", "--learn", "--interval", "50", *args,
                     "--traces", traces)
        one_error(result, "the feature 'method' has the name of the method field", "--group NEW=method")
    else:
        extra = ["--traces", traces] if command == "compare --traces" else ["-o", traces]
        result = run(command.split()[0], data, "-m", model, "-t", "y", *args, *extra)
        one_error(result, "the feature 'method' has the name of the method field", "--group NEW=method")
    assert not traces.exists() or traces.read_text() == ""
    renamed = run("compare", data, "-m", model, "-t", "y", *args, "--traces", traces, "--group", "m=method",
                  "--sampling", "uniform")
    assert renamed.exit_code == 0, renamed.stderr
    assert traces.read_text().splitlines()[0] == "method,row,m,b,c"


def test_compare_traces_refuse_a_feature_named_row_or_the_bound_of_another(run, method_feature, tmp_path):
    frame = pd.read_csv(method_feature / "d.csv").rename(columns={"method": "row"})
    frame.to_csv(tmp_path / "row.csv", index=False)
    from sklearn.linear_model import LinearRegression

    X = frame.drop(columns="y")
    joblib.dump(LinearRegression().fit(X, frame.y), tmp_path / "row.joblib")
    one_error(run("compare", tmp_path / "row.csv", "-m", tmp_path / "row.joblib", "-t", "y", "--loss", "squared",
                  *BASE, "--traces", tmp_path / "tr.csv"), "'row' has the name of the traces' row-number field")
    bound = frame.rename(columns={"row": "b_bound"})
    bound.to_csv(tmp_path / "bound.csv", index=False)
    joblib.dump(LinearRegression().fit(bound.drop(columns="y"), bound.y), tmp_path / "bound.joblib")
    one_error(run("compare", tmp_path / "bound.csv", "-m", tmp_path / "bound.joblib", "-t", "y", "--loss",
                  "squared", *BASE, "--traces", tmp_path / "tr.csv"),
              "'b_bound' has the name of the bound column of 'b'")
    assert not (tmp_path / "tr.csv").exists()


def test_a_jsonl_key_the_first_row_lacks_is_refused(run, tmp_path):
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 3))
    rows = [{"a": r[0], "b": r[1], "c": r[2], "label": bool(r[0] > 0)} for r in X.tolist()]
    del rows[0]["a"]
    (tmp_path / "events.jsonl").write_text("\n".join(map(json.dumps, rows)) + "\n")
    (tmp_path / "model.pkl").write_bytes(pickle.dumps(preprocessing.StandardScaler()
                                                       | linear_model.LogisticRegression()))
    for skip in ((), ("--on-bad-row", "skip")):  # not a bad row: every later row would lose the key
        result = run("explain", tmp_path / "events.jsonl", "-m", tmp_path / "model.pkl", "-t", "label", "--learn",
                     *BASE, "--no-live", *skip)
        assert result.exit_code == 1
        line = result.stderr.strip().splitlines()[-1]
        assert "row 2 (line 2), column 'a': a key the first row lacks" in line and "--features" in line, line
        assert parse_csv(result.stdout)[-1]["row"] == "1"  # the row before is written
    listed = run("explain", tmp_path / "events.jsonl", "-m", tmp_path / "model.pkl", "-t", "label", "--learn",
                 *BASE, "--features", "a,b,c", "--on-bad-row", "skip", "-q")
    assert listed.exit_code == 0 and parse_csv(listed.stdout)[0].keys() == {"row", "a", "b", "c"}


def test_importances_that_are_all_exactly_zero_are_warned_about(run, tmp_path):
    rng = np.random.default_rng(0)
    X = pd.DataFrame({"x1": rng.normal(size=100), "x2": rng.normal(size=100)})
    y = np.where(X.x1 > 0, "yes", "no")
    joblib.dump(DummyClassifier(strategy="most_frequent").fit(X, y), tmp_path / "constant.joblib")
    X.assign(y=y).to_csv(tmp_path / "d.csv", index=False)
    result = run("explain", tmp_path / "d.csv", "-m", tmp_path / "constant.joblib", "-t", "y", *BASE, "--no-live")
    assert result.exit_code == 0
    assert "every feature scored exactly 0 after 99 rows" in result.stderr


def test_a_question_mark_read_as_missing_is_noted(run, tmp_path):
    """UCI's '?' is a missing value to ipfi but text to pandas: a model trained on a frame pandas
    read may know it as a category, so the run says how many were read as missing, and where."""
    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"work": rng.choice(["a", "b", "?"], 200), "x": rng.normal(size=200)})
    frame["y"] = np.where(frame.x > 0, "yes", "no")
    frame.to_csv(tmp_path / "d.csv", index=False)
    from sklearn.compose import ColumnTransformer
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    model = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), ["work"])],
                                            remainder="passthrough"), RandomForestClassifier(10, random_state=0))
    joblib.dump(model.fit(frame[["work", "x"]], frame.y), tmp_path / "m.joblib")
    expected = int((frame.work == "?").sum())
    for command in ("explain", "batch"):
        display = ["--no-live"] if command == "explain" else []
        # the encoder cannot take NaN among its text categories: those rows are skipped, and said why
        result = run(command, tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "y", *BASE, *display,
                     "--on-bad-row", "skip")
        assert result.exit_code == 0, result.stderr
        assert f"'?' read as missing (UCI's token) in 'work' ({expected})" in result.stderr
        assert "--no-default-na" in result.stderr
    kept = run("batch", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "y", *BASE, "--no-default-na")
    assert kept.exit_code == 0 and "read as missing" not in kept.stderr and "skipped" not in kept.stderr


def test_text_codes_that_look_like_numbers_are_read_as_text_with_the_text_option(run, tmp_path):
    """Zip codes a model learned as strings ('02139') read as numbers (2139) in a CSV: the failure
    names the way out, and --text keeps them as written."""
    from sklearn.compose import ColumnTransformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({"zip": rng.choice(["02139", "10001", "94105"], 300), "x1": rng.normal(size=300)})
    frame["y"] = np.where(frame.zip == "02139", "yes", "no")
    model = make_pipeline(ColumnTransformer([("oh", OneHotEncoder(handle_unknown="ignore"), ["zip"])],
                                            remainder="passthrough"), LogisticRegression())
    joblib.dump(model.fit(frame[["zip", "x1"]], frame.y), tmp_path / "m.joblib")
    frame.to_csv(tmp_path / "d.csv", index=False)
    one_error(run("batch", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "y", *BASE),
              "row 1 (line 2)", "read it as text with --text")
    kept = run("batch", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "y", *BASE, "-q", "--text", "zip")
    assert kept.exit_code == 0, kept.stderr
    assert batch_importances(kept.stdout)["zip"] > 0.3  # the label is the zip code
    streamed = run("explain", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "y", *BASE, "-q",
                   "--text", "zip")
    assert streamed.exit_code == 0 and float(parse_csv(streamed.stdout)[-1]["zip"]) > 0.3
    unknown = run("batch", tmp_path / "d.csv", "-m", tmp_path / "m.joblib", "-t", "y", "--text", "zipp")
    assert unknown.exit_code == 2 and "--text" in unknown.stderr


def test_a_jsonl_key_left_out_is_a_missing_value_for_a_model_that_names_its_inputs(run, tmp_path):
    """HistGradientBoosting takes NaN: a row without 'age' is explained as the row with "age": null."""
    import pandas as pd

    root = Path(__file__).resolve().parents[2]
    rows = pd.read_csv(root / "sample_data" / "agrawal_static.csv", nrows=120).to_dict("records")
    null = [dict(r) for r in rows]
    null[0]["age"] = None
    null[7]["age"] = None
    left_out = [dict(r) for r in rows]
    del left_out[0]["age"], left_out[7]["age"]
    for name, objects in (("null", null), ("left_out", left_out)):
        (tmp_path / f"{name}.jsonl").write_text("".join(json.dumps(r) + "\n" for r in objects))
    model = root / "sample_data" / "agrawal_hgb.joblib"
    results = [run("explain", tmp_path / f"{name}.jsonl", "-m", model, "-t", "class", *BASE, "--no-live")
               for name in ("null", "left_out")]
    assert all(r.exit_code == 0 for r in results), results[1].stderr
    assert results[1].stdout == results[0].stdout


def test_the_positional_note_says_which_column_feeds_which_input(run, tmp_path):
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(3)
    frame = pd.DataFrame({"b": rng.normal(size=50), "a": rng.normal(size=50)})
    frame["y"] = 2 * frame.a
    joblib.dump(LinearRegression().fit(frame[["a", "b"]].to_numpy(), frame.y), tmp_path / "m.joblib")
    frame.to_csv(tmp_path / "shuffled.csv", index=False)  # the file has b first: the model gets b as input 0
    result = run("explain", tmp_path / "shuffled.csv", "-m", tmp_path / "m.joblib", "-t", "y", "--loss", "squared",
                 *BASE, "--no-live")
    assert result.exit_code == 0
    assert "its input 0 = 'b', 1 = 'a'" in " ".join(result.stderr.split()), result.stderr
