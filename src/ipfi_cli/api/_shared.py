"""What the Python API's explainers share: the loss a model gets, labels matched to its classes, and
tables read as rows and column names (the command line's rules, raised as exceptions)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core import batch as core_batch
from ipfi_cli.core.losses import Loss, Output, default_loss, get_loss
from ipfi_cli.models.adapters import as_predictor


def _task(model: Any, loss: Loss | None) -> bool:
    """True for classification: what the model says, else what the loss implies."""
    from ipfi_cli.run.labels import declared_task

    task = declared_task(getattr(model, "model", model))
    if task is not None:
        return task != "regression"
    if loss is not None:
        return loss.output is not Output.VALUE
    return bool(as_predictor(model).is_classifier)


def _default_loss(model: Any, loss: str | Loss | None) -> Loss:
    """The loss to use, checked against the model before the first row (the command line's check)."""
    from ipfi_cli.errors import ModelError
    from ipfi_cli.run.labels import LossFitError, check_loss, declared_task

    chosen = get_loss(loss) if loss is not None else None
    predictor = as_predictor(model)
    if chosen is not None and chosen.relative and not isinstance(loss, Loss):
        # "prediction-shift": needs no label, and its form depends on the model's output
        from ipfi_cli.core.losses import prediction_shift

        return prediction_shift(bool(predictor.is_classifier), predictor.classes, bool(predictor.has_proba))
    classification = _task(model, chosen)
    chosen = chosen or default_loss(classification)
    try:
        classes = predictor.classes if classification else None
        has_proba = bool(predictor.has_proba) if chosen.output is Output.PROBA else False
        check_loss(chosen, classification, declared_task(getattr(model, "model", model)), classes, has_proba)
    except LossFitError as error:
        raise ModelError(str(error).replace("--loss", "loss=").replace("loss= ", "loss=").replace(
            "--task classification", "a classification loss")) from None
    return chosen


def _matcher(model: Any, loss: Loss, first_row: Mapping[str, Any] | None = None) -> Any:
    """The command line's label matcher for this model's classes (``None`` for regression). A model
    that does not list its classes (a served one) shows them in its answer on ``first_row``."""
    from ipfi_cli.run.labels import LabelMatcher, model_classes_from_answer

    if loss.output is Output.VALUE:
        return None
    predictor = as_predictor(model)
    classes = getattr(predictor, "classes", None)
    if classes:
        return LabelMatcher(classification=True, classes=classes, fixed=not predictor.can_learn)
    if first_row is None or predictor.can_learn:
        return None
    answered = model_classes_from_answer(predictor, dict(first_row))
    return LabelMatcher(classification=True, classes=answered, fixed=False) if answered else None


def _matched(matcher: Any, y: Sequence[Any]) -> list[Any]:
    """``y`` as the model's own class values; labels none of which it has raise :class:`ModelError`."""
    from ipfi_cli.errors import ModelError
    from ipfi_cli.run.checks import labels_match_nothing

    if matcher is None:
        return list(y)
    labels = [matcher(v) for v in y]
    if matcher.none_matched:
        raise ModelError(labels_match_nothing(matcher))
    return labels


def _columns_of(model: Any, X: Any = None) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        return [str(c) for c in names]
    if X is not None and hasattr(X, "columns"):
        return [str(c) for c in X.columns]
    if isinstance(X, np.ndarray) and X.ndim == 2:
        return [f"x{i}" for i in range(X.shape[1])]
    return None


def _first_record(rows: Any, names: Sequence[str]) -> dict[str, Any] | None:
    """The table's first row as ``{column: value}`` (``None`` for an empty table)."""
    if len(rows) == 0:
        return None
    if hasattr(rows, "iloc"):
        return {c: rows.iloc[0][c] for c in names}
    first = rows[0]
    return {c: first[c] for c in names} if isinstance(first, Mapping) else dict(zip(names, list(first)))


def _table(X: Any, columns: Sequence[str] | None, model: Any) -> tuple[Any, list[str]]:
    names = list(columns) if columns is not None else _columns_of(model, X)
    if isinstance(X, list) and X and isinstance(X[0], Mapping):
        names = names or [str(c) for c in X[0]]
    if names is None and not isinstance(X, np.ndarray) and len(X) and not isinstance(X[0], Mapping):
        X = np.asarray(X, dtype=object)   # a list of lists: an array, columns x0, x1, ...
        if X.ndim == 2:
            X = X.astype(np.float64) if all(isinstance(v, (int, float)) for v in X.flat) else X
            names = [f"x{i}" for i in range(X.shape[1])]
    if names is None:
        raise ValueError("give columns=: the rows do not name their columns")
    return X, [str(c) for c in names]


def _bunch(result: core_batch.PFIResult) -> Any:
    from sklearn.utils import Bunch

    return Bunch(importances_mean=result.values.mean(axis=1), importances_std=np.asarray(result.std),
                 importances=result.values, feature_names=list(result.names), baseline_loss=result.baseline_loss,
                 n_rows=result.n_rows)
