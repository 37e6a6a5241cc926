"""Drift helpers for the experiment streams."""

from __future__ import annotations

import pytest

from ipfi_cli.evaluation.drift import (
    agrawal_function_drift,
    agrawal_rows,
    function_drift,
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
