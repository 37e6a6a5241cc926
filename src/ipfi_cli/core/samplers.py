"""Reservoirs of earlier rows from which iPFI draws replacement values.

Each sampler keeps ``n_realisations`` independent reservoirs of at most ``size``
rows (one per iPFI realisation), so the M realisations the estimate averages do not
share their memory of the past. Rows are stored as arrays in column order. Memory is
``n_realisations * size * n_columns`` values, whatever the stream's length.

The order of random draws is fixed: for each row, first :meth:`draw` (when the row
is explained), then :meth:`insert`. Both the row-by-row and the batched paths of
:class:`~ipfi_cli.core.incremental.IncrementalPFI` follow it, which is what makes
them give the same numbers.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> sampler = GeometricReservoir(size=3, n_realisations=2, n_columns=1)
>>> for t in range(5):
...     sampler.insert(rng, np.array([t]))
>>> sampler.filled, sampler.n_seen
(3, 5)
"""

from __future__ import annotations

from abc import ABC, abstractmethod

import numpy as np


class Reservoir(ABC):
    """Fixed-size memories of past rows, one per realisation."""

    name: str = ""

    def __init__(self, size: int = 100, n_realisations: int = 1, n_columns: int = 1,
                 dtype: type | np.dtype = object) -> None:
        if size < 1:
            raise ValueError(f"reservoir size must be at least 1, got {size}")
        if n_realisations < 1:
            raise ValueError(f"n_realisations must be at least 1, got {n_realisations}")
        self.size = int(size)
        self.n_realisations = int(n_realisations)
        self.rows = np.empty((self.n_realisations, self.size, int(n_columns)), dtype=dtype)
        self.filled = 0  # slots in use (the same in every realisation)
        self.n_seen = 0  # rows inserted so far
        self._realisation_ids = np.arange(self.n_realisations)

    def draw(self, rng: np.random.Generator, n_draws: int) -> np.ndarray:
        """Slot indices, shape ``(n_realisations, n_draws)``, uniform over the filled slots.

        Draw before inserting the current row, so a row never replaces itself.
        """
        if self.filled == 0:
            raise ValueError("the reservoir is empty: insert a row before drawing")
        return rng.integers(0, self.filled, size=(self.n_realisations, n_draws))

    def insert(self, rng: np.random.Generator, row: np.ndarray) -> None:
        """Offer one row (an array in column order) to every realisation's reservoir."""
        if self.filled < self.size:
            self.rows[:, self.filled] = row
            self.filled += 1
        else:
            self._replace(rng, row)
        self.n_seen += 1

    @abstractmethod
    def _replace(self, rng: np.random.Generator, row: np.ndarray) -> None:
        """Insert ``row`` into full reservoirs."""

    def as_dtype(self, dtype: type | np.dtype) -> None:
        """Convert the stored rows (e.g. to ``object`` when a non-numeric value arrives)."""
        self.rows = self.rows.astype(dtype)

    def state_dict(self) -> dict[str, object]:
        """The reservoirs as plain data: the rows (an array), how many are filled and seen."""
        return {"sampling": self.name, "size": self.size, "n_realisations": self.n_realisations,
                "rows": self.rows.copy(), "filled": self.filled, "n_seen": self.n_seen}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict`'s data (the same sampling, size and realisations)."""
        rows = np.asarray(state["rows"])
        expected = (self.n_realisations, self.size, self.rows.shape[2])
        if state["sampling"] != self.name or rows.shape != expected:
            raise ValueError(f"the state holds {state['sampling']} reservoirs of shape {rows.shape}, not {self.name} "
                             f"ones of shape {expected}")
        self.rows = rows.copy()
        self.filled = int(state["filled"])  # type: ignore[call-overload]
        self.n_seen = int(state["n_seen"])  # type: ignore[call-overload]


class UniformReservoir(Reservoir):
    """Reservoir sampling (Vitter's Algorithm R): every past row is equally likely.

    After ``t`` rows each one is in a given reservoir with probability ``size / t``,
    and a draw returns any earlier row with probability ``1 / t``.
    """

    name = "uniform"

    def _replace(self, rng: np.random.Generator, row: np.ndarray) -> None:
        slots = rng.integers(0, self.n_seen + 1, size=self.n_realisations)
        keep = slots < self.size
        if keep.any():
            self.rows[self._realisation_ids[keep], slots[keep]] = row


class GeometricReservoir(Reservoir):
    """The paper's geometric sampling: every new row enters, replacing a uniform slot.

    With ``p = 1 / size`` a draw at time ``s`` returns the row from time ``r`` (once
    the reservoir is full) with probability ``p * (1 - p) ** (s - r - 1)``: recent
    rows are preferred, which lets iPFI follow drift in the features' distribution.
    """

    name = "geometric"

    def _replace(self, rng: np.random.Generator, row: np.ndarray) -> None:
        slots = rng.integers(0, self.size, size=self.n_realisations)
        self.rows[self._realisation_ids, slots] = row


SAMPLERS: dict[str, type[Reservoir]] = {"uniform": UniformReservoir, "geometric": GeometricReservoir}


def make_sampler(name: str, size: int, n_realisations: int, n_columns: int,
                 dtype: type | np.dtype = object) -> Reservoir:
    """Build a sampler by name: ``uniform`` or ``geometric``."""
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampling {name!r}; choose one of {', '.join(SAMPLERS)}") from None
    return cls(size=size, n_realisations=n_realisations, n_columns=n_columns, dtype=dtype)
