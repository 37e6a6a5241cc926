"""What ``ipfi compare`` is asked to do: :class:`CompareSettings`, one value per help panel.

The comparison itself (:func:`~ipfi_cli.evaluation.command.run_compare`) lives beside the
experiments it runs, in :mod:`ipfi_cli.evaluation`.

>>> settings = CompareSettings(ModelSpec("model.joblib"), InputSpec("data.csv"), Selection(target="class"),
...                            comparison=Comparison(orderings=10), seed=0)
>>> settings.comparison.orderings, settings.estimator.alphas, settings.comparison.samplings_run(learn=False)
(10, (0.001,), ('uniform', 'geometric'))
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from ipfi_cli.core.params import DEFAULT_ALPHA, DEFAULT_REPEATS, DEFAULT_RESERVOIR_SIZE
from ipfi_cli.run.batch import BatchRows
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.settings import Display, ModelSpec

if TYPE_CHECKING:
    from ipfi_cli.run.monitor import MonitorSettings


@dataclass(frozen=True)
class CompareEstimator:
    """The Estimator panel: iPFI's settings (one run per alpha), or SAGE's game."""

    method: str = "pfi"  # --method: "pfi" or "sage"
    alphas: Sequence[float] = (DEFAULT_ALPHA,)  # --alpha (repeatable; each checked)
    repeats: int = DEFAULT_REPEATS
    reservoir_size: int = DEFAULT_RESERVOIR_SIZE
    inner: int | None = None  # sage: imputations per coalition (None: by the loss)
    empty_coalition: str = "imputed"
    permutations: int = 2000  # sage: batch SAGE's permutations
    n_jobs: int | None = None  # batch PFI's threads


@dataclass(frozen=True)
class Comparison:
    """The Comparison panel: how often and in which orders iPFI is compared, and the error's normalisation
    (with what: batch PFI, or interval PFI when the model learns, ``ModelSpec.learn``)."""

    learn_first: bool = False  # with ModelSpec.learn (--learn): learn each row before explaining it
    orderings: int = 1  # static: random orderings of the rows
    keep_order: bool = False  # static: the file's own order, once
    samplings: Sequence[str] = ()  # --sampling; empty: uniform and geometric (static), geometric (--learn)
    interval: int = 1000  # --learn: rows per interval PFI window
    drift_at: int | None = None  # --learn: the row of a known drift
    normalisation: str = "sum"

    def samplings_run(self, learn: bool) -> tuple[str, ...]:
        """The sampling strategies run: the chosen ones, or the default for the kind of model."""
        if self.samplings:
            return tuple(self.samplings)
        return ("geometric",) if learn else ("uniform", "geometric")


@dataclass(frozen=True)
class CompareOutput:
    """The Output panel: the records, and the traces for ``ipfi plot``."""

    path: str | None = None  # --output (None or "-": standard output)
    format: str | None = None
    traces: str | None = None  # --traces FILE
    trace_every: int = 1


@dataclass(frozen=True)
class CompareSettings:
    """Everything ``ipfi compare`` is asked, one value per help panel."""

    model: ModelSpec
    inputs: InputSpec
    selection: Selection
    estimator: CompareEstimator = field(default_factory=CompareEstimator)
    comparison: Comparison = field(default_factory=Comparison)
    rows: BatchRows = field(default_factory=BatchRows)
    output: CompareOutput = field(default_factory=CompareOutput)
    monitor: MonitorSettings | None = None
    display: Display = field(default_factory=Display)
    seed: int | None = None
