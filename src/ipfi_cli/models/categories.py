"""The categories a fitted model knows for its input columns.

A scikit-learn ``OneHotEncoder(handle_unknown="ignore")`` gives a value it did not see when
fitted an all-zero encoding: the model still predicts, and a column whose values are all
unknown to it (``' State-gov'`` read with the space after UCI's ``, ``) changes no prediction,
so its importance is 0 whatever the data hold. :func:`learned_categories` reads the categories
the model's encoders learned (``categories_`` of a ``OneHotEncoder``, ``OrdinalEncoder`` or
``TargetEncoder``), so a run can compare the input's first values with them:

* an encoder that is the model, or the first step of a ``Pipeline`` (its input names from
  ``feature_names_in_``);
* an encoder inside a ``ColumnTransformer`` (that step first in a ``Pipeline``, or the model),
  alone or after steps that keep the values (``SimpleImputer``, ``"passthrough"``), its columns
  those the transformer selected;
* the categorical columns of an XGBoost or LightGBM model fitted on pandas categoricals (the
  predictor's ``categories``).

Anything else (an encoder after a step that changes the values, a river model, which learns
its categories as it goes) is not looked into.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

_MAX_DEPTH = 6
#: steps that hand their input's values on unchanged (a missing value aside)
_KEEPS_VALUES = ("SimpleImputer",)


@dataclass(frozen=True)
class Categories:
    """The categories one encoder learned for one input column."""

    encoder: str  # how a message names the encoder ("OneHotEncoder")
    known: frozenset[Any]  # the categories, as Python values (missing values left out)
    shown: tuple[Any, ...]  # a few of them, in the encoder's order, for a message
    fails: bool = False  # an unknown value makes the model raise (handle_unknown="error"), not ignore it


def _native(value: Any) -> Any:
    item = getattr(value, "item", None)
    return item() if item is not None and not isinstance(value, (str, bytes)) else value


def _is_missing(value: Any) -> bool:
    return value is None or (isinstance(value, float) and value != value)


def _categories(encoder: str, values: Sequence[Any], fails: bool = False) -> Categories:
    known = [_native(v) for v in values]
    known = [v for v in known if not _is_missing(v)]
    return Categories(encoder, frozenset(known), tuple(known[:4]), fails)


def _names(estimator: Any, given: Sequence[str] | None) -> list[str] | None:
    names = getattr(estimator, "feature_names_in_", None)
    if names is not None:
        return [str(n) for n in names]
    return list(given) if given is not None else None


def _walk(estimator: Any, names: Sequence[str] | None, found: dict[str, Categories], depth: int) -> None:
    if depth > _MAX_DEPTH or estimator is None or isinstance(estimator, str):
        return
    steps = getattr(estimator, "steps", None)
    if isinstance(steps, list):  # a Pipeline: its first steps that see the input's own values
        names = _names(estimator, names)
        for step in steps:
            part = step[1] if isinstance(step, tuple) and len(step) == 2 else None
            if part is None or isinstance(part, str):  # "passthrough"
                continue
            _walk(part, names, found, depth + 1)
            if type(part).__name__ not in _KEEPS_VALUES:
                break
        return
    transformers = getattr(estimator, "transformers_", None)
    if isinstance(transformers, list):  # a fitted ColumnTransformer
        names = _names(estimator, names)
        indices = getattr(estimator, "_transformer_to_input_indices", None) or {}
        for entry in transformers:
            if not (isinstance(entry, tuple) and len(entry) == 3):
                continue
            name, part, _ = entry
            selected = indices.get(name)
            columns = ([names[i] for i in selected] if names is not None and selected is not None
                       and all(0 <= i < len(names) for i in selected) else None)
            _walk(part, columns, found, depth + 1)
        return
    categories = getattr(estimator, "categories_", None)
    if not isinstance(categories, list):
        return
    columns = _names(estimator, names)
    if columns is None or len(columns) != len(categories):
        return
    fails = getattr(estimator, "handle_unknown", None) == "error"
    for column, values in zip(columns, categories):
        try:
            found.setdefault(column, _categories(type(estimator).__name__, list(values), fails))
        except TypeError:  # an unhashable category: not compared
            continue


def learned_categories(model: Any, predictor: Any = None, columns: Sequence[str] | None = None
                       ) -> dict[str, Categories]:
    """Input column -> the categories the model learned for it (see the module docstring).

    ``columns`` name the model's inputs when it names none (fitted on an array: it takes the
    run's columns by position); ``predictor`` is the run's, whose ``categories`` an XGBoost or
    LightGBM model's categorical columns are.

    >>> import pandas as pd
    >>> from sklearn.compose import make_column_transformer
    >>> from sklearn.linear_model import LinearRegression
    >>> from sklearn.pipeline import make_pipeline
    >>> from sklearn.preprocessing import OneHotEncoder
    >>> X = pd.DataFrame({"city": ["paris", "rome", "oslo"], "size": [1.0, 2.0, 3.0]})
    >>> model = make_pipeline(make_column_transformer((OneHotEncoder(handle_unknown="ignore"), ["city"]),
    ...                                               remainder="passthrough"), LinearRegression())
    >>> found = learned_categories(model.fit(X, [1.0, 2.0, 3.0]))
    >>> sorted(found), sorted(found["city"].known), found["city"].encoder
    (['city'], ['oslo', 'paris', 'rome'], 'OneHotEncoder')
    """
    found: dict[str, Categories] = {}
    names = _names(model, None)
    if names is None and columns is not None and getattr(model, "n_features_in_", None) == len(columns):
        names = list(columns)
    try:
        _walk(model, names, found, 0)
    except Exception:  # noqa: BLE001 - a model's own attributes: nothing to compare with, rather than a failure
        found = {}
    for column, values in (getattr(predictor, "categories", None) or {}).items():
        if values is not None and column not in found:
            try:
                found[column] = _categories("categorical column", list(values))
            except TypeError:
                continue
    return found
