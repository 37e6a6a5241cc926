"""MLflow's scoring protocol for a served model (:class:`~ipfi_cli.models.http.HttpPredictor`).

``POST .../invocations`` with ``{"dataframe_split": {"columns": [...], "data": [...]}}``
(``mlflow models serve``, Databricks and SageMaker MLflow containers). The answer is
``{"predictions": [...]}``: labels or numbers, or per row a list of class probabilities
(a model logged with ``pyfunc_predict_fn="predict_proba"``) or a ``{class: p}`` object.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.models.http_options import HttpOptions


class MlflowProtocol:
    """The request bodies and answers of MLflow's ``/invocations`` (columns go by name)."""

    def __init__(self, options: HttpOptions) -> None:
        self.options = options

    def read_metadata(self, request: Callable[[str, str], Any], path: str) -> tuple[list[str] | None, int | None]:
        """The columns and the number of features the model declares: MLflow's server declares none."""
        return None, None

    def arrange(self, block: np.ndarray, columns: Sequence[str]) -> tuple[np.ndarray, Sequence[str], list[str]]:
        """The block and its columns as they are sent, and the columns' wire types (none here)."""
        return block, columns, []

    def payload(self, rows: np.ndarray, columns: Sequence[str], types: list[str], output: Output) -> dict[str, Any]:
        # numbers as a numpy array: orjson writes the bytes of their Python values, without a Python object each
        data: Any = np.ascontiguousarray(rows, dtype=np.float64 if rows.dtype.kind == "f" else None) \
            if rows.dtype.kind in "fiub" else rows.tolist()
        return {"dataframe_split": {"columns": list(columns), "data": data}}

    def predictions(self, answer: Any, output: Output, n_rows: int) -> list[Any]:
        """One prediction per row; an answer of another shape is a ``ValueError`` (see :meth:`expected`)."""
        predictions = answer.get("predictions", answer) if isinstance(answer, dict) else answer
        if isinstance(predictions, dict) and predictions \
                and all(isinstance(v, list) for v in predictions.values()):  # a DataFrame column-wise
            predictions = [dict(zip(predictions, values)) for values in zip(*predictions.values())]
        if not isinstance(predictions, list):
            raise ValueError("predictions")
        return predictions

    def expected(self, n_rows: int) -> str:
        """What a well-formed answer holds, for a message."""
        return '{"predictions": [...]}'
