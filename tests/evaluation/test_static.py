"""Experiment A runner: batch PFI once, orderings and samplings seeded independently."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import batch_pfi
from ipfi_cli.evaluation import compare_static
from ipfi_cli.evaluation import static as static_module
from ipfi_cli.models import FunctionPredictor

COLUMNS = ["a", "b", "c"]



def independent_error(estimate, reference):
    """The paper's error written out here (not with the function under test): both vectors
    clipped at 0 and divided by their sum, then the L1 distance."""
    a = np.clip(np.asarray(estimate, dtype=float), 0, None)
    b = np.clip(np.asarray(reference, dtype=float), 0, None)
    return float(np.abs(a / a.sum() - b / b.sum()).sum())

def rule(block: np.ndarray) -> np.ndarray:
    return (block[:, 0] + 0.5 * block[:, 1] > 0.75).astype(int)


@pytest.fixture(scope="module")
def data():
    X = np.random.default_rng(0).random((600, 3))
    return X, rule(X)


def run(data, **kw):
    X, y = data
    options = dict(orderings=2, alpha=0.02, n_repeats=3, seed=5)
    options.update(kw)
    return compare_static(FunctionPredictor(rule), X, y, COLUMNS, **options)


def test_errors_compare_each_final_estimate_with_the_one_batch_pfi(data):
    result = run(data)
    assert [(r.sampling, r.ordering) for r in result.runs] == [
        ("uniform", 0), ("geometric", 0), ("uniform", 1), ("geometric", 1)]
    for r in result.runs:
        assert r.error == pytest.approx(independent_error(r.estimates, result.batch.mean))
    assert set(result.summary()) == {"uniform", "geometric"}
    assert result.summary()["uniform"].n == 2


def test_batch_pfi_is_computed_once_and_can_be_passed_in(data, monkeypatch):
    calls = []
    real = static_module.batch_pfi

    def counting(*args, **kwargs):
        calls.append(1)
        return real(*args, **kwargs)

    monkeypatch.setattr(static_module, "batch_pfi", counting)
    first = run(data, orderings=3)
    assert len(calls) == 1
    second = run(data, orderings=3, batch=first.batch)
    assert len(calls) == 1
    assert [r.error for r in second.runs] == [r.error for r in first.runs]


@pytest.mark.process  # joblib's worker processes
def test_a_run_does_not_depend_on_the_other_samplings_or_on_n_jobs(data):
    from joblib import parallel_config

    both = run(data)
    geometric = run(data, samplings=["geometric"])
    assert [r.estimates.tolist() for r in both.runs if r.sampling == "geometric"] == \
           [r.estimates.tolist() for r in geometric.runs]
    with parallel_config(backend="threading"):
        parallel = run(data, n_jobs=2)
    assert [r.estimates.tolist() for r in parallel.runs] == [r.estimates.tolist() for r in both.runs]


def test_same_seed_same_numbers_other_seed_other_orderings(data):
    assert [r.error for r in run(data).runs] == [r.error for r in run(data).runs]
    assert [r.error for r in run(data, seed=6).runs] != [r.error for r in run(data).runs]


def test_keep_order_streams_the_rows_as_given(data):
    from ipfi_cli.core import IPFIEstimator

    X, y = data
    result = run(data, orderings=1, shuffle=False, samplings=["uniform"], keep_traces=True)
    # the same explainer seed on the rows in file order gives the same final estimates
    seed = int(np.random.SeedSequence(5).spawn(3)[2].spawn(1)[0].spawn(2)[0].generate_state(1)[0])
    direct = IPFIEstimator(FunctionPredictor(rule), COLUMNS, alpha=0.02, n_repeats=3, sampling="uniform", seed=seed)
    direct.explain_many(X, y.tolist())
    assert result.runs[0].estimates.tolist() == direct.importance_array().tolist()
    with pytest.raises(ValueError, match="only one ordering"):
        run(data, orderings=2, shuffle=False)


def test_traces_end_at_the_final_estimate_and_records_are_complete(data):
    result = run(data, keep_traces=True, trace_every=50)
    traced = [r for r in result.runs if r.trace is not None]
    assert [r.ordering for r in traced] == [0, 0]  # only ordering 0 keeps traces
    for r in traced:
        assert r.trace_rows.tolist() == list(range(49, 600, 50))  # rows 50, 100, ..., 600 (0-based), as --every
        assert r.trace[-1].tolist() == r.estimates.tolist()
    records = result.records()
    assert len(records) == 3 + 4 * 3
    assert records[0].method == "batch" and records[0].std is not None
    table = result.trace_table()
    assert table[-1]["method"] == "batch" and table[-1]["row"] == 600


def test_agrees_with_batch_pfi_called_directly(data):
    X, y = data
    result = run(data)
    seed = int(np.random.SeedSequence(5).spawn(3)[0].generate_state(1)[0])
    direct = batch_pfi(FunctionPredictor(rule), X, y, COLUMNS, n_repeats=3, seed=seed)
    assert result.batch.mean == direct.mean
