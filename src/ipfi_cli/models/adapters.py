"""Model adapters, chosen by explicit capability checks (never by type names).

* river models and pipelines: they have ``predict_one`` (and ``learn_one``);
* scikit-learn estimators and pipelines: ``predict`` plus ``get_params``/``fit``;
* a plain callable: ``f(block) -> predictions`` on a 2-D array.

Feature values pass through untouched: strings stay strings, numbers stay numbers.
Heavy libraries are imported only when an adapter of that kind is used.

>>> import numpy as np
>>> predictor = as_predictor(lambda X: X[:, 0] * 2.0)
>>> predictor.predict_block(np.array([[1.0], [2.0]]), ["a"], Output.VALUE, None).tolist()
[2.0, 4.0]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import ModelError
from ipfi_cli.models.boosting import fitted_categories


def _proba_of(probabilities: np.ndarray, classes: Sequence[Any], targets: np.ndarray | None) -> np.ndarray:
    """Pick, per row, the probability of that row's target (0 for a class the model never saw)."""
    if targets is None:
        raise ValueError("the probability of the true label needs the labels")
    index = {c: i for i, c in enumerate(list(classes))}
    columns = np.array([index.get(t, -1) for t in targets.tolist()], dtype=np.intp)
    picked = probabilities[np.arange(len(columns)), np.maximum(columns, 0)]
    return np.where(columns >= 0, picked, 0.0)


def predict_records_as_block(predictor: Any, records: list[dict[str, Any]], output: Output,
                             target: Any) -> np.ndarray:
    """``predict_records`` for a predictor whose fast path is ``predict_block``: the records as
    one object block (values as they came), every row with the same ``target``."""
    columns = list(records[0])
    block = np.empty((len(records), len(columns)), dtype=object)
    block[:, :] = [[r[c] for c in columns] for r in records]
    targets = np.full(len(records), target, dtype=object) if output is Output.PROBA else None
    return np.asarray(predictor.predict_block(block, columns, output, targets))


class SklearnPredictor:
    """A fitted scikit-learn estimator or pipeline; predicts whole blocks in one call.

    When the model was fitted on a DataFrame (it has ``feature_names_in_``) it gets a
    DataFrame with those names, so pipelines with string categorical columns work.
    ``categories`` (column -> categories, ``None``: unknown) are the columns an XGBoost or
    LightGBM model was fitted on as pandas categoricals (see
    :func:`~ipfi_cli.models.boosting.fitted_categories`): they are cast to those categories.
    """

    supports_batch = True
    can_learn = False

    def __init__(self, model: Any, categories: dict[str, list[Any] | None] | None = None) -> None:
        if not hasattr(model, "predict"):
            raise ModelError("the model has no predict method")
        self.model = model
        self.categories = categories or {}
        names = getattr(model, "feature_names_in_", None)
        self.columns: list[str] | None = [str(c) for c in names] if names is not None else None
        self.n_features: int | None = getattr(model, "n_features_in_", None)

    @property
    def is_classifier(self) -> bool:
        from sklearn.base import is_classifier

        return bool(is_classifier(self.model))

    @property
    def has_proba(self) -> bool:
        return hasattr(self.model, "predict_proba")

    @property
    def classes(self) -> list[Any] | None:
        classes = getattr(self.model, "classes_", None)
        return list(classes) if classes is not None else None

    def _frame(self, block: np.ndarray, columns: Sequence[str]) -> Any:
        if self.columns is None and not self.categories:
            return block
        import pandas as pd

        frame = pd.DataFrame(block, columns=list(columns), copy=False)
        if block.dtype == object:
            frame = frame.infer_objects()
        if self.columns is not None and list(columns) != self.columns:
            frame = frame[self.columns]
        for column, categories in self.categories.items():
            if column in frame.columns:
                frame[column] = pd.Categorical(frame[column], categories=categories)
        return frame

    def predict_block(self, block: np.ndarray, columns: Sequence[str], output: Output,
                      targets: np.ndarray | None) -> np.ndarray:
        data = self._frame(block, columns)
        if output is Output.PROBA:
            if not self.has_proba:
                raise ModelError("the log loss needs predict_proba, which this model does not have")
            return _proba_of(np.asarray(self.model.predict_proba(data)), self.model.classes_, targets)
        return np.asarray(self.model.predict(data))

    def predict_records(self, records: list[dict[str, Any]], output: Output, target: Any) -> np.ndarray:
        columns = list(records[0])
        block = np.array([[r[c] for c in columns] for r in records], dtype=object)
        targets = np.full(len(records), target, dtype=object) if output is Output.PROBA else None
        return self.predict_block(block, columns, output, targets)

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        raise ModelError("a scikit-learn model cannot learn one row at a time here; "
                         "use a river model for incremental learning")


def river_task(model: Any) -> str | None:
    """``classification`` or ``regression`` for a river model or pipeline, else ``None``.

    From river 0.24 on a pipeline is an instance of its last step's kind; before, it is
    not, so a pipeline is judged by its last step (river 0.26 has no ``utils.inspect``).
    """
    from river import base, compose

    while isinstance(model, compose.Pipeline) and model.steps \
            and not isinstance(model, (base.Classifier, base.Regressor)):
        model = list(model.steps.values())[-1]
    if isinstance(model, base.Classifier):
        return "classification"
    if isinstance(model, base.Regressor):
        return "regression"
    return None


def _distinct(records: list[dict[str, Any]]) -> tuple[list[dict[str, Any]], list[int] | None]:
    """The distinct records and, for each record, the index of its equal among them.

    Records are equal when they hold the same names with values of the same type that compare
    equal (so ``1``, ``1.0`` and ``True`` stay apart, and a NaN matches only itself). ``None``
    for the indexes when every record is distinct or a value cannot be hashed.

    >>> _distinct([{"a": 1}, {"a": 2}, {"a": 1}, {"a": 1.0}])
    ([{'a': 1}, {'a': 2}, {'a': 1.0}], [0, 1, 0, 2])
    """
    first: dict[tuple[Any, ...], int] = {}
    where: list[int] = []
    unique: list[dict[str, Any]] = []
    try:
        for record in records:
            key = (*record.items(), *map(type, record.values()))
            index = first.setdefault(key, len(unique))
            if index == len(unique):
                unique.append(record)
            where.append(index)
    except TypeError:  # an unhashable value (a list, a dict): ask every record
        return records, None
    return (records, None) if len(unique) == len(records) else (unique, where)


class RiverPredictor:
    """A river model or pipeline: ``predict_one``/``predict_proba_one`` per record.

    ``use_many=True`` sends whole blocks through ``predict_many``/``predict_proba_many``
    (as a DataFrame) where the model has them. It is off by default: for blocks of one
    row's ~100 evaluations, building the DataFrame costs more than the calls it saves
    (measured: 1.3 ms against 0.34 ms for 91 rows through a scaled logistic regression).
    """

    def __init__(self, model: Any, use_many: bool = False) -> None:
        if not hasattr(model, "predict_one"):
            raise ModelError("the model has no predict_one method")
        self.model = model
        self.use_many = use_many and hasattr(model, "predict_many")
        self.supports_batch = self.use_many
        self.columns: list[str] | None = None
        self.n_features: int | None = None
        self.classes: list[Any] | None = None  # asked on the first row (see ipfi_cli.run.labels)

    @property
    def can_learn(self) -> bool:
        return hasattr(self.model, "learn_one")

    @property
    def is_classifier(self) -> bool:
        return river_task(self.model) == "classification"

    @property
    def has_proba(self) -> bool:
        return hasattr(self.model, "predict_proba_one") and self.is_classifier

    def predict_records(self, records: list[dict[str, Any]], output: Output, target: Any) -> np.ndarray:
        """The model's answer for each record; equal records are asked once.

        A step's perturbed rows repeat (a donor's value equal to the row's own, or the same
        donor drawn twice): a quarter of them on Agrawal. ``predict_one`` does not change the
        model, so asking each distinct record once gives the same answers, and the cost of a
        slow model (an adaptive random forest) drops by as much.
        """
        model = self.model
        unique, where = _distinct(records)
        if output is Output.PROBA:
            proba = getattr(model, "predict_proba_one", None)
            if proba is None:
                raise ModelError("the log loss needs predict_proba_one, which this model does not have")
            answers = np.array([proba(record).get(target, 0.0) for record in unique], dtype=np.float64)
            return answers if where is None else answers[where]
        predict = model.predict_one
        predictions = [predict(record) for record in unique]
        if where is not None:
            predictions = [predictions[i] for i in where]
        if output is Output.VALUE:
            return np.array([np.nan if p is None else p for p in predictions], dtype=np.float64)
        result = np.empty(len(predictions), dtype=object)
        result[:] = predictions
        return result

    def predict_block(self, block: np.ndarray, columns: Sequence[str], output: Output,
                      targets: np.ndarray | None) -> np.ndarray:
        import pandas as pd

        frame = pd.DataFrame(block, columns=list(columns))
        if block.dtype == object:
            frame = frame.infer_objects()
        if output is Output.PROBA:
            if not hasattr(self.model, "predict_proba_many"):
                raise ModelError("the log loss needs predict_proba_many, which this model does not have")
            probabilities = self.model.predict_proba_many(frame)
            return _proba_of(probabilities.to_numpy(dtype=np.float64), list(probabilities.columns), targets)
        return np.asarray(self.model.predict_many(frame))

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        if not self.can_learn:
            raise ModelError("the model has no learn_one method, so it cannot learn incrementally")
        self.model.learn_one(x, y)


class FunctionPredictor:
    """A plain function of a 2-D block (``vectorized=True``) or of one record dict.

    >>> import numpy as np
    >>> FunctionPredictor(lambda r: r["a"] > 1, vectorized=False).predict_records(
    ...     [{"a": 0}, {"a": 2}], Output.LABEL, None).tolist()
    [False, True]
    """

    can_learn = False
    has_proba = False

    def __init__(self, function: Callable[..., Any], vectorized: bool = True,
                 is_classifier: bool | None = None) -> None:
        if not callable(function):
            raise ModelError("the model is not callable")
        self.function = function
        self.supports_batch = vectorized
        self.columns: list[str] | None = None
        self.n_features: int | None = None
        self.classes: list[Any] | None = None
        self._is_classifier = is_classifier

    @property
    def is_classifier(self) -> bool:
        return bool(self._is_classifier)

    def predict_block(self, block: np.ndarray, columns: Sequence[str], output: Output,
                      targets: np.ndarray | None) -> np.ndarray:
        if output is Output.PROBA:
            raise ModelError("a plain function gives no probabilities; use another loss")
        if not self.supports_batch:
            return self.predict_records([dict(zip(columns, r)) for r in block.tolist()], output, None)
        answers = np.asarray(self.function(block))
        if answers.ndim == 2 and answers.shape[1] == 1:  # a column of answers, as many wrapped models give
            answers = answers[:, 0]
        if answers.shape != (len(block),):
            raise ModelError(f"the function answered {len(block)} rows with an array of shape {answers.shape}: "
                             "it must return one value per row (a 1-D array as long as the block)")
        return answers

    def predict_records(self, records: list[dict[str, Any]], output: Output, target: Any) -> np.ndarray:
        if output is Output.PROBA:
            raise ModelError("a plain function gives no probabilities; use another loss")
        if self.supports_batch:
            columns = list(records[0])
            return self.predict_block(np.array([[r[c] for c in columns] for r in records], dtype=object),
                                      columns, output, None)
        result = np.empty(len(records), dtype=object)
        result[:] = [self.function(r) for r in records]
        return result

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        raise ModelError("a plain function cannot learn")


def as_predictor(model: Any, *, use_many: bool = False) -> Any:
    """Wrap ``model`` in the adapter its methods call for.

    Checks, in order: already an adapter (any :class:`~ipfi_cli.core.predictor.Predictor`:
    ONNX, MLflow, a served model, a user's own); ``predict_one`` (river); ``predict`` with
    ``fit`` or ``get_params`` (scikit-learn and look-alikes); callable (a function of a block).
    """
    if isinstance(model, (SklearnPredictor, RiverPredictor, FunctionPredictor)):
        return model
    kind = type(model)  # the protocol's methods, looked up on the type (a property may need a server)
    if all(hasattr(kind, name) for name in ("predict_block", "predict_records", "learn_one")) \
            and not hasattr(kind, "predict_one") and not hasattr(kind, "get_params"):
        return model
    if hasattr(model, "predict_one"):
        return RiverPredictor(model, use_many=use_many)
    if hasattr(model, "predict") and (hasattr(model, "fit") or hasattr(model, "get_params")):
        return SklearnPredictor(model, fitted_categories(model))  # XGBoost/LightGBM fitted on categoricals
    if callable(model):
        return FunctionPredictor(model)
    raise ModelError(
        f"cannot explain a {type(model).__name__}: it has no predict_one (river), "
        "no predict (scikit-learn) and is not callable"
    )
