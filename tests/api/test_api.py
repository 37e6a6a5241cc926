"""The Python face: raw river models, scikit-learn pipelines and plain functions in; dicts and
Bunches out, with numbers checked against oracles and against scikit-learn."""

from __future__ import annotations

import math
import re
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from ipfi_cli import IncrementalPFI, IntervalPFI, batch_pfi

README = Path(__file__).resolve().parents[2] / "README.md"
DOCS_PYTHON = README.parent / "docs" / "python.md"


def test_a_raw_river_model_learning_as_it_goes():
    from river import linear_model, preprocessing

    rng = np.random.default_rng(0)
    model = preprocessing.StandardScaler() | linear_model.LinearRegression()
    explainer = IncrementalPFI(model, loss="squared", alpha=0.01, n_repeats=3, seed=0)
    for _ in range(3000):
        a, b = rng.normal(size=2)
        x, y = {"a": a, "b": b}, 2.0 * a
        importances = explainer.explain_one(x, y)
        model.learn_one(x, y)
    assert list(importances) == ["a", "b"] and explainer.n_explained == 2999
    # truth for y = 2a with standard normal a: 2 * 2**2 * Var(a) = 8 for a, 0 for b; tolerance 25 %:
    # the smoothed estimate averages about 200 rows' noisy contributions (seed fixed)
    assert importances["a"] == pytest.approx(8.0, rel=0.25) and abs(importances["b"]) < 0.2


def test_a_scikit_learn_pipeline_with_a_text_column():
    from sklearn.compose import make_column_transformer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder

    rng = np.random.default_rng(1)
    frame = pd.DataFrame({"x": rng.normal(size=1500), "colour": rng.choice(["red", "blue"], 1500),
                          "noise": rng.normal(size=1500)})
    y = ((frame.x > 0) ^ (frame.colour == "red")).astype(int)
    model = make_pipeline(make_column_transformer((OneHotEncoder(), ["colour"]), remainder="passthrough"),
                          LogisticRegression()).fit(frame.iloc[:500], y.iloc[:500])
    explainer = IncrementalPFI(model, alpha=0.01, n_repeats=3, seed=0)
    assert explainer.columns == ["x", "colour", "noise"]   # from feature_names_in_
    # 500 rows explained one at a time (each a call of the pipeline: the test's cost), enough for
    # alpha=0.01 to forget its start ((1 - alpha) ** 500 < 0.007)
    stream, labels = frame.iloc[500:1000], y.iloc[500:1000]
    for row, label in zip(stream.to_dict("records"), labels):
        explainer.explain_one(row, int(label))
    batch = batch_pfi(model, stream, labels, n_repeats=5, seed=0)
    assert batch.feature_names == ["x", "colour", "noise"] and batch.importances.shape == (3, 5)
    # a logistic regression cannot model the xor: it leans on x and colour a little and on noise not at
    # all, and iPFI's last 200 rows must agree with batch PFI within 0.1 (three bound-widths)
    for name, mean in zip(batch.feature_names, batch.importances_mean):
        assert abs(explainer.importances[name] - mean) < 0.1
    assert abs(batch.importances_mean[2]) < 0.02


def test_batch_pfi_agrees_with_scikit_learns_permutation_importance():
    from sklearn.ensemble import RandomForestClassifier
    from sklearn.inspection import permutation_importance

    rng = np.random.default_rng(2)
    X = rng.normal(size=(1000, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)
    model = RandomForestClassifier(n_estimators=30, random_state=0).fit(X[:500], y[:500])
    ours = batch_pfi(model, X[500:], y[500:], n_repeats=20, seed=0)
    theirs = permutation_importance(model, X[500:], y[500:], scoring="accuracy", n_repeats=20, random_state=0)
    n = 500
    for j in range(3):
        # ours is the error rate's increase scaled by N/(N-1); theirs the accuracy's decrease. Independent
        # shuffles: the means agree within 4 standard errors of their difference (plus rounding)
        se = math.sqrt((ours.importances_std[j] ** 2 + theirs.importances_std[j] ** 2) / 20)
        assert abs(ours.importances_mean[j] * (n - 1) / n - theirs.importances_mean[j]) <= 4 * se + 1e-9
    assert ours.importances_mean[0] > ours.importances_mean[1] > abs(ours.importances_mean[2])


def test_a_plain_function_and_rows_as_dicts():
    rows = [{"a": float(i % 10), "b": float(i % 7)} for i in range(400)]
    labels = [int(r["a"] > 4) for r in rows]
    rule = lambda block: (block[:, 0] > 4).astype(int)  # noqa: E731 - a model is any function of a block
    result = batch_pfi(rule, rows, labels, n_repeats=5, seed=0)
    assert result.feature_names == ["a", "b"]
    # shuffling a misclassifies a row when the donor falls on the other side: 2 * 0.5 * 0.5 = 0.5
    assert result.importances_mean[0] == pytest.approx(0.5, abs=0.05) and result.importances_mean[1] == 0.0
    windows = IntervalPFI(rule, ["a", "b"], interval=200, n_repeats=2, seed=0)
    found = [w for w in (windows.update(r, y) for r, y in zip(rows, labels)) if w is not None]
    assert len(found) == 2 and found[0].importances_mean[1] == 0.0


def test_the_same_seed_gives_the_same_numbers():
    rows = [{"a": float(i % 10), "b": float(i % 7)} for i in range(300)]
    rule = lambda block: block[:, 0] * 2  # noqa: E731
    first, second = (IncrementalPFI(rule, seed=5) for _ in range(2))
    for r in rows:
        one, two = first.explain_one(r, r["a"] * 2), second.explain_one(r, r["a"] * 2)
    assert one == two


def test_the_readme_example_runs():
    text = README.read_text()
    section = text[text.index("## Use from Python"):]
    code = re.search(r"```python\n(.*?)```", section, flags=re.S).group(1)
    # docs/python.md opens with the same example: one example, shown in two places
    assert re.search(r"```python\n(.*?)```", DOCS_PYTHON.read_text(), flags=re.S).group(1) == code
    exec(compile(code, "README.md", "exec"), {})


def test_batch_pfi_names_a_column_the_rows_lack():
    """A DataFrame or dict rows without one of the model's inputs raised pandas' bare KeyError('age');
    a ValueError now names it, whether the inputs come from the model or from columns=."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    frame = pd.DataFrame(rng.normal(size=(50, 3)), columns=["salary", "age", "loan"])
    y = frame["salary"] + frame["age"]
    model = LinearRegression().fit(frame, y)
    lacking = frame.drop(columns="age")
    for columns in (None, ["salary", "age", "loan"]):
        with pytest.raises(ValueError, match=r"^X has no column 'age', one of the model's inputs \(salary, age, "
                                             r"loan\); X's columns: salary, loan$"):
            batch_pfi(model, lacking, y, columns=columns, seed=0, n_repeats=2)
    records = frame.to_dict("records")
    del records[3]["age"]
    with pytest.raises(ValueError, match=r"^row 4 of X has no key 'age', one of the model's inputs"):
        batch_pfi(model, records, y, seed=0, n_repeats=2)
    assert batch_pfi(model, frame, y, seed=0, n_repeats=2).feature_names == ["salary", "age", "loan"]
