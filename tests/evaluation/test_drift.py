"""Drift helpers for the experiment streams."""

from __future__ import annotations

import pytest

from ipfi_cli.evaluation.drift import (
    agrawal_function_drift,
    agrawal_rows,
    function_drift,
    gradual_drift,
    pick_swap_partner,
    swap_features,
)


def test_swap_features_from_the_drift_row_on():
    rows = [({"a": i, "b": 10 * i, "c": -i}, i) for i in range(4)]
    out = swap_features(rows, {"a": "c"}, at=2)
    assert [x for x, _ in out] == [{"a": 0, "b": 0, "c": 0}, {"a": 1, "b": 10, "c": -1},
                                   {"a": -2, "b": 20, "c": 2}, {"a": -3, "b": 30, "c": 3}]
    assert rows[3][0]["a"] == 3  # the input rows are not modified
    with pytest.raises(ValueError, match="distinct"):
        swap_features(rows, {"a": "b", "b": "c"}, at=0)


def test_function_drift_concatenates_at_the_drift_row():
    before = [({"x": 0}, "old")] * 5
    after = [({"x": 1}, "new")] * 3
    out = function_drift(before, after, 4)
    assert [y for _, y in out] == ["old"] * 4 + ["new"] * 3
    with pytest.raises(ValueError, match="fewer than"):
        function_drift(before, after, 6)


def test_agrawal_function_drift_follows_river_functions_1_then_2():
    from river.datasets.synth import Agrawal

    rows = agrawal_function_drift(200, 100, functions=(1, 2), seed=0)
    assert len(rows) == 200
    rule1, rule2 = Agrawal._classification_function_1, Agrawal._classification_function_2
    assert all(y == rule1(**x) for x, y in rows[:100])
    assert all(y == rule2(**x) for x, y in rows[100:])
    assert agrawal_rows(5, 1, seed=3) == agrawal_rows(5, 1, seed=3)


def test_pick_swap_partner_is_seeded_and_never_the_feature_itself():
    columns = ["a", "b", "c", "d"]
    picks = {pick_swap_partner(columns, "a", seed=s) for s in range(20)}
    assert "a" not in picks and picks <= {"b", "c", "d"}
    assert pick_swap_partner(columns, "a", seed=1) == pick_swap_partner(columns, "a", seed=1)


def test_gradual_drift_follows_the_sigmoid_and_reads_each_list_in_order():
    """River's ConceptDriftStream: row i comes from ``after`` with probability 1 / (1 + exp(-4 (i - at) / width)).

    Over rows 801-1200 (at 1000, width 400) the expected count from ``after`` is the sum of that
    probability, about 200 of 400; the tolerance is 4 binomial standard deviations (seed fixed).
    """
    import math

    before = [({"i": k}, 0) for k in range(3000)]
    after = [({"i": k}, 1) for k in range(3000)]
    rows = gradual_drift(before, after, at=1000, width=400, seed=0)
    for label in (0, 1):
        taken = [x["i"] for x, y in rows if y == label]
        assert taken == list(range(len(taken)))  # each list read from its start, in order
    probs = [1 / (1 + math.exp(-4 * (i - 1000) / 400)) for i in range(801, 1201)]
    expected, sd = sum(probs), math.sqrt(sum(p * (1 - p) for p in probs))
    drawn = sum(y for _, y in rows[800:1200])
    assert abs(drawn - expected) <= 4 * sd, (drawn, expected, sd)
    assert sum(y for _, y in rows[:300]) == 0  # p < 1e-3 per row there
    assert all(y == 1 for _, y in rows[1800:])  # the stream ends when `after` runs out; before that p > 0.9997
