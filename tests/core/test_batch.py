"""Batch PFI (N / (N - 1) scaling, independent streams per group, n_jobs) and IntervalPFIEstimator."""

from __future__ import annotations

import itertools
from fractions import Fraction

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from ipfi_cli.core import IntervalPFIEstimator, batch_pfi
from ipfi_cli.models import FunctionPredictor


def _identity(block):
    return np.asarray(block[:, 0], dtype=np.float64)


def _exact_scaled_values(x: list[int]) -> dict[Fraction, Fraction]:
    """Every permutation's N/(N-1) * mean((x_pi - x)^2), with its probability (all N! equally likely)."""
    n = len(x)
    values: dict[Fraction, Fraction] = {}
    permutations = list(itertools.permutations(range(n)))
    for order in permutations:
        value = Fraction(n, n - 1) * Fraction(sum((x[o] - x[i]) ** 2 for i, o in enumerate(order)), n)
        values[value] = values.get(value, 0) + Fraction(1, len(permutations))
    return values


@pytest.mark.parametrize("x, exact_mean, n_repeats", [([0, 1], 1, 2000), ([0, 1, 2], 2, 6000)])
def test_n_over_n_minus_1_scaling_on_a_tiny_sample(x, exact_mean, n_repeats):
    """Model f(x) = x, target y = x, squared loss: a permutation's loss increase is
    mean((x_pi(n) - x_n)^2). Its expectation over uniform permutations, times N/(N-1), is
    the mean over rows of the mean squared gap to the *other* rows (N=2: 1; N=3: (1+4+1+1+4+1)/6 = 2).
    Unscaled it would be 1/2 and 4/3."""
    distribution = _exact_scaled_values(x)
    assert sum(v * p for v, p in distribution.items()) == exact_mean
    result = batch_pfi(FunctionPredictor(_identity), np.array(x, dtype=float)[:, None], [float(v) for v in x],
                       ["x"], loss="squared", n_repeats=n_repeats, seed=0)
    assert result.values.shape == (1, n_repeats) and result.baseline_loss == 0.0
    # every repeat is one permutation's exact value ...
    support = np.array(sorted(float(v) for v in distribution))
    nearest = support[np.abs(result.values[0][:, None] - support).argmin(axis=1)]
    np.testing.assert_allclose(result.values[0], nearest, rtol=0, atol=1e-12)
    # ... with the permutation's frequency (chi-square at 0.001)
    observed = np.array([np.sum(nearest == v) for v in support])
    expected = np.array([float(distribution[Fraction(v).limit_denominator(100)]) for v in support]) * n_repeats
    assert stats.chisquare(observed, expected).pvalue > 0.001
    # and the mean is the exact expectation. sd of one repeat: sqrt(E[v^2] - 4) = sqrt(2) for
    # N = 3 (1 for N = 2), so the mean's sd is 0.018; tolerance 4 sd.
    sd = np.sqrt(sum(float(v) ** 2 * float(p) for v, p in distribution.items()) - exact_mean ** 2)
    assert abs(result.mean[0] - exact_mean) <= 4 * sd / np.sqrt(n_repeats)


def test_batch_pfi_validation():
    with pytest.raises(ValueError, match="at least 2 rows"):
        batch_pfi(FunctionPredictor(_identity), np.array([[1.0]]), [1.0], ["x"], loss="squared")
    with pytest.raises(ValueError, match="n_repeats must be at least 1"):
        batch_pfi(FunctionPredictor(_identity), np.ones((3, 1)), [1.0] * 3, ["x"], loss="squared",
                  n_repeats=0)


def _weighted_sum(block):
    return (block[:, 0] + 2 * block[:, 1] - block[:, 2] > 1).astype(int)


def _data(n=2000, seed=0):
    rng = np.random.default_rng(seed)
    X = rng.random((n, 4))
    return X, _weighted_sum(X)


@pytest.mark.process  # joblib's worker processes
def test_n_jobs_gives_exactly_the_same_numbers():
    X, y = _data()
    serial = batch_pfi(FunctionPredictor(_weighted_sum), X, y, list("abcd"), n_repeats=5, seed=3)
    parallel = batch_pfi(FunctionPredictor(_weighted_sum), X, y, list("abcd"), n_repeats=5, seed=3, n_jobs=2)
    assert serial.names == parallel.names == list("abcd")
    assert np.array_equal(serial.values, parallel.values)
    assert serial.baseline_loss == parallel.baseline_loss == 0.0


def test_rows_as_array_frame_or_dicts_give_the_same_numbers():
    X, y = _data(500)
    columns = list("abcd")
    from_array = batch_pfi(FunctionPredictor(_weighted_sum), X, y, columns, n_repeats=3, seed=1)
    frame = pd.DataFrame(X, columns=columns)[["d", "b", "a", "c"]]        # other column order
    from_frame = batch_pfi(FunctionPredictor(_weighted_sum), frame, y, columns, n_repeats=3, seed=1)
    from_dicts = batch_pfi(FunctionPredictor(_weighted_sum), frame.to_dict("records"), list(y), columns,
                           n_repeats=3, seed=1)
    assert np.array_equal(from_array.values, from_frame.values)
    assert np.array_equal(from_array.values, from_dicts.values)
    other_seed = batch_pfi(FunctionPredictor(_weighted_sum), X, y, columns, n_repeats=3, seed=2)
    assert not np.array_equal(from_array.values, other_seed.values)
    assert from_array.values[3].tolist() == [0.0] * 3                    # d is unused


def _sum_of_copies(block):
    return (block[:, 0] + block[:, 1] > 1).astype(int)


def test_each_group_gets_its_own_permutation_stream():
    """a and a_copy are the same column and the model is symmetric in them, so their
    importances have the same distribution; drawn from one shared stream they would be
    identical repeat by repeat."""
    rng = np.random.default_rng(4)
    a = rng.random(2000)
    X = np.column_stack([a, a])
    y = _sum_of_copies(X)
    result = batch_pfi(FunctionPredictor(_sum_of_copies), X, y, ["a", "a_copy"], n_repeats=20, seed=5)
    first, second = result.values
    # the values lie on a grid of step ~1/2000 with sd ~0.01, so a few repeats may coincide by
    # chance (~1 in 70 each); one shared stream would make all 20 equal
    assert np.sum(first == second) <= 3, (first, second)
    # means: each repeat's sd is ~0.01 (result.std), the two means are independent, so their
    # difference has sd sqrt(2 / 20) * 0.01 ~ 0.003; tolerance 4 of those.
    tolerance = 4 * np.sqrt((np.square(result.std[0]) + np.square(result.std[1])) / 20)
    assert abs(result.mean[0] - result.mean[1]) <= tolerance
    assert 0.005 < tolerance < 0.03 and result.mean[0] > 0.2      # a real importance, a tight check
    assert result.std == pytest.approx(np.std(result.values, axis=1, ddof=1).tolist())
    assert result.n_repeats == 20 and result.n_rows == 2000


class _Switch:
    """A model that uses column a, until told to use column b."""

    def __init__(self):
        self.column = 0

    def __call__(self, block):
        return (block[:, self.column] > 0.5).astype(int)


def test_interval_pfi_windows_and_the_model_at_each_windows_end():
    switch = _Switch()
    interval = IntervalPFIEstimator(FunctionPredictor(switch), ["a", "b"], interval=50, n_repeats=4, seed=0)
    rng = np.random.default_rng(6)
    X = rng.random((175, 2))
    results = {}
    for t, row in enumerate(X, start=1):
        y = int(row[0] > 0.5) if t <= 50 else int(row[1] > 0.5)
        result = interval.update({"a": row[0], "b": row[1]}, y)
        if t == 50:
            switch.column = 1      # window 1 was computed with the first model, the next ones with this
        if result is not None:
            results[t] = result
    assert sorted(results) == [50, 100, 150]
    assert all(r.n_rows == 50 and r.names == ["a", "b"] and r.n_repeats == 4 for r in results.values())
    first, second = results[50].as_dict(), results[100].as_dict()
    # truth 0.5 for the used column, exactly 0.0 for the unused one. One window of 50 rows, 4
    # repeats: each repeat's sd is ~sqrt(0.25 / 50) = 0.07, their mean's 0.035; tolerance 0.2 (> 5 sd)
    assert first["b"] == 0.0 and abs(first["a"] - 0.5) < 0.2
    assert second["a"] == 0.0 and abs(second["b"] - 0.5) < 0.2
    assert results[50].baseline_loss == 0.0 and results[100].baseline_loss == 0.0
    rest = interval.flush()
    assert rest is not None and rest.n_rows == 25
    assert interval.flush() is None                     # nothing left
    interval.update({"a": 0.1, "b": 0.2}, 0)
    assert interval.flush() is None                     # one row is not enough for PFI


def test_interval_pfi_uses_a_new_seed_per_window_and_repeats_with_the_same_seed():
    rows = [{"a": float(v), "b": float(w)} for v, w in np.random.default_rng(7).random((40, 2))]
    targets = [int(r["a"] > 0.5) for r in rows]

    def run():
        interval = IntervalPFIEstimator(FunctionPredictor(_Switch()), ["a", "b"], interval=20, n_repeats=5, seed=1)
        return [r for r in (interval.update(x, y) for x, y in zip(rows + rows[:20], targets + targets[:20]))
                if r is not None]

    first, again = run(), run()
    assert [r.values.tolist() for r in first] == [r.values.tolist() for r in again]
    # windows 1 and 3 hold the same rows, yet are permuted differently
    assert not np.array_equal(first[0].values, first[2].values)


def test_interval_must_be_at_least_two():
    with pytest.raises(ValueError, match="at least 2"):
        IntervalPFIEstimator(FunctionPredictor(_identity), ["x"], interval=1)


def test_repeats_of_a_small_table_share_a_model_call_and_give_the_values_of_one_call_each():
    """Served models pay per request: a small table's repeats go in one call per group. The values
    are those of permuting and predicting one repeat at a time with the same random streams
    (computed here by hand: per group ``default_rng(SeedSequence(seed).spawn(groups)[g])``, one
    ``permutation`` per repeat)."""
    rng = np.random.default_rng(8)
    X = rng.normal(size=(300, 3))
    y = (X[:, 0] + 0.5 * X[:, 1] > 0).astype(int)

    def model(block):
        return (block[:, 0] + 0.5 * block[:, 1] > 0).astype(int)

    sizes = []
    counted = FunctionPredictor(lambda block: (sizes.append(len(block)), model(block))[1])
    result = batch_pfi(counted, X, y, ["a", "b", "c"], loss="zero-one", n_repeats=7, seed=3)
    assert sizes == [300] + [300 * 7] * 3  # the baseline, then one call per group
    streams = np.random.SeedSequence(3).spawn(3)
    baseline = (model(X) != y).astype(float)
    for g, stream in enumerate(streams):
        draws = np.random.default_rng(stream)
        expected = []
        for _ in range(7):
            permuted = X.copy()
            permuted[:, g] = X[draws.permutation(300), g]
            expected.append(300 / 299 * ((model(permuted) != y) - baseline).mean())
        assert result.values[g] == pytest.approx(expected, abs=1e-15)
