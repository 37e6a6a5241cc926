"""Conditional removal: the samplers against closed forms, and the feature-removal stream of
Muschalik et al. (ESANN 2023) with a Hoeffding adaptive tree learning as it goes."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.core.removal import GaussianSampler, TreeSampler
from ipfi_cli.core.sage import ISAGEEstimator
from ipfi_cli.models import FunctionPredictor, as_predictor

COLUMNS = ["x0", "x1", "x2", "x3"]


def _removal_stream(seed: int) -> tuple[np.ndarray, np.ndarray]:
    """4 Gaussian features: 10,000 rows of perfectly correlated copies (covariance all 5), then
    10,000 independent standard normal rows; the label is 1[x0 > 0]."""
    rng = np.random.default_rng(seed)
    copies = rng.normal(size=10000) * np.sqrt(5)
    X = np.vstack([np.repeat(copies[:, None], 4, axis=1), rng.normal(size=(10000, 4))])
    return X, (X[:, 0] > 0).astype(int)


@pytest.mark.slow
def test_feature_removal_stream_marginal_against_conditional():
    """The authors' committed run (unseeded data): marginal iPFI of x0 0.407 and conditional
    0.010 at row 10,000; 0.518 and 0.494 at row 20,000.

    With perfectly correlated copies the tree may split on any copy: river's tie-break picks the
    last one (x3, river 0.26), where theirs picked x0 and a little of the others. So the
    correlated phase is checked on *the copy the model uses* (largest marginal value): marginal
    0.4-0.6 (a coin flip's accuracy drop is 0.5), every conditional value below 0.03 (the
    sampler's R^2 is 1: the others replace any copy); after decorrelation x0 alone decides the
    label: both near 0.5 (within 0.07) and the other features within 0.03 of 0.
    Tolerances: alpha = 0.001 averages ~2,000 rows; a contribution is 0/1 with p ~0.5, so the
    sd of an estimate is ~0.011 (M = 1), the reservoir's shared rows add up to ~1.5x: 0.07 is
    over 4 sd; the conditional values of unused features are exactly 0 per row or nearly.
    """
    from river import tree

    X, y = _removal_stream(0)
    model = tree.HoeffdingAdaptiveTreeClassifier(leaf_prediction="nba", seed=42)
    predictor = as_predictor(model)
    explainers = {
        "marginal": IPFIEstimator(predictor, COLUMNS, alpha=0.001, n_repeats=1, seed=1),
        "gaussian": IPFIEstimator(predictor, COLUMNS, alpha=0.001, n_repeats=1, seed=1, removal="conditional"),
    }
    at: dict[int, dict[str, np.ndarray]] = {}
    for t in range(20000):
        x = dict(zip(COLUMNS, X[t].tolist()))
        for explainer in explainers.values():
            explainer.explain_one(x, int(y[t]))
        model.learn_one(x, int(y[t]))
        if t + 1 in (10000, 20000):
            at[t + 1] = {name: e.importance_array() for name, e in explainers.items()}
            if t + 1 == 10000:
                fit_correlated = {name: e.removal_fit for name, e in explainers.items()}
    used = int(np.argmax(at[10000]["marginal"]))
    assert 0.4 <= at[10000]["marginal"][used] <= 0.6, at[10000]
    assert np.all(np.abs(at[10000]["gaussian"]) < 0.03), at[10000]["gaussian"]
    assert min(fit_correlated["gaussian"].values()) > 0.99, fit_correlated["gaussian"]
    for name in ("marginal", "gaussian"):
        assert at[20000][name][0] == pytest.approx(0.5, abs=0.07), (name, at[20000][name])
        assert np.all(np.abs(at[20000][name][1:]) < 0.03), (name, at[20000][name])
    # independent features: the samplers say the others no longer tell a feature (R^2 ~ 0)
    assert max(abs(v) for v in explainers["gaussian"].removal_fit.values()) < 0.1


def test_copies_are_replaceable_for_the_tree_sampler_and_share_conditional_sage():
    """The correlated phase with a fixed model using x0 only: marginal PFI of x0 is 0.5 (a coin
    flip), conditional 0 with either sampler (each copy determines x0); conditional SAGE shares
    the explained loss 0.5 evenly, 0.125 per copy, while marginal SAGE gives it all to x0.
    Tolerances as in the stream test: 0.06 for 0.5 (M = 2, ~1,500 rows effective), 0.03 for 0;
    0.04 for the SAGE shares (they are differences of two 0/1 losses, sd ~0.012 here)."""
    X, y = _removal_stream(5)
    X, y = X[:3000], y[:3000]
    model = FunctionPredictor(lambda B: (B[:, 0] > 0).astype(int))
    options = {"alpha": 0.001, "n_repeats": 2, "seed": 6, "smoothing": "mean"}
    marginal = IPFIEstimator(model, COLUMNS, **options).explain_many(X, y)[-1]
    tree = IPFIEstimator(model, COLUMNS, removal="conditional", conditional_sampler="tree", **options)
    conditional = tree.explain_many(X, y)[-1]
    assert marginal[0] == pytest.approx(0.5, abs=0.06) and np.all(marginal[1:] == 0.0)
    assert np.all(np.abs(conditional) < 0.03), conditional
    assert min(tree.removal_fit.values()) > 0.99
    sage = ISAGEEstimator(model, COLUMNS, removal="conditional", **options)
    shares = sage.explain_many(X, y)[-1]
    assert sage.explained_loss == pytest.approx(0.5, abs=0.03)
    assert np.all(np.abs(shares - 0.125) < 0.04), shares
    marginal_sage = ISAGEEstimator(model, COLUMNS, **options).explain_many(X, y)[-1]
    assert marginal_sage[0] == pytest.approx(0.5, abs=0.06) and np.all(np.abs(marginal_sage[1:]) < 0.03)


def test_gaussian_sampler_draws_the_conditional_distribution():
    """Standard bivariate normal with correlation rho: x0 | x1 ~ N(rho x1, 1 - rho^2), R^2 = rho^2."""
    rho = 0.8
    rng = np.random.default_rng(0)
    sampler = GaussianSampler(2, smoothing="mean")
    for _ in range(20000):
        a = rng.normal()
        sampler.learn(np.array([a, rho * a + np.sqrt(1 - rho ** 2) * rng.normal()]))
    draws = sampler.draw_groups(rng, np.array([0.0, 1.5]), [np.array([0])], 20000)[:, 0]
    # Tolerances: the fitted moments from 20,000 rows are off by ~0.01; the mean of 20,000 draws
    # has sd 0.004, their variance sd 0.004.
    assert draws.mean() == pytest.approx(rho * 1.5, abs=0.03)
    assert draws.var() == pytest.approx(1 - rho ** 2, abs=0.03)
    assert sampler.fit == pytest.approx([rho ** 2, rho ** 2], abs=0.02)
    # a coalition: x1 given nothing (every column absent) is the marginal N(0, 1)
    rows = sampler.draw_absent(rng, np.array([5.0, 5.0]), np.array([[True, True]]), 20000)[0]
    assert rows.mean(axis=0) == pytest.approx([0.0, 0.0], abs=0.05)
    assert np.corrcoef(rows.T)[0, 1] == pytest.approx(rho, abs=0.02)


def test_tree_sampler_follows_a_dependence_the_gaussian_cannot():
    """x1 = x0^2 + noise: uncorrelated with x0, so the Gaussian sampler's R^2 for x1 is ~0; the
    tree's is high. Measured with 5,000 rows: tree 0.93, Gaussian 0.00."""
    rng = np.random.default_rng(1)
    gaussian, tree = GaussianSampler(2, smoothing="mean"), TreeSampler(2, smoothing="mean", seed=2)
    for _ in range(5000):
        a = rng.normal()
        row = np.array([a, a * a + 0.1 * rng.normal()])
        gaussian.learn(row)
        tree.learn(row)
    assert tree.fit[1] > 0.8
    assert abs(gaussian.fit[1]) < 0.05
    draws = tree.draw_groups(rng, np.array([2.0, 0.0]), [np.array([1])], 2000)[:, 0]
    assert np.median(draws) == pytest.approx(4.0, abs=0.6)


def test_conditional_batched_path_gives_the_bytes_of_row_by_row():
    rng = np.random.default_rng(3)
    a = rng.normal(size=400)
    X = np.column_stack([a, a + 0.3 * rng.normal(size=400), rng.normal(size=400)])
    y = X[:, 0] + X[:, 2]
    model = FunctionPredictor(lambda B: B[:, 0] + B[:, 2])
    for cls, extra in ((IPFIEstimator, {"n_repeats": 3}), (ISAGEEstimator, {"n_repeats": 2, "n_inner": 2})):
        one = cls(model, ["a", "b", "c"], loss="squared", removal="conditional", seed=4, **extra)
        many = cls(model, ["a", "b", "c"], loss="squared", removal="conditional", seed=4, **extra)
        first = np.array([one.explain_one(dict(zip("abc", r)), t) for r, t in zip(X.tolist(), y.tolist())])
        second = np.vstack([many.explain_many(X[:150], y[:150]), many.explain_many(X[150:], y[150:])])
        assert first.tobytes() == second.tobytes(), cls


def test_conditional_removal_names_a_non_numeric_value():
    explainer = IPFIEstimator(FunctionPredictor(lambda r: 1.0, vectorized=False), ["a", "b"], loss="absolute",
                               removal="conditional", seed=0)
    with pytest.raises(ValueError, match="needs numbers, got 'red'") as caught:
        explainer.explain_one({"a": 1.0, "b": "red"}, 1.0)
    assert caught.value.column == "b"  # a RowError: the row's, named with its column
    explainer.explain_one({"a": 1.0, "b": 2.0}, 1.0)
    state = explainer.state_dict()
    with pytest.raises(ValueError, match="missing value") as caught:  # a NaN learned would make every draw NaN
        explainer.explain_one({"a": float("nan"), "b": 2.0}, 1.0)
    assert caught.value.column == "a"
    assert repr(explainer.state_dict()) == repr(state)  # nothing of the refused row was kept
    with pytest.raises(ValueError, match="unknown removal"):
        IPFIEstimator(FunctionPredictor(lambda B: B[:, 0]), ["a"], removal="conditionally")
