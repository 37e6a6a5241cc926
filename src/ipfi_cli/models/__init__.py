"""Adapters that give scikit-learn estimators, river models and plain functions the
:class:`~ipfi_cli.core.predictor.Predictor` interface the core needs."""

from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import (
    FunctionPredictor,
    RiverPredictor,
    SklearnPredictor,
    as_predictor,
)

__all__ = ["FunctionPredictor", "ModelError", "RiverPredictor", "SklearnPredictor", "as_predictor"]
