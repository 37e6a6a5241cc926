"""XGBoost and LightGBM models fitted on pandas categorical columns.

Both libraries take a categorical feature only as a pandas ``category`` column: fed the
plain values (numbers or text, as a file gives them) they refuse the frame (XGBoost: "must
be int, float, bool or category"; LightGBM: "categorical_feature do not match"). The
scikit-learn adapter (:class:`~ipfi_cli.models.adapters.SklearnPredictor`) casts those columns
to ``category`` with the categories :func:`fitted_categories` reads from the model, so codes
mean what they meant in training; a value the model never saw becomes missing, which both
libraries handle as missing.

Found by capability, not by type: XGBoost's ``get_booster().feature_types`` (``"c"``) and
``get_categories()`` (XGBoost 3.1+; older versions get the categories present in each
block, which XGBoost 3.1+ would re-code anyway), LightGBM's ``booster_.pandas_categorical``.
"""

from __future__ import annotations

from typing import Any


def _xgboost_categories(model: Any) -> dict[str, list[Any] | None]:
    try:
        booster = model.get_booster()
    except Exception:  # noqa: BLE001 - not fitted, or not XGBoost after all
        return {}
    names, types = booster.feature_names or [], booster.feature_types or []
    found: dict[str, list[Any] | None] = {n: None for n, t in zip(names, types) if t == "c"}
    if not found:
        return {}
    try:
        stored = booster.get_categories(export_to_arrow=True).to_arrow() or []
        for name, values in stored:
            if name in found and values is not None:
                found[name] = values.to_pylist()
    except Exception:  # noqa: BLE001 - XGBoost < 3.1, or no pyarrow: categories from each block
        pass
    return found


def _lightgbm_categories(model: Any) -> dict[str, list[Any] | None]:
    booster = getattr(model, "_Booster", None)  # booster_ itself raises on an unfitted model
    categories = getattr(booster, "pandas_categorical", None)
    if not categories or booster is None:
        return {}
    infos = booster.dump_model(num_iteration=0).get("feature_infos", {})
    categorical = [name for name in booster.feature_name() if infos.get(name, {}).get("values")]
    if len(categorical) != len(categories):
        return {}  # categorical features given by index as well: leave the frame to LightGBM
    return {name: list(values) for name, values in zip(categorical, categories)}


def fitted_categories(model: Any) -> dict[str, list[Any] | None]:
    """Column -> categories for the columns ``model`` was fitted on as pandas categoricals
    (``None``: categorical, categories unknown). Empty for any other model."""
    if hasattr(model, "get_booster") and getattr(model, "enable_categorical", False):
        return _xgboost_categories(model)
    if getattr(getattr(model, "_Booster", None), "pandas_categorical", None):
        return _lightgbm_categories(model)
    return {}
