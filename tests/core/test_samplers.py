"""Reservoir distributions, checked with chi-square tests at significance 0.001 (fixed seeds).

Each sampler keeps ``n_realisations`` independent reservoirs, so one sampler with
R = 20,000 realisations gives 20,000 independent replicates of one reservoir.
Rows are their own ids (one float column), so a stored or drawn value names its row.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from ipfi_cli.core import GeometricReservoir, IPFIEstimator, UniformReservoir, make_sampler
from ipfi_cli.models import FunctionPredictor

R = 20_000
SIGNIFICANCE = 0.001


def _filled(cls, size: int, n_rows: int, seed: int):
    rng = np.random.default_rng(seed)
    sampler = cls(size=size, n_realisations=R, n_columns=1, dtype=np.float64)
    for row_id in range(n_rows):
        sampler.insert(rng, np.array([float(row_id)]))
    return sampler, rng


def _drawn_ids(sampler, rng) -> np.ndarray:
    slots = sampler.draw(rng, 1)[:, 0]
    return sampler.rows[np.arange(R), slots, 0].astype(int)


def _pearson_p(observed: np.ndarray, expected: np.ndarray) -> float:
    assert expected.min() >= 5 and observed.sum() == pytest.approx(expected.sum())
    return float(stats.chisquare(observed, expected).pvalue)


def test_uniform_inclusion_probability_is_size_over_t():
    size, t = 10, 50
    sampler, _ = _filled(UniformReservoir, size, t, seed=0)
    ids = sampler.rows[:, :, 0].astype(int)
    assert sampler.filled == size and sampler.n_seen == t
    assert all(len(set(r)) == size for r in ids[:200])     # a reservoir holds distinct rows
    counts = np.bincount(ids.ravel(), minlength=t)          # realisations holding each row
    p = size / t
    # Inclusion indicators of a uniform size-L subset of t rows have variance p(1-p) and
    # covariance -p(1-p)/(t-1), so sum (c_i - Rp)^2 / (R p (1-p) t/(t-1)) ~ chi2(t - 1).
    statistic = np.sum((counts - R * p) ** 2) / (R * p * (1 - p) * t / (t - 1))
    assert stats.chi2.sf(statistic, t - 1) > SIGNIFICANCE, counts
    # and the oldest and newest rows are kept alike (a per-row binomial check, 4.5 sd)
    for row in (0, size - 1, size, t - 1):
        assert abs(counts[row] - R * p) < 4.5 * np.sqrt(R * p * (1 - p)), (row, counts[row])


def test_uniform_draw_probability_is_one_over_t():
    t = 50
    sampler, rng = _filled(UniformReservoir, 10, t, seed=1)
    drawn = np.bincount(_drawn_ids(sampler, rng), minlength=t)   # multinomial(R, 1/t) if right
    assert _pearson_p(drawn, np.full(t, R / t)) > SIGNIFICANCE


def _geometric_expected(size: int, s: int) -> np.ndarray:
    """Expected counts of the drawn row's age k = s - 1 - r (rows r >= size, entered after the
    reservoir filled: p (1 - p)^k), then one pooled bin for the rows of the initial fill."""
    p = 1 / size
    ages = np.arange(s - size)
    probabilities = np.append(p * (1 - p) ** ages, (1 - p) ** (s - size))
    assert probabilities.sum() == pytest.approx(1.0)
    return R * probabilities


def _age_counts(ids: np.ndarray, size: int, s: int) -> np.ndarray:
    late = ids[ids >= size]
    return np.append(np.bincount(s - 1 - late, minlength=s - size), np.sum(ids < size))


def test_geometric_draw_probability_decays_with_age():
    size, s = 10, 60      # 60 rows stored, the draw for row 60; expected counts >= 11.5 per bin
    sampler, rng = _filled(GeometricReservoir, size, s, seed=2)
    observed = _age_counts(_drawn_ids(sampler, rng), size, s)
    assert _pearson_p(observed, _geometric_expected(size, s)) > SIGNIFICANCE


def test_geometric_formula_rejects_a_uniform_reservoir():
    """The same test has power: a uniform reservoir's draws (1/t per row) fail it."""
    size, s = 10, 60
    sampler, rng = _filled(UniformReservoir, size, s, seed=2)
    observed = _age_counts(_drawn_ids(sampler, rng), size, s)
    assert _pearson_p(observed, _geometric_expected(size, s)) < 1e-12


def test_draw_is_uniform_over_filled_slots_before_the_reservoir_is_full():
    sampler, rng = _filled(GeometricReservoir, 10, 4, seed=3)
    drawn = np.bincount(_drawn_ids(sampler, rng), minlength=4)
    assert drawn.size == 4 and _pearson_p(drawn, np.full(4, R / 4)) > SIGNIFICANCE


def test_sampler_validation():
    with pytest.raises(ValueError, match="at least 1"):
        UniformReservoir(size=0)
    with pytest.raises(ValueError, match="at least 1"):
        GeometricReservoir(size=5, n_realisations=0)
    with pytest.raises(ValueError, match="empty"):
        UniformReservoir(size=5).draw(np.random.default_rng(0), 1)
    with pytest.raises(ValueError, match="unknown sampling"):
        make_sampler("reservoir", 5, 1, 1)
    assert isinstance(make_sampler("geometric", 5, 2, 3), GeometricReservoir)


class _Recorder:
    """A model (of a block, or of one record) that keeps every row it is asked to predict."""

    def __init__(self):
        self.rows = []

    def __call__(self, data):
        if isinstance(data, dict):
            self.rows.append([data["id"], data["shadow"]])
            return 0.0
        self.rows.extend(np.asarray(data, dtype=np.float64).tolist())
        return np.zeros(len(data))


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
@pytest.mark.parametrize("path", ["one", "many", "records"])
def test_a_row_is_never_drawn_at_its_own_step(sampling, path):
    """Every replacement value comes from a strictly earlier row (draw happens before insert)."""
    n_rows, n_repeats, columns = 60, 5, ["id", "shadow"]
    recorder = _Recorder()
    model = FunctionPredictor(recorder, vectorized=path != "records")
    explainer = IPFIEstimator(model, columns, loss="absolute", n_repeats=n_repeats, sampling=sampling,
                               reservoir_size=3, seed=4)
    rows = np.column_stack([np.arange(n_rows), np.arange(n_rows) + 0.5]).astype(float)
    if path == "many":
        explainer.explain_many(rows, np.zeros(n_rows))
    else:
        for row in rows:
            explainer.explain_one({"id": row[0], "shadow": row[1]}, 0.0)
    block_rows = 1 + n_repeats * len(columns)
    blocks = np.array(recorder.rows).reshape(n_rows - 1, block_rows, 2)  # row 0: no block
    drawn_latest = 0
    for step, block in enumerate(blocks, start=1):
        assert block[0].tolist() == [step, step + 0.5]                # the unperturbed row
        perturbed = block[1:].reshape(n_repeats, len(columns), 2)     # (realisation, group, column)
        for g in range(len(columns)):
            replaced = perturbed[:, g, g]
            assert np.all(replaced < step), (step, replaced)         # strictly earlier rows
            assert np.all(perturbed[:, g, 1 - g] == block[0, 1 - g])  # the other column untouched
        drawn_latest += np.sum(perturbed[:, 0, 0] == step - 1)
    assert drawn_latest > 0      # the previous row is eligible (so the check above is not vacuous)


def test_storage_turns_to_objects_when_a_string_arrives():
    """A batch model's numeric reservoir is converted when a non-number arrives mid-stream."""
    seen = []

    def model(block):
        seen.append(block)
        return np.zeros(len(block))

    explainer = IPFIEstimator(FunctionPredictor(model), ["a", "b"], loss="absolute", n_repeats=2, seed=0)
    explainer.explain_one({"a": 1.0, "b": 2.0}, 0.0)
    explainer.explain_one({"a": 3.0, "b": 4.0}, 0.0)
    assert seen[-1].dtype == np.float64
    explainer.explain_one({"a": 5.0, "b": "x"}, 0.0)
    assert seen[-1].dtype == object and seen[-1][0].tolist() == [5.0, "x"]
    explainer.explain_one({"a": 6.0, "b": 7.0}, 0.0)
    assert seen[-1].dtype == object
    assert set(seen[-1][2::2, 1].tolist()) <= {2.0, 4.0, "x"}       # rows with b replaced: earlier values


def _reuse_memory_of(shape):
    """Leave a freed block of the allocator's holding 1.5s where the next array of ``shape`` may land."""
    np.full(shape, 1.5)  # freed at once: malloc hands the same chunk to the next request of its size


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
def test_slots_not_filled_are_zeros_not_leftover_memory(sampling):
    """The reservoirs are saved whole with the state: a slot not filled yet must hold zeros (the
    same bytes for the same seed, and nothing of the process's memory), whatever the allocator
    hands over."""
    shape = (10, 100, 9)
    _reuse_memory_of(shape)
    sampler = make_sampler(sampling, size=100, n_realisations=10, n_columns=9, dtype=np.float64)
    rng = np.random.default_rng(0)
    for row in np.arange(27.0).reshape(3, 9):
        sampler.insert(rng, row)
    rows = sampler.state_dict()["rows"]
    assert sampler.filled == 3
    assert not rows[:, 3:].any()
    assert rows[:, :3].tolist() == [np.arange(27.0).reshape(3, 9).tolist()] * 10
