"""iPDP on a static scikit-learn model against scikit-learn's own ``partial_dependence``."""

from __future__ import annotations

import inspect

import numpy as np
import pytest
from sklearn.datasets import make_friedman1
from sklearn.ensemble import HistGradientBoostingRegressor
from sklearn.inspection import partial_dependence

from ipfi_cli.core.pdp import IPDPEstimator
from ipfi_cli.models import as_predictor

COLUMNS = [f"x{i}" for i in range(10)]
WARM_UP = 500
#: scikit-learn takes a grid of our choosing from 1.7 on (custom_values)
CUSTOM_GRID = "custom_values" in inspect.signature(partial_dependence).parameters
needs_custom_grid = pytest.mark.skipif(not CUSTOM_GRID, reason="partial_dependence takes custom_values from "
                                       "scikit-learn 1.7")


@pytest.fixture(scope="module")
def fitted():
    X, y = make_friedman1(n_samples=5000, noise=0.5, random_state=0)
    model = HistGradientBoostingRegressor(max_iter=60, random_state=0).fit(X[:2000], y[:2000])
    return model, X[2000:]


def _sklearn_pd(model, X, feature, grid):
    result = partial_dependence(model, X, [feature], custom_values={feature: grid}, kind="average",
                                method="brute")
    return result["average"][0]


@needs_custom_grid
def test_fixed_grid_equals_sklearn_exactly(fitted):
    """Same rows (after the warm-up), same grid, running mean: the same average of the same
    predictions, to rounding."""
    model, X = fitted
    grids = {"x0": np.linspace(0.1, 0.9, 7), "x3": np.linspace(0.0, 1.0, 7)}
    pdp = IPDPEstimator(as_predictor(model), COLUMNS, ["x0", "x3"], grid=grids, smoothing="mean", warm_up=WARM_UP)
    pdp.explain_many(X)
    for name, column in (("x0", 0), ("x3", 3)):
        grid, curve = pdp.curves[name]
        assert grid.tolist() == grids[name].tolist()
        assert curve == pytest.approx(_sklearn_pd(model, X[WARM_UP:], column, grid), abs=1e-9)


@needs_custom_grid
def test_streaming_quantile_grid_converges_to_sklearn(fitted):
    """The grid from streaming 5 %/95 % quantiles (P-square) moves a little after the warm-up, so
    the early rows' ICE values sit at slightly other grid points (the curves span 6 and 8 units).
    The grid's ends settle last: at the lowest point of x0, where the curve is steepest (~10 per
    unit), the PD was off by 0.08 (measured on 4,000 rows), 1.4 % of the curve's range, the inner
    points by under 0.02. Tolerance: 3 % of the curve's range. The final grid is within 0.02 of the
    rows' exact quantiles (P-square after 3,000 rows)."""
    model, X = fitted
    pdp = IPDPEstimator(as_predictor(model), COLUMNS, ["x0", "x3"], smoothing="mean", warm_up=WARM_UP)
    traces = pdp.explain_many(X)
    assert traces.shape == (3000, 2, 10) and np.isnan(traces[WARM_UP - 1]).all()
    for name, column in (("x0", 0), ("x3", 3)):
        grid, curve = pdp.curves[name]
        exact = np.quantile(X[:, column], [0.05, 0.95])
        assert [grid[0], grid[-1]] == pytest.approx(exact.tolist(), abs=0.02)
        reference = _sklearn_pd(model, X[WARM_UP:], column, grid)
        assert np.ptp(reference) > 3
        assert np.abs(curve - reference).max() < 0.03 * np.ptp(reference), (name, curve, reference)
    assert pdp.spreads["x3"] > pdp.spreads["x0"] > 0   # friedman1: 10 (x3 - .5) beats 10 sin(pi x0 x1)


def test_a_failing_call_leaves_the_curves_as_they_were(fitted):
    model, X = fitted
    predictor = as_predictor(model)
    pdp = IPDPEstimator(predictor, COLUMNS, ["x0"], warm_up=5)
    pdp.explain_many(X[:100])
    before = pdp.curves["x0"]
    bad = X[100:200].copy()
    bad[50, 3] = np.nan   # HistGradientBoosting takes NaN; make the model call fail instead
    pdp.model = type("Failing", (), {"supports_batch": True, "predict_block": lambda *a: 1 / 0})()
    with pytest.raises(ZeroDivisionError):
        pdp.explain_many(bad)
    pdp.model = predictor
    after = pdp.curves["x0"]
    assert before[0].tolist() == after[0].tolist() and before[1].tolist() == after[1].tolist()
    assert pdp.n_seen == 100


@pytest.mark.parametrize("bad", [float("inf"), float("-inf"), float("nan")])
def test_a_non_finite_value_of_a_curve_feature_is_refused_and_changes_nothing(fitted, bad):
    """A curve's grid comes from running quantiles of its feature: one inf or NaN would make the
    grid, and every curve on it, NaN for good. It is refused, naming the row and the feature."""
    model, X = fitted
    explainer = IPDPEstimator(as_predictor(model), COLUMNS, ["x0"], warm_up=2)
    explainer.explain_many(X[:5])
    before = explainer.explain_many(X[5:6])[0].copy()
    rows = X[5:8].copy()
    rows[1, 0] = bad
    with pytest.raises(ValueError, match=r"row 1 .*'x0' is .*not a finite number"):
        explainer.explain_many(rows)
    assert explainer.n_seen == 6
    np.testing.assert_array_equal(explainer.explain_many(X[6:7])[0].shape, before.shape)
    assert np.isfinite(explainer.explain_many(X[7:8])[0]).all()
    rows[1, 0], rows[1, 3] = X[6, 0], bad  # a non-curve column: the model decides what it makes of it
    explainer.explain_many(rows[:1])
