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

from typing import Any, Protocol, Sequence, runtime_checkable

import numpy as np

from ipfi_cli.core.losses import Output


@runtime_checkable
class Predictor(Protocol):
    """What iPFI and batch PFI call. Implemented by the adapters in ``ipfi_cli.models``."""

    #: True when ``predict_block`` is the fast path (many rows in one call).
    supports_batch: bool

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
