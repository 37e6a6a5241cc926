"""The micro-batch path (array operations per model call) equals the row-by-row definition bit for bit.

Expected values come from the row-by-row calls (``Reservoir.draw`` then ``insert``,
``ExponentialMean.update``, ``IPFIEstimator.explain_one``), which are the definition; the
batched code shares none of their arithmetic.
"""

from __future__ import annotations

import copy

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator
from ipfi_cli.core.samplers import GeometricReservoir, UniformReservoir, bounded_integers, make_sampler
from ipfi_cli.core.smoothing import ExponentialMean
from ipfi_cli.models import FunctionPredictor


def test_bounded_integers_are_numpys_integers_from_the_same_state():
    highs = np.array([1, 2, 3, 100, 1, 7, 2**31 + 5, 2**32, 10_000, 1, 1])
    for seed in range(50):
        ours, numpys = np.random.default_rng(seed), np.random.default_rng(seed)
        numpys.integers(0, 5)   # leave half a 64-bit word in the generator's buffer
        ours.integers(0, 5)
        drawn = bounded_integers(ours, highs)
        expected = [int(numpys.integers(0, h)) for h in highs]
        if drawn is None:   # numpy would reject a word (likely only for 2**31 + 5: 50 %)
            continue
        assert drawn.tolist() == expected
        assert ours.bit_generator.state == numpys.bit_generator.state


def test_bounded_integers_says_when_numpy_would_reject_a_word():
    # 2**32 mod 3e9 = 1.29e9: about 30 % of words are rejected, so among 20 draws one is
    results = [bounded_integers(np.random.default_rng(seed), np.full(20, 3_000_000_000)) for seed in range(5)]
    assert any(r is None for r in results)


def _stepwise(sampler, rng, rows, n_draws, draw_index, column):
    realisation = draw_index // n_draws
    out = []
    for row in rows:
        slots = sampler.draw(rng, n_draws).reshape(-1)[draw_index]
        out.append(sampler.rows[realisation, slots, column])
        sampler.insert(rng, row)
    return np.array(out)


def _compare(sampling, size, n_real, n_columns, n_rows, first, *, n_seen=None, dtype=np.float64, seed=0):
    data = np.random.default_rng(seed + 1000).random((first + n_rows, n_columns))
    data = data.astype(dtype) if dtype is not object else np.array(data.tolist(), dtype=object)
    n_draws = n_columns
    draw_index = np.arange(n_real * n_draws)
    column = np.tile(np.arange(n_columns), n_real)
    a = make_sampler(sampling, size, n_real, n_columns, dtype)
    rng_a = np.random.default_rng(seed)
    for row in data[:first]:
        a.insert(rng_a, row)
    if n_seen is not None:
        a.n_seen = n_seen
    b, rng_b = copy.deepcopy(a), copy.deepcopy(rng_a)
    expected = _stepwise(a, rng_a, data[first:], n_draws, draw_index, column)
    got = b.draw_insert_many(rng_b, data[first:], n_draws, draw_index, column)
    assert np.array_equal(got, expected)
    assert np.array_equal(b.rows, a.rows)
    assert (b.filled, b.n_seen) == (a.filled, a.n_seen)
    assert rng_b.bit_generator.state == rng_a.bit_generator.state


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
@pytest.mark.parametrize("size, first, n_rows", [(1, 1, 30), (3, 1, 30), (10, 1, 6), (10, 4, 40),
                                                 (10, 25, 200), (100, 1, 500)])
def test_draw_insert_many_is_draw_then_insert_row_by_row(sampling, size, first, n_rows):
    """From the first stored row (draws from one slot take no random number) through the
    filling of the reservoir to full reservoirs, where each insertion draws its slot."""
    for seed in range(3):
        _compare(sampling, size, n_real=4, n_columns=3, n_rows=n_rows, first=first, seed=seed)


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
@pytest.mark.parametrize("size, first, n_rows", [(1, 1, 20), (3, 1, 30), (10, 4, 40), (10, 25, 60)])
def test_integers_drawn_with_draw_bounds_are_draw_then_insert_row_by_row(sampling, size, first, n_rows):
    """A caller that draws other random numbers between rows draws each row's integers with
    ``rng.integers(0, draw_bounds[t])``: the same numbers, slots and reservoirs."""
    n_real, n_columns, n_draws = 3, 2, 4
    data = np.random.default_rng(size).random((first + n_rows, n_columns))
    a = make_sampler(sampling, size, n_real, n_columns, np.float64)
    rng_a = np.random.default_rng(first)
    for row in data[:first]:
        a.insert(rng_a, row)
    b, rng_b = copy.deepcopy(a), copy.deepcopy(rng_a)
    expected = []
    for row in data[first:]:
        rng_a.random()   # another draw between rows
        expected.append(a.rows[np.arange(n_real)[:, None], a.draw(rng_a, n_draws)].reshape(-1, n_columns))
        a.insert(rng_a, row)
    bounds = b.draw_bounds(n_rows, n_draws)
    drawn = []
    for high in bounds:
        rng_b.random()
        drawn.append(rng_b.integers(0, high))
    table, sources = b.draw_insert_drawn(data[first:], np.array(drawn), n_draws)
    assert np.array_equal(table[sources], np.array(expected))
    assert np.array_equal(b.rows, a.rows)
    assert (b.filled, b.n_seen) == (a.filled, a.n_seen)
    assert rng_b.bit_generator.state == rng_a.bit_generator.state


@pytest.mark.parametrize("sampling, size, first, n_seen", [("geometric", 1, 1, None), ("geometric", 10, 4, None),
                                                         ("uniform", 10, 25, None), ("uniform", 5, 5, 3_000_000_000),
                                                         ("uniform", 5, 5, 2**32 + 7)])
def test_draw_integers_is_one_integers_call_per_row_with_draw_bounds(sampling, size, first, n_seen):
    """One request for all rows where numpy takes one 32-bit word per integer; one call per row
    where it would reject a word (uniform reservoirs after ~3e9 rows) or takes 64-bit words."""
    n_real, n_draws, n_rows = 3, 4, 40
    a = make_sampler(sampling, size, n_real, 2, np.float64)
    rng_a = np.random.default_rng(first)
    for row in np.random.default_rng(size).random((first, 2)):
        a.insert(rng_a, row)
    if n_seen is not None:
        a.n_seen = n_seen
    rng_b = copy.deepcopy(rng_a)
    for _ in range(3):  # one request after another
        expected = [rng_a.integers(0, high).tolist() for high in a.draw_bounds(n_rows, n_draws)]
        assert a.draw_integers(rng_b, n_rows, n_draws).tolist() == expected
        assert rng_b.bit_generator.state == rng_a.bit_generator.state


def test_draw_insert_many_keeps_object_rows():
    _compare("geometric", 5, n_real=2, n_columns=2, n_rows=30, first=2, dtype=object)


def test_draw_insert_many_takes_numpys_slow_path_where_numpy_rejects_or_leaves_32_bits():
    """A uniform reservoir after ~3e9 rows draws its replacement slot below n_seen + 1, where
    numpy rejects ~30 % of words; beyond 2**32 rows numpy draws 64-bit words."""
    for seed in range(3):
        _compare("uniform", 5, n_real=3, n_columns=2, n_rows=40, first=5, n_seen=3_000_000_000, seed=seed)
    _compare("uniform", 5, n_real=3, n_columns=2, n_rows=10, first=5, n_seen=2**32 + 7)


def test_samplers_by_name_are_the_classes():
    assert isinstance(make_sampler("geometric", 2, 1, 1), GeometricReservoir)
    assert isinstance(make_sampler("uniform", 2, 1, 1), UniformReservoir)


@pytest.mark.parametrize("n", [1, 9, 40])
@pytest.mark.parametrize("alpha", [0.001, 0.3, 1.0])
def test_update_many_is_update_row_by_row_to_the_last_bit(n, alpha):
    values = np.random.default_rng(n).normal(size=(300, n)) * np.logspace(-3, 3, n)
    one, many = ExponentialMean(alpha, n), ExponentialMean(alpha, n)
    expected = np.array([one.update(v).copy() for v in values])
    got = np.concatenate([many.update_many(values[:1]), many.update_many(values[1:120]),
                          many.update_many(values[120:120]), many.update_many(values[120:])])
    assert np.array_equal(got, expected)
    assert np.array_equal(many.variance, one.variance)
    assert (many.weight, many.sum_sq_weights, many.count) == (one.weight, one.sum_sq_weights, one.count)


def _rule(block):
    return (block[:, 0] + 0.5 * block[:, 1] - 0.2 * block[:, 2] > 0.6).astype(int)


@pytest.mark.parametrize("options", [
    {"columns": ["a"], "n_repeats": 10},                       # one group: numpy sums 10 values pairwise
    {"columns": ["a", "b", "c"], "n_repeats": 9, "sampling": "uniform", "reservoir_size": 7},
    {"columns": ["a", "b", "c", "d"], "n_repeats": 3, "groups": {"ab": ["a", "b"]}, "features": ["c"]},
])
def test_explain_many_is_explain_one_with_contributions(options):
    options = dict(options)
    columns = options.pop("columns")
    settings = {"loss": "zero-one", "alpha": 0.05, "reservoir_size": 15, "seed": 3, **options}

    def rule(block):
        return _rule(np.pad(block, ((0, 0), (0, 3)))[:, :3])

    rng = np.random.default_rng(5)
    X = rng.random((260, len(columns)))
    y = (rng.random(260) < 0.5).astype(int).tolist()
    one = IPFIEstimator(FunctionPredictor(rule), columns, **settings)
    expected, contributions, losses = [], [], []
    for row, label in zip(X, y):
        expected.append(one.explain_one(dict(zip(columns, row.tolist())), label))
        contributions.append(one.last_contribution if one.n_explained else np.full(len(one.names), np.nan))
        losses.append(one.last_loss if one.n_explained else np.nan)
    many = IPFIEstimator(FunctionPredictor(rule), columns, **settings)
    many.max_block_cells = 40 * many.block_rows * len(columns)   # several model calls per micro-batch
    parts = [many.explain_many([dict(zip(columns, r.tolist())) for r in X[i:i + 100]], y[i:i + 100],
                               return_contributions=True) for i in range(0, 260, 100)]
    assert np.array_equal(np.concatenate([p[0] for p in parts]), np.array(expected), equal_nan=True)
    assert np.array_equal(np.concatenate([p[1] for p in parts]), np.array(contributions), equal_nan=True)
    assert np.array_equal(np.concatenate([p[2] for p in parts]), np.array(losses), equal_nan=True)
    assert np.array_equal(many.last_contributions, one.last_contributions)
    assert (many.mean_loss, many.n_seen, many.n_explained) == (one.mean_loss, one.n_seen, one.n_explained)
    assert np.array_equal(many.bound_array(), one.bound_array(), equal_nan=True)


@pytest.mark.parametrize("loss, make_target, wrap", [
    ("zero-one", lambda b: int(b), np.int64),                  # int labels against int predictions
    ("absolute", lambda b: float(b) * 1.5 - 0.25, np.float64),  # float targets against float predictions
])
def test_targets_compared_in_bulk_give_the_numbers_of_python_objects(loss, make_target, wrap):
    """Python int/float targets are compared as int64/float64 arrays; numpy scalars (another
    type) take the object path: both give the same numbers."""
    rng = np.random.default_rng(2)
    X = rng.random((150, 3))
    y = [make_target(b) for b in rng.random(150) < 0.5]

    def model(block):
        labels = _rule(block)
        return labels if loss == "zero-one" else labels * 1.5 - 0.25 + block[:, 2]

    def explain(targets):
        explainer = IPFIEstimator(FunctionPredictor(model), ["a", "b", "c"], loss=loss, alpha=0.05, seed=4)
        return explainer.explain_many(X, targets)

    plain, objects = explain(y), explain([wrap(v) for v in y])
    assert np.array_equal(plain, objects, equal_nan=True)
    assert not np.isnan(plain[1:]).any()



@pytest.mark.parametrize("path", ["array", "objects", "records"])
def test_model_calls_and_rows_predicted_are_counted_on_every_path(path):
    """``n_model_calls``/``n_predictions`` (ipfi_model_calls_total, ipfi_model_predictions_total)
    equal the calls and rows the predictor received: on the array path (numbers), the batched
    path (a text column: object rows) and row by row (a predictor that takes records)."""
    def rule(block):
        return (np.asarray(block[:, 0], dtype=float) > 0.5).astype(int)

    predictor = FunctionPredictor(rule if path != "records" else lambda r: int(r["a"] > 0.5),
                                  vectorized=path != "records")
    received = {"calls": 0, "rows": 0}
    for method in ("predict_block", "predict_records"):
        original = getattr(predictor, method)

        def counted(rows, *args, _original=original):
            received["calls"] += 1
            received["rows"] += len(rows)
            return _original(rows, *args)

        setattr(predictor, method, counted)
    rng = np.random.default_rng(7)
    X = rng.random((90, 3))
    y = (rng.random(90) < 0.5).astype(int).tolist()
    explainer = IPFIEstimator(predictor, ["a", "b", "c"], loss="zero-one", n_repeats=2, seed=1)
    explainer.max_block_cells = 20 * explainer.block_rows * 3   # several calls per micro-batch
    if path == "array":
        explainer.explain_many(X, y)
    else:
        explainer.explain_many([{"a": a, "b": b, "c": "xy"[c > 0.5]} for a, b, c in X.tolist()], y)
    assert (explainer.n_model_calls, explainer.n_predictions) == (received["calls"], received["rows"])
    assert received["rows"] == 89 * (1 + 2 * 3)   # the first row only fills the reservoir
    assert received["calls"] == (89 if path == "records" else 5)   # 89 rows: one per call, or 20 per call
