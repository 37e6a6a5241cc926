"""The settings of the incremental explainer, with their defaults and checks in one place.

Importable without numpy: the command line takes its defaults from here while
``ipfi --help`` stays fast.

>>> PFIParams(alpha=0.01)
PFIParams(alpha=0.01, n_repeats=10, sampling='geometric', reservoir_size=100)
>>> PFIParams(alpha=2.0)
Traceback (most recent call last):
...
ValueError: alpha must be in (0, 1], got 2.0
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ipfi_cli.core.choices import SAMPLING_NAMES

DEFAULT_ALPHA = 0.001
DEFAULT_REPEATS = 10
DEFAULT_SAMPLING = "geometric"
DEFAULT_RESERVOIR_SIZE = 100


def check_alpha(alpha: float) -> float:
    """``alpha`` if it is a smoothing rate in (0, 1], else a ``ValueError`` naming it."""
    if not 0.0 < alpha <= 1.0:
        raise ValueError(f"alpha must be in (0, 1], got {alpha}")
    return float(alpha)


@dataclass(frozen=True)
class PFIParams:
    """iPFI's own settings (``--alpha``, ``--repeats``, ``--sampling``, ``--reservoir-size``), checked."""

    alpha: float = DEFAULT_ALPHA
    n_repeats: int = DEFAULT_REPEATS
    sampling: str = DEFAULT_SAMPLING
    reservoir_size: int = DEFAULT_RESERVOIR_SIZE

    def __post_init__(self) -> None:
        check_alpha(self.alpha)
        if self.n_repeats < 1:
            raise ValueError(f"n_repeats must be at least 1, got {self.n_repeats}")
        if self.reservoir_size < 1:
            raise ValueError(f"reservoir_size must be at least 1, got {self.reservoir_size}")
        if self.sampling not in SAMPLING_NAMES:
            raise ValueError(f"sampling must be one of {', '.join(SAMPLING_NAMES)}, got {self.sampling!r}")

    def as_kwargs(self) -> dict[str, Any]:
        """The keyword arguments of :class:`~ipfi_cli.core.incremental.IPFIEstimator` they set."""
        return asdict(self)
