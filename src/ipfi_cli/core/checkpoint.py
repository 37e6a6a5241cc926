"""Save and restore an explainer's whole state as bytes, so a stopped run can resume exactly.

A checkpoint holds the trackers, the reservoirs, the random generator's state and the
row count; the model is left out (a static model is loaded again from its file, a
learning model is saved beside it by the caller). Restoring checks that the checkpoint
was written by a compatible version for the same columns and settings, and says what
differs rather than continuing with a wrong answer.

>>> from ipfi_cli.models import FunctionPredictor
>>> from ipfi_cli.core import IncrementalPFI
>>> model = FunctionPredictor(lambda X: X[:, 0] > 0)
>>> explainer = IncrementalPFI(model, ["a", "b"], seed=3)
>>> _ = explainer.explain_one({"a": 1.0, "b": 2.0}, True)
>>> restored = restore(dump(explainer), model, settings(explainer))
>>> restored.n_seen
1
"""

from __future__ import annotations

import copy
import pickle
from typing import Any

from ipfi_cli.core.incremental import IncrementalPFI
from ipfi_cli.core.predictor import Predictor

FORMAT = "ipfi-explainer-state"
VERSION = 1


class CheckpointError(ValueError):
    """A checkpoint cannot be used: unreadable, another version, or other columns/settings."""


def settings(explainer: IncrementalPFI) -> dict[str, Any]:
    """Everything that must match for a checkpoint to continue the same run."""
    return {
        "columns": list(explainer.columns),
        "names": list(explainer.names),
        "groups": {name: list(cols) for name, cols in explainer.groups.items()},
        "loss": explainer.loss.name,
        "alpha": explainer.alpha,
        "n_repeats": explainer.n_repeats,
        "sampling": explainer.sampling,
        "reservoir_size": explainer.reservoir_size,
        "seed": explainer.seed,
    }


def dump(explainer: IncrementalPFI, extra: dict[str, Any] | None = None) -> bytes:
    """The explainer's state without its model, plus ``extra`` (e.g. the caller's counters)."""
    detached = copy.copy(explainer)
    detached.model = None
    payload = {"format": FORMAT, "version": VERSION, "settings": settings(explainer),
               "explainer": detached, "extra": dict(extra or {})}
    return pickle.dumps(payload, protocol=pickle.HIGHEST_PROTOCOL)


def read(data: bytes) -> dict[str, Any]:
    """Unpack a checkpoint (format and version checked); ``["extra"]`` is the caller's dict."""
    try:
        payload = pickle.loads(data)
    except Exception as error:  # a torn or foreign file: unpickling can fail in many ways
        raise CheckpointError(f"not a readable ipfi state ({type(error).__name__}: {error})") from None
    if not isinstance(payload, dict) or payload.get("format") != FORMAT:
        raise CheckpointError("not an ipfi explainer state")
    if payload.get("version") != VERSION:
        raise CheckpointError(f"state format version {payload.get('version')} is not supported "
                              f"(this ipfi reads version {VERSION})")
    return payload


def restore(data: bytes, model: Predictor, expected: dict[str, Any]) -> IncrementalPFI:
    """Rebuild the explainer from ``data`` around ``model``; ``expected`` are the current
    :func:`settings` (from a fresh explainer built with the run's options)."""
    payload = read(data)
    saved = payload["settings"]
    differences = [f"{key}: state has {saved.get(key)!r}, this run has {expected.get(key)!r}"
                   for key in expected if saved.get(key) != expected.get(key)]
    if differences:
        raise CheckpointError("the state was written by a different run: " + "; ".join(differences))
    explainer: IncrementalPFI = payload["explainer"]
    explainer.model = model
    return explainer
