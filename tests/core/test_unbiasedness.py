"""Unbiasedness for a static model (the paper's Theorem 2) and two closed-form oracles.

* the mean of iPFI over independent streams matches batch PFI on a large sample;
* a linear regression on independent standard normal features under squared loss has
  ``PFI_j = 2 * coef_j**2`` (permuting x_j adds ``coef_j * (x'_j - x_j)``, whose square has
  mean ``2 coef_j**2 Var(x_j)``; the cross term with the residual has mean 0);
* the bias-corrected start: the estimate after the first explained rows is already unbiased.
"""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.linear_model import LinearRegression, LogisticRegression
from sklearn.tree import DecisionTreeClassifier

from ipfi_cli.core import IPFIEstimator, batch_pfi
from ipfi_cli.models import FunctionPredictor, as_predictor

COLUMNS = ["a", "b", "c"]


def _classification_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] + 0.5 * rng.normal(size=n) > 0).astype(int)
    return X, y


def _n_eff(alpha: float, n_explained: int) -> float:
    weights = alpha * (1 - alpha) ** np.arange(n_explained)
    return float(weights.sum() ** 2 / (weights ** 2).sum())


@pytest.fixture(scope="module", params=["logistic", "tree"])
def static_model(request):
    """A fitted classifier and its batch PFI on 100,000 fresh rows (the reference)."""
    estimator = (LogisticRegression() if request.param == "logistic"
                 else DecisionTreeClassifier(max_depth=4, random_state=0))
    model = as_predictor(estimator.fit(*_classification_data(2000, 1)))
    return model, batch_pfi(model, *_classification_data(100_000, 2), COLUMNS, loss="zero-one",
                            n_repeats=4, seed=3)


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
def test_mean_of_ipfi_matches_batch_pfi(static_model, sampling):
    model, truth = static_model
    # Short streams (300 rows at alpha = 0.001) on purpose: there a zero-start estimator would
    # still be at 1 - 0.999**299 = 26 % of the truth, so this tests the start as well.
    finals = []
    for seed in range(40):
        X, y = _classification_data(300, 1000 + seed)
        explainer = IPFIEstimator(model, COLUMNS, loss="zero-one", alpha=0.001, n_repeats=10,
                                   sampling=sampling, seed=seed)
        finals.append(explainer.explain_many(X, y)[-1])
    finals = np.array(finals)
    # Tolerance: 3.5 standard errors of the difference. The iPFI side's SE comes from the spread
    # of the 40 independent finals (t with 39 dof: P(|t| > 3.5) = 0.001); the batch side's from
    # the spread of its 4 repeats plus the sample's own sd (<= 0.5 / sqrt(100000) = 0.0016).
    se_ipfi = finals.std(axis=0, ddof=1) / np.sqrt(len(finals))
    se_batch = np.sqrt(np.square(truth.std) / truth.n_repeats + 0.5 ** 2 / truth.n_rows)
    tolerance = 3.5 * np.sqrt(se_ipfi ** 2 + se_batch ** 2)
    difference = finals.mean(axis=0) - np.array(truth.mean)
    assert np.all(np.abs(difference) <= tolerance), (difference, tolerance)
    assert truth.mean[0] > 0.1 and np.all(tolerance < 0.02)   # the test has teeth


B = np.array([2.0, 1.0, 0.5, 0.0])
NOISE = 0.5


def _linear_data(n: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, B.size))
    return X, X @ B + NOISE * rng.normal(size=n)


@pytest.fixture(scope="module")
def linear_model():
    return LinearRegression().fit(*_linear_data(5000, 0))


def test_linear_oracle_ipfi(linear_model):
    coef = linear_model.coef_
    predictor = as_predictor(linear_model)
    finals = []
    for seed in range(4):
        explainer = IPFIEstimator(predictor, list("abcd"), loss="squared", alpha=0.001, n_repeats=10,
                                   seed=seed)
        finals.append(explainer.explain_many(*_linear_data(5000, 100 + seed))[-1])
    estimate = np.mean(finals, axis=0)
    # sd of one final: a row's contribution is b^2 (x' - x)^2 + 2 b (x' - x) e. The replacement
    # values are earlier rows of the same stream, so the weighted second moment of the recent
    # rows enters twice: Var ~ (8.4 b^4 + 4.4 b^2 s_e^2) / n_eff with n_eff = 1972 after 4999
    # explained rows (measured rms over 20 streams within 10 % of this). Mean of 4 streams,
    # tolerance 4 sd: 0.53 for b = 2 (truth 8), 0.14 for b = 1, 0.04 for b = 0.5.
    sd = np.sqrt((8.4 * coef ** 4 + 4.4 * coef ** 2 * NOISE ** 2) / _n_eff(0.001, 4999)) / np.sqrt(4)
    assert np.all(np.abs(estimate - 2 * coef ** 2) <= 4 * sd), (estimate, 2 * coef ** 2, 4 * sd)


def test_linear_oracle_batch(linear_model):
    coef = linear_model.coef_
    X, y = _linear_data(50_000, 200)
    result = batch_pfi(as_predictor(linear_model), X, y, list("abcd"), loss="squared", n_repeats=5, seed=0)
    # sd: the sample's second moment of x_j enters through both the row and its permuted
    # partner (8 b^4 / N), each permutation adds 4 b^4 / N / M, the residual term 8 b^2 s_e^2 / N
    # (measured rms over 20 samples within 20 % of this). Tolerance 4 sd: 0.22 for b = 2.
    n, m = result.n_rows, result.n_repeats
    sd = np.sqrt((8 * coef ** 4 + 4 * coef ** 4 / m + 8 * coef ** 2 * NOISE ** 2) / n)
    assert np.all(np.abs(np.array(result.mean) - 2 * coef ** 2) <= 4 * sd)


def _threshold(block):
    return (block[:, 0] > 0.5).astype(int)


def test_estimate_is_unbiased_from_the_first_explained_row():
    """y = 1[a > 0.5], model = the same rule, a ~ U(0, 1): PFI(a) = P(a' on the other side) = 0.5.

    After the first explained row every realisation draws row 1 (the only one stored), so
    the estimate is 1[a_1, a_2 on different sides], mean 0.5, sd 0.5. Over S = 2000
    independent runs the mean after explained row k (k = 1..5) has sd <= 0.5 / sqrt(2000) =
    0.011; tolerance 0.045 (4 sd). A zero-started EW mean would be alpha * 0.5 = 0.0005.
    """
    alpha, runs, rows = 0.001, 2000, 6
    data = np.random.default_rng(5).random((runs, rows, 2))
    estimates = np.empty((runs, rows, 2))
    for run in range(runs):
        explainer = IPFIEstimator(FunctionPredictor(_threshold), ["a", "b"], loss="zero-one",
                                   alpha=alpha, n_repeats=10, seed=run)
        estimates[run] = explainer.explain_many(data[run], _threshold(data[run]))
    assert np.isnan(estimates[:, 0]).all()             # nothing earlier to draw from
    means = estimates[:, 1:].mean(axis=0)              # (5 explained rows, 2 features)
    assert np.all(np.abs(means[:, 0] - 0.5) <= 0.045), means[:, 0]
    assert np.all(means[:, 1] == 0.0)
    # the first estimate is exactly row 2's indicator, as derived above
    sides = data[:, :, 0] > 0.5
    assert np.array_equal(estimates[:, 1, 0], (sides[:, 0] != sides[:, 1]).astype(float))
    zero_start = alpha * means[0, 0]
    assert means[0, 0] > 400 * zero_start
