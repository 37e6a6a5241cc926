"""The pure core: estimators (behind :class:`~ipfi_cli.core.explainer.Explainer`), samplers, losses.
No file I/O, no CLI, no display.

Names are imported on first use, so ``ipfi_cli.core.choices`` loads without numpy.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:  # the names as a type checker sees them
    from ipfi_cli.core.batch import IntervalPFIEstimator, PFIResult, batch_pfi
    from ipfi_cli.core.changes import ChangeDetector, ChangeEvent, RankingEvent, ndcg_at_k
    from ipfi_cli.core.explainer import METHODS, Explainer, make_explainer
    from ipfi_cli.core.groups import resolve_groups
    from ipfi_cli.core.incremental import IPFIEstimator
    from ipfi_cli.core.losses import LOSSES, Loss, LossMismatchError, Output, default_loss, get_loss
    from ipfi_cli.core.paired import BothRemovals
    from ipfi_cli.core.pdp import IPDPEstimator
    from ipfi_cli.core.predictor import Predictor
    from ipfi_cli.core.prequential import explain_then_learn
    from ipfi_cli.core.removal import GaussianSampler, TreeSampler
    from ipfi_cli.core.row_values import RowError
    from ipfi_cli.core.sage import ISAGEEstimator, SAGEResult, batch_sage
    from ipfi_cli.core.samplers import GeometricReservoir, UniformReservoir, make_sampler
    from ipfi_cli.core.smoothing import ExponentialMean, RunningMean

_WHERE = {
    "IntervalPFIEstimator": "batch", "PFIResult": "batch", "batch_pfi": "batch",
    "ChangeDetector": "changes", "ChangeEvent": "changes", "RankingEvent": "changes", "ndcg_at_k": "changes",
    "METHODS": "explainer", "Explainer": "explainer", "make_explainer": "explainer",
    "resolve_groups": "groups",
    "IPFIEstimator": "incremental", "RowError": "row_values",
    "LOSSES": "losses", "Loss": "losses", "LossMismatchError": "losses", "Output": "losses",
    "default_loss": "losses", "get_loss": "losses",
    "BothRemovals": "paired", "IPDPEstimator": "pdp",
    "Predictor": "predictor",
    "GaussianSampler": "removal", "TreeSampler": "removal",
    "ISAGEEstimator": "sage", "SAGEResult": "sage", "batch_sage": "sage",
    "explain_then_learn": "prequential",
    "GeometricReservoir": "samplers", "UniformReservoir": "samplers", "make_sampler": "samplers",
    "ExponentialMean": "smoothing", "RunningMean": "smoothing",
}

__all__ = [
    "LOSSES", "METHODS", "BothRemovals", "ChangeDetector", "ChangeEvent", "Explainer", "ExponentialMean",
    "GaussianSampler", "GeometricReservoir", "IPDPEstimator", "IPFIEstimator", "ISAGEEstimator", "IntervalPFIEstimator",
    "Loss", "LossMismatchError", "Output", "PFIResult", "Predictor", "RankingEvent", "RowError", "RunningMean",
    "SAGEResult", "TreeSampler", "UniformReservoir", "batch_pfi", "batch_sage", "default_loss", "explain_then_learn",
    "get_loss", "make_explainer", "make_sampler", "ndcg_at_k", "resolve_groups",
]


def __getattr__(name: str) -> Any:
    if name not in _WHERE:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f"{__name__}.{_WHERE[name]}"), name)
    globals()[name] = value
    return value
