"""The label-free ``prediction-shift`` loss: the importance is how far the model's own output moves
when a feature is permuted, with no label at all (the rows' labels are None here).

Expected values are worked out by hand or by an independent Monte Carlo over pairs of rows; the
tolerances (stated per test) are several standard errors of the estimates, with fixed seeds."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator, batch_pfi
from ipfi_cli.core.losses import Output, prediction_shift
from ipfi_cli.models import FunctionPredictor


def uniform_rows(n: int, seed: int) -> np.ndarray:
    return np.random.default_rng(seed).random((n, 2))


def test_a_regressors_shift_is_the_mean_absolute_change_of_its_output():
    # f = 2a: replacing a by an independent a' moves the output by 2|a - a'|, whose mean is 2/3
    # (E|U - U'| = 1/3 for independent uniforms); b moves nothing
    model = FunctionPredictor(lambda X: 2.0 * X[:, 0])
    loss = prediction_shift(is_classifier=False, classes=None, has_proba=False)
    explainer = IPFIEstimator(model, ["a", "b"], loss=loss, alpha=0.002, sampling="uniform",
                               reservoir_size=500, seed=4)
    rows = uniform_rows(6000, 0)
    estimates = explainer.explain_many(rows, [None] * len(rows))[-1]
    # per-row contributions have sd about 2 * 0.236 / sqrt(10); the EMA averages ~1000 rows: SE ~ 0.005
    assert estimates[0] == pytest.approx(2 / 3, abs=0.03)
    assert estimates[1] == 0.0
    assert explainer.mean_loss == 0.0  # the unperturbed output never moves from itself


def test_a_classifier_without_probabilities_counts_label_flips():
    # label = a > 0.5: a replaced by an independent a' flips the label with probability 1/2
    model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int), is_classifier=True)
    loss = prediction_shift(is_classifier=True, classes=[0, 1], has_proba=False)
    assert loss.output is Output.LABEL
    explainer = IPFIEstimator(model, ["a", "b"], loss=loss, alpha=0.002, sampling="uniform",
                               reservoir_size=500, seed=5)
    rows = uniform_rows(6000, 1)
    estimates = explainer.explain_many(rows, [None] * len(rows))[-1]
    # contributions are means of 10 Bernoulli(1/2): sd 0.16; over ~1000 rows SE ~ 0.005
    assert estimates[0] == pytest.approx(0.5, abs=0.03)
    assert estimates[1] == 0.0


def test_a_binary_classifiers_shift_is_the_total_variation_distance_of_its_probabilities():
    from sklearn.linear_model import LogisticRegression

    from ipfi_cli.models import as_predictor

    rng = np.random.default_rng(2)
    X = rng.normal(size=(4000, 2))
    y = (X[:, 0] + 0.3 * rng.normal(size=4000) > 0).astype(int)
    model = LogisticRegression().fit(X, y)
    predictor = as_predictor(model)
    loss = prediction_shift(True, predictor.classes, predictor.has_proba)
    assert loss.output is Output.PROBA and loss.proba_class == 1
    # an independent Monte Carlo: E |p1(a, b) - p1(a', b)| over independent rows (TV of two classes)
    pairs = rng.normal(size=(200_000, 2))
    swapped = pairs.copy()
    swapped[:, 0] = rng.normal(size=200_000)
    p, q = model.predict_proba(pairs)[:, 1], model.predict_proba(swapped)[:, 1]
    expected = float(np.mean(0.5 * (np.abs(p - q) + np.abs((1 - p) - (1 - q)))))
    result = batch_pfi(predictor, X, [None] * len(X), ["a", "b"], loss=loss, n_repeats=5, seed=0)
    # batch PFI over 4,000 rows x 5 permutations: SE of the mean |p - q| (sd ~0.4) is ~0.003
    assert result.mean[0] == pytest.approx(expected, abs=0.02)
    assert result.mean[1] < 0.02 and result.baseline_loss == 0.0
