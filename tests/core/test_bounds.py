"""Confidence half-widths (ipfi_cli.core.bounds): the sums they read, and the calibrated one's coverage."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from ipfi_cli.core import IPFIEstimator
from ipfi_cli.core.bounds import RealisationSpread, half_width
from ipfi_cli.core.smoothing import ExponentialMean
from ipfi_cli.models import FunctionPredictor

TRUTH = {"salary": 80 / 169, "age": 16600 / 48373}   # exact, see test_agrawal_oracle.py


def test_spread_is_each_realisations_weighted_mean():
    rng = np.random.default_rng(3)
    alpha, n_rows = 0.2, 30
    contributions = rng.normal(size=(n_rows, 4, 2))            # (row, realisation, feature)
    spread = RealisationSpread(alpha, 4, 2)
    for c in contributions:
        spread.update(c)
    weights = alpha * (1 - alpha) ** np.arange(n_rows)[::-1]  # the newest row weighs alpha
    expected_means = np.einsum("t,tmg->mg", weights, contributions) / weights.sum()
    expected_within = weights @ contributions.var(axis=1, ddof=1) / weights.sum()
    assert np.allclose(spread.means, expected_means, rtol=1e-12)
    assert np.allclose(spread.within, expected_within, rtol=1e-12)
    assert np.allclose(spread.between(), expected_means.var(axis=0, ddof=1), rtol=1e-12)


def test_half_widths_by_hand():
    tracker = ExponentialMean(0.1, 1)
    values = [0.0, 1.0, 0.0, 0.0, 1.0, 1.0, 0.0, 1.0]
    for v in values:
        tracker.update(np.array([v]))
    weights = 0.1 * 0.9 ** np.arange(len(values))[::-1]
    mean = weights @ values / weights.sum()
    variance = weights @ (np.array(values) - mean) ** 2 / weights.sum()
    n_eff = weights.sum() ** 2 / (weights ** 2).sum()
    se = math.sqrt(variance / n_eff)
    v, n = tracker.variance, tracker.effective_count
    assert half_width("chebyshev", 0.05, v, n)[0] == pytest.approx(se / math.sqrt(0.05), rel=1e-12)
    assert half_width("normal", 0.05, v, n)[0] == pytest.approx(stats.norm.ppf(0.975) * se, rel=1e-12)
    # chebyshev is what ExponentialMean.confidence_bound has always given, to the last bit
    assert half_width("chebyshev", 0.1, v, n).tolist() == tracker.confidence_bound(0.1).tolist()


def test_realisations_half_width_by_hand():
    spread = RealisationSpread(0.5, 3, 1)
    rows = np.array([[[0.0], [1.0], [2.0]], [[1.0], [1.0], [4.0]]])
    for c in rows:
        spread.update(c)
    means = (0.25 * rows[0] + 0.5 * rows[1]) / 0.75              # per realisation
    within = (0.25 * rows[0].var(ddof=1) + 0.5 * rows[1].var(ddof=1)) / 0.75
    between = means.var(ddof=1)
    variance, n_eff = np.array([0.8]), 1.8
    stream, draws = (0.8 - within / 3) / n_eff, between / 3
    dof = (stream + draws) ** 2 / (stream ** 2 / 0.8 + draws ** 2 / 2)
    expected = stats.t.ppf(0.95, dof) * math.sqrt(stream + draws)
    assert half_width("realisations", 0.1, variance, n_eff, spread)[0] == pytest.approx(expected, rel=1e-12)


def test_bounds_need_what_they_read():
    model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
    explainer = IPFIEstimator(model, ["a", "b"], seed=0)
    with pytest.raises(ValueError, match="spread"):
        explainer.bound_array(0.05, "realisations")
    with pytest.raises(ValueError, match="at least 2 repeats"):
        IPFIEstimator(model, ["a", "b"], n_repeats=1, bounds_method="realisations")
    with pytest.raises(ValueError, match="unknown bounds method"):
        IPFIEstimator(model, ["a", "b"], bounds_method="hoeffding")
    with pytest.raises(ValueError, match="delta"):
        explainer.bound_array(1.5)


def _rule(block: np.ndarray) -> np.ndarray:
    """river's Agrawal function 1 on (salary, age) columns."""
    salary, age = block[:, 0], block[:, 1]
    return np.where(age < 40, (50000 <= salary) & (salary <= 100000),
                    np.where(age < 60, (75000 <= salary) & (salary <= 125000),
                             (25000 <= salary) & (salary <= 75000))).astype(int)


def test_realisations_bound_covers_on_the_oracle():
    """Coverage of the calibrated bound at delta 0.05 on the Agrawal oracle (exact truth).

    The generator's salary (uniform on [20000, 150000]) and age (integers 20..80), its rule as
    the model; 60 streams of 1,500 rows, alpha 0.01 (n_eff ~ 176), M 10, uniform sampling (a
    reservoir row is reused for good, the case the independent-rows bounds get wrong); salary
    and age scored: 120 checks, seed fixed. If the coverage were 95 % the count of misses is
    Binomial(120, 0.05), sd 2.0 points: the threshold 87 % is 4 sd below (measured: 90.0 %; a
    row's second role, as a later row's replacement, is not counted and costs a few points, see
    ipfi_cli.core.bounds). The bound must also not buy coverage with width: its median stays
    below 1.6x the 95th percentile of the actual error (measured 0.92; the Chebyshev bound is
    about 2.3x the calibrated one). Either failing means the calibration is broken.
    """
    rng = np.random.default_rng(2024)
    errors, widths = [], []
    for k in range(60):
        X = np.column_stack([rng.uniform(20000, 150000, 1500), rng.integers(20, 81, 1500)]).astype(float)
        explainer = IPFIEstimator(FunctionPredictor(_rule), ["salary", "age"], alpha=0.01, n_repeats=10,
                                   sampling="uniform", seed=k, bounds_method="realisations")
        explainer.explain_many(X, _rule(X))
        estimate, bound = explainer.importances, explainer.bounds(0.05)
        for name, truth in TRUTH.items():
            errors.append(abs(estimate[name] - truth))
            widths.append(bound[name])
    errors, widths = np.array(errors), np.array(widths)
    coverage = np.mean(errors <= widths)
    ratio = np.median(widths) / np.quantile(errors, 0.95)
    assert coverage >= 0.87, coverage
    assert ratio <= 1.6, ratio
