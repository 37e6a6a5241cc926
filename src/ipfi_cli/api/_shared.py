"""What the Python API's explainers share: the loss a model gets, labels matched to its classes, and
tables read as rows and column names (the command line's rules, raised as exceptions)."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core import batch as core_batch
from ipfi_cli.core.losses import Loss, Output, default_loss, get_loss, prediction_shift
from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import as_predictor
from ipfi_cli.models.loading import GuardedPredictor
from ipfi_cli.run.checks import labels_match_nothing
from ipfi_cli.run.labels import LabelMatcher, declared_task, model_classes_from_answer, model_classes_from_first_row
from ipfi_cli.run.setup import RenamedInputs


def _task(model: Any, loss: Loss | None) -> bool:
    """True for classification: what the model says, else what the loss implies."""
    task = declared_task(getattr(model, "model", model))
    if task is not None:
        return task != "regression"
    if loss is not None:
        return loss.output is not Output.VALUE
    return bool(as_predictor(model).is_classifier)


def _default_loss(model: Any, loss: str | Loss | None) -> Loss:
    """The loss to use, checked against the model before the first row (the command line's check)."""
    from ipfi_cli.run.labels import LossFitError, check_loss, declared_task

    chosen = get_loss(loss) if loss is not None else None
    predictor = as_predictor(model)
    if chosen is not None and chosen.relative and not isinstance(loss, Loss):
        # "prediction-shift": needs no label, and its form depends on the model's output

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
    """The command line's label matcher for this model (``None`` for a loss that needs no label).

    Regression labels must be finite numbers; a missing label is refused for every model. A
    classifier that does not list its classes (river, a served model, a function) shows them in its
    answer on ``first_row``, as on the command line's first row (``'yes'`` then finds ``True``)."""
    if loss.relative:
        return None
    if loss.output is Output.VALUE:
        return LabelMatcher(classification=False)
    predictor = as_predictor(model)
    classes = getattr(predictor, "classes", None)
    if classes:
        return LabelMatcher(classification=True, classes=classes, fixed=not predictor.can_learn)
    matcher = LabelMatcher(classification=True, fixed=False)
    if first_row is not None:
        raw = getattr(model, "model", model)
        if predictor.can_learn and hasattr(raw, "predict_one"):
            answered = model_classes_from_first_row(raw, dict(first_row))
        else:  # one answer shows a class, not all: labels are converted to its type
            answered = model_classes_from_answer(predictor, dict(first_row))
        if answered:
            matcher.learn_classes(answered)
    return matcher


def _native_label(y: Any) -> Any:
    """A NumPy scalar label as the Python value a reader gives (``np.float64(3.0)`` -> ``3.0``)."""
    return y.item() if isinstance(y, np.generic) else y


def _predictor(model: Any, keys: Mapping[str, Any] | None = None) -> Any:
    """The model as the core calls it: its own exceptions raised as
    :class:`~ipfi_cli.errors.ModelCallError`; with ``keys`` (text name -> the rows' own key, for
    rows keyed by ints) the model gets records keyed as it learned them."""
    predictor: Any = GuardedPredictor(as_predictor(model))
    if keys:
        predictor = RenamedInputs(predictor, dict(keys))
    return predictor


@contextlib.contextmanager
def _located(row: int | None) -> Iterator[None]:
    """Name ``row`` in a problem of the row's (a label, a value, the model failing on it)."""
    from ipfi_cli.errors import InputError, ModelCallError, ModelError

    try:
        yield
    except ModelCallError as error:
        where = f"row {row}: the model failed on this row" if row is not None else "the model failed"
        raise ModelError(f"{where} ({error})") from error.cause
    except InputError as error:
        if error.row is None:
            error.row = row
        raise


def _api_text(message: str) -> str:
    """A command line message as the Python API says it (no option names)."""
    return message.replace("check --target and ", "check ")


def _matched(matcher: Any, y: Sequence[Any]) -> list[Any]:
    """``y`` as the model's own class values; a label that cannot be used raises
    :class:`~ipfi_cli.run.labels.LabelError` naming its row, labels none of which the model has
    :class:`ModelError`."""
    from ipfi_cli.errors import ModelError

    if matcher is None:
        return list(y)
    labels = []
    for row, value in enumerate(y, start=1):
        with _located(row):
            labels.append(matcher(_native_label(value)))
    if matcher.none_matched:
        raise ModelError(_api_text(labels_match_nothing(matcher)))
    return labels


def _labels_of(y: Any, n_rows: int) -> Any:
    """``y`` as one label per row: a column ``(n, 1)`` is taken as its values; another length or
    shape raises :class:`ValueError`."""
    shape = np.shape(y)
    if len(shape) == 2 and shape[1] == 1:
        y = np.asarray(y)[:, 0]
    elif len(shape) != 1:
        raise ValueError(f"y must hold one label per row (1-D), got shape {shape}")
    if len(y) != n_rows:
        raise ValueError(f"X has {n_rows:,} rows and y {len(y):,} labels: give one label per row")
    return y


def _text_keys(X: Any) -> tuple[Any, dict[str, Any] | None]:
    """Dict rows keyed by ints (river's ``iter_array``, its synthetic streams) as rows keyed by text,
    and the text name -> key map the model gets them back by (``None`` for text keys)."""
    if isinstance(X, list) and X and isinstance(X[0], Mapping) and any(not isinstance(k, str) for k in X[0]):
        keys = {str(k): k for k in X[0]}
        return [{str(k): v for k, v in row.items()} for row in X], keys
    return X, None


def _check_columns(model: Any, columns: Sequence[str] | None) -> None:
    """``columns`` given for a model that names its inputs must hold every one of them."""
    from ipfi_cli.errors import ModelError

    named = _columns_of(model)
    if columns is None or not named:
        return
    lacking = [c for c in named if c not in [str(c) for c in columns]]
    if lacking:
        shown = ", ".join(map(repr, lacking[:6])) + (", ..." if len(lacking) > 6 else "")
        raise ModelError(f"the model takes the columns it was fitted on, and columns= lacks {shown}; to explain "
                         "only some of them, pass them as features=")


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
    if isinstance(X, np.ndarray) and X.ndim != 2:
        raise ValueError(f"X must be a table, rows by columns (2-D), got shape {X.shape}")
    _check_columns(model, columns)
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
    _check_present(X, names)
    return X, [str(c) for c in names]


def _check_present(X: Any, names: Sequence[Any]) -> None:
    """A ValueError naming the first of the model's inputs ``X`` lacks (a DataFrame's column, a dict
    row's key), not pandas' bare KeyError from deep inside."""
    frame_columns = getattr(X, "columns", None)
    if frame_columns is not None and not isinstance(X, np.ndarray):
        have = {str(c) for c in frame_columns}
        missing = [str(c) for c in names if str(c) not in have]
        if missing:
            raise ValueError(f"X has no column {missing[0]!r}, one of the model's inputs "
                             f"({', '.join(map(str, names))}); X's columns: {', '.join(map(str, frame_columns))}")
    elif isinstance(X, list) and X and isinstance(X[0], Mapping):
        wanted = [str(c) for c in names]
        for number, row in enumerate(X, start=1):
            if not isinstance(row, Mapping):
                raise ValueError(f"row {number} of X is not a dict, as the first is")
            missing = [c for c in wanted if c not in row]
            if missing:
                raise ValueError(f"row {number} of X has no key {missing[0]!r}, one of the model's inputs "
                                 f"({', '.join(wanted)})")


def _bunch(result: core_batch.PFIResult) -> Any:
    from sklearn.utils import Bunch

    return Bunch(importances_mean=result.values.mean(axis=1), importances_std=np.asarray(result.std),
                 importances=result.values, feature_names=list(result.names), baseline_loss=result.baseline_loss,
                 n_rows=result.n_rows)
