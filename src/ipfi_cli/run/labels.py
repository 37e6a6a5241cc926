"""Labels as the model means them, and losses that fit the model.

A label read from a file is text or a JSON value; the model's classes may be bools, ints,
floats or strings. :class:`LabelMatcher` maps each label to the model's own class value,
so ``True``, ``"true"``, ``1`` and ``1.0`` find the class ``True``, and ``"1"`` finds
the class ``1``. The classes come from the model: scikit-learn's ``classes_``, or a river
classifier's answer on the first row (the keys of ``predict_proba_one``, else the type of
``predict_one``). Labels that are none of a fixed model's classes are counted, so a run can
say that the model never predicts them.

:func:`check_loss` refuses, before the first row, a loss that cannot measure the model:
zero-one or log loss for a regressor (its numbers almost never equal a label, so every
row would have the loss's maximum and every importance would be 0), absolute or squared
error for a classifier with text classes.

>>> matcher = LabelMatcher(classification=True, classes=[False, True])
>>> [matcher("True"), matcher("false"), matcher(1), matcher(0.0)]
[True, False, True, False]
>>> matcher = LabelMatcher(classification=True, classes=["0", "1"])
>>> [matcher(1), matcher(0.0)]
['1', '0']
>>> matcher = LabelMatcher(classification=True, classes=[0.0, 1.0])
>>> [matcher("yes"), matcher(False), matcher("1")]
[1.0, 0.0, 1.0]
>>> matcher("maybe"), matcher.unknown
('maybe', {'maybe': 1})
"""

from __future__ import annotations

import math
import sys
from collections.abc import Iterable, Sequence
from typing import Any

from ipfi_cli.core.losses import Loss, Output
from ipfi_cli.errors import InputError, ModelError, ServiceError
from ipfi_cli.models.adapters import river_task
from ipfi_cli.text import quoted

#: text spellings of the two bool classes
_TRUE = ("true", "t", "yes", "y", "1", "1.0")
_FALSE = ("false", "f", "no", "n", "0", "0.0")
#: the largest finite float, as an int (an int label beyond it is no number a model computes with)
_FLOAT_MAX = int(sys.float_info.max)
#: rows whose unperturbed zero-one loss is all 1 before a run says the labels look wrong
MISMATCH_ROWS = 25


_TOO_LARGE = "a label of {digits:,} digits, too large for a float; no model predicts it"


class LabelError(InputError):
    """A label that cannot be used (missing, or not a number in regression)."""


class LossFitError(ModelError):
    """A loss that cannot measure this model; the message names the fix."""


def _native(value: Any) -> Any:
    """A numpy scalar as the Python value (``np.int64(1)`` -> ``1``, ``np.str_('a')`` -> ``'a'``)."""
    if isinstance(value, str):
        return str(value)
    item = getattr(value, "item", None)
    return item() if item is not None and not isinstance(value, (str, bytes)) else value


def _is_missing(value: Any) -> bool:
    return value is None or (type(value) is float and math.isnan(value))


def _too_large(value: Any) -> bool:
    """An integer no float holds (a 400-digit label): beyond +-1.8e308."""
    return type(value) is int and not -_FLOAT_MAX <= value <= _FLOAT_MAX


def _number_of(value: Any) -> float | None:
    """A label as a float when it is a number or number-like text (bools are not numbers), ``None``
    for an integer no float holds."""
    if isinstance(value, bool):
        return None
    if isinstance(value, (int, float)):
        return None if _too_large(value) else float(value)
    if isinstance(value, str):
        try:
            number = float(value.strip())
        except ValueError:
            return None
        return number if math.isfinite(number) else None
    return None


class LabelMatcher:
    """Turn each label into the model's own value for it (see the module docstring).

    Parameters
    ----------
    classification : bool
        ``False``: labels must be finite numbers (regression).
    classes : sequence or None, default=None
        The model's classes when known. ``None``: labels pass through as read, until
        :meth:`learn_classes` is given some.
    fixed : bool, default=True
        The classes are all the model can predict (a fitted, static model): labels that
        are none of them are counted in :attr:`unknown`. A model that learns as it goes
        gains classes, so for it labels are only converted to the classes' type.
    """

    def __init__(self, *, classification: bool, classes: Iterable[Any] | None = None, fixed: bool = True) -> None:
        self.classification = classification
        self.fixed = fixed
        self.classes: list[Any] | None = None
        #: label (as read) -> rows with it that match no class of a fixed model
        self.unknown: dict[Any, int] = {}
        #: labels looked up among known classes (rows)
        self.matched = 0
        self._lookup: dict[Any, Any] = {}  # a class's own text (and number) -> the class
        self._aliases: dict[Any, Any] = {}  # lower-cased, stripped, yes/no ... -> the one class it can mean
        self._kind: type | None = None
        #: text labels taken as they are (no class found them), by their case- and space-blind form: the
        #: spellings seen (a model that learns its classes from them learns each as a class)
        self.spellings: dict[str, set[str]] = {}
        if classes is not None:
            self.learn_classes(classes)

    def learn_classes(self, classes: Iterable[Any]) -> None:
        """Set the model's classes (native Python values) and the lookup that finds them."""
        known = [_native(c) for c in classes]
        if not known:
            return
        self.classes = known
        kinds = {type(c) for c in known}
        self._kind = kinds.pop() if len(kinds) == 1 else None
        exact: dict[Any, Any] = {}
        aliases: dict[Any, Any] = {}
        ambiguous: set[Any] = set()
        # two classes that are the numbers 0 and 1 (ints, floats or their text): a 0/1 model
        zero_one = (len(known) == 2 and not any(isinstance(c, bool) for c in known)
                    and {_number_of(c) for c in known} == {0.0, 1.0})
        for c in known:
            exact.setdefault(str(c), c)
            if isinstance(c, (int, float)) and not isinstance(c, bool) and math.isfinite(c):
                exact.setdefault(("number", float(c)), c)
            keys: list[Any] = [str(c).strip().lower()]
            if isinstance(c, bool) or zero_one:  # True/yes find the class 1 of a 0/1 model, as 1 finds True
                keys += list(_TRUE if c is True or _number_of(c) == 1.0 else _FALSE)
            for key in keys:
                if aliases.setdefault(key, c) != c or key in ambiguous:
                    ambiguous.add(key)  # "Setosa" and "setosa" both: "SETOSA" finds neither
        # a class's own text always finds it: an alias of another class ("setosa" of "Setosa") never hides it
        self._lookup = exact
        self._aliases = {key: c for key, c in aliases.items() if key not in ambiguous}

    def __call__(self, value: Any) -> Any:
        if _is_missing(value):
            raise LabelError("missing label")
        if not self.classification:
            if type(value) not in (int, float):
                raise LabelError(f"the label {quoted(value)} is not a number (the task is regression)")
            if _too_large(value):
                raise LabelError(_TOO_LARGE.format(digits=len(str(abs(value)))))
            if not math.isfinite(value):
                raise LabelError(f"the label {value} is not a finite number")
            return value
        if not self._lookup:
            self._note_spelling(value)
            return value
        self.matched += 1
        found = self._find(value)
        if found is not None:
            return found[0]
        if _too_large(value):  # no class of a model is such a number
            raise LabelError(_TOO_LARGE.format(digits=len(str(abs(value)))))
        if self.fixed:
            try:
                self.unknown[value] = self.unknown.get(value, 0) + 1
            except TypeError:  # unhashable (cannot come from a reader, but from Python it may)
                pass
            return value
        self._note_spelling(value)
        return self._as_kind(value)

    def _note_spelling(self, value: Any) -> None:
        """Remember a text label taken as it is, under its case- and space-blind form (a few spellings
        each, for the first 10,000 forms: labels of a classifier are few)."""
        if isinstance(value, str):
            key = value.strip().lower()
            seen = self.spellings.get(key)
            if seen is None:
                if len(self.spellings) < 10_000:
                    self.spellings[key] = {value}
            elif len(seen) < 5:
                seen.add(value)

    def spelling_summary(self, limit: int = 3) -> str | None:
        """One line about text labels that differ only in case or surrounding spaces and were taken as
        they are, so that a model learning its classes from them learns each as a class of its own
        (``'setosa'`` and ``' SETOSA'``), or ``None``."""
        apart = [sorted(spellings) for _, spellings in sorted(self.spellings.items()) if len(spellings) > 1]
        if not apart:
            return None
        shown = ", ".join(_listed([quoted(v) for v in group]) for group in apart[:limit])
        more = f" and {len(apart) - limit} more" if len(apart) > limit else ""
        return (f"labels that differ only in case or surrounding spaces were taken as different classes: {shown}"
                f"{more}; the model learns each spelling as a class of its own: write each class one way")

    def many(self, values: Sequence[Any]) -> list[Any] | None:
        """The labels of many rows, as calling this matcher on each would give them (with the
        same counts), looked up once per distinct value; ``None`` (and nothing counted) if one
        of them cannot be used: the rows need the row-by-row check, which names it.

        >>> matcher = LabelMatcher(classification=True, classes=[0, 1])
        >>> matcher.many([1, 0, 1, 2]), matcher.matched, matcher.unknown
        ([1, 0, 1, 2], 4, {2: 1})
        """
        saved_matched, saved_unknown = self.matched, dict(self.unknown)
        try:
            # keyed by type too: 1 and 1.0 are equal keys but may find different classes
            found = {key: self(key[1]) for key in dict.fromkeys((type(v), v) for v in values)}
        except (ValueError, TypeError):  # an unusable label, or an unhashable one (not from a reader)
            self.matched, self.unknown = saved_matched, saved_unknown
            return None
        # the lookups above counted each distinct value once: count every row instead
        self.matched = saved_matched
        if self.classification and self._lookup:
            self.matched = saved_matched + len(values)
        fresh = {key for key, count in self.unknown.items() if count != saved_unknown.get(key, 0)}
        self.unknown = saved_unknown
        if fresh:
            for value in values:
                if value in fresh:
                    self.unknown[value] = self.unknown.get(value, 0) + 1
        return [found[type(value), value] for value in values]

    def find(self, value: Any) -> tuple[Any] | None:
        """``(class,)`` for the class ``value`` means, by the rule labels follow (a class's own text, its
        number, then an alias that no other class shares: ``1`` finds ``1.0``, ``dole`` finds ``Dole``,
        ``yes`` the class 1 of a 0/1 model), or ``None``; nothing is counted.

        >>> LabelMatcher(classification=True, classes=["Dole", "Lab"]).find("dole")
        ('Dole',)
        """
        if _is_missing(value) or not self._lookup:
            return None
        return self._find(value)

    def _find(self, value: Any) -> tuple[Any] | None:
        classes = self.classes or []
        if not isinstance(value, bool):
            number = _number_of(value)
            if number is not None:
                hit = self._lookup.get(("number", number))
                if hit is not None:
                    return (hit,)
        elif any(type(c) is bool for c in classes):
            return (value,) if value in classes else None
        text = str(value)
        if text in self._lookup:  # a class's own text first: no alias of another class hides it
            return (self._lookup[text],)
        number = None if isinstance(value, bool) else _number_of(value)
        if number is not None and number.is_integer() and str(int(number)) in self._lookup:
            return (self._lookup[str(int(number))],)  # 1.0 finds the class "1"
        alias = text.strip().lower()
        if alias in self._aliases:
            return (self._aliases[alias],)
        return None

    def _as_kind(self, value: Any) -> Any:
        """A label no class has yet, in the classes' type where it converts cleanly."""
        kind = self._kind
        if kind is None or isinstance(value, kind) and not (kind is int and isinstance(value, bool)):
            return value
        if kind is bool:
            text = str(value).strip().lower()
            return True if text in _TRUE else False if text in _FALSE else value
        if kind is str:
            number = _number_of(value)
            if number is not None and number.is_integer() and not isinstance(value, str):
                return str(int(number))
            return str(value)
        number = _number_of(value)
        if kind is int and number is not None and number.is_integer():
            return int(number)
        if kind is float and number is not None:
            return number
        return value

    @property
    def none_matched(self) -> bool:
        """Every label looked up so far matched no class of a fixed model: the model cannot be
        measured on these labels (every row would have the maximal loss)."""
        return self.fixed and self.matched > 0 and sum(self.unknown.values()) == self.matched

    def unknown_summary(self, limit: int = 3) -> str | None:
        """One line about the labels no class matched, or ``None``."""
        if not self.unknown:
            return None
        rows = sum(self.unknown.values())
        common = sorted(self.unknown.items(), key=lambda item: -item[1])[:limit]
        shown = ", ".join(f"{quoted(label)} ({count:,} row{'s' if count != 1 else ''})" for label, count in common)
        more = f" and {len(self.unknown) - limit} more" if len(self.unknown) > limit else ""
        classes = ", ".join(repr(c) for c in (self.classes or [])[:10])
        return (f"{rows:,} row(s) have a label the model never predicts: {shown}{more}; the model's classes are "
                f"{classes}. Those rows count as errors; check that the labels are the model's")


def _listed(items: Sequence[str]) -> str:
    """``a``, ``a and b``, ``a, b and c``."""
    return items[0] if len(items) == 1 else ", ".join(items[:-1]) + " and " + items[-1]


def model_classes_from_first_row(model: Any, x: dict[str, Any]) -> list[Any] | None:
    """A river classifier's classes as it answers on a first row, or ``None``.

    The keys of ``predict_proba_one`` when it gives any, else the value of ``predict_one``
    (which tells at least the classes' type).
    """
    try:
        proba = model.predict_proba_one(x) if hasattr(model, "predict_proba_one") else None
    except Exception:  # noqa: BLE001 - the row's own problems are reported when it is explained
        proba = None
    if proba:
        return list(proba)
    try:
        predicted = model.predict_one(x)
    except Exception:  # noqa: BLE001
        return None
    return None if predicted is None else [predicted]


def model_classes_from_answer(predictor: Any, x: dict[str, Any]) -> list[Any] | None:
    """The classes a model that does not list them (a served model, a pyfunc) shows in its answer on
    one row: every class when the answer named them (``{class: probability}``), else the answer itself,
    or both bools when it is a bool (so ``no`` finds ``False`` too)."""
    try:
        predicted = predictor.predict_records([x], Output.LABEL, None)[0]
    except ServiceError:  # the model cannot be reached: said at once, about no row
        raise
    except Exception:  # noqa: BLE001 - the row's own problems are reported when it is explained
        return None
    named = getattr(predictor, "classes", None)
    if named:  # the answer named every class (a served model's {class: probability} objects)
        return list(named)
    predicted = _native(predicted)
    if predicted is None or (isinstance(predicted, float) and not math.isfinite(predicted)):
        return None
    if isinstance(predicted, bool):
        return [False, True]
    if predicted in (0, 1, "0", "1") and not isinstance(predicted, float):  # a 0/1 model: yes/true find 1 too
        return [type(predicted)(0), type(predicted)(1)]
    return [predicted]


def declared_task(model: Any) -> str | None:
    """``classification`` or ``regression`` when the model says which it is, else ``None``."""
    if hasattr(model, "predict_one"):
        return river_task(model)
    if hasattr(model, "predict") and (hasattr(model, "fit") or hasattr(model, "get_params")):
        from sklearn.base import is_classifier, is_regressor

        if is_classifier(model):
            return "classification"
        if is_regressor(model):
            return "regression"
    return None


def check_loss(loss: Loss, classification: bool, task: str | None, classes: Sequence[Any] | None,
               has_proba: bool) -> None:
    """Raise :class:`LossFitError` for a loss or task that cannot measure this model.

    ``task`` is what the model declares (:func:`declared_task`); ``classification`` what
    the run chose; ``classes`` the model's classes when known.
    """
    if task == "regression" and loss.output is Output.PROBA:
        raise LossFitError("the model is a regressor, and the log loss needs class probabilities, which a "
                           "regressor does not give; use --loss absolute or squared (the default for a regressor)")
    if task == "regression" and (classification or loss.output is not Output.VALUE):
        what = f"--loss {loss.name}" if loss.output is not Output.VALUE else "--task classification"
        raise LossFitError(
            f"the model is a regressor, and {what} compares its numbers with the labels for exact equality, so "
            "every row would have the maximal loss and every importance would be 0; use --loss absolute or "
            "squared (the default for a regressor), without --task classification")
    if loss.output is Output.PROBA and not classification:
        raise LossFitError("the log loss is for classification; use --loss absolute or squared")
    if loss.output is Output.PROBA and not has_proba:
        raise LossFitError("the log loss needs predicted probabilities, and this model has none; "
                           "use --loss zero-one")
    if loss.output is Output.VALUE and classes:
        text = [c for c in classes if not isinstance(_native(c), (int, float)) or isinstance(_native(c), bool)]
        if text:
            shown = ", ".join(repr(_native(c)) for c in list(classes)[:5])
            raise LossFitError(
                f"the {loss.name} error needs numeric labels, and this classifier's classes are not numbers "
                f"({shown}); use --loss zero-one or log (and not --task regression)")


def mismatch_example(predictor: Any, columns: Sequence[str], reference: tuple[dict[str, Any], Any] | None) -> str:
    """`` (the model predicts values like 1; the labels read like 'yes')`` for a row the model
    took, to show how predictions and labels differ; empty when there is no such row."""
    if reference is None:
        return ""
    values, label = reference
    try:
        predicted = predictor.predict_records([{c: values[c] for c in columns}], Output.LABEL, None)[0]
    except Exception:  # noqa: BLE001 - only an example for the message
        return ""
    return f" (the model predicts values like {quoted(predicted)}; the labels read like {quoted(label)})"
