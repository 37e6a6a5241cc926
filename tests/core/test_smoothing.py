"""ExponentialMean against a direct weighted mean / variance at every step, and iPFI's use of it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ipfi_cli.core import ExponentialMean, IPFIEstimator, RunningMean
from ipfi_cli.models import FunctionPredictor


def _direct(values: np.ndarray, alpha: float) -> dict[str, np.ndarray | float]:
    """Weights alpha * (1 - alpha) ** age over the rows so far, normalised by their sum."""
    t = len(values)
    weights = alpha * (1 - alpha) ** np.arange(t - 1, -1, -1.0)
    total = weights.sum()
    mean = weights @ values / total
    variance = weights @ (values - mean) ** 2 / total
    n_eff = total ** 2 / (weights ** 2).sum()
    return {"mean": mean, "variance": variance, "weight": total, "n_eff": n_eff,
            "sum_sq_weights": (weights ** 2).sum()}


# Tolerance rtol 1e-9: the recursive (West) update and the direct sums agree to rounding; over
# 300 steps the accumulated relative error is ~1e-13 (values have an offset of 1000 to make a
# naive sum-of-squares formula lose digits, which a correct update must not).
@pytest.mark.parametrize("alpha", [1.0, 0.5, 0.1, 0.01, 0.001])
def test_matches_direct_weighted_mean_and_variance_at_every_step(alpha):
    rng = np.random.default_rng(42)
    values = 1000.0 + rng.normal(size=(300, 3)) * np.array([1.0, 0.01, 50.0])
    tracker = ExponentialMean(alpha, 3)
    assert np.isnan(tracker.mean).all() and tracker.count == 0 and tracker.effective_count == 0.0
    for t in range(1, len(values) + 1):
        returned = tracker.update(values[t - 1]).copy()
        direct = _direct(values[:t], alpha)
        np.testing.assert_allclose(returned, direct["mean"], rtol=1e-12)
        np.testing.assert_allclose(tracker.mean, direct["mean"], rtol=1e-12)
        assert tracker.count == t
        assert tracker.weight == pytest.approx(direct["weight"], rel=1e-12)
        assert tracker.sum_sq_weights == pytest.approx(direct["sum_sq_weights"], rel=1e-12)
        assert tracker.effective_count == pytest.approx(direct["n_eff"], rel=1e-12)
        if t == 1:
            assert np.isnan(tracker.variance).all() and np.isnan(tracker.standard_error()).all()
            continue
        np.testing.assert_allclose(tracker.variance, direct["variance"], rtol=1e-9, atol=1e-12)
        se = np.sqrt(direct["variance"] / direct["n_eff"])
        np.testing.assert_allclose(tracker.standard_error(), se, rtol=1e-9, atol=1e-12)
        np.testing.assert_allclose(tracker.confidence_bound(0.05), se / math.sqrt(0.05), rtol=1e-9, atol=1e-12)


def test_first_value_is_the_mean_and_effective_count_tends_to_2_over_alpha():
    tracker = ExponentialMean(0.01, 2)
    tracker.update(np.array([3.0, -1.0]))
    assert tracker.mean.tolist() == [3.0, -1.0]          # no pull towards a zero start
    for _ in range(5000):
        tracker.update(np.array([0.0, 0.0]))
    assert tracker.effective_count == pytest.approx(2 / 0.01 - 1, rel=1e-6)


def test_effective_count_when_the_squared_weights_underflow():
    # alpha ** 2 is 0 in floating point: every weight is alike, and n_eff is the count (it divided by 0)
    tracker = ExponentialMean(1e-200, 1)
    for v in (1.0, 2.0, 4.0):
        tracker.update(np.array([v]))
    assert tracker.sum_sq_weights == 0.0
    assert tracker.effective_count == 3.0
    assert tracker.mean.tolist() == pytest.approx([7 / 3], rel=1e-12)


@pytest.mark.parametrize("alpha", [0.0, -0.1, 1.5])
def test_rejects_bad_alpha(alpha):
    with pytest.raises(ValueError, match="alpha"):
        ExponentialMean(alpha, 1)


def test_rejects_bad_delta():
    tracker = ExponentialMean(0.5, 1)
    for v in (1.0, 2.0):
        tracker.update(np.array([v]))
    for delta in (0.0, 1.0):
        with pytest.raises(ValueError, match="delta"):
            tracker.confidence_bound(delta)


def _two_features(block):
    return (block[:, 0] + 0.3 * block[:, 1] > 0.6).astype(int)


@pytest.mark.parametrize("path", ["one", "many"])
def test_ipfi_estimate_is_weighted_average_of_its_contributions_at_every_step(path):
    """End to end: after each row, importances == direct weighted mean of the per-row
    contributions (mean over the M realisations), variances the weighted variance, bounds
    the Chebyshev half-width, mean_loss the plain mean of the unperturbed losses."""
    alpha, rng = 0.05, np.random.default_rng(3)
    X = rng.random((120, 2))
    y = (rng.random(120) < 0.8) * _two_features(X)          # some rows mislabelled: loss varies
    explainer = IPFIEstimator(FunctionPredictor(_two_features), ["a", "b"], alpha=alpha, n_repeats=4,
                               reservoir_size=7, seed=11)
    contributions, losses = [], []
    for t in range(len(X)):
        if path == "one":
            estimate = explainer.explain_one({"a": X[t, 0], "b": X[t, 1]}, y[t])
        else:
            estimate = explainer.explain_many(X[t:t + 1], y[t:t + 1])[0]
        if t == 0:
            assert np.isnan(estimate).all() and explainer.n_explained == 0
            continue
        assert explainer.last_contributions.shape == (4, 2)
        contributions.append(explainer.last_contributions.mean(axis=0))
        losses.append(explainer.last_loss)
        direct = _direct(np.array(contributions), alpha)
        np.testing.assert_allclose(estimate, direct["mean"], rtol=1e-12, atol=1e-15)
        assert explainer.n_explained == t and explainer.n_seen == t + 1
        assert explainer.mean_loss == pytest.approx(np.mean(losses), rel=1e-12)
        if t >= 2:
            np.testing.assert_allclose(list(explainer.variances.values()), direct["variance"],
                                       rtol=1e-9, atol=1e-15)
            half_width = np.sqrt(direct["variance"] / direct["n_eff"]) / math.sqrt(0.1)
            if direct["n_eff"] < 2.5:  # two rows' worth: no bound (ipfi_cli.core.bounds.MIN_BOUNDS_EFFECTIVE_COUNT)
                half_width = np.full_like(half_width, np.nan)
            np.testing.assert_allclose(list(explainer.bounds(0.1).values()), half_width,
                                       rtol=1e-9, atol=1e-15)
    assert explainer.importances["a"] > 0.1               # a non-trivial stream


def test_a_tracker_pickled_before_it_had_a_history_still_updates():
    """Explainers are pickled (Dask, checkpoints); one pickled by an earlier ipfi has no ``history``."""
    import pickle

    from ipfi_cli.core.smoothing import ExponentialMean

    tracker = ExponentialMean(0.5, 2)
    tracker.update(np.array([1.0, 2.0]))
    del tracker.__dict__["history"]  # as an earlier version pickled it
    old = pickle.loads(pickle.dumps(tracker))
    np.testing.assert_allclose(old.update(np.array([3.0, 4.0])), [(0.5 * 1 + 3) / 1.5, (0.5 * 2 + 4) / 1.5])


def test_the_mean_is_the_decayed_sum_over_the_decayed_weight_to_the_bit():
    """Issue 41: ``S_t = alpha x_t + (1 - alpha) S_{t-1}``, ``W_t = alpha + (1 - alpha) W_{t-1}``, mean
    ``S_t / W_t``, computed here in Python floats (the bias-corrected update of before gave 7/3 one ulp
    low for the first case); any split of the rows into update_many calls gives these bits."""
    rng = np.random.default_rng(41)
    for alpha, values in [(0.5, np.array([[1.0], [3.0]])), (0.01, rng.normal(size=(300, 2))),
                          (0.3, rng.normal(size=(50, 3)) * 1e3)]:
        decay = 1.0 - alpha
        expected = []
        total, weight = [0.0] * values.shape[1], 0.0
        for row in values.tolist():
            total = [alpha * x + decay * s for x, s in zip(row, total)]
            weight = alpha + decay * weight
            expected.append([s / weight for s in total])
        for cuts in ([0, len(values)], [0, 1, len(values) // 2, len(values)]):
            tracker = ExponentialMean(alpha, values.shape[1])
            got = np.concatenate([tracker.update_many(values[a:b]) for a, b in zip(cuts, cuts[1:])])
            assert got.tolist() == expected
    assert [ExponentialMean(0.5, 1).update_many(np.array([[1.0], [3.0]]))[-1, 0]] == [7 / 3]


def test_running_mean_is_the_running_sum_over_the_count_to_the_bit():
    values = np.random.default_rng(3).normal(size=(200, 2))
    expected, total = [], [0.0, 0.0]
    for count, row in enumerate(values.tolist(), start=1):
        total = [x + s for x, s in zip(row, total)]
        expected.append([s / count for s in total])
    tracker = RunningMean(2)
    got = np.concatenate([tracker.update_many(values[:7]), [tracker.update(v).copy() for v in values[7:9]],
                          tracker.update_many(values[9:])])
    assert got.tolist() == expected


def test_a_state_saved_before_the_decayed_sum_continues_from_mean_times_weight():
    values = np.random.default_rng(5).normal(size=(40, 2))
    saved = ExponentialMean(0.1, 2)
    saved.update_many(values[:20])
    state = saved.state_dict()
    del state["sum"]   # as an earlier ipfi saved it
    loaded = ExponentialMean(0.1, 2)
    loaded.load_state_dict(state)
    np.testing.assert_allclose(loaded.update_many(values[20:]), saved.update_many(values[20:]), rtol=1e-13)


@pytest.mark.parametrize("shape", [(63,), (63, 7), (1, 3), (0, 4)])
def test_the_short_loop_and_lfilter_give_the_same_bits(shape):
    """Under LOOP_ROWS rows the recursion is a loop (no scipy.signal import for short runs); its
    numbers are lfilter's to the bit, on values of every magnitude (fixed seed)."""
    from scipy.signal import lfilter

    from ipfi_cli.core import smoothing

    rng = np.random.default_rng(41)
    inputs = rng.standard_normal(shape) * 10.0 ** rng.integers(-12, 12, size=shape)
    start = rng.standard_normal(shape[1:]) if len(shape) > 1 else 0.37
    for decay in (0.999, 0.5, 1.0, 1e-3):
        looped = smoothing._recursion(decay, inputs, start)
        initial = np.asarray(decay * np.asarray(start, dtype=np.float64)).reshape(1, *shape[1:])
        filtered, _ = lfilter([1.0], [1.0, -decay], inputs, axis=0, zi=initial)
        assert looped.shape == filtered.shape
        assert np.array_equal(looped.view(np.uint64), np.asarray(filtered, dtype=np.float64).view(np.uint64))
