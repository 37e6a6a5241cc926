"""Losses on hand-computed values, and how each model kind feeds them."""

from __future__ import annotations

import math

import numpy as np
import pytest
from sklearn.linear_model import LogisticRegression

from ipfi_cli.core import IPFIEstimator, LossMismatchError, Output, default_loss, get_loss
from ipfi_cli.core.losses import LOG_LOSS_EPS
from ipfi_cli.models import FunctionPredictor, ModelError, RiverPredictor, as_predictor


def _objects(*values):
    array = np.empty(len(values), dtype=object)
    array[:] = values
    return array


def test_zero_one():
    loss = get_loss("zero-one")
    assert loss.output is Output.LABEL
    assert loss.compute(_objects("UP", "DOWN", "UP"), _objects("UP", "UP", "DOWN")).tolist() == [0.0, 1.0, 1.0]
    assert loss.compute(_objects(1, 0, True), _objects(1, 1, 1)).tolist() == [0.0, 1.0, 0.0]


def test_absolute_and_squared():
    y, predicted = np.array([1.0, -2.0, 0.5, 3.0]), np.array([1.5, 1.0, 0.5, -1.0])
    assert get_loss("absolute").compute(y, predicted).tolist() == [0.5, 3.0, 0.0, 4.0]
    assert get_loss("squared").compute(y, predicted).tolist() == [0.25, 9.0, 0.0, 16.0]
    # object arrays of numbers (as the explainer builds targets) work the same
    assert get_loss("squared").compute(_objects(1, 2), _objects(3.0, 2)).tolist() == [4.0, 0.0]
    assert get_loss("absolute").output is Output.VALUE and get_loss("squared").output is Output.VALUE


def test_log_loss_is_minus_log_of_the_true_labels_probability_clipped():
    loss = get_loss("log")
    assert loss.output is Output.PROBA
    values = loss.compute(_objects("a", "b", "c", "d"), np.array([1.0, 0.5, 0.1, 0.0]))
    assert values[:3] == pytest.approx([0.0, math.log(2), math.log(10)], rel=1e-12)
    assert values[3] == pytest.approx(-math.log(1e-15)) and LOG_LOSS_EPS == 1e-15   # p = 0 -> 34.54


def test_names_aliases_and_defaults():
    for name, expected in [("zero-one", "zero-one"), ("ZERO_ONE", "zero-one"), ("01", "zero-one"),
                           ("mae", "absolute"), ("abs", "absolute"), ("mse", "squared"),
                           ("log-loss", "log"), ("logloss", "log"), ("cross-entropy", "log"), (" log ", "log")]:
        assert get_loss(name).name == expected
    loss = get_loss("squared")
    assert get_loss(loss) is loss
    with pytest.raises(ValueError, match="unknown loss 'hinge'; choose one of zero-one, absolute, squared, log"):
        get_loss("hinge")
    assert default_loss(True).name == "zero-one" and default_loss(False).name == "absolute"


@pytest.fixture(scope="module")
def string_classifier():
    rng = np.random.default_rng(0)
    X = rng.normal(size=(300, 2))
    y = np.where(X[:, 0] > 0, "yes", "no")
    return LogisticRegression().fit(X, y), X


def test_log_loss_picks_the_probability_of_the_true_label(string_classifier):
    model, X = string_classifier
    predictor = as_predictor(model)
    targets = _objects("yes", "no", "maybe")
    picked = predictor.predict_block(X[:3], ["a", "b"], Output.PROBA, targets)
    proba = model.predict_proba(X[:3])
    assert list(model.classes_) == ["no", "yes"]
    assert picked.tolist() == [proba[0, 1], proba[1, 0], 0.0]       # unknown label -> p = 0


def test_log_loss_of_an_unknown_label_is_clipped(string_classifier):
    model, X = string_classifier
    explainer = IPFIEstimator(as_predictor(model), ["a", "b"], loss="log", seed=0)
    explainer.explain_one({"a": X[0, 0], "b": X[0, 1]}, "yes")
    estimate = explainer.explain_one({"a": X[1, 0], "b": X[1, 1]}, "maybe")
    assert explainer.last_loss == pytest.approx(-math.log(1e-15))
    assert np.all(estimate == 0.0)                # every perturbed prediction is clipped alike
    explainer.explain_one({"a": X[2, 0], "b": X[2, 1]}, model.predict(X[2:3])[0])
    p_true = model.predict_proba(X[2:3]).max()
    assert explainer.last_loss == pytest.approx(-math.log(p_true), rel=1e-12)


def test_absolute_loss_on_a_string_classifier_raises_a_clear_error(string_classifier):
    model, X = string_classifier
    explainer = IPFIEstimator(as_predictor(model), ["a", "b"], loss="absolute", seed=0)
    explainer.explain_one({"a": X[0, 0], "b": X[0, 1]}, "yes")          # first row: nothing predicted yet
    with pytest.raises(LossMismatchError, match=r"needs numeric predictions, got '(yes|no)'; "
                                                r"for a classifier use the zero-one or log loss"):
        explainer.explain_one({"a": X[1, 0], "b": X[1, 1]}, "no")
    with pytest.raises(LossMismatchError, match="numeric targets, got 'UP'"):
        get_loss("squared").compute(_objects("UP"), np.array([1.0]))
    assert issubclass(LossMismatchError, ValueError)


class _ProbaOnlyRiverModel:
    """A river-style classifier that must be asked for probabilities under the log loss."""

    def __init__(self):
        self.proba_calls = 0

    def predict_one(self, x):
        raise AssertionError("the log loss must use predict_proba_one")

    def predict_proba_one(self, x):
        self.proba_calls += 1
        p = 1 / (1 + math.exp(-x["a"]))
        return {True: p, False: 1 - p}


def test_river_model_with_log_loss_uses_predict_proba_one():
    model = _ProbaOnlyRiverModel()
    explainer = IPFIEstimator(RiverPredictor(model), ["a", "b"], loss="log", n_repeats=3, seed=0)
    explainer.explain_one({"a": 0.0, "b": 1.0}, True)
    explainer.explain_one({"a": 2.0, "b": 1.0}, False)
    # one block of 1 + 3 x 2 records, each distinct one asked once: the row itself, and a replaced by 0.0
    # (b's only earlier value is its own, so those records are the row)
    assert model.proba_calls == 2
    assert explainer.last_loss == pytest.approx(-math.log(1 - 1 / (1 + math.exp(-2.0))), rel=1e-12)
    # replacing a with the only earlier value (0.0): p(False) goes to 0.5
    expected = -math.log(0.5) - explainer.last_loss
    assert explainer.importances["a"] == pytest.approx(expected, rel=1e-12)
    assert explainer.importances["b"] == 0.0
    explainer.explain_one({"a": 1.0, "b": 0.0}, "never seen")              # absent label -> p = 0
    assert explainer.last_loss == pytest.approx(-math.log(1e-15))


def test_log_loss_needs_probabilities():
    explainer = IPFIEstimator(FunctionPredictor(lambda B: B[:, 0]), ["a"], loss="log", seed=0)
    explainer.explain_one({"a": 1.0}, 1)
    with pytest.raises(ModelError, match="no probabilities"):
        explainer.explain_one({"a": 2.0}, 1)

    class PredictOnly:
        def get_params(self):
            return {}

        def predict(self, X):
            return np.zeros(len(X))

    explainer = IPFIEstimator(as_predictor(PredictOnly()), ["a"], loss="log", seed=0)
    explainer.explain_one({"a": 1.0}, 1)
    with pytest.raises(ModelError, match="needs predict_proba"):
        explainer.explain_one({"a": 2.0}, 1)
