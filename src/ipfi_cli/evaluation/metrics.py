"""The paper's error between two importance vectors, and quantile summaries of errors.

The paper (Experiment A) says: "We normalize the iPFI and the batch PFI estimates
between 0 and 1, and compute the sum over the feature-wise absolute approximation
errors". We read "normalize" the way the paper's published evaluation code does it
(``sum`` below, the default): negative importances are set to 0 (a feature whose
permutation *lowers* the loss is unimportant, not "negatively important"), then the
vector is divided by its sum, so each entry is a share in [0, 1] and the entries add
up to 1. The error is then the L1 distance between two such share vectors; it lies
in [0, 2] (0: same ranking and same proportions; 2: disjoint supports).

Two other readings are available for comparison, both mapping into [0, 1]:

* ``max``: clip at 0, divide by the largest value (the top feature gets 1);
* ``minmax``: ``(v - min) / (max - min)`` without clipping (the least important
  feature gets 0, the most important 1).

A vector that is all zero (after clipping) normalises to all zeros; a vector with a
NaN (an estimate not available yet) normalises to all NaN, and its error is NaN.

>>> normalise([0.3, 0.1, -0.02, 0.0]).round(3).tolist()
[0.75, 0.25, 0.0, 0.0]
>>> round(importance_error([0.3, 0.1, 0.0], [0.2, 0.2, 0.0]), 3)   # |0.75-0.5| + |0.25-0.5|
0.5
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

import numpy as np

from ipfi_cli.core.ranking import NORMALISATIONS, importance_error, normalise

__all__ = ["NORMALISATIONS", "ErrorSummary", "importance_error", "normalise", "summarise"]



@dataclass(frozen=True)
class ErrorSummary:
    """Median and quartiles of a set of errors (NaNs ignored), as in the paper's tables.

    Quartiles use numpy's default (linear) interpolation, as the paper's code does.
    """

    n: int
    median: float
    q1: float
    q3: float

    @property
    def iqr(self) -> float:
        return self.q3 - self.q1

    def as_dict(self) -> dict[str, float | int]:
        return {"n": self.n, "median": self.median, "q1": self.q1, "q3": self.q3, "iqr": self.iqr}


def summarise(errors: Iterable[float]) -> ErrorSummary:
    """Summarise errors; all fields NaN (``n`` = 0) when there is none.

    >>> s = summarise([0.1, 0.2, 0.3, 0.4])
    >>> s.n, round(s.median, 3), round(s.q1, 3), round(s.q3, 3), round(s.iqr, 3)
    (4, 0.25, 0.175, 0.325, 0.15)
    """
    values = np.asarray([e for e in errors], dtype=np.float64)
    values = values[~np.isnan(values)]
    if values.size == 0:
        nan = float("nan")
        return ErrorSummary(0, nan, nan, nan)
    q1, median, q3 = np.quantile(values, [0.25, 0.5, 0.75])
    return ErrorSummary(int(values.size), float(median), float(q1), float(q3))
