"""iSAGE's micro-batch path (a static model, rows of numbers) equals ``explain_one`` row by row, bit for bit.

The expected values come from ``explain_one`` one row at a time, which is the definition; the
micro-batch path draws the same random numbers but builds, predicts, scores and folds with
array operations. The models are elementwise (``B @ beta`` is not: BLAS computes a 1-row
product with another summation order than a many-row one, so the model itself would differ).
"""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core.losses import Output
from ipfi_cli.core.sage import ORDER_STREAM, ISAGEEstimator
from ipfi_cli.core.sage_game import MarginalPrediction
from ipfi_cli.models import FunctionPredictor

COLUMNS = ["a", "b", "c", "d"]


def _value(block):
    return 2 * block[:, 0] + block[:, 1] - 0.5 * block[:, 2] * block[:, 3]


def _label(block):
    return (block[:, 0] + 0.5 * block[:, 2] > 0).astype(int)


def _data(n, seed):
    rng = np.random.default_rng(seed)
    X = rng.normal(size=(n, 4))
    return X, _value(X) + 0.3 * rng.normal(size=n), (X[:, 0] + 0.3 * rng.normal(size=n) > 0).astype(int)


CASES = {
    "absolute, exponential": {"loss": "absolute", "n_repeats": 3, "n_inner": 2},
    "squared, mean, uniform": {"loss": "squared", "smoothing": "mean", "sampling": "uniform", "reservoir_size": 7},
    "zero-one, exponential": {"loss": "zero-one", "n_repeats": 4},
    "zero-one, mean, 3 inner": {"loss": "zero-one", "smoothing": "mean", "n_inner": 3, "n_repeats": 2},
    "groups": {"loss": "squared", "groups": {"ab": ["a", "b"], "c": ["c"], "d": ["d"]}, "n_repeats": 3},
    # one player: numpy sums the 12 realisations pairwise; one slot: nothing to draw
    "one player": {"loss": "squared", "groups": {"all": COLUMNS}, "n_repeats": 12},
    "one slot": {"loss": "absolute", "reservoir_size": 1, "sampling": "geometric", "n_repeats": 2},
    "conditional": {"loss": "squared", "removal": "conditional", "n_repeats": 2},
    "conditional, mean, groups": {"loss": "absolute", "removal": "conditional", "smoothing": "mean",
                                  "groups": {"ab": ["a", "b"], "cd": ["c", "d"]}, "n_inner": 2},
}


def _settings(case):
    return {"alpha": 0.05, "reservoir_size": 20, "seed": 9, **CASES[case]}


def _explain_one(case, X, y):
    settings = _settings(case)
    model = _label if settings["loss"] == "zero-one" else _value
    explainer = ISAGEEstimator(FunctionPredictor(model), COLUMNS, **settings)
    estimates, contributions, losses = [], [], []
    for row, target in zip(X.tolist(), y.tolist()):
        estimates.append(explainer.explain_one(dict(zip(COLUMNS, row)), target))
        contributions.append(explainer.last_contribution if explainer.n_explained else np.full(len(explainer.names),
                                                                                              np.nan))
        losses.append(explainer.last_loss if explainer.n_explained else np.nan)
    return explainer, np.array(estimates), np.array(contributions), np.array(losses)


def _same_state(a, b):
    assert a._rng.bit_generator.state == b._rng.bit_generator.state
    assert a._order_rng.bit_generator.state == b._order_rng.bit_generator.state
    assert np.array_equal(a._reservoir.rows, b._reservoir.rows)
    assert (a._reservoir.filled, a._reservoir.n_seen, a.n_seen, a.n_explained) == \
        (b._reservoir.filled, b._reservoir.n_seen, b.n_seen, b.n_explained)
    assert a.importance_array().tobytes() == b.importance_array().tobytes()
    assert a._tracker.variance.tobytes() == b._tracker.variance.tobytes()
    assert (a.marginal_loss, a.model_loss, a.mean_loss, a.last_loss) == (b.marginal_loss, b.model_loss, b.mean_loss,
                                                                       b.last_loss)
    assert a.last_contributions.tobytes() == b.last_contributions.tobytes()
    assert a._marginal.state_dict()["labels"] == b._marginal.state_dict()["labels"]
    assert a._marginal.state_dict()["weights"].tobytes() == b._marginal.state_dict()["weights"].tobytes()


@pytest.mark.parametrize("case", list(CASES))
@pytest.mark.parametrize("size", [1, 7, 64, 200])
def test_micro_batches_of_any_size_give_the_bytes_of_row_by_row(case, size):
    X, value, label = _data(200, 1)
    y = label if CASES[case]["loss"] == "zero-one" else value
    one, estimates, contributions, losses = _explain_one(case, X, y)
    settings = _settings(case)
    many = ISAGEEstimator(FunctionPredictor(_label if settings["loss"] == "zero-one" else _value), COLUMNS, **settings)
    parts = [many.explain_many(X[s:s + size], y[s:s + size], return_contributions=True) for s in range(0, 200, size)]
    assert np.concatenate([p[0] for p in parts]).tobytes() == estimates.tobytes()
    assert np.concatenate([p[1] for p in parts]).tobytes() == contributions.tobytes()
    assert np.concatenate([p[2] for p in parts]).tobytes() == losses.tobytes()
    _same_state(one, many)


def test_a_static_micro_batch_is_one_model_call_or_as_many_as_its_cells_need():
    X, y, _ = _data(120, 2)
    explainer = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, loss="squared", n_repeats=2, seed=3)
    explainer.explain_many(X[:1], y[:1])          # the stream's first row: stored, not explained
    explainer.explain_many(X[1:101], y[1:101])
    assert (explainer.n_model_calls, explainer.n_predictions) == (1, 100 * explainer.block_rows)
    narrow = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, loss="squared", n_repeats=2, seed=3)
    narrow.max_block_cells = 30 * narrow.block_rows * len(COLUMNS)   # 30 rows a call
    narrow.fill_cells = 50    # and the chains built a few rows at a time
    narrow.explain_many([dict(zip(COLUMNS, r)) for r in X[:101].tolist()], y[:101].tolist())   # dicts of numbers
    assert narrow.n_model_calls == 4
    _same_state(explainer, narrow)


@pytest.mark.parametrize("case", ["absolute, exponential", "zero-one, mean, 3 inner", "conditional, mean, groups"])
def test_a_state_saved_mid_stream_resumes_to_the_same_bytes(case):
    X, value, label = _data(150, 4)
    y = label if CASES[case]["loss"] == "zero-one" else value
    one, estimates, _, _ = _explain_one(case, X, y)
    settings = _settings(case)
    model = FunctionPredictor(_label if settings["loss"] == "zero-one" else _value)
    first = ISAGEEstimator(model, COLUMNS, **settings)
    head = np.concatenate([first.explain_many(X[:40], y[:40]), first.explain_many(X[40:77], y[40:77])])
    resumed = ISAGEEstimator(model, COLUMNS, **settings)
    resumed.load_state_dict(first.state_dict())
    tail = np.concatenate([resumed.explain_many(X[77:120], y[77:120]), resumed.explain_many(X[120:], y[120:])])
    assert np.concatenate([head, tail]).tobytes() == estimates.tobytes()
    _same_state(one, resumed)


def test_micro_batches_and_single_rows_mix():
    X, y, _ = _data(90, 5)
    one, estimates, _, _ = _explain_one("squared, mean, uniform", X, y)
    mixed = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, **_settings("squared, mean, uniform"))
    got = [mixed.explain_many(X[:30], y[:30])]
    got += [mixed.explain_one(dict(zip(COLUMNS, r)), t)[None] for r, t in zip(X[30:35].tolist(), y[30:35].tolist())]
    got.append(mixed.explain_many(X[35:], y[35:]))
    assert np.concatenate(got).tobytes() == estimates.tobytes()
    _same_state(one, mixed)


@pytest.mark.parametrize("smoothing", ["exponential", "mean"])
def test_the_marginal_label_folds_a_block_as_one_by_one(smoothing):
    """Labels that come later, ties (the first label to come wins) and a block after single updates."""
    labels = ["b", "a", "a", "b", "c", "b", "c", "c", "a", "d", "d", "d", "a", "b"] * 3
    one, many = MarginalPrediction(Output.LABEL, smoothing, 0.3), MarginalPrediction(Output.LABEL, smoothing, 0.3)
    expected = [one.update(label) for label in labels]
    got = [many.update(labels[0])] + many.update_many(np.array(labels[1:9], dtype=object)).tolist()
    got += many.update_many(np.array(labels[9:], dtype=object)).tolist()
    assert got == expected
    assert list(many._weights) == list(one._weights)
    assert np.array(list(many._weights.values())).tobytes() == np.array(list(one._weights.values())).tobytes()


@pytest.mark.parametrize("removal, array_path", [("marginal", True), ("conditional", False)])
def test_marginal_removal_on_numbers_takes_the_array_path_and_conditional_the_row_fills(monkeypatch, removal,
                                                                                      array_path):
    """Conditional draws depend on the sampler as it learns each row: those rows are filled one by
    one (and predicted and folded together); the test above checks both give row by row's bytes."""
    taken = []
    for path in ("_prepare_numeric", "_fill_block"):
        original = getattr(ISAGEEstimator, path)

        def spy(self, *args, _original=original, _path=path, **kwargs):
            taken.append(_path)
            return _original(self, *args, **kwargs)

        monkeypatch.setattr(ISAGEEstimator, path, spy)
    X, y, _ = _data(30, 6)
    ISAGEEstimator(FunctionPredictor(_value), COLUMNS, loss="squared", removal=removal, seed=1).explain_many(X, y)
    assert set(taken) == {"_prepare_numeric" if array_path else "_fill_block"}


class _Counting:
    """A generator that counts the calls of its methods."""

    def __init__(self, rng):
        self.rng, self.calls = rng, []

    def __getattr__(self, name):
        attr = getattr(self.rng, name)
        if not callable(attr):
            return attr

        def call(*args, **kwargs):
            self.calls.append(name)
            return attr(*args, **kwargs)
        return call


def test_a_micro_batch_draws_its_orderings_with_one_call_and_its_donors_with_one_more():
    """The orderings come from a stream of their own, so a model call's rows draw theirs at once,
    and the reservoirs' integers at once (the bytes are row by row's: the tests above)."""
    X, y, _ = _data(101, 2)
    explainer = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, loss="squared", n_repeats=2, seed=3)
    explainer.max_block_cells = 30 * explainer.block_rows * len(COLUMNS)   # 30 rows a call
    explainer.explain_many(X[:1], y[:1])          # the stream's first row: stored, not explained
    explainer._order_rng, explainer._rng = _Counting(explainer._order_rng), _Counting(explainer._rng)
    explainer.explain_many(X[1:], y[1:])
    assert explainer.n_model_calls == 4
    assert explainer._order_rng.calls == ["permuted"] * 4
    assert explainer._rng.calls == ["integers"] * 4


def test_reservoir_draws_numpy_would_reject_are_drawn_row_by_row_with_the_same_bytes():
    """A uniform reservoir after ~3e9 rows draws below n_seen + 1, where numpy rejects ~30 % of
    its 32-bit words: the micro-batch then draws each row's integers with its own call."""
    X, y, _ = _data(80, 7)
    settings = {"loss": "squared", "sampling": "uniform", "reservoir_size": 5, "n_repeats": 3, "seed": 2}
    one = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, **settings)
    many = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, **settings)
    expected = [one.explain_one(dict(zip(COLUMNS, r)), t) for r, t in zip(X[:10].tolist(), y[:10].tolist())]
    got = [many.explain_many(X[:10], y[:10])]
    one._reservoir.n_seen = many._reservoir.n_seen = 3_000_000_000
    expected += [one.explain_one(dict(zip(COLUMNS, r)), t) for r, t in zip(X[10:].tolist(), y[10:].tolist())]
    got.append(many.explain_many(X[10:], y[10:]))
    assert np.concatenate(got).tobytes() == np.array(expected).tobytes()
    _same_state(one, many)


def test_the_orderings_stream_is_the_seeds_own_spawned_key():
    """Every process, worker or resumed run builds the same stream from the same seed."""
    explainer = ISAGEEstimator(FunctionPredictor(_value), COLUMNS, loss="squared", seed=9)
    spawned = np.random.default_rng(np.random.SeedSequence(9, spawn_key=(ORDER_STREAM,)))
    assert explainer._order_rng.bit_generator.state == spawned.bit_generator.state
    assert explainer._rng.bit_generator.state == np.random.default_rng(9).bit_generator.state
