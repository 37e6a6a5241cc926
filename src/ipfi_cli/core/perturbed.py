"""The model's predictions of perturbed rows and their losses, shared by iPFI and iSAGE.

A time step's evaluation block (``block_rows`` rows: the row itself first, then its perturbed
copies) goes to the model as one array (``predict_block``) or as records (``predict_records``,
river's dicts); :class:`PerturbedPredictions` makes those calls, counts them, and turns the
predictions of consecutive steps into losses, shape ``(steps, block_rows)``.

>>> from ipfi_cli.core.losses import get_loss
>>> predictions = PerturbedPredictions(get_loss("zero-one"), block_rows=3)
>>> predictions.losses(np.array([1, 0, 1, 0, 0, 1]), [1, 0]).tolist()   # two steps of 3 rows
[[0.0, 1.0, 0.0], [0.0, 0.0, 1.0]]
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.layout import PermutationLayout
from ipfi_cli.core.losses import ABSOLUTE, SQUARED, ZERO_ONE, Loss, Output
from ipfi_cli.core.predictor import Predictor

#: values (records x the row's width) of a row's perturbed copies built and predicted in one call at most,
#: when the model takes records (river): 10,000 columns x M = 10 would be 10^9 values at once
RECORD_CELLS = 1 << 21
#: built-in losses that give the same numbers for int64/float64 targets as for the Python objects
_NUMERIC_TARGET_LOSSES = (ZERO_ONE, ABSOLUTE, SQUARED)


def loss_targets(loss: Loss, targets: list[Any], kind: str) -> np.ndarray:
    """The targets as an array for ``loss``: int64 (float64) when every target is an ``int``
    (``float``) and the predictions (of dtype kind ``kind``) are integers (floats), so a built-in
    loss compares numbers in bulk with exactly the result of comparing the Python objects; else
    an object array of the targets as they are.

    >>> loss_targets(ZERO_ONE, [1, 0], "i").dtype, loss_targets(ZERO_ONE, [1, "0"], "i").dtype
    (dtype('int64'), dtype('O'))
    """
    if loss in _NUMERIC_TARGET_LOSSES and len(targets):
        kinds = set(map(type, targets))
        try:
            if kinds == {int} and kind in "ib":
                return np.array(targets, dtype=np.int64)
            if kinds == {float} and kind == "f":
                return np.array(targets, dtype=np.float64)
        except OverflowError:  # an int beyond 64 bits: compared as a Python object
            pass
    return _objects(targets)


def _objects(values: Sequence[Any]) -> np.ndarray:
    out = np.empty(len(values), dtype=object)
    for i, y in enumerate(values):
        out[i] = y
    return out


def as_predictions(predicted: Any) -> np.ndarray:
    """The model's predictions as an array; text labels as objects (the losses compare them so)."""
    array = np.asarray(predicted)
    return array.astype(object) if array.dtype.kind in "US" else array


class PerturbedPredictions:
    """Predicts evaluation blocks of ``block_rows`` rows each and scores them with ``loss``.

    ``n_model_calls`` and ``n_predictions`` count the calls to the model and the rows they predicted.
    """

    def __init__(self, loss: Loss, block_rows: int) -> None:
        self.loss = loss
        self.block_rows = block_rows
        self.n_model_calls = 0
        self.n_predictions = 0

    def output_targets(self, targets: list[Any]) -> list[Any]:
        """The class whose probability the model returns per row: the label, or for a label-free
        loss its fixed class."""
        if self.loss.proba_class is not None:
            return [self.loss.proba_class] * len(targets)
        return targets

    def row_targets(self, targets: list[Any]) -> np.ndarray | None:
        """What ``predict_block`` takes per block row for ``targets``' steps: each step's class
        repeated for every row of its block when the loss reads probabilities, else ``None``."""
        if self.loss.output is not Output.PROBA:
            return None
        return np.repeat(_objects(self.output_targets(targets)), self.block_rows)

    def predict_block(self, model: Predictor, block: np.ndarray, columns: list[str], targets: list[Any]) -> np.ndarray:
        """The model's predictions of ``block`` (the blocks of ``targets``' steps, one after the other)."""
        row_targets = self.row_targets(targets)
        self.n_model_calls += 1
        self.n_predictions += len(block)
        return model.predict_block(block, columns, self.loss.output, row_targets)

    def predict_records(self, model: Predictor, base: dict[str, Any], replaced: list[Any],
                        layout: PermutationLayout, y: Any) -> np.ndarray:
        """The row ``base`` and its perturbed copies (``replaced``: every pair's value, see
        :class:`~ipfi_cli.core.layout.PermutationLayout`) as records, predicted in calls of at most
        :data:`RECORD_CELLS` values each: a wide row's copies (1 + d x M dicts of d values) are never
        all in memory at once."""
        target = self.output_targets([y])[0]
        per_call = max(1, RECORD_CELLS // max(1, len(base)))
        records: list[dict[str, Any]] = [base]
        parts: list[np.ndarray] = []

        def flush() -> None:
            self.n_model_calls += 1
            self.n_predictions += len(records)
            parts.append(np.asarray(model.predict_records(records, self.loss.output, target)))
            records.clear()
        copy = base.copy
        if layout.record_names is not None:
            for name, value in zip(layout.record_names, replaced):
                if len(records) >= per_call:
                    flush()
                record = copy()
                record[name] = value
                records.append(record)
        else:
            for pairs in layout.record_layout:
                if len(records) >= per_call:
                    flush()
                record = copy()
                for name, pair in pairs:
                    record[name] = replaced[pair]
                records.append(record)
        flush()
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def losses(self, predicted: Any, targets: list[Any]) -> np.ndarray:
        """Loss of every evaluation, shape ``(len(targets), block_rows)``."""
        predicted = as_predictions(predicted)
        n_block = self.block_rows
        if self.loss.relative:  # label-free: each row's unperturbed output is the "target" of its block
            reference = predicted.reshape(len(targets), n_block)[:, :1]
            losses = self.loss.compute(np.repeat(reference, n_block, axis=1).reshape(-1), predicted)
        else:
            y = np.repeat(loss_targets(self.loss, targets, predicted.dtype.kind), n_block)
            losses = self.loss.compute(y, predicted)
        return losses.reshape(len(targets), n_block)
