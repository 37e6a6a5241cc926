"""Feature groups: resolution rules, one value per group, joint replacement from one row."""

from __future__ import annotations

import numpy as np
import pytest

from ipfi_cli.core import IPFIEstimator, batch_pfi, resolve_groups
from ipfi_cli.models import FunctionPredictor


def test_resolve_groups_orders_and_merges():
    columns = ["a", "b", "c", "d"]
    assert resolve_groups(columns) == {"a": [0], "b": [1], "c": [2], "d": [3]}
    assert resolve_groups(columns, features=["d", "b"]) == {"b": [1], "d": [3]}
    # a group stands where its first column stands; its columns are not reported alone
    assert resolve_groups(columns, groups={"cb": ["c", "b"]}) == {"a": [0], "cb": [1, 2], "d": [3]}
    assert resolve_groups(columns, features=["a"], groups={"g": ["d", "b"]}) == {"a": [0], "g": [1, 3]}
    assert resolve_groups(columns, features=[], groups={"g": ["c"]}) == {"g": [2]}
    assert resolve_groups(columns, groups={"a": ["a"]}) == {"a": [0], "b": [1], "c": [2], "d": [3]}


@pytest.mark.parametrize("features, groups, message", [
    (["a", "nope"], None, "features names unknown column.*nope"),
    (None, {"g": ["a", "zz"]}, "group 'g' names unknown column.*zz"),
    (None, {"g": ["a", "b"], "h": ["b", "c"]}, "column 'b' is in groups 'g' and 'h'"),
    (None, {"g": []}, "group 'g' has no columns"),
    (None, {"a": ["a", "b"]}, "group name 'a' is also a column name"),
    ([], None, "nothing to explain"),
])
def test_resolve_groups_errors(features, groups, message):
    with pytest.raises(ValueError, match=message):
        resolve_groups(["a", "b", "c"], features=features, groups=groups)


def test_resolve_groups_rejects_duplicate_columns():
    with pytest.raises(ValueError, match="duplicate column names: a, c"):
        resolve_groups(["a", "b", "a", "c", "c"])


def test_explainer_surfaces_group_errors():
    with pytest.raises(ValueError, match="unknown column"):
        IPFIEstimator(FunctionPredictor(lambda B: B[:, 0]), ["a", "b"], groups={"g": ["a", "q"]})


def _xor_of_copies(block):
    """0 on every real row (a_copy == a); 1 when only one of the two was replaced."""
    return (block[:, 0] != block[:, 1]).astype(int)


def _bits(n, seed):
    rng = np.random.default_rng(seed)
    a = rng.integers(0, 2, n).astype(float)
    return np.column_stack([a, a, rng.integers(0, 2, n)]).astype(float)


@pytest.mark.parametrize("sampling", ["geometric", "uniform"])
def test_a_group_is_replaced_jointly_from_one_row(sampling):
    """Replacing a alone breaks a == a_copy half the time; replacing the group {a, a_copy}
    from one earlier row never does: its importance is exactly 0 at every step."""
    X = _bits(2000, 0)
    y = np.zeros(len(X), dtype=int)
    explainer = IPFIEstimator(FunctionPredictor(_xor_of_copies), ["a", "a_copy", "b"], alpha=0.002,
                               sampling=sampling, groups={"both": ["a", "a_copy"]}, seed=1)
    assert explainer.names == ["both", "b"]
    trace = explainer.explain_many(X, y)
    assert trace.shape == (2000, 2)
    assert np.all(trace[1:] == 0.0)
    single = IPFIEstimator(FunctionPredictor(_xor_of_copies), ["a", "a_copy", "b"], alpha=0.002,
                            sampling=sampling, features=["a"], seed=1).explain_many(X, y)
    # truth P(a' != a) = 0.5 for either a, so a row's contribution (mean of M = 10 draws) has
    # variance 0.25 / 10; at n_eff ~ 960 the sd is 0.0051, x1.4 for reservoir sharing 0.0072.
    # Tolerance 0.03 (> 4 sd).
    assert abs(single[-1, 0] - 0.5) < 0.03
    result = batch_pfi(FunctionPredictor(_xor_of_copies), X, y, ["a", "a_copy", "b"], n_repeats=3,
                       groups={"both": ["a", "a_copy"]}, seed=2)
    assert result.names == ["both", "b"] and np.all(result.values == 0.0)


def _and(block):
    return ((block[:, 0] == 1) & (block[:, 1] == 1)).astype(int)


def test_group_importance_differs_from_each_single():
    """y = a AND b, independent fair bits. PFI(a) = P(b = 1) P(a' != a) = 0.25 (same for b);
    PFI({a, b}) = P(a'b' != ab) = 2 * 1/4 * 3/4 = 0.375."""
    rng = np.random.default_rng(3)
    X = rng.integers(0, 2, (4000, 2)).astype(float)
    y = _and(X)
    singles = IPFIEstimator(FunctionPredictor(_and), ["a", "b"], alpha=0.002, seed=4).explain_many(X, y)[-1]
    group = IPFIEstimator(FunctionPredictor(_and), ["a", "b"], alpha=0.002, groups={"ab": ["a", "b"]},
                           seed=4).explain_many(X, y)[-1]
    # sd of a final: per-row variance Var(g) + E[g(1-g)]/M = 0.075 (single), 0.066 (group); at
    # n_eff ~ 999 that is 0.0087 / 0.0081, x1.4 for reservoir sharing ~ 0.012. Tolerance 0.05 (4 sd);
    # the two truths are 0.125 apart, so a group computed as a single would fail.
    assert singles == pytest.approx([0.25, 0.25], abs=0.05)
    assert group.shape == (1,) and group[0] == pytest.approx(0.375, abs=0.05)
    batch = batch_pfi(FunctionPredictor(_and), X, y, ["a", "b"], n_repeats=5, groups={"ab": ["a", "b"]},
                      seed=5)
    # batch sd ~ sqrt(0.375 * 0.625 / 4000 / 5 + data part 0.05 / 4000) < 0.005: 0.02 is 4 sd
    assert batch.as_dict()["ab"] == pytest.approx(0.375, abs=0.02)
