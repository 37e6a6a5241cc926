"""The rows' influences (ipfi_cli.core.influence) against a brute-force sum over a logged stream.

The model logs every block it is given; each column's values are distinct across the
stream, so every perturbed cell names the row it was drawn from. From the log the test
rebuilds each row's influence, as explained row and as donor, per realisation and
feature, and the cross-realisation variance, with none of the tracker's bookkeeping.
"""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator
from ipfi_cli.models import FunctionPredictor

COLUMNS = ["a", "b", "c"]


class LoggedModel:
    def __init__(self) -> None:
        self.blocks: list[np.ndarray] = []

    def __call__(self, block: np.ndarray) -> np.ndarray:
        self.blocks.append(block.copy())
        return 2.0 * block[:, 0] - block[:, 1] ** 2 + 0.5 * block[:, 0] * block[:, 2]


def brute_force(X: np.ndarray, y: np.ndarray, blocks: np.ndarray, alpha: float, n_repeats: int,
                estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """sum_s a_s / (M (M - 1) W^2) with a_s = sum_{m != m'} U_s^m U_s^m', and (sum_s a_s)^2 / sum_s a_s^2,
    from the logged blocks (one per explained row)."""
    n_rows, n_features = X.shape
    where = {(j, float(v)): t for t in range(n_rows) for j, v in enumerate(X[t])}
    influence = np.zeros((n_rows, n_repeats, n_features))
    weight, total = 0.0, 0.0
    predict = LoggedModel()
    for k, block in enumerate(blocks):
        t = k + 1                                        # the first row is only stored
        weight = 1.0 if k == 0 else weight / (1.0 - alpha)
        total += weight
        losses = (predict(block) - y[t]) ** 2
        contributions = (losses[1:] - losses[0]).reshape(n_repeats, n_features)
        centred = weight * (contributions - estimate)
        influence[t] += centred                          # as the explained row
        for m in range(n_repeats):
            for g in range(n_features):
                donor = where[(g, float(block[1 + m * n_features + g, g]))]
                influence[donor, m, g] += centred[m, g]  # as the donor
    influence, total = influence / weight, total / weight       # scaled to the newest row (no overflow)
    products = influence.sum(axis=1) ** 2 - (influence ** 2).sum(axis=1)     # a_s, shape (rows, features)
    variance = np.maximum(products.sum(axis=0), 0.0) / (n_repeats * (n_repeats - 1)) / total ** 2
    return variance, products.sum(axis=0) ** 2 / (products ** 2).sum(axis=0)


def stream(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n_rows, len(COLUMNS)))
    return X, 2.0 * X[:, 0] - X[:, 1] ** 2 + rng.normal(scale=0.3, size=n_rows)


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
@pytest.mark.parametrize("path", ["one", "many"])
@pytest.mark.parametrize("alpha", [0.02, 0.5])
def test_influence_equals_the_brute_force_sum(sampling, path, alpha):
    """Equal to rounding (rtol 1e-9: sums of ~1,000 products in another order), with a reservoir of
    5 rows (evictions from the 6th row on); at alpha 0.5 the weights pass 1e30 at row ~100 (the
    tracker rescales them) and few rows count, so a feature's products may sum below 0 (clipped)."""
    X, y = stream(400, seed=7)
    model = LoggedModel()
    explainer = IPFIEstimator(FunctionPredictor(model), COLUMNS, loss="squared", alpha=alpha, n_repeats=4,
                               sampling=sampling, reservoir_size=5, seed=3, bounds_method="realisations")
    if path == "one":
        for row, target in zip(X, y):
            explainer.explain_one(dict(zip(COLUMNS, row)), target)
    else:
        explainer.explain_many(X[:150], y[:150])
        explainer.explain_many(X[150:], y[150:])
    blocks = np.concatenate(model.blocks).reshape(-1, 1 + 4 * 3, 3)
    expected, expected_dof = brute_force(X, y, blocks, alpha, 4, explainer.importance_array())
    assert (expected > 0).all() if alpha < 0.1 else (expected > 0).any()   # not all clipped to 0
    got, dof = explainer._spread.stream_variance_and_dof()
    assert np.allclose(got, expected, rtol=1e-9, atol=0)
    assert np.allclose(dof, expected_dof, rtol=1e-7, atol=0)   # fourth powers: more rounding


def test_state_continues_the_influence():
    X, y = stream(120, seed=11)
    settings = dict(loss="squared", alpha=0.05, n_repeats=3, sampling="uniform", reservoir_size=6, seed=5,
                    bounds_method="realisations")
    whole = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
    whole.explain_many(X, y)
    first = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
    first.explain_many(X[:70], y[:70])
    second = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
    second.load_state_dict(first.state_dict())
    second.explain_many(X[70:], y[70:])
    assert second.bound_array(0.05).tolist() == whole.bound_array(0.05).tolist()


def test_failed_row_leaves_no_influence():
    X, y = stream(60, seed=2)
    calls = {"n": 0}

    def flaky(block: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["n"] == 30:
            raise RuntimeError("model server went away")
        return 2.0 * block[:, 0]

    settings = dict(loss="squared", alpha=0.1, n_repeats=2, reservoir_size=4, seed=1, bounds_method="realisations")
    failing = IPFIEstimator(FunctionPredictor(flaky), COLUMNS, **settings)
    clean = IPFIEstimator(FunctionPredictor(lambda b: 2.0 * b[:, 0]), COLUMNS, **settings)
    for row, target in zip(X, y):
        x = dict(zip(COLUMNS, row))
        try:
            failing.explain_one(x, target)
        except RuntimeError:
            failing.explain_one(x, target)        # the same row again, as a retrying caller would
        clean.explain_one(x, target)
    assert failing.bound_array(0.05).tolist() == clean.bound_array(0.05).tolist()


def test_pickled_explainer_continues_the_influence():
    # a pickled explainer (joblib, multiprocessing) continues with the same bounds, also when it
    # was pickled before the tracker kept its index arrays
    import pickle

    X, y = stream(120, seed=4)
    settings = dict(loss="squared", alpha=0.05, n_repeats=3, sampling="geometric", reservoir_size=6, seed=8,
                    bounds_method="realisations")
    whole = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
    whole.explain_many(X, y)
    first = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
    first.explain_many(X[:70], y[:70])
    for drop_index_arrays in (False, True):
        second = pickle.loads(pickle.dumps(first))
        if drop_index_arrays:
            tracker = second._spread.influence
            state = {k: v for k, v in tracker.__dict__.items() if k not in ("_realisation", "_feature")}
            tracker.__dict__.clear()
            tracker.__setstate__(state)
        second.explain_many(X[70:], y[70:])
        assert second.bound_array(0.05).tolist() == whole.bound_array(0.05).tolist()


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
@pytest.mark.parametrize("alpha", [0.02, 0.5])   # 0.5: the weights are rescaled every ~100 rows
def test_micro_batches_give_the_bits_of_row_by_row(sampling, alpha):
    """Folding a micro-batch at once (``DonorInfluence.fold_many``, ``RealisationSpread.update_many``)
    leaves every sum, weight and closed sum with the bits of folding row by row, whatever the
    micro-batches' sizes."""
    X, y = stream(400, seed=21)
    settings = dict(loss="squared", alpha=alpha, n_repeats=3, sampling=sampling, reservoir_size=5, seed=13,
                    bounds_method="realisations")
    one = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
    for row, target in zip(X, y):
        one.explain_one(dict(zip(COLUMNS, row)), target)
    expected = one._spread.state_dict()
    for sizes, cells in (([400], None), ([1, 7, 50, 3, 139, 200], None), ([400], 64)):
        many = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, **settings)
        if cells is not None:
            many.max_block_cells = cells   # two rows per model call
        start = 0
        for size in sizes:
            many.explain_many(X[start:start + size], y[start:start + size])
            start += size
        got = many._spread.state_dict()
        for key in ("means", "weight", "count"):
            assert np.array_equal(got[key], expected[key]), key
        for key, value in expected["influence"].items():
            assert np.array_equal(got["influence"][key], value), key
        assert many.bound_array(0.05).tolist() == one.bound_array(0.05).tolist()


def test_a_copied_tracker_is_independent_and_equal():
    """The run copies the tracker before each micro-batch (``copy.deepcopy``), to restore it when the
    model fails: the copy must share no array, dict or list with the original."""
    import copy

    X, y = stream(80, seed=3)
    explainer = IPFIEstimator(FunctionPredictor(LoggedModel()), COLUMNS, loss="squared", alpha=0.05, n_repeats=3,
                              reservoir_size=6, seed=2, bounds_method="realisations")
    explainer.explain_many(X[:60], y[:60])
    tracker = explainer._spread.influence
    twin = copy.deepcopy(tracker)
    before = copy.deepcopy(tracker.state_dict())
    for name, value in tracker.__dict__.items():
        if isinstance(value, (np.ndarray, dict, list)):
            assert twin.__dict__[name] is not value, name
    twin.explained_stored_many(60, np.zeros((1, 3, 3), dtype=np.intp), np.zeros((1, 3), dtype=np.intp))
    twin.fold_many(np.ones((1, 3, 3)))
    after = tracker.state_dict()
    for key, value in before.items():
        assert np.array_equal(after[key], value), key


def test_a_micro_batch_the_model_fails_on_leaves_the_influence_as_it_was():
    X, y = stream(140, seed=6)
    calls = {"n": 0, "fail": False}

    def flaky(block: np.ndarray) -> np.ndarray:
        calls["n"] += 1
        if calls["fail"] and calls["n"] % 3 == 0:
            raise RuntimeError("model server went away")
        return 2.0 * block[:, 0] - block[:, 1]

    settings = dict(loss="squared", alpha=0.05, n_repeats=3, reservoir_size=5, seed=4, bounds_method="realisations")
    failing = IPFIEstimator(FunctionPredictor(flaky), COLUMNS, **settings)
    failing.max_block_cells = 64   # several model calls per micro-batch: the third one fails
    clean = IPFIEstimator(FunctionPredictor(lambda b: 2.0 * b[:, 0] - b[:, 1]), COLUMNS, **settings)
    failing.explain_many(X[:70], y[:70])
    clean.explain_many(X[:70], y[:70])
    calls["fail"] = True
    with pytest.raises(RuntimeError):
        failing.explain_many(X[70:], y[70:])
    calls["fail"] = False
    failing.explain_many(X[70:], y[70:])
    clean.explain_many(X[70:], y[70:])
    assert failing.bound_array(0.05).tolist() == clean.bound_array(0.05).tolist()
    for key, value in clean._spread.influence.state_dict().items():
        assert np.array_equal(failing._spread.influence.state_dict()[key], value), key
