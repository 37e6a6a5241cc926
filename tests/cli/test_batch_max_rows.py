"""``ipfi batch --max-rows``: memory bounded by a uniform sample of the rows, announced, reproducible."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.run.dataset import RowSample

from .conftest import parse_csv


def test_within_the_limit_the_numbers_are_those_of_an_unlimited_run(run, agrawal_small, hgb):
    common = ["batch", agrawal_small, "-m", hgb, "-t", "class", "--seed", "3", "-M", "2", "-q"]
    unlimited = run(*common)
    exact = run(*common, "--max-rows", "300")
    assert unlimited.exit_code == 0 and exact.exit_code == 0, exact.stderr
    assert exact.stdout == unlimited.stdout
    assert "sample" not in exact.stderr


def test_a_larger_input_is_sampled_with_a_note_and_the_same_seed_gives_the_same_bytes(run, agrawal_small, hgb):
    common = ["batch", agrawal_small, "-m", hgb, "-t", "class", "-M", "2", "--max-rows", "120"]
    first = run(*common, "--seed", "3")
    again = run(*common, "--seed", "3")
    other = run(*common, "--seed", "4")
    assert first.exit_code == 0, first.stderr
    assert first.stdout == again.stdout and first.stdout != other.stdout
    assert {record["n_rows"] for record in parse_csv(first.stdout)} == {"120"}
    assert "uniform sample of 120 of the 300 good rows" in " ".join(first.stderr.split())


@pytest.mark.parametrize("limit", [2, 5])
def test_every_row_is_kept_with_probability_limit_over_n(limit):
    """Algorithm R's law: over 4,000 seeds each of 20 rows is kept limit/20 of the time.

    Chi-square goodness of fit on the 20 inclusion counts; they sum to seeds x limit, which makes
    the statistic's mean n - limit, so it is scaled by (n-1)/(n-limit) to compare with chi2(n-1).
    p > 0.001 fails by chance once in a thousand runs; the seeds are fixed.
    """
    from scipy.stats import chi2

    n, seeds = 20, 4000
    counts = np.zeros(n)
    for seed in range(seeds):
        sample = RowSample(limit, seed)
        sample.extend(list(range(n)))
        kept = sample.rows()
        assert kept == sorted(kept) and len(kept) == limit
        counts[kept] += 1
    expected = seeds * limit / n
    statistic = ((counts - expected) ** 2 / expected).sum() * (n - 1) / (n - limit)
    assert chi2.sf(statistic, n - 1) > 0.001, (counts, statistic)


def test_a_limit_below_two_rows_is_refused():
    with pytest.raises(ValueError, match="at least 2"):
        RowSample(1, 0)


def test_compare_samples_its_static_rows_alike_and_streams_every_row_with_learn(run, agrawal_small, hgb,
                                                                                  drift_small, hoeffding):
    common = ["compare", agrawal_small, "-m", hgb, "-t", "class", "-M", "2", "--seed", "3", "--sampling", "uniform"]
    unlimited, sampled = run(*common), run(*common, "--max-rows", "150")
    assert unlimited.exit_code == 0 and sampled.exit_code == 0, sampled.stderr
    assert "uniform sample of 150 of the 300 good rows" in " ".join(sampled.stderr.split())
    assert "uniform sample" not in unlimited.stderr and sampled.stdout != unlimited.stdout
    learning = run("compare", drift_small, "-m", hoeffding, "-t", "class", "--learn", "--interval", "100",
                   "--seed", "3", "--max-rows", "150")
    assert learning.exit_code == 0 and "uniform sample" not in learning.stderr, learning.stderr
