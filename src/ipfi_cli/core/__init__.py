"""The pure core: estimators, samplers, losses. No file I/O, no CLI, no display."""

from ipfi_cli.core.batch import IntervalPFI, PFIResult, batch_pfi
from ipfi_cli.core.changes import ChangeDetector, ChangeEvent, RankingEvent, ndcg_at_k
from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.core.incremental import IncrementalPFI, RowError
from ipfi_cli.core.losses import LOSSES, Loss, LossMismatchError, Output, default_loss, get_loss
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.core.prequential import explain_then_learn
from ipfi_cli.core.samplers import GeometricReservoir, UniformReservoir, make_sampler
from ipfi_cli.core.smoothing import ExponentialMean

__all__ = [
    "LOSSES", "ChangeDetector", "ChangeEvent", "ExponentialMean", "GeometricReservoir", "IncrementalPFI",
    "IntervalPFI", "Loss", "LossMismatchError", "Output", "PFIResult", "Predictor", "RankingEvent", "RowError",
    "UniformReservoir", "batch_pfi", "default_loss", "explain_then_learn", "get_loss", "make_sampler", "ndcg_at_k",
    "resolve_groups",
]
