"""Comparing two importance vectors: the paper's error and nDCG@k of one ranking against another.

The error (the paper's Experiment A): both vectors are normalised (``sum``, the default:
negative importances set to 0, then divided by the sum, as the paper's published evaluation
code does; ``max`` and ``minmax`` for comparison), then their L1 distance is taken, in [0, 2]
for ``sum``. A vector with a NaN (an estimate not available yet) gives NaN.

>>> normalise([0.3, 0.1, -0.02, 0.0]).round(3).tolist()
[0.75, 0.25, 0.0, 0.0]
>>> round(importance_error([0.3, 0.1, 0.0], [0.2, 0.2, 0.0]), 3)   # |0.75-0.5| + |0.25-0.5|
0.5
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

#: the normalisations :func:`normalise` knows; the first is the default (the paper's)
NORMALISATIONS = ("sum", "max", "minmax")


def normalise(values: Sequence[float] | np.ndarray, method: str = "sum") -> np.ndarray:
    """Map an importance vector into [0, 1] (see the module docstring for the methods)."""
    v = np.asarray(values, dtype=np.float64)
    if v.ndim != 1:
        raise ValueError(f"expected a 1-D importance vector, got shape {v.shape}")
    if method not in NORMALISATIONS:
        raise ValueError(f"unknown normalisation {method!r}; choose one of {', '.join(NORMALISATIONS)}")
    if v.size == 0 or np.isnan(v).any():
        return np.full(v.shape, np.nan)
    if method == "minmax":
        low, high = v.min(), v.max()
        return (v - low) / (high - low) if high > low else np.zeros_like(v)
    clipped = np.clip(v, 0.0, None)
    scale = clipped.sum() if method == "sum" else clipped.max()
    return clipped / scale if scale > 0 else np.zeros_like(v)


def importance_error(estimate: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray,
                     normalisation: str = "sum") -> float:
    """``sum_j |normalise(estimate)_j - normalise(reference)_j|`` (NaN if either has a NaN)."""
    a = normalise(estimate, normalisation)
    b = normalise(reference, normalisation)
    if a.shape != b.shape:
        raise ValueError(f"the vectors differ in length: {a.size} and {b.size}")
    return float(np.abs(a - b).sum())


def _dcg(relevance: np.ndarray, scores: np.ndarray, k: int) -> float:
    """DCG@k of ``relevance`` ranked by ``scores``; tied scores share their positions' discounts."""
    n = len(scores)
    order = np.argsort(-scores, kind="stable")
    ranked_scores, ranked_rel = scores[order], relevance[order]
    discount = np.zeros(n)
    discount[:k] = 1.0 / np.log2(np.arange(2, min(k, n) + 2))
    starts = np.flatnonzero(np.r_[True, ranked_scores[1:] != ranked_scores[:-1]])
    if len(starts) == n:   # no ties
        return float(ranked_rel @ discount)
    counts = np.diff(np.r_[starts, n])
    return float((np.add.reduceat(ranked_rel, starts) / counts * np.add.reduceat(discount, starts)).sum())


def ndcg_at_k(current: Sequence[float] | np.ndarray, reference: Sequence[float] | np.ndarray,
              k: int | None = None) -> float:
    """nDCG@k of the ranking by ``current`` with ``reference`` (clipped at 0) as the relevances.

    Tied scores in ``current`` get the average gain of their positions (as scikit-learn's
    ``ndcg_score`` with ``ignore_ties=False``). NaN when ``current`` has a NaN or the
    reference has nothing positive.

    >>> ndcg_at_k([0.3, 0.2, 0.0], [0.3, 0.2, 0.0])
    1.0
    >>> round(ndcg_at_k([0.0, 0.2, 0.3], [0.3, 0.2, 0.0]), 3)   # (0.2 / log2(3) + 0.3 / 2) / (0.3 + 0.2 / log2(3))
    0.648
    """
    scores = np.asarray(current, dtype=np.float64)
    relevance = np.clip(np.asarray(reference, dtype=np.float64), 0.0, None)
    if scores.shape != relevance.shape or scores.ndim != 1:
        raise ValueError(f"the vectors differ in shape: {scores.shape} and {relevance.shape}")
    k = len(scores) if k is None else int(k)
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    if np.isnan(scores).any() or np.isnan(relevance).any():
        return float("nan")
    ideal = _dcg(relevance, relevance, k)
    return float(_dcg(relevance, scores, k) / ideal) if ideal > 0 else float("nan")



def top_names(names: list[str], values: np.ndarray, k: int) -> tuple[str, ...]:
    """The ``k`` names with the largest values, largest first (ties in ``names`` order)."""
    order = np.argsort(-np.asarray(values, dtype=np.float64), kind="stable")[:k]
    return tuple(names[i] for i in order)

