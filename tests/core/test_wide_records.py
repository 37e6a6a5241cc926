"""A wide row of a model that takes records (river's dicts): its perturbed copies are predicted in
calls of bounded size, with the numbers of one call.

With d columns and M repeats a row has 1 + d x M copies of d values: 10,000 columns and M = 10
would be 10^9 values at once (a river model reached 6 GB in 16 s). The estimates must not depend
on how the copies are cut into calls.
"""

from __future__ import annotations

import numpy as np

from ipfi_cli.core import perturbed
from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.models import FunctionPredictor


class CountingModel:
    """A record model (a weighted sum of its inputs, thresholded) that records each call's size."""

    def __init__(self, weights: dict[str, float]) -> None:
        self.weights = weights
        self.calls: list[int] = []
        self.most_values = 0

    def __call__(self, record: dict[str, float]) -> int:
        return int(sum(self.weights[k] * v for k, v in record.items()) > 0)


def run(monkeypatch, cells: int) -> tuple[list[list[float]], CountingModel]:
    rng = np.random.default_rng(7)
    columns = [f"c{i}" for i in range(40)]
    weights = {c: float(w) for c, w in zip(columns, rng.normal(size=40))}
    model = CountingModel(weights)
    predictor = FunctionPredictor(model, vectorized=False)
    inner = predictor.predict_records

    def counted(records, output, target):
        model.calls.append(len(records))
        model.most_values = max(model.most_values, sum(len(r) for r in records))
        return inner(records, output, target)
    monkeypatch.setattr(predictor, "predict_records", counted)
    monkeypatch.setattr(perturbed, "RECORD_CELLS", cells)
    explainer = IPFIEstimator(predictor, columns, n_repeats=3, seed=11)
    rows = rng.normal(size=(30, 40))
    estimates = []
    for row in rows:
        x = dict(zip(columns, row.tolist()))
        estimates.append(list(explainer.explain_one(x, model(x))))
    return estimates, model


def test_copies_are_predicted_in_bounded_calls_with_the_same_numbers(monkeypatch):
    whole, one_call = run(monkeypatch, cells=1 << 30)
    cut, bounded = run(monkeypatch, cells=400)  # 10 records of 40 values per call
    assert max(one_call.calls) == 1 + 40 * 3  # every copy of a row in one call
    assert bounded.most_values <= 400 and max(bounded.calls) == 10
    assert sum(bounded.calls) == sum(one_call.calls)
    np.testing.assert_array_equal(np.array(cut), np.array(whole))  # bit for bit: the same draws, the same sums
