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
def test_the_grid_from_the_warm_up_gives_sklearns_partial_dependence_exactly(fitted):
    """The grid spans the 5 %/95 % quantiles of the warm-up rows (numpy's, computed here) and then
    stays: a curvy model's curve is scikit-learn's brute-force PD at that grid on the rows after the
    warm-up, to rounding, after each row checked. (The grid used to follow P-square quantiles row by row,
    so a point averaged predictions made at positions it no longer had: at the end, off by 1.1 % of the curve's
    range here.)"""
    model, X = fitted
    pdp = IPDPEstimator(as_predictor(model), COLUMNS, ["x0", "x3"], smoothing="mean", warm_up=WARM_UP)
    traces, grids = pdp.explain_many(X, return_grids=True)
    assert traces.shape == (3000, 2, 10) and np.isnan(traces[WARM_UP - 1]).all()
    for f, (name, column) in enumerate((("x0", 0), ("x3", 3))):
        expected_grid = np.linspace(*np.quantile(X[:WARM_UP, column], [0.05, 0.95]), 10)
        assert np.array_equal(grids[WARM_UP:, f], np.broadcast_to(expected_grid, (3000 - WARM_UP, 10)))
        for t in (WARM_UP, WARM_UP + 1, 1234, 2999):   # after row t + 1 (0-based t)
            reference = _sklearn_pd(model, X[WARM_UP:t + 1], column, expected_grid)
            assert traces[t, f] == pytest.approx(reference, abs=1e-9), (name, t)
        assert np.ptp(_sklearn_pd(model, X[WARM_UP:], column, expected_grid)) > 3
    assert pdp.spreads["x3"] > pdp.spreads["x0"] > 0   # friedman1: 10 (x3 - .5) beats 10 sin(pi x0 x1)


@pytest.fixture(scope="module")
def linear():
    """y = 3 a + 2 b - c + noise, a least-squares fit: its PD curve in a feature is a line of slope
    that coefficient (the other features enter only through their weighted mean)."""
    from sklearn.linear_model import LinearRegression

    rng = np.random.default_rng(0)
    X = rng.normal(size=(1200, 3))
    y = X @ np.array([3.0, 2.0, -1.0]) + 0.5 * rng.normal(size=len(X))
    return LinearRegression().fit(X, y), X


@pytest.mark.parametrize("smoothing", ["exponential", "mean"])
def test_a_linear_models_curves_are_lines_of_its_slopes_after_every_row(linear, smoothing):
    """The trial: with the grid that followed the streaming quantiles, the curve of a in this setting
    had slope 3.35 at row 150 for a coefficient of 2.99, and its low end was 1.08 away from the PD
    there. Now after every row, each curve's slope between any two grid points is the coefficient
    (to rounding: rel 1e-9), and it is the weighted mean of the rows' predictions (closed form: the
    intercept, the coefficient times the grid value, the others' weighted means times theirs)."""
    model, X = linear
    warm_up, alpha = 20, 0.01
    pdp = IPDPEstimator(as_predictor(model), ["a", "b", "c"], ["a", "b"], smoothing=smoothing, alpha=alpha,
                        warm_up=warm_up)
    traces, grids = pdp.explain_many(X, return_grids=True)
    for t in range(warm_up, len(X)):
        rows = X[warm_up:t + 1]
        ages = np.arange(len(rows))[::-1]
        weights = (1 - alpha) ** ages if smoothing == "exponential" else np.ones(len(rows))
        means = np.average(rows, axis=0, weights=weights)
        for f in range(2):
            grid, curve = grids[t, f], traces[t, f]
            assert np.diff(curve) / np.diff(grid) == pytest.approx(np.full(9, model.coef_[f]), rel=1e-9), (t, f)
            others = model.intercept_ + means @ model.coef_ - means[f] * model.coef_[f]
            assert curve == pytest.approx(others + model.coef_[f] * grid, abs=1e-9), (t, f)


@needs_custom_grid
def test_a_linear_models_curves_are_sklearns_with_the_smoothings_weights(linear):
    """scikit-learn's brute-force partial_dependence at the printed grid on the rows after the
    warm-up, weighted (1 - alpha) ** age as the exponential smoothing weighs them: equal to rounding."""
    model, X = linear
    warm_up, alpha = 20, 0.01
    pdp = IPDPEstimator(as_predictor(model), ["a", "b", "c"], ["a", "b"], alpha=alpha, warm_up=warm_up)
    traces, grids = pdp.explain_many(X, return_grids=True)
    for t in (warm_up, 99, 149, 199, 449, 799, 1199):
        rows = X[warm_up:t + 1]
        weights = (1 - alpha) ** np.arange(len(rows))[::-1]
        for f in range(2):
            reference = partial_dependence(model, rows, [f], custom_values={f: grids[t, f]}, kind="average",
                                           method="brute", sample_weight=weights)["average"][0]
            assert traces[t, f] == pytest.approx(reference, abs=1e-9), (t, f)


def test_a_grid_from_quantiles_needs_a_warm_up():
    with pytest.raises(ValueError, match="warm-up of at least 2 rows"):
        IPDPEstimator(as_predictor(lambda B: B[:, 0]), ["a"], ["a"], warm_up=1)
    IPDPEstimator(as_predictor(lambda B: B[:, 0]), ["a"], ["a"], warm_up=0, grid={"a": [0.0, 1.0]})


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


def test_a_missing_value_of_a_curve_feature_is_left_out_of_the_grid_and_replaced_by_it(fitted):
    """As scikit-learn's partial_dependence: a NaN of the tracked feature is left out of the grid's
    quantiles, and the row's curve, which sets the feature to each grid value, is that of the row with
    any value there (it was refused as 'nan is not a finite number')."""
    import copy

    model, X = fitted
    explainer = IPDPEstimator(as_predictor(model), COLUMNS, ["x0"], warm_up=4, grid_size=3)
    rows = X[:6].copy()
    rows[1, 0] = np.nan
    explainer.explain_many(rows[:5])
    grid = explainer.curves["x0"][0]
    np.testing.assert_allclose(grid, np.linspace(*np.quantile(X[[0, 2, 3], 0], [0.05, 0.95]), 3), rtol=1e-15)
    other = copy.deepcopy(explainer)
    missing, given = rows[5:6].copy(), rows[5:6].copy()
    missing[0, 0], given[0, 0] = np.nan, 123.0
    np.testing.assert_array_equal(explainer.explain_many(missing), other.explain_many(given))
    assert np.isfinite(explainer.curves["x0"][1]).all()


@pytest.mark.parametrize("bad", [float("inf"), float("-inf")])
def test_a_non_finite_value_of_a_curve_feature_is_refused_and_changes_nothing(fitted, bad):
    """A curve's grid comes from quantiles of its feature: one inf would make the grid, and every
    curve on it, inf or NaN for good. It is refused, naming the row and the feature."""
    model, X = fitted
    explainer = IPDPEstimator(as_predictor(model), COLUMNS, ["x0"], warm_up=2)
    explainer.explain_many(X[:5])
    before = explainer.explain_many(X[5:6])[0].copy()
    rows = X[5:8].copy()
    rows[1, 0] = bad
    with pytest.raises(ValueError, match=r"^row 2, column 'x0': -?inf is not a finite number"):
        explainer.explain_many(rows)
    assert explainer.n_seen == 6
    np.testing.assert_array_equal(explainer.explain_many(X[6:7])[0].shape, before.shape)
    assert np.isfinite(explainer.explain_many(X[7:8])[0]).all()
    rows[1, 0], rows[1, 3] = X[6, 0], bad  # a non-curve column: the model decides what it makes of it
    explainer.explain_many(rows[:1])
