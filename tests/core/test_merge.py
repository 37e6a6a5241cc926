"""Smoothing that merges (forward decay, running mean) and the merge of iPFI states.

Exact where the maths is exact: the merged smoothing of shards equals the smoothing of the whole
up to floating-point rounding (relative 1e-12). Approximate where reservoirs are involved: the
merged estimate of shards explained separately is compared with the whole stream's estimate and
the truth within a stated statistical tolerance.
"""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import plain_state
from ipfi_cli.core.decay import LANDMARK_STEP, DecayedMean, event_time, merge_reservoir_rows, parse_duration
from ipfi_cli.core.mergeable import MergeablePFI, merge_states
from ipfi_cli.models import FunctionPredictor


def stream(n=2000, d=3, seed=0, span=10_000.0):
    rng = np.random.default_rng(seed)
    times = np.sort(rng.uniform(0, span, n))
    values = rng.normal(size=(n, d)) + np.sin(times / 500.0)[:, None]
    return times, values


def smooth(times, values, half_life, order=None):
    tracker = DecayedMean(values.shape[1], half_life=half_life)
    for i in (range(len(times)) if order is None else order):
        tracker.update(values[i], times[i])
    return tracker


def close(a, b, rel=1e-12):
    return np.allclose(a, b, rtol=rel, atol=rel)


@pytest.mark.parametrize("half_life", [None, 300.0, 1.0])  # 1.0: 10,000 half-lives, the landmark moves
@pytest.mark.parametrize("n_shards, how", [(2, "key"), (4, "key"), (2, "time"), (4, "time")])
def test_shards_merge_into_the_whole(half_life, n_shards, how):
    times, values = stream()
    whole = smooth(times, values, half_life)
    rng = np.random.default_rng(1)
    shard_of = rng.integers(0, n_shards, len(times)) if how == "key" else \
        np.minimum((times / times.max() * n_shards).astype(int), n_shards - 1)
    shards = [smooth(times[shard_of == k], values[shard_of == k], half_life) for k in range(n_shards)]
    merged = shards[0]
    for shard in shards[1:]:
        merged = merged.merged(shard)
    assert merged.count == whole.count == len(times)
    assert close(merged.mean, whole.mean) and close(merged.variance, whole.variance)
    assert close(merged.effective_count, whole.effective_count)
    if half_life == 1.0:
        assert whole.landmark >= LANDMARK_STEP * 19  # it moved 19 times over 10,000 half-lives


def test_forward_decay_is_the_decayed_mean_and_ignores_arrival_order():
    times, values = stream(n=300, span=3000.0)
    h = 400.0
    weights = 2.0 ** (-(times.max() - times) / h)  # the decay by age, computed directly
    expected = (weights[:, None] * values).sum(axis=0) / weights.sum()
    tracker = smooth(times, values, h)
    assert close(tracker.mean, expected, 1e-10)
    shuffled = smooth(times, values, h, order=np.random.default_rng(2).permutation(len(times)))
    assert close(shuffled.mean, expected, 1e-10)
    running = smooth(times, values, None)
    assert close(running.mean, values.mean(axis=0)) and close(running.variance, values.var(axis=0))


def test_state_round_trip_and_refusals():
    times, values = stream(n=50)
    tracker = smooth(times, values, 60.0)
    back = DecayedMean(3, half_life=60.0)
    back.load_state_dict(plain_state.loads(plain_state.dumps(tracker.state_dict())))
    assert np.array_equal(back.mean, tracker.mean) and back.landmark == tracker.landmark
    with pytest.raises(ValueError, match="half-life"):
        tracker.merged(DecayedMean(3, half_life=30.0))
    with pytest.raises(ValueError, match="event time"):
        DecayedMean(1, half_life=1.0).update(np.zeros(1), None)


def test_durations_and_times():
    assert parse_duration("2h") == 7200.0 and parse_duration("45") == 45.0
    with pytest.raises(ValueError, match="not a duration"):
        parse_duration("soon")
    assert event_time("2024-01-01T00:00:00Z") == event_time("2024-01-01 00:00:00") == 1704067200.0


def test_seconds_as_text_are_seconds_and_milliseconds_are_refused():
    """In a column of ISO text, a value in seconds was "not a time"; epoch milliseconds passed as
    seconds (the year 55,000), so every row weighed alike."""
    assert event_time("1704067200") == event_time(" 1704067200.0 ") == event_time("2024-01-01 00:00:00")
    with pytest.raises(ValueError, match="after the year 9999 .* milliseconds"):
        event_time(1704067200000)
    with pytest.raises(ValueError, match="after the year 9999"):
        event_time("1704067200000")
    assert event_time(253402300799) == event_time("9999-12-31T23:59:59Z")  # the last second there is


def test_reservoir_merge_takes_each_shard_in_proportion_to_its_rows():
    """Shard A saw 300 rows (all 0), shard B 100 (all 1); a merged reservoir of 100 is a uniform
    sample of the 400: a quarter of 1s. Over 200 realisations the share's standard error is
    sqrt(0.25 * 0.75 / 400 * 300/399 / 200 * ...) < 0.004; the tolerance 0.02 is 5 of them."""
    m, size = 200, 100
    a, b = np.zeros((m, size, 1)), np.ones((m, size, 1))
    rows, filled = merge_reservoir_rows(a, size, 300, b, size, 100, np.random.default_rng(0))
    assert filled == size and abs(rows.mean() - 0.25) < 0.02
    partial, filled = merge_reservoir_rows(a, 30, 30, b, 40, 40, np.random.default_rng(0))
    assert filled == 70 and partial[:, :70].sum() == 40 * m  # not full yet: every row of both


def agrawal_explainers(agrawal_stream, agrawal_rule, agrawal_columns, n_shards, seed=0):
    X, y = agrawal_stream(6000, 7)
    model = FunctionPredictor(agrawal_rule)
    options = {"loss": "zero-one", "n_repeats": 3, "sampling": "uniform", "reservoir_size": 200}
    whole = MergeablePFI(model, agrawal_columns, seed=seed, **options)
    whole.explain_many(X, y)
    shard_of = np.random.default_rng(5).integers(0, n_shards, len(y))  # by hash of a key: same distribution
    shards = []
    for k in range(n_shards):
        part = MergeablePFI(model, agrawal_columns, seed=seed + 1 + k, **options)
        part.explain_many(X[shard_of == k], y[shard_of == k])
        shards.append(part)
    return model, options, whole, shards, X, y


@pytest.mark.parametrize("n_shards", [2, 4])
def test_merged_ipfi_equals_the_whole_within_the_estimates_error(agrawal_stream, agrawal_rule, agrawal_columns,
                                                                 n_shards):
    """Static model, uniform sampling, running mean: the shards' and the whole's estimates are
    unbiased for the same PFI. Each is a mean over ~6,000 rows of contributions with standard
    deviation <= 0.5 (zero-one loss, averaged over 3 repeats): standard error <= 0.0065, so two
    estimates differ by more than 0.04 (~4.3 standard errors of the difference) with probability
    < 1e-4. Salary and age carry the importance (about 0.3 each); the rest is 0."""
    model, options, whole, shards, _, _ = agrawal_explainers(agrawal_stream, agrawal_rule, agrawal_columns, n_shards)
    merged_state = merge_states([s.state_dict() for s in shards], seed=11)
    merged = MergeablePFI(model, agrawal_columns, seed=11, **options)
    merged.load_state_dict(plain_state.loads(plain_state.dumps(merged_state)))
    assert merged.n_explained == sum(s.n_explained for s in shards) == whole.n_explained - (n_shards - 1)
    assert merged.mean_loss == 0.0
    gap = np.abs(merged.importance_array() - whole.importance_array())
    assert gap.max() < 0.04, dict(zip(whole.names, gap.round(4)))
    top = [whole.names[i] for i in np.argsort(-merged.importance_array())[:2]]
    assert sorted(top) == ["age", "salary"]
    # the merged explainer goes on: 10 more rows
    X, y = agrawal_stream(6010, 7)
    merged.explain_many(X[6000:], y[6000:])
    assert merged.n_explained == whole.n_explained - (n_shards - 1) + 10


def test_merge_refuses_other_settings_and_row_count_smoothing(agrawal_stream, agrawal_rule, agrawal_columns):
    from ipfi_cli.core import IPFIEstimator

    model, options, whole, shards, _, _ = agrawal_explainers(agrawal_stream, agrawal_rule, agrawal_columns, 2)
    other = MergeablePFI(model, agrawal_columns, seed=0, **{**options, "n_repeats": 2})
    with pytest.raises(ValueError, match=r"state 2 has other settings than state 1 \(n_repeats: 2 vs 3\)"):
        merge_states([shards[0].state_dict(), other.state_dict()])
    counting = IPFIEstimator(model, agrawal_columns, seed=0, **options)
    with pytest.raises(ValueError, match="not of a mergeable explainer"):
        merge_states([shards[0].state_dict(), counting.state_dict()])


def _numeric_stream(n=240, seed=3):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 3))
    y = (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int)
    times = np.sort(rng.uniform(0, 5000.0, n))
    return X, y, times


def _mergeable(half_life, seed=5):
    model = FunctionPredictor(lambda X: (X[:, 0] + 0.3 * X[:, 1] > 0).astype(int))
    return MergeablePFI(model, ["a", "b", "c"], n_repeats=4, reservoir_size=20, seed=seed, half_life=half_life,
                        time_column="t" if half_life is not None else None)


@pytest.mark.parametrize("half_life", [None, 600.0])
def test_the_array_path_of_a_mergeable_explainer_is_its_row_by_row_path(half_life):
    """Micro-batches of numbers take the array path (its reservoir draws), whose smoothing for
    forward decay and the running mean is folded row by row: the numbers of ``explain_one``
    exactly (expected from ``explain_one``, which shares no arithmetic with the array folding)."""
    X, y, times = _numeric_stream()
    rows = [{"a": float(r[0]), "b": float(r[1]), "c": float(r[2]), "t": float(t)} for r, t in zip(X, times)]
    one = _mergeable(half_life)
    expected = np.array([one.explain_one(row, int(label)) for row, label in zip(rows, y)])
    many = _mergeable(half_life)
    got = np.concatenate([many.explain_many(rows[i:i + 50], y[i:i + 50].tolist()) for i in range(0, len(rows), 50)])
    assert np.array_equal(got, expected, equal_nan=True)
    assert many.state_dict()["tracker"]["count"] == one.state_dict()["tracker"]["count"] == len(rows) - 1


@pytest.mark.parametrize("half_life", [None, 600.0])
def test_a_state_saved_between_micro_batches_continues_bit_for_bit(half_life):
    """The plain-data state (reservoir slots and counts, the generator with its buffered half
    word, the smoother) taken after array-path micro-batches and decoded from bytes continues
    exactly as the uninterrupted explainer (expected: the uninterrupted run)."""
    X, y, times = _numeric_stream(n=300)
    rows = [{"a": float(r[0]), "b": float(r[1]), "c": float(r[2]), "t": float(t)} for r, t in zip(X, times)]
    whole = _mergeable(half_life)
    expected = np.concatenate([whole.explain_many(rows[i:i + 37], y[i:i + 37].tolist()) for i in range(0, 300, 37)])
    first = _mergeable(half_life)
    head = [first.explain_many(rows[i:i + 37], y[i:i + 37].tolist()) for i in range(0, 148, 37)]
    second = _mergeable(half_life)
    second.load_state_dict(plain_state.loads(plain_state.dumps(first.state_dict())))
    tail = [second.explain_many(rows[i:i + 37], y[i:i + 37].tolist()) for i in range(148, 300, 37)]
    assert np.array_equal(np.concatenate(head + tail), expected, equal_nan=True)
    assert np.array_equal(second.bound_array(), whole.bound_array(), equal_nan=True)


def test_realisations_bounds_are_refused():
    """The realisations' bounds follow the exponential smoothing by rows, which a mergeable explainer
    replaces: refused when asked, rather than bounds from means that never move."""
    model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
    with pytest.raises(ValueError, match="exponential smoothing by rows"):
        MergeablePFI(model, ["a", "b"], half_life=60.0, bounds_method="realisations")
    assert MergeablePFI(model, ["a", "b"], half_life=60.0, bounds_method="normal").bounds_method == "normal"


def _timed_shard(times, value, half_life=10.0, seed=1, n_repeats=20, size=50):
    """A uniform-sampling shard whose rows all hold ``value`` in column ``a``, at ``times``."""
    model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
    shard = MergeablePFI(model, ["a", "b"], n_repeats=n_repeats, reservoir_size=size, seed=seed,
                         half_life=half_life, sampling="uniform")
    rows = np.column_stack([np.full(len(times), float(value)), np.zeros(len(times))])
    shard.explain_many(rows, [0] * len(times), times=list(map(float, times)))
    return shard


def test_uniform_reservoirs_merge_by_the_rows_seen_whatever_their_times():
    """Uniform sampling keeps a row of long ago as likely as a recent one, so one run's reservoir
    holds each shard's rows in proportion to their number. The merge shared them by decayed weight:
    shard A (300 rows spread over [0, 1000], all a = 0) against shard B (300 rows, two at the start and
    the rest in [900, 1000], all a = 1), half-life 10: B's decayed weight is ~90 % of the total, and the
    merged reservoir held ~90 % of B's rows instead of 50 %. The share of B over 20 realisations of 50
    slots (hypergeometric, 50 of 600): standard error ~0.016; the tolerance 0.08 is 5 of them."""
    a = _timed_shard(np.linspace(0.0, 1000.0, 300), 0.0, seed=1)
    b = _timed_shard(np.concatenate([[0.0, 1.0], np.linspace(900.0, 1000.0, 298)]), 1.0, seed=2)
    merged = merge_states([a.state_dict(), b.state_dict()], seed=3)
    rows = np.asarray(merged["sampler"]["rows"], dtype=np.float64)
    assert merged["sampler"]["filled"] == 50 and merged["sampler"]["n_seen"] == 600
    assert abs(rows[:, :, 0].mean() - 0.5) < 0.08, rows[:, :, 0].mean()


def test_shards_split_by_time_are_refused_and_shards_split_at_random_are_not():
    """Shard k of a stream split by time explained its rows with a reservoir of its own rows only,
    never the earlier shards': no merge gives one run's estimate, so it is refused (a usage error
    naming the shard). Shards by a random key are not: 200 random splits of 2,000 timed rows into
    2 to 6 shards (a false refusal has a chance under 1 in 1,000 per shard)."""
    from ipfi_cli.core.mergeable import SplitByTime, check_not_split_by_time
    from ipfi_cli.errors import UsageError

    times, values = stream(n=2000)
    for n_shards in (2, 4):
        shard_of = np.minimum((np.arange(len(times)) * n_shards) // len(times), n_shards - 1)
        trackers = [smooth(times[shard_of == k], values[shard_of == k], 300.0).state_dict() for k in range(n_shards)]
        with pytest.raises(SplitByTime, match=r"^state 2: its first explained row is of 1970-01-01 .* after about "
                                              r"1,00[01] rows|^state 2: .* after about 50[01] rows") as caught:
            check_not_split_by_time(trackers)
        assert isinstance(caught.value, UsageError) and caught.value.index == 1
        # the same shards latest first: the first state given that began after others' rows is named
        with pytest.raises(SplitByTime) as caught:
            check_not_split_by_time(trackers[::-1])
        assert caught.value.index == 0
    rng = np.random.default_rng(11)
    for trial in range(200):
        n_shards = 2 + trial % 5
        shard_of = rng.integers(0, n_shards, len(times))
        trackers = [smooth(times[shard_of == k], values[shard_of == k], 300.0).state_dict() for k in range(n_shards)]
        check_not_split_by_time(trackers)


@pytest.mark.parametrize("n", [1, 4])
@pytest.mark.parametrize("half_life", [None, 3.0, 0.01])  # 0.01: the landmark moves inside micro-batches
def test_decayed_mean_folds_a_micro_batch_to_the_bits_of_row_by_row_at_any_split(n, half_life):
    """update_many over any grouping of the rows into calls, and across a state saved and loaded between
    two (a resume), gives update's means and state row by row, to the bit (expected: update row by row).
    Values of three magnitudes, times a little out of order."""
    rng = np.random.default_rng(11)
    T = 700
    values = rng.normal(size=(T, n)) * rng.choice([1e-3, 1.0, 1e3], size=(T, 1))
    times = np.cumsum(rng.exponential(1.0, size=T))
    times[rng.random(T) < 0.05] -= 2.0
    given = times.tolist() if half_life is not None else [None] * T
    one = DecayedMean(n, half_life=half_life)
    with np.errstate(over="ignore"):
        expected = np.array([one.update(v, t).copy() for v, t in zip(values, given)])
    if half_life == 0.01:
        assert one.landmark > LANDMARK_STEP * half_life  # moved, more than once
    fields = ("mean", "_sum_sq_dev", "weight", "sum_sq_weights", "count", "landmark", "first_time", "last_time")
    for cuts in ([T], [1, T - 1], [63, 64, 65, 508], [5] * 140, [300, 1, 399]):
        many, got, begin = DecayedMean(n, half_life=half_life), [], 0
        for size in cuts:
            with np.errstate(over="ignore"):
                got.append(many.update_many(values[begin:begin + size], given[begin:begin + size]))
            begin += size
            if begin == 301:  # a resume: the state as plain data, into a new tracker
                resumed = DecayedMean(n, half_life=half_life)
                resumed.load_state_dict(plain_state.loads(plain_state.dumps(many.state_dict())))
                many = resumed
        assert np.concatenate(got).tobytes() == expected.tobytes(), cuts
        for name in fields:
            assert np.asarray(getattr(many, name)).tobytes() == np.asarray(getattr(one, name)).tobytes(), (cuts, name)
    with pytest.raises(ValueError, match="event time"):
        DecayedMean(n, half_life=1.0).update_many(values[:3], [0.0, None, 2.0])


@pytest.mark.parametrize("half_life", [None, 600.0])
def test_a_mergeable_explainer_folds_micro_batches_of_numbers_as_arrays(monkeypatch, half_life):
    """Micro-batches of numbers are drawn (prepare_numeric) and smoothed (update_many) as arrays, not row
    by row, with the numbers of explain_one (expected: explain_one, row by row) at any micro-batch size."""
    X, y, times = _numeric_stream()
    rows = [{"a": float(r[0]), "b": float(r[1]), "c": float(r[2]), "t": float(t)} for r, t in zip(X, times)]
    one = _mergeable(half_life)
    expected = np.array([one.explain_one(row, int(label)) for row, label in zip(rows, y)])
    expected_bounds = one.bound_array(0.1)

    def no_row(*args, **kwargs):
        raise AssertionError("a row folded on its own")

    monkeypatch.setattr(DecayedMean, "update", no_row)
    for size in (1, 50, 240):
        many = _mergeable(half_life)
        got = []
        for i in range(0, len(X), size):
            extra = {"times": times[i:i + size].tolist()} if half_life is not None else {}
            got.append(many.explain_many(X[i:i + size], y[i:i + size].tolist(), **extra))
        assert np.concatenate(got).tobytes() == expected.tobytes(), size
        assert many.bound_array(0.1).tobytes() == expected_bounds.tobytes()


def test_merged_reservoir_slots_not_filled_are_zeros():
    """Two shards that filled 30 and 40 of 100 slots: the merged reservoir's last 30 slots hold
    zeros, not the allocator's leftovers (they are saved with the merged state)."""
    np.full((50, 100, 1), 1.5)  # freed at once: memory the next array of this size may reuse
    a, b = np.full((50, 100, 1), 2.0), np.full((50, 100, 1), 3.0)
    rows, filled = merge_reservoir_rows(a, 30, 30, b, 40, 40, np.random.default_rng(0))
    assert filled == 70 and not rows[:, 70:].any()


def test_a_stream_of_thousands_of_half_lives_keeps_its_effective_count():
    """A minute's half-life and a row a second for 9 hours (540 half-lives; the squared weights
    overflowed at 512 and every bound was NaN from then on, exit 0). Rows evenly spaced make the
    weights a geometric series of ratio r = 2 ** (-1/60): Kish's effective count tends to
    (1 + r) / (1 - r) (sum r^k squared over sum r^2k), ~173.6; after thousands of rows the
    remainder is below 1e-12 of it (tolerance 1e-9: the float sums' rounding over 32,400 rows)."""
    tracker = DecayedMean(1, half_life=60.0)
    times = np.arange(9 * 3600, dtype=float)
    values = np.random.default_rng(0).normal(size=(len(times), 1))
    counts = []
    for begin in range(0, len(times), 500):
        tracker.update_many(values[begin:begin + 500], times[begin:begin + 500].tolist())
        counts.append(tracker.effective_count)
    r = 2.0 ** (-1 / 60)
    assert np.isfinite(counts).all() and np.isfinite(tracker.confidence_bound(0.05)).all()
    assert abs(counts[-1] - (1 + r) / (1 - r)) < 1e-9 * (1 + r) / (1 - r)
    assert tracker.landmark >= 9 * 3600 - LANDMARK_STEP * 60  # it moved on with the stream
