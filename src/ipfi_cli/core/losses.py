"""Per-row losses, vectorised over the rows of one evaluation block.

Each loss says which model output it needs (:class:`Output`) and maps the true
targets and that output to one loss value per row. iPFI only ever uses loss
*differences* between a perturbed and the unperturbed prediction of one row.

>>> import numpy as np
>>> ZERO_ONE.compute(np.array([1, 0, 1], dtype=object), np.array([1, 1, 1], dtype=object)).tolist()
[0.0, 1.0, 0.0]
>>> ABSOLUTE.compute(np.array([1.0, 2.0]), np.array([1.5, 0.0])).tolist()
[0.5, 2.0]

A *label-free* loss (``relative``) compares each prediction with the model's own unperturbed
prediction of the same row instead of a label: ``prediction-shift`` is the absolute change of
a regressor's output, the total-variation distance of a binary classifier's probabilities, or
a flip of the predicted label (:func:`prediction_shift`). Its importance is how much the
model's output moves when a feature is permuted: what label-free monitors compute, available
before (or without) any label.

>>> shift = prediction_shift(is_classifier=True, classes=[0, 1], has_proba=True)
>>> shift.output.value, shift.proba_class, shift.relative
('proba', 1, True)
>>> shift.compute(np.array([0.9, 0.9]), np.array([0.9, 0.25])).tolist()   # |p1 - p1'|: the TV distance
[0.0, 0.65]
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from enum import Enum
from typing import Any, cast

import numpy as np

from ipfi_cli.errors import ModelError

#: probabilities are clipped to this before taking the log (scikit-learn's log_loss uses machine epsilon)
LOG_LOSS_EPS = 1e-15


class Output(str, Enum):
    """What a loss needs from the model for each row."""

    LABEL = "label"  # a predicted class label (predict / predict_one)
    VALUE = "value"  # a predicted number (regression predict / predict_one)
    PROBA = "proba"  # the probability the model gives the row's true label (predict_proba)


class LossMismatchError(ModelError):
    """The chosen loss does not fit what the model predicts."""


class UnmeasurableError(ModelError):
    """The model's answers cannot give an importance: every row has the loss's maximum (the
    answers never match what the), or the loss is not a finite number (overflow)."""


@dataclass(frozen=True)
class Loss:
    """A named per-row loss: ``compute(y_true, model_output) -> losses``."""

    name: str
    output: Output
    function: Callable[[np.ndarray, np.ndarray], np.ndarray]
    description: str
    #: label-free: the "target" of every evaluation is the model's unperturbed output for the row
    relative: bool = False
    #: with ``Output.PROBA`` and ``relative``: the class whose probability is compared
    proba_class: Any = None

    def compute(self, y_true: np.ndarray, predicted: np.ndarray) -> np.ndarray:
        """One loss per row; an overflow gives ``inf`` quietly (the run reports it as a non-finite loss)."""
        with np.errstate(over="ignore", invalid="ignore"):
            return self.function(y_true, predicted)


def _zero_one(y_true: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    return cast(np.ndarray, (predicted != y_true).astype(np.float64))


def _as_numbers(values: np.ndarray, what: str) -> np.ndarray:
    try:
        return np.asarray(values, dtype=np.float64)
    except (TypeError, ValueError):
        sample = next((v for v in np.ravel(values) if not isinstance(v, (int, float))), None)
        raise LossMismatchError(
            f"the loss needs numeric {what}, got {sample!r}; "
            "for a classifier use the zero-one or log loss"
        ) from None


def _absolute(y_true: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    return cast(np.ndarray, np.abs(_as_numbers(predicted, "predictions") - _as_numbers(y_true, "targets")))


def _squared(y_true: np.ndarray, predicted: np.ndarray) -> np.ndarray:
    diff = _as_numbers(predicted, "predictions") - _as_numbers(y_true, "targets")
    return cast(np.ndarray, diff * diff)


def _log(y_true: np.ndarray, proba_of_true: np.ndarray) -> np.ndarray:
    return -np.log(np.clip(np.asarray(proba_of_true, dtype=np.float64), LOG_LOSS_EPS, 1.0))


ZERO_ONE = Loss("zero-one", Output.LABEL, _zero_one, "1 if the predicted label is wrong, else 0")
ABSOLUTE = Loss("absolute", Output.VALUE, _absolute, "|prediction - target|")
SQUARED = Loss("squared", Output.VALUE, _squared, "(prediction - target)^2")
LOG = Loss("log", Output.PROBA, _log, "-log(probability of the true label), clipped at 1e-15")

PREDICTION_SHIFT = Loss("prediction-shift", Output.VALUE, _absolute,
                        "|prediction - unperturbed prediction| (no label needed)", relative=True)

LOSSES: dict[str, Loss] = {loss.name: loss for loss in (ZERO_ONE, ABSOLUTE, SQUARED, LOG, PREDICTION_SHIFT)}


def prediction_shift(is_classifier: bool, classes: Sequence[Any] | None, has_proba: bool) -> Loss:
    """The label-free ``prediction-shift`` loss for a model: the absolute change of a regressor's
    output; for a binary classifier with probabilities, the total-variation distance of its two
    class probabilities (``|p(c) - p'(c)|``, equal to half the L1 distance of the vectors); for
    any other classifier, a flip of the predicted label (0 or 1).

    (The total-variation distance of more than two classes needs every class probability, which
    the model adapters do not give: label flips are used then.)
    """
    if not is_classifier:
        return PREDICTION_SHIFT
    if has_proba and classes is not None and len(classes) == 2:
        return Loss("prediction-shift", Output.PROBA, _absolute,
                    "total-variation distance of the class probabilities from the unperturbed ones (no label needed)",
                    relative=True, proba_class=list(classes)[1])
    return Loss("prediction-shift", Output.LABEL, _zero_one,
                "1 if the predicted label flips from the unperturbed one, else 0 (no label needed)", relative=True)


def maximal_loss(loss: Loss) -> float:
    """The largest value one row's loss can take: 1 for zero-one, ``-log(1e-15)`` for log, else infinity."""
    if loss.output is Output.LABEL:
        return 1.0
    if loss.output is Output.PROBA:
        return float(-np.log(LOG_LOSS_EPS))
    return float("inf")


def unmeasurable(loss: Loss, mean_loss: float, n_rows: int) -> str | None:
    """Why ``n_rows`` rows with this mean unperturbed loss give no importance, or ``None``.

    Every row at the loss's maximum means no answer matched its label, so no permutation can make
    a prediction worse; a loss that is not finite makes every difference NaN or infinite.

    >>> unmeasurable(ZERO_ONE, 1.0, 40)[:45]
    'every one of the 40 rows has the maximal zero'
    >>> unmeasurable(SQUARED, float("inf"), 40)[:30]
    'the squared loss is not a fini'
    >>> unmeasurable(ZERO_ONE, 0.25, 40) is None
    True
    """
    if n_rows <= 0:
        return None
    if not np.isfinite(mean_loss):
        return (f"the {loss.name} loss is not a finite number (the model's answers are NaN or infinite, or so "
                "large that the loss overflows), so no importance can be computed")
    if mean_loss >= maximal_loss(loss):
        what = "a wrong prediction" if loss.output is Output.LABEL else "probability 0 for its label"
        return (f"every one of the {n_rows:,} rows has the maximal {loss.name} loss ({what}): no permutation can "
                "make a loss larger, so no importance can be measured; the labels probably never match what the "
                "model answers: check --target and that the labels are the model's classes")
    return None


def get_loss(name: str | Loss) -> Loss:
    """Look a loss up by name (``zero-one``, ``absolute``, ``squared``, ``log``)."""
    if isinstance(name, Loss):
        return name
    key = name.strip().lower().replace("_", "-")
    aliases = {"zero-one": "zero-one", "zeroone": "zero-one", "01": "zero-one", "mae": "absolute",
               "abs": "absolute", "mse": "squared", "log-loss": "log", "logloss": "log",
               "cross-entropy": "log"}
    key = aliases.get(key, key)
    if key not in LOSSES:
        raise ValueError(f"unknown loss {name!r}; choose one of {', '.join(LOSSES)}")
    return LOSSES[key]


def default_loss(is_classifier: bool) -> Loss:
    """The paper's defaults: zero-one for classification, absolute error for regression."""
    return ZERO_ONE if is_classifier else ABSOLUTE
