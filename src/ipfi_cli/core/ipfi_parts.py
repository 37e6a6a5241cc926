"""What the functions that serve :class:`~ipfi_cli.core.incremental.IPFIEstimator` read and write of it
(its settings, stream state and counters), as a protocol: :mod:`~ipfi_cli.core.ipfi_state`,
:mod:`~ipfi_cli.core.ipfi_stream` and :mod:`~ipfi_cli.core.micro_batch` are typed against it instead
of the estimator's class, which imports them (so no module imports its importer back, even for a
type checker)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, ClassVar, Protocol

if TYPE_CHECKING:
    import numpy as np

    from ipfi_cli.core.bounds import RealisationSpread, RowBounds
    from ipfi_cli.core.layout import PermutationLayout
    from ipfi_cli.core.losses import Loss
    from ipfi_cli.core.perturbed import PerturbedPredictions
    from ipfi_cli.core.removal import ConditionalSampler
    from ipfi_cli.core.samplers import Reservoir
    from ipfi_cli.core.smoothing import ExponentialMean, RunningMean


class EstimatorParts(Protocol):
    """An iPFI estimator's settings, stream state and counters (the attributes
    :class:`~ipfi_cli.core.incremental.IPFIEstimator` sets in its constructor)."""

    _state_kind: ClassVar[str]
    max_block_cells: int
    columns: list[str]
    loss: Loss
    alpha: float
    n_repeats: int
    sampling: str
    reservoir_size: int
    seed: int | None
    groups: dict[str, list[int]]
    names: list[str]
    smoothing: str
    removal: str
    bounds_method: str
    n_seen: int
    last_contributions: np.ndarray
    last_loss: float
    last_row_bounds: np.ndarray | None
    layout: PermutationLayout
    block_rows: int
    _tracker: ExponentialMean | RunningMean
    _remover: ConditionalSampler | None
    _group_columns: list[np.ndarray]
    _spread: RealisationSpread | None
    _row_bounds: RowBounds | None  # the bounds after chosen rows of an explain_many call, while it runs
    _rng: np.random.Generator
    _sampler: Reservoir | None
    _loss_sum: float
    _predictions: PerturbedPredictions

    @property
    def use_batch(self) -> bool: ...

    @property
    def bounds_per_row(self) -> bool: ...

    @property
    def n_explained(self) -> int: ...

    @property
    def n_model_calls(self) -> int: ...

    @n_model_calls.setter
    def n_model_calls(self, value: int) -> None: ...

    @property
    def n_predictions(self) -> int: ...

    @n_predictions.setter
    def n_predictions(self, value: int) -> None: ...

    @property
    def last_contribution(self) -> np.ndarray: ...

    @property
    def _reservoir(self) -> Reservoir: ...

    def settings_dict(self) -> dict[str, Any]: ...

    def explain_one(self, x: Mapping[str, Any], y: Any) -> np.ndarray: ...

    def _row_values(self, x: Mapping[str, Any]) -> list[Any]: ...

    def _fill_block(self, block: np.ndarray, row: np.ndarray) -> None: ...

    def _losses(self, predicted: Any, targets: list[Any]) -> np.ndarray: ...

    def _fold(self, losses: np.ndarray) -> None: ...

    def _floats_stored(self) -> bool: ...

    def _save_stream_state(self) -> tuple[Any, ...]: ...

    def _restore_stream_state(self, saved: tuple[Any, ...]) -> None: ...
