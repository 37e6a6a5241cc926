"""The two-step micro-batch API: ``prepare`` + a prediction made outside + ``finish`` gives
``explain_many``'s bytes (estimates, contributions, losses and the state after), for iPFI and iSAGE,
on the array path and the value-rows path; two explainers' blocks predicted in one model call give
each explainer's own ``explain_many``.

The expected values come from ``explain_many`` (and ``explain_one`` row by row, which
``tests/core/test_micro_batch.py`` ties it to): a path that shares no code with the external
model call made here.
"""

from __future__ import annotations

import pickle

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator, ISAGEEstimator
from ipfi_cli.models import FunctionPredictor

COLUMNS = ["a", "b", "c"]


def _model() -> FunctionPredictor:
    return FunctionPredictor(lambda X: 2.0 * X[:, 0] - X[:, 1] + 0.5 * X[:, 0] * X[:, 2])


def _data(n: int, seed: int) -> tuple[np.ndarray, list[float]]:
    X = np.random.default_rng(seed).normal(size=(n, len(COLUMNS)))
    y = (2.0 * X[:, 0] - X[:, 1] + np.random.default_rng(seed + 1).normal(scale=0.3, size=n)).tolist()
    return X, y


def _make(kind: str, **options):
    if kind == "sage":
        return ISAGEEstimator(_model(), COLUMNS, loss="squared", alpha=0.05, n_repeats=3, seed=7, **options)
    return IPFIEstimator(_model(), COLUMNS, loss="squared", alpha=0.05, n_repeats=4, seed=7, **options)


def _state_bytes(explainer) -> bytes:
    """The state but the model's call counts (a call made outside the explainer is the caller's to count)."""
    state = explainer.state_dict()
    del state["model_calls"], state["predictions"]
    sampler = state["sampler"]
    if sampler is not None:   # the reservoirs' slots not filled yet hold whatever memory they were given
        sampler["rows"] = sampler["rows"][:, :sampler["filled"]]
    return pickle.dumps(state)


def _external(explainer, pending):
    """The model's call made by the caller, not by the explainer."""
    return explainer.model.predict_block(pending.block, explainer.columns, pending.output, pending.row_targets)


@pytest.mark.parametrize("kind", ["ipfi", "sage"])
@pytest.mark.parametrize("smoothing", ["exponential", "mean"])
@pytest.mark.parametrize("as_dicts", [False, True])
def test_prepare_external_predict_finish_is_explain_many_to_the_byte(kind, smoothing, as_dicts):
    X, y = _data(240, 3)
    ours, theirs = _make(kind, smoothing=smoothing), _make(kind, smoothing=smoothing)
    for start, end in [(0, 1), (1, 90), (90, 91), (91, 240)]:   # the stream's first row alone, one row, many
        rows = [dict(zip(COLUMNS, r)) for r in X[start:end].tolist()] if as_dicts else X[start:end]
        pending = ours.prepare(rows, y[start:end])
        traces = ours.finish(pending, _external(ours, pending))
        expected = theirs.explain_many(rows, y[start:end], return_contributions=True)
        for got, want in zip(traces, expected):
            assert got.tobytes() == np.asarray(want).tobytes()
        assert _state_bytes(ours) == _state_bytes(theirs)
        assert ours.importance_array().tobytes() == theirs.importance_array().tobytes()


def test_one_model_call_for_two_explainers_blocks_gives_each_its_own_numbers():
    """What keyed runs do: every key's rows of a micro-batch in one call to the model."""
    X, y = _data(300, 5)
    keys = np.arange(300) % 2
    ours = [_make("ipfi"), _make("ipfi")]
    theirs = [_make("ipfi"), _make("ipfi")]
    for start in range(0, 300, 60):
        pendings = [e.prepare(X[start:start + 60][keys[start:start + 60] == k],
                              [t for t, kk in zip(y[start:start + 60], keys[start:start + 60]) if kk == k])
                    for k, e in enumerate(ours)]
        joined = np.concatenate([p.block for p in pendings])
        predictions = ours[0].model.predict_block(joined, COLUMNS, pendings[0].output, None)
        cut = len(pendings[0].block)
        got = [ours[0].finish(pendings[0], predictions[:cut]), ours[1].finish(pendings[1], predictions[cut:])]
        for k in range(2):
            rows = X[start:start + 60][keys[start:start + 60] == k]
            targets = [t for t, kk in zip(y[start:start + 60], keys[start:start + 60]) if kk == k]
            assert got[k].estimates.tobytes() == theirs[k].explain_many(rows, targets).tobytes()
    assert [_state_bytes(e) for e in ours] == [_state_bytes(e) for e in theirs]


@pytest.mark.parametrize("kind", ["ipfi", "sage"])
def test_cancel_and_a_failing_finish_leave_the_explainer_as_before_prepare(kind):
    X, y = _data(100, 9)
    ours, theirs = _make(kind), _make(kind)
    ours.explain_many(X[:50], y[:50])
    theirs.explain_many(X[:50], y[:50])
    ours.cancel(ours.prepare(X[50:80], y[50:80]))
    pending = ours.prepare(X[50:80], y[50:80])
    with pytest.raises(ValueError):
        ours.finish(pending, np.zeros(3))   # too few predictions for the block
    assert _state_bytes(ours) == _state_bytes(theirs)
    assert ours.explain_many(X[50:], y[50:]).tobytes() == theirs.explain_many(X[50:], y[50:]).tobytes()


def test_prepare_needs_a_model_that_predicts_blocks():
    records = FunctionPredictor(lambda r: r["a"], vectorized=False)
    explainer = IPFIEstimator(records, COLUMNS, loss="squared", seed=1)
    with pytest.raises(ValueError, match="supports_batch"):
        explainer.prepare([{"a": 1.0, "b": 2.0, "c": 3.0}], [1.0])


@pytest.mark.parametrize("method", ["chebyshev", "realisations"])
def test_finish_gives_the_bounds_after_the_rows_explain_many_gives(method):
    """finish(bounds_delta=..., bounds_rows=...) sets last_row_bounds as explain_many does (expected:
    explain_many on a twin), so keys prepared together and finished one by one keep their records' bounds."""
    X, y = _data(90, 3)
    a, b = (IPFIEstimator(_model(), COLUMNS, loss="squared", seed=2, n_repeats=3, bounds_method=method)
            for _ in range(2))
    for begin, end in ((0, 40), (40, 90)):
        rows = [o for o in range(end - begin) if (begin + o + 1) % 6 == 0]
        b.explain_many(X[begin:end], y[begin:end], bounds_delta=0.1, bounds_rows=rows)
        pending = a.prepare(X[begin:end], y[begin:end])
        a.finish(pending, a.predict(pending), bounds_delta=0.1, bounds_rows=rows)
        assert a.last_row_bounds.tobytes() == b.last_row_bounds.tobytes()
        assert np.isfinite(a.last_row_bounds[rows[-1]]).all()
