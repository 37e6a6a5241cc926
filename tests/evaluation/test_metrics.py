"""The paper's error metric on hand-computed cases, and the quartile summary."""

from __future__ import annotations

import math

import numpy as np
import pytest

from ipfi_cli.evaluation.metrics import importance_error, normalise, summarise


def test_sum_normalisation_clips_negatives_and_divides_by_the_sum():
    assert normalise([0.3, 0.1, -0.02, 0.0]).tolist() == pytest.approx([0.75, 0.25, 0.0, 0.0])


def test_max_and_minmax_normalisations():
    assert normalise([0.4, 0.1, -0.2], "max").tolist() == pytest.approx([1.0, 0.25, 0.0])
    assert normalise([0.4, 0.1, -0.2], "minmax").tolist() == pytest.approx([1.0, 0.5, 0.0])


def test_all_zero_or_all_negative_vectors_normalise_to_zeros():
    assert normalise([0.0, 0.0]).tolist() == [0.0, 0.0]
    assert normalise([-0.1, -0.2]).tolist() == [0.0, 0.0]
    assert normalise([0.2, 0.2], "minmax").tolist() == [0.0, 0.0]


def test_nan_gives_nan():
    assert np.isnan(normalise([0.1, float("nan")])).all()
    assert math.isnan(importance_error([0.1, float("nan")], [0.1, 0.2]))


def test_error_hand_computed():
    # shares (0.75, 0.25, 0) vs (0.5, 0.5, 0): |0.25| + |0.25| = 0.5
    assert importance_error([0.3, 0.1, 0.0], [0.2, 0.2, 0.0]) == pytest.approx(0.5)
    # a negative estimate counts as 0: shares (1, 0) vs (0.8, 0.2)
    assert importance_error([0.5, -0.1], [0.4, 0.1]) == pytest.approx(0.4)
    # max normalisation: (1, 1/3) vs (1, 1) -> 2/3
    assert importance_error([0.3, 0.1], [0.2, 0.2], "max") == pytest.approx(2 / 3)


def test_error_bounds_and_scale_invariance():
    assert importance_error([1.0, 2.0, 3.0], [10.0, 20.0, 30.0]) == pytest.approx(0.0)
    assert importance_error([1.0, 0.0], [0.0, 1.0]) == pytest.approx(2.0)  # disjoint supports: the maximum


def test_error_rejects_vectors_of_different_length():
    with pytest.raises(ValueError, match="differ in length"):
        importance_error([0.1, 0.2], [0.1])


def test_unknown_normalisation():
    with pytest.raises(ValueError, match="unknown normalisation"):
        normalise([0.1], "softmax")


def test_summary_matches_numpy_quartiles_and_ignores_nan():
    errors = [0.05, 0.01, 0.03, float("nan"), 0.02]
    s = summarise(errors)
    assert s.n == 4
    assert s.median == pytest.approx(0.025)
    assert (s.q1, s.q3) == pytest.approx((0.0175, 0.035))
    assert s.iqr == pytest.approx(0.0175)
    assert summarise([]).n == 0 and math.isnan(summarise([]).median)
