"""The running mean (``smoothing="mean"``): every row weighs alike, so for a static model iPFI
converges to batch PFI, and its bounds come from the running variance."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator, batch_pfi
from ipfi_cli.core.smoothing import RunningMean
from ipfi_cli.models import FunctionPredictor


def test_running_mean_is_the_plain_mean_and_variance():
    values = np.random.default_rng(0).normal(1000.0, 3.0, size=(500, 2))
    mean = RunningMean(2)
    for v in values:
        mean.update(v)
    # rtol 1e-9: Welford's update against numpy's two-pass sums (offset 1000 to punish a naive formula)
    assert mean.mean == pytest.approx(values.mean(axis=0), rel=1e-12)
    assert mean.variance == pytest.approx(values.var(axis=0), rel=1e-9)
    assert mean.standard_error() == pytest.approx(values.std(axis=0) / np.sqrt(500), rel=1e-9)
    assert mean.effective_count == 500


def test_ipfi_with_the_running_mean_matches_batch_pfi_after_20000_rows(agrawal_stream, agrawal_rule,
                                                                       agrawal_columns):
    """Agrawal function 1 with its own rule as the model (see test_agrawal_oracle.py).

    Tolerance 0.01: with every row weighing 1/20,000 the running mean's sd is ~0.0022 (per-row
    contribution variance ~0.1 with M = 10; shared reservoir rows add up to ~1.4x), batch PFI's
    (10 shuffles of the same rows) ~0.0011: 0.01 is over 3.5 combined sd. (The exponential mean
    at alpha = 0.001 keeps only ~2,000 rows' worth, sd ~0.006: it could not promise 0.01.)
    """
    X, y = agrawal_stream(20000, 3)
    features = ["salary", "age"]
    batch = batch_pfi(FunctionPredictor(agrawal_rule), X, y, agrawal_columns, n_repeats=10, features=features,
                      seed=4).as_dict()
    running = IPFIEstimator(FunctionPredictor(agrawal_rule), agrawal_columns, n_repeats=10, sampling="uniform",
                             features=features, smoothing="mean", seed=5)
    final = dict(zip(running.names, running.explain_many(X, y)[-1]))
    for name in features:
        assert abs(final[name] - batch[name]) < 0.01, (name, final[name], batch[name])
    bounds = running.bounds(0.05)
    assert all(0 < b < 0.02 for b in bounds.values()), bounds   # Chebyshev, 1/sqrt(0.05) = 4.5 se
    assert running.n_explained == 19999


@pytest.mark.parametrize("n", [1, 5, 40])   # 40: more series than update_many loops over one by one
def test_update_many_is_update_row_by_row_to_the_last_bit(n):
    values = np.random.default_rng(n).normal(size=(200, n)) * np.logspace(-3, 3, n)
    one, many = RunningMean(n), RunningMean(n)
    expected = np.array([one.update(v).copy() for v in values])
    got = np.concatenate([many.update_many(values[:1]), many.update_many(values[1:90]),
                          many.update_many(values[90:90]), many.update_many(values[90:])])
    assert got.tobytes() == expected.tobytes()
    assert many.variance.tobytes() == one.variance.tobytes()
    assert many.count == one.count
