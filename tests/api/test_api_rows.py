"""The API on the rows a river or scikit-learn user gives it: int keys, keys that come late, labels
that are missing or spelled otherwise, answers of the wrong shape, and a model that fails on a row.
Each case gave wrong numbers with no error, or a traceback from deep inside a library, before."""

from __future__ import annotations

import itertools
import math
import warnings

import numpy as np
import pandas as pd
import pytest

from ipfi_cli import IncrementalPFI, batch_pfi
from ipfi_cli.errors import InputError, ModelError


def friedman_rows(n: int) -> list[tuple[dict, float]]:
    """River's Friedman stream: rows keyed by the ints 0-9, the target from 0-4."""
    from river.datasets import synth

    return list(itertools.islice(synth.Friedman(seed=0), n))


def test_int_keyed_rows_are_explained_as_their_text_keyed_copy():
    """River's synthetic streams key rows by int: the importances are those of the same rows keyed by
    text, with a model trained on them (the same arithmetic), and come back under the int keys."""
    from river import linear_model, preprocessing

    rows = friedman_rows(1500)
    as_int = preprocessing.StandardScaler() | linear_model.LinearRegression()
    as_text = preprocessing.StandardScaler() | linear_model.LinearRegression()
    by_int = IncrementalPFI(as_int, alpha=0.01, n_repeats=2, seed=0)
    by_text = IncrementalPFI(as_text, alpha=0.01, n_repeats=2, seed=0)
    for x, y in rows:
        got = by_int.explain_one(x, y)
        expected = by_text.explain_one({str(k): v for k, v in x.items()}, y)
        as_int.learn_one(x, y)
        as_text.learn_one({str(k): v for k, v in x.items()}, y)
    assert list(got) == list(range(10))
    assert [got[k] for k in range(10)] == [expected[str(k)] for k in range(10)]
    assert got[3] > 0.5  # Friedman's x3 is in the target with weight 10: a real comparison


@pytest.mark.parametrize("shows_keys", [True, False], ids=["river-model", "model-hiding-its-features"])
def test_a_state_of_int_keyed_rows_loads_without_columns(shows_keys):
    """The state spells the columns as text: loaded into an explainer given no columns, int-keyed
    rows go on as in the explainer that saved it (before: refused, the model 'learned none of the
    keys'). The int keys are found from the river model, or else from the next row."""
    from river import linear_model, preprocessing

    rows = friedman_rows(900)
    model = preprocessing.StandardScaler() | linear_model.LinearRegression()
    for x, y in rows[:300]:
        model.learn_one(x, y)

    class Hidden:  # a model whose learned features cannot be seen
        def predict_one(self, x):
            return model.predict_one(x)

    saving = IncrementalPFI(model, loss="squared", n_repeats=2, seed=0)
    for x, y in rows[300:600]:
        saving.explain_one(x, y)
    loading = IncrementalPFI(model if shows_keys else Hidden(), loss="squared", n_repeats=2, seed=0)
    loading.load_state_dict(saving.state_dict())
    for x, y in rows[600:]:
        got, expected = loading.explain_one(x, y), saving.explain_one(x, y)
    assert list(got) == list(range(10)) and got == expected
    assert got[3] > 0.5  # x3 carries the target: the model reads the renamed rows


def test_rows_keyed_otherwise_than_the_model_learned_are_refused():
    from river import linear_model

    model = linear_model.LinearRegression()
    for x, y in friedman_rows(50):
        model.learn_one(x, y)
    explainer = IncrementalPFI(model, seed=0)
    with pytest.raises(ModelError, match="none of them is a key of the rows.*every importance would be 0"):
        explainer.explain_one({str(k): v for k, v in friedman_rows(1)[0][0].items()}, 0.0)


def test_batch_pfi_of_int_keyed_rows_names_them_as_the_rows_do():
    rows = friedman_rows(300)

    def model(block: np.ndarray) -> np.ndarray:
        return 10 * block[:, 3]  # only x3

    result = batch_pfi(model, [x for x, _ in rows], [10 * x[3] for x, _ in rows], loss="squared", n_repeats=3,
                       seed=0)
    assert result.feature_names == list(range(10))
    assert result.importances_mean[3] > 1 and not result.importances_mean[[0, 1, 2, 4, 5]].any()


def test_a_key_the_first_row_lacks_is_warned_about():
    """The columns are the first row's keys: a key that comes later never reaches the model, so every
    number is off (here ``a``'s too: the model is scored on rows without ``b``)."""
    explainer = IncrementalPFI(lambda block: block[:, 0], seed=0)
    with pytest.warns(UserWarning, match="row 2 has the key 'b', which the first row lacks"):
        explainer.explain_one({"a": 0.0}, 0.0)
        explainer.explain_one({"a": 1.0, "b": 2.0}, 1.0)
    with warnings.catch_warnings():
        warnings.simplefilter("error")  # once per key
        explainer.explain_one({"a": 1.0, "b": 3.0}, 1.0)


@pytest.mark.parametrize("label", [math.nan, None, np.float64("nan")])
def test_a_missing_label_is_refused_for_a_function_classifier(label):
    """A plain function that answers classes: a missing label used to count as a wrong prediction."""
    explainer = IncrementalPFI(lambda block: (block[:, 0] > 0).astype(int), ["a", "b"], loss="zero-one", seed=0)
    explainer.explain_one({"a": 1.0, "b": 0.0}, 1)
    explainer.explain_one({"a": -1.0, "b": 0.0}, 0)
    with pytest.raises(InputError, match="row 3: missing label"):
        explainer.explain_one({"a": 1.0, "b": 0.0}, label)


def test_labels_spelled_otherwise_find_a_river_classifiers_classes():
    """A river classifier shows its classes (True/False) on the first row, as on the command line."""
    from river import datasets, linear_model, preprocessing

    data = list(datasets.Phishing())
    model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    for x, y in data[:600]:
        model.learn_one(x, y)
    plain = IncrementalPFI(model, alpha=0.01, n_repeats=2, seed=0)
    spelled = IncrementalPFI(model, alpha=0.01, n_repeats=2, seed=0)
    for x, y in data[600:900]:
        expected = plain.explain_one(x, y)
        got = spelled.explain_one(x, "yes" if y else "no")
    assert got == expected and max(expected.values()) > 0.02


def test_a_function_answering_a_column_equals_one_answering_a_vector_and_a_wrong_length_is_refused():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = 2 * X[:, 0]
    vector = batch_pfi(lambda B: 2 * B[:, 0], X, y, loss="squared", n_repeats=2, seed=0)
    column = batch_pfi(lambda B: 2 * B[:, :1], X, y, loss="squared", n_repeats=2, seed=0)
    np.testing.assert_array_equal(column.importances, vector.importances)
    with pytest.raises(ModelError, match=r"answered 300 rows with an array of shape \(1,\)"):
        batch_pfi(lambda B: 2 * B[:1, 0], X, y, loss="squared", n_repeats=2, seed=0)
    explainer = IncrementalPFI(lambda B: np.float64(1.0), ["a", "b"], loss="squared", seed=0)
    with pytest.raises(ModelError, match="one value per row"):  # the first row is tried with the model
        explainer.explain_one({"a": 0.0, "b": 0.0}, 0.0)


def test_the_model_failing_on_a_row_is_named_with_the_row():
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    model = LinearRegression().fit(X, y)
    rows = X.to_dict("records")[:20]
    rows[10] = dict(rows[10], bmi=math.nan)
    explainer = IncrementalPFI(model, seed=0)
    with pytest.raises(ModelError, match=r"^row 11: the model failed on this row \(ValueError: Input X contains NaN"):
        for x, target in zip(rows, y):
            explainer.explain_one(x, target)
    with pytest.raises(TypeError, match="x must be a dict"):
        explainer.explain_one(X.to_numpy()[0], 1.0)


def test_batch_pfi_takes_y_as_a_column_and_refuses_other_lengths_and_partial_columns():
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import LinearRegression

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    model = LinearRegression().fit(X, y)
    flat = batch_pfi(model, X, y.to_numpy(), n_repeats=2, seed=0)
    column = batch_pfi(model, X, y.to_numpy().reshape(-1, 1), n_repeats=2, seed=0)
    np.testing.assert_array_equal(column.importances, flat.importances)
    with pytest.raises(ValueError, match="X has 442 rows and y 437 labels"):
        batch_pfi(model, X, y[:-5], n_repeats=2, seed=0)
    with pytest.raises(ModelError, match="columns= lacks 'sex'"):
        batch_pfi(model, X[["age", "bmi"]], y, columns=["age", "bmi"], n_repeats=2, seed=0)
    with pytest.raises(InputError, match="row 3: missing label"):
        batch_pfi(model, X, pd.Series(y.to_numpy()).where(lambda s: s.index != 2), n_repeats=2, seed=0)


def test_the_state_saved_and_loaded_through_the_api_continues_exactly():
    """``state_dict`` / ``load_state_dict`` and ``last_contribution`` on the API's explainer (the
    README names them there), without ``columns``: the state's are taken."""
    rng = np.random.default_rng(1)
    X = rng.normal(size=(400, 3))

    def model(block: np.ndarray) -> np.ndarray:
        return block[:, 0] - 2 * block[:, 2]

    rows = [dict(zip("abc", r)) for r in X.tolist()]
    whole = IncrementalPFI(model, alpha=0.05, n_repeats=2, seed=7)
    first = IncrementalPFI(model, alpha=0.05, n_repeats=2, seed=7)
    for x in rows[:200]:
        whole.explain_one(x, model(np.array([list(x.values())]))[0])
        first.explain_one(x, model(np.array([list(x.values())]))[0])
    second = IncrementalPFI(model, alpha=0.05, n_repeats=2, seed=7)
    second.load_state_dict(first.state_dict())
    for x in rows[200:]:
        expected = whole.explain_one(x, model(np.array([list(x.values())]))[0])
        got = second.explain_one(x, model(np.array([list(x.values())]))[0])
    assert got == expected and got["c"] > got["a"] > 0.5
    assert second.last_contribution == whole.last_contribution and set(second.last_contribution) == set("abc")


@pytest.mark.parametrize("settings, message", [
    ({"sampling": "recent"}, "unknown sampling 'recent'; choose one of uniform, geometric"),
    ({"reservoir_size": 0}, "reservoir_size must be at least 1"),
    ({"removal": "none"}, "choose one of marginal, conditional, both"),
    ({"smoothing": "mean", "bounds_method": "realisations"}, "bounds_method='realisations' follows"),
])
def test_settings_are_refused_when_the_explainer_is_made_not_at_the_first_row(settings, message):
    """Without columns the explainer was made at the first row, so a wrong setting passed until then."""
    with pytest.raises(ValueError, match=message):
        IncrementalPFI(lambda block: block[:, 0], **settings)
