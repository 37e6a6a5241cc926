"""The one interface the estimators need from a model.

The core never touches a model directly: it talks to a *predictor*, an object with
the methods below. ``ipfi_cli.models`` builds predictors for scikit-learn, river
and plain callables; anything else that has these methods works too.

Rows reach a predictor in one of two shapes:

* a *block*: a 2-D numpy array, one row per evaluation, columns in ``columns`` order
  (used when ``supports_batch`` is true: one call evaluates many rows);
* *records*: a list of dicts ``{column: value}`` (one model call per row, as river does).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from ipfi_cli.core.losses import Output


@runtime_checkable
class Predictor(Protocol):
    """What iPFI and batch PFI call. Implemented by the adapters in ``ipfi_cli.models``."""

    #: True when ``predict_block`` is the fast path (many rows in one call).
    supports_batch: bool
    #: The input columns the model names (scikit-learn's ``feature_names_in_``), or ``None``.
    columns: list[str] | None
    #: How many inputs a model that does not name them was fitted on, or ``None``.
    n_features: int | None

    @property
    def can_learn(self) -> bool:
        """The model learns one row at a time (river's ``learn_one``)."""
        ...

    @property
    def classes(self) -> list[Any] | None:
        """The classes a fitted classifier predicts, when it says (scikit-learn's ``classes_``)."""
        ...

    @property
    def is_classifier(self) -> bool:
        """The model says it is a classifier."""
        ...

    @property
    def has_proba(self) -> bool:
        """The model gives class probabilities (the log loss needs them)."""
        ...

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        """Learn one row (raises for a model that cannot)."""
        ...

    def predict_block(
        self, block: np.ndarray, columns: Sequence[str], output: Output, targets: np.ndarray | None
    ) -> np.ndarray:
        """Predict every row of ``block``.

        For ``Output.PROBA`` return, per row, the probability of ``targets[i]``.
        """
        ...

    def predict_records(
        self, records: list[dict[str, Any]], output: Output, target: Any
    ) -> np.ndarray:
        """Predict every record; for ``Output.PROBA`` the probability of ``target``."""
        ...
