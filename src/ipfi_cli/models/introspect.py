"""What a fitted river model has learned about its inputs: the feature names it knows.

A river model takes any dict, so one trained on other names than the input's columns (a
header ``0,1,2`` read as text against int keys from ``stream.iter_array``, or renamed
columns) silently predicts a constant and every importance comes out 0. The names a model
learned are visible in its state: a scaler's counts, a linear model's weights, a tree's
split features, the keys a ``compose.Select`` picks; of a pipeline, only its first step's (the
later steps see that step's outputs, such as a one-hot encoder's ``city_paris``).
:func:`learned_features` collects them so a run can refuse inputs the model has never seen.
"""

from __future__ import annotations

from typing import Any

#: attributes whose dict keys are feature names (river's StandardScaler, linear models, Select)
_KEYED = ("counts", "_weights", "weights", "keys")
_MAX_DEPTH = 6


def _walk(obj: Any, found: set[Any], depth: int, seen: set[int]) -> None:
    if depth > _MAX_DEPTH or id(obj) in seen or isinstance(obj, (str, bytes, int, float, bool)) or obj is None:
        return
    seen.add(id(obj))
    module = type(obj).__module__ or ""
    if isinstance(obj, (list, tuple)):
        for item in obj:
            _walk(item, found, depth + 1, seen)
        return
    if isinstance(obj, dict):
        for item in obj.values():
            _walk(item, found, depth + 1, seen)
        return
    if not module.startswith("river"):
        return
    state = getattr(obj, "__dict__", {})
    for name in _KEYED:
        value = state.get(name)
        if value is not None and hasattr(value, "keys") and not isinstance(value, type):
            found.update(k for k in value.keys() if isinstance(k, (str, int)))
        elif name == "keys" and isinstance(value, (set, frozenset, list, tuple)):
            found.update(k for k in value if isinstance(k, (str, int)))
    feature = state.get("feature")
    if isinstance(feature, (str, int)) and "tree" in module:
        found.add(feature)
    steps = state.get("steps")
    if isinstance(steps, dict):  # a pipeline: only its first step sees the inputs (the later ones see its
        for first in list(steps.values())[:1]:  # outputs, such as one-hot names); nothing else of it
            _walk(first, found, depth + 1, seen)
        return
    for name, value in state.items():
        if name in ("steps", "transformers", "_root", "children", "model", "classifier", "regressor") or \
                (isinstance(value, (dict, list, tuple)) and name not in _KEYED):
            _walk(value, found, depth + 1, seen)


def learned_features(model: Any) -> set[Any]:
    """The feature names a river model (or pipeline) shows it has learned or selects; empty
    for an untrained model or another kind of model.

    >>> from river import linear_model, preprocessing
    >>> model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
    >>> model.learn_one({"a": 1.0, "b": 2.0}, True)
    >>> sorted(learned_features(model))
    ['a', 'b']
    """
    found: set[Any] = set()
    if hasattr(model, "predict_one"):
        _walk(model, found, 0, set())
    return found


def unseen_inputs(model: Any, columns: list[str]) -> str | None:
    """A one-line problem when a river model learned features none of which are ``columns``
    (it would predict as if every input were missing), else ``None``."""
    learned = learned_features(model)
    if not learned or learned & set(columns):
        return None
    shown = ", ".join(repr(k) for k in sorted(learned, key=str)[:8]) + (", ..." if len(learned) > 8 else "")
    hint = ""
    if all(isinstance(k, int) for k in learned):
        hint = (" (int keys, as river's stream.iter_array gives them; a CSV header is text: train the model "
                "with feature_names=... or on dicts keyed by the column names)")
    inputs = ", ".join(repr(c) for c in columns[:8]) + (", ..." if len(columns) > 8 else "")
    return (f"the river model learned the features {shown}, and none of them is an input column ({inputs}){hint}: "
            "every importance would be 0; give the model the columns it was trained on")
