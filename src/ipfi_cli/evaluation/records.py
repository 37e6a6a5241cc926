"""Per-feature comparison records: one flat record per method, feature and run.

They are what ``ipfi compare`` writes (one CSV row or JSON line each), so every field
is a plain number or string and missing values are ``None``.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import asdict, dataclass, fields
from typing import Any

import numpy as np

from ipfi_cli.evaluation.metrics import importance_error, normalise


@dataclass(frozen=True)
class FeatureComparison:
    """One feature's importance from one method and run, beside the reference it is compared to.

    ``method`` is ``batch`` (the reference itself), ``ipfi`` or ``interval``.
    ``ordering`` numbers the random orderings of a static comparison; ``row`` is the
    stream position (rows seen) of a learning comparison's interval point.
    ``normalised``/``reference_normalised`` are the vectors' normalised entries;
    ``abs_diff`` is their absolute difference and ``error`` the run's total error
    (the sum of ``abs_diff`` over the features).
    """

    method: str
    feature: str
    importance: float | None
    sampling: str | None = None
    alpha: float | None = None
    ordering: int | None = None
    row: int | None = None
    std: float | None = None
    n_repeats: int | None = None
    normalised: float | None = None
    reference: float | None = None
    reference_normalised: float | None = None
    abs_diff: float | None = None
    error: float | None = None

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


#: field names in record order (the CSV header)
RECORD_FIELDS: list[str] = [f.name for f in fields(FeatureComparison)]


def _number(value: float) -> float | None:
    value = float(value)
    return None if np.isnan(value) else value


def compare_vectors(names: Sequence[str], estimate: Sequence[float] | np.ndarray,
                    reference: Sequence[float] | np.ndarray, *, method: str,
                    normalisation: str = "sum", **labels: Any) -> list[FeatureComparison]:
    """Records for one estimate vector against one reference vector (``labels`` fill the rest).

    >>> recs = compare_vectors(["a", "b"], [0.3, 0.1], [0.2, 0.2], method="ipfi", ordering=0)
    >>> [(r.feature, round(r.normalised, 9), r.reference_normalised, round(r.error, 9)) for r in recs]
    [('a', 0.75, 0.5, 0.5), ('b', 0.25, 0.5, 0.5)]
    """
    estimate = np.asarray(estimate, dtype=np.float64)
    reference = np.asarray(reference, dtype=np.float64)
    a = normalise(estimate, normalisation)
    b = normalise(reference, normalisation)
    error = _number(importance_error(estimate, reference, normalisation))
    return [FeatureComparison(method=method, feature=name, importance=_number(estimate[j]),
                              normalised=_number(a[j]), reference=_number(reference[j]),
                              reference_normalised=_number(b[j]), abs_diff=_number(abs(a[j] - b[j])),
                              error=error, **labels)
            for j, name in enumerate(names)]


#: each sampling strategy's child of a run's seed sequence, so one strategy's numbers do not
#: depend on which others are run with it
_SAMPLING_SLOTS = {"uniform": 0, "geometric": 1}


def sampling_slot(sampling: str) -> int:
    """The index of ``sampling``'s seed among a run's two spawned seed sequences.

    >>> sampling_slot("geometric")
    1
    """
    try:
        return _SAMPLING_SLOTS[sampling]
    except KeyError:
        raise ValueError(f"unknown sampling {sampling!r}; choose uniform or geometric") from None
