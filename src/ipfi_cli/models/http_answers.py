"""What a served model's answers mean (:class:`ServedAnswers`, mixed into
:class:`~ipfi_cli.models.http.HttpPredictor`): labels, values or class probabilities, per row,
from the lists and ``{class: p}`` objects servers send; an answer that cannot be what the
protocol promises is an :class:`~ipfi_cli.models.http_options.HttpModelError` naming the URL,
a row's answer that is not probabilities a :class:`~ipfi_cli.errors.ModelError` of that row."""

from __future__ import annotations

import json
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import _proba_of
from ipfi_cli.models.http_options import HttpModelError, HttpOptions

#: how far a served probability may lie outside [0, 1], and its row's sum from 1 (float32 rounding)
PROBABILITY_TOLERANCE = 1e-6
SUM_TOLERANCE = 1e-3

EXPECTED = {Output.LABEL: "one label", Output.VALUE: "one number", Output.PROBA: "class probabilities"}


def shown_answer(value: Any) -> str:
    """A short JSON excerpt of an answer for a message."""
    try:
        text = json.dumps(value, default=str)
    except (TypeError, ValueError):
        text = repr(value)
    return text[:80] + "..." if len(text) > 80 else text


def _class_key(value: Any) -> str:
    """The spelling that finds a class: ``True``/``"true"`` -> ``true``, ``1``/``1.0``/``"1"`` -> ``1``."""
    if isinstance(value, (bool, np.bool_)):
        return "true" if value else "false"
    if isinstance(value, (float, np.floating)) and float(value).is_integer():
        return str(int(value))
    return str(value).strip().lower()


def _class_probabilities(answer: Any) -> bool:
    """Whether one row's answer reads as class probabilities: a list, or a ``{class: p}`` object, of
    two or more numbers (a one-field object or list is one label or value)."""
    values = list(answer.values()) if isinstance(answer, dict) else answer if isinstance(answer, list) else None
    return values is not None and len(values) > 1 and all(
        isinstance(v, (int, float)) and not isinstance(v, bool) for v in values)


class ServedAnswers:
    """Decoding of answers; the predictor gives the options and the classes (``--classes``, or
    the ones a server names in its first ``{class: p}`` answer, kept from then on)."""

    options: HttpOptions
    classes: list[Any] | None
    _class_lookup: dict[str, Any] | None

    def _decode(self, results: list[Any], n_rows: int, output: Output, targets: np.ndarray | None) -> np.ndarray:
        first = results[0]
        if output is Output.PROBA:
            matrix, classes = self._probabilities(results, n_rows)
            return _proba_of(matrix, classes, targets)
        shape = (f"each prediction has {len(first)} fields ({', '.join(map(str, first))})" if isinstance(first, dict)
                 else f"each prediction is a list of {len(first)}" if isinstance(first, list) else "")
        if output is Output.LABEL and _class_probabilities(first):
            # a server that answers probabilities: the label is the likeliest class
            try:
                matrix, classes = self._probabilities(results, n_rows)
            except HttpModelError:
                raise
            except ModelError:  # numbers, but no probabilities: not what a label is either
                raise HttpModelError(f"{self.options.display_url}: {shape}, which are not class probabilities; "
                                     "expected one label per row, or class probabilities") from None
            labels = np.empty(n_rows, dtype=object)
            labels[:] = [classes[i] for i in matrix.argmax(axis=1)]
            return labels
        if isinstance(first, dict):
            if len(first) != 1:
                raise HttpModelError(f"{self.options.display_url}: {shape}; expected one label or value per row")
            results = [next(iter(r.values())) for r in results]
        elif isinstance(first, list):
            if len(first) != 1:
                raise HttpModelError(f"{self.options.display_url}: {shape}; expected one label or value per row")
            results = [r[0] for r in results]
        if output is Output.VALUE:
            if any(isinstance(r, (str, bool, list, dict)) for r in results):
                raise ValueError("not numbers")
            return np.array([np.nan if r is None else r for r in results], dtype=np.float64)
        if any(isinstance(r, (list, dict)) or r is None for r in results):
            raise ValueError("not labels")
        labels = np.empty(len(results), dtype=object)
        labels[:] = [self._declared(r) for r in results] if self.classes else results
        return labels

    def _probabilities(self, results: list[Any], n_rows: int) -> tuple[np.ndarray, list[Any]]:
        """Every row's class probabilities ``[N, C]`` and the classes of the columns: ``{class: p}``
        objects name them (the first answer's keys, unless ``--classes`` did), lists are in the order
        ``--classes`` gives. Rows that are not probabilities are the model's answer on that row: a
        :class:`~ipfi_cli.errors.ModelError`, located in the row that got it."""
        first = results[0]
        if isinstance(first, dict):
            classes = self.classes or list(first)
            matrix = np.array([[row.get(c, row.get(str(c), 0.0)) for c in classes] for row in results],
                              dtype=np.float64)
        else:
            if not self.classes:
                raise HttpModelError(f"{self.options.display_url}: the server gives probabilities without class "
                                     "names: give --classes in the order of its probability columns")
            classes = self.classes
            matrix = np.asarray(results, dtype=np.float64).reshape(n_rows, -1)
            if matrix.shape[1] != len(classes):
                raise HttpModelError(f"{self.options.display_url}: {matrix.shape[1]} probabilities per row, but "
                                     f"--classes names {len(classes)} classes")
        bad = ~np.isfinite(matrix).all(axis=1) | (matrix < -PROBABILITY_TOLERANCE).any(axis=1) \
            | (matrix > 1 + PROBABILITY_TOLERANCE).any(axis=1) | (np.abs(matrix.sum(axis=1) - 1) > SUM_TOLERANCE)
        if bad.any():
            shown = shown_answer(results[int(np.argmax(bad))])
            raise ModelError(f"the server's answer {shown} is not class probabilities (each in [0, 1], "
                             "summing to 1)")
        if not self.classes:  # the server named its classes: labels are matched to them from now on
            self.classes = list(classes)
            self._class_lookup = None
        return matrix, list(classes)

    def _declared(self, answer: Any) -> Any:
        """An answer as the ``--classes`` value it names: ``true`` finds ``True``, ``1`` finds ``'1'``."""
        lookup = self._class_lookup
        if lookup is None:
            lookup = {}
            for c in self.classes or []:
                lookup.setdefault(_class_key(c), c)
            self._class_lookup = lookup
        return lookup.get(_class_key(answer), answer)
