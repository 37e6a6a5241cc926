"""Adapters that give scikit-learn estimators, river models and plain functions the
:class:`~ipfi_cli.core.predictor.Predictor` interface the core needs.

The adapters are imported on first use, so the command line can read :mod:`ipfi_cli.models.hashing`
before anything heavy (NumPy) is imported."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from ipfi_cli.errors import ModelError

if TYPE_CHECKING:
    from ipfi_cli.models.adapters import FunctionPredictor, RiverPredictor, SklearnPredictor, as_predictor

__all__ = ["FunctionPredictor", "ModelError", "RiverPredictor", "SklearnPredictor", "as_predictor"]


def __getattr__(name: str) -> Any:
    """The adapters, imported on first use."""
    if name in ("FunctionPredictor", "RiverPredictor", "SklearnPredictor", "as_predictor"):
        from ipfi_cli.models import adapters

        return getattr(adapters, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
