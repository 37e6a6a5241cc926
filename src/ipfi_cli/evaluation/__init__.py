"""Comparisons of iPFI with batch and interval PFI: the paper's error metric and experiment runners.

Pure like the core (no CLI, no display, no file I/O); it only composes the core's
estimators (``IPFIEstimator``, ``batch_pfi``, ``IntervalPFIEstimator``, ``explain_then_learn``).

* :mod:`~ipfi_cli.evaluation.metrics`: normalisation and the error between two importance vectors;
* :mod:`~ipfi_cli.evaluation.records`: flat per-feature comparison records;
* :mod:`~ipfi_cli.evaluation.static`: Experiment A (static model, random orderings vs batch PFI);
* :mod:`~ipfi_cli.evaluation.dynamic`: Experiment B (learning model, iPFI vs interval PFI);
* :mod:`~ipfi_cli.evaluation.drift`: function and feature drift for experiment streams;
* :mod:`~ipfi_cli.evaluation.changes`: streams with a known change of reliance, run through the change detector;
* :mod:`~ipfi_cli.evaluation.command`: ``ipfi compare``'s run from its settings (the one module here that
  reads and writes files).
"""

from ipfi_cli.core.batch import as_block
from ipfi_cli.evaluation.changes import SCENARIOS, ChangeRun, change_scenario, scenario_stream
from ipfi_cli.evaluation.drift import agrawal_function_drift, function_drift, pick_swap_partner, swap_features
from ipfi_cli.evaluation.dynamic import IntervalPoint, LearningComparison, Trace, compare_learning
from ipfi_cli.evaluation.metrics import NORMALISATIONS, ErrorSummary, importance_error, normalise, summarise
from ipfi_cli.evaluation.records import RECORD_FIELDS, FeatureComparison, compare_vectors
from ipfi_cli.evaluation.static import StaticComparison, StaticRun, compare_static

__all__ = [
    "NORMALISATIONS", "RECORD_FIELDS", "SCENARIOS", "ChangeRun", "ErrorSummary", "FeatureComparison",
    "IntervalPoint", "LearningComparison", "StaticComparison", "StaticRun", "Trace", "agrawal_function_drift",
    "as_block", "change_scenario", "compare_learning", "compare_static", "compare_vectors", "function_drift",
    "importance_error", "normalise", "pick_swap_partner", "scenario_stream", "summarise", "swap_features",
]
