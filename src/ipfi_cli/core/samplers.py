"""Reservoirs of earlier rows from which iPFI draws replacement values.

Each sampler keeps ``n_realisations`` independent reservoirs of at most ``size``
rows (one per iPFI realisation), so the M realisations the estimate averages do not
share their memory of the past. Rows are stored as arrays in column order. Memory is
``n_realisations * size * n_columns`` values, whatever the stream's length.

The order of random draws is fixed: for each row, first :meth:`draw` (when the row
is explained), then :meth:`insert`. Both the row-by-row and the batched paths of
:class:`~ipfi_cli.core.incremental.IPFIEstimator` follow it, which is what makes
them give the same numbers. :meth:`Reservoir.draw_insert_many` does both for many
rows at once with array operations, from the very same random numbers: numpy's
bounded integers below ``2**32`` are Lemire's method on the generator's stream of
32-bit words (:func:`bounded_integers`), so one request for all of a micro-batch's
words, split afterwards, gives what one request per row gives. A caller that needs the
donors' rows themselves (iSAGE's chains) draws the integers with
:meth:`Reservoir.draw_integers` (one request too), and :meth:`Reservoir.draw_insert_drawn`
does the rest.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> sampler = GeometricReservoir(size=3, n_realisations=2, n_columns=1)
>>> for t in range(5):
...     _ = sampler.insert(rng, np.array([t]))
>>> sampler.filled, sampler.n_seen
(3, 5)
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from typing import cast

import numpy as np

from ipfi_cli.core.state_fields import array, choice, integer

_WORD = 1 << 32  # numpy draws bounded integers below 2**32 from 32-bit words


def bounded_integers(rng: np.random.Generator, highs: np.ndarray, counts: np.ndarray | None = None
                     ) -> np.ndarray | None:
    """``rng.integers(0, high)`` for every ``high`` in turn (each ``counts`` times), with one
    request to ``rng``.

    numpy (since 1.17) draws an integer in ``[0, high)``, ``1 < high <= 2**32``, as
    Lemire's multiply-shift of one 32-bit word of the generator's stream (``high == 1``
    takes no word), and rejects the word when the low half of the product is below
    ``2**32 mod high`` (a chance of ``high / 2**32`` at most). Returns ``None`` when a word
    would be rejected: the caller then restores the generator and takes the slow path.

    >>> highs = np.array([5, 1, 100, 7])
    >>> a, b = np.random.default_rng(3), np.random.default_rng(3)
    >>> bounded_integers(a, highs).tolist() == [int(b.integers(0, h)) for h in highs]
    True
    >>> a.bit_generator.state == b.bit_generator.state
    True
    """
    highs = np.asarray(highs, dtype=np.uint64)
    if counts is not None:
        highs = np.repeat(highs, counts)
    takes_word = highs > 1
    every = bool(takes_word.all())
    bounds = highs if every else highs[takes_word]
    if not len(bounds):
        return np.zeros(len(highs), dtype=np.intp)
    product = np.multiply(rng.integers(0, _WORD, size=len(bounds), dtype=np.uint32), bounds, dtype=np.uint64)
    low = product & np.uint64(_WORD - 1)
    near = low < bounds  # the threshold 2**32 mod high is below high: only these can be rejected
    if near.any() and np.any(low[near] < np.uint64(_WORD) % bounds[near]):
        return None
    drawn = cast(np.ndarray, (product >> np.uint64(32)).view(np.int64))
    if every:
        return drawn
    out = np.zeros(len(highs), dtype=np.intp)
    out[takes_word] = drawn
    return out


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
        # slots not filled yet are zeros (None for objects), never the allocator's leftovers: they are
        # saved with the state, which must be the same bytes for the same seed and hold nothing else
        shape = (self.n_realisations, self.size, int(n_columns))
        self.rows = np.empty(shape, dtype=dtype) if np.dtype(dtype) == object else np.zeros(shape, dtype=dtype)
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

    def insert(self, rng: np.random.Generator, row: np.ndarray) -> np.ndarray:
        """Offer one row (an array in column order) to every realisation's reservoir; returns the
        slot it went to in each (``size``: not kept)."""
        if self.filled < self.size:
            self.rows[:, self.filled] = row
            written = np.full(self.n_realisations, self.filled)
            self.filled += 1
        else:
            written = self._replace(rng, row)
        self.n_seen += 1
        return written

    @abstractmethod
    def _replace(self, rng: np.random.Generator, row: np.ndarray) -> np.ndarray:
        """Insert ``row`` into full reservoirs; returns the slot written per realisation (``size``: none)."""

    @abstractmethod
    def _replacement_bounds(self, n_seen: np.ndarray) -> np.ndarray:
        """Per row inserted into full reservoirs after ``n_seen`` rows: the bound of the
        :meth:`_replace` draws (1: no draw, slot 0)."""

    @abstractmethod
    def _replacement_slots(self, drawn: np.ndarray) -> np.ndarray:
        """The slots the :meth:`_replace` draws write to (``size``: not written)."""

    def _schedule(self, n_rows: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """For the next ``n_rows`` rows, each drawn from then inserted: the slots in use at each
        row's draw, whether the reservoirs are full at its insertion, and the bound of the
        insertion's draw (1: it draws nothing)."""
        step = np.arange(n_rows)
        filled = np.minimum(self.filled + step, self.size)
        full = filled == self.size
        return filled, full, np.where(full, self._replacement_bounds(self.n_seen + step), 1)

    def draw_insert_many(self, rng: np.random.Generator, rows: np.ndarray, n_draws: int,
                         draw_index: np.ndarray, column: np.ndarray,
                         slots: list[tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
        """For each of ``rows`` in turn, :meth:`draw` then :meth:`insert`, with array operations.

        The random numbers, the slots and the reservoirs afterwards are exactly those of
        the row-by-row calls. Returns the drawn values, shape ``(len(rows), len(column))``:
        ``out[t, p]`` is column ``column[p]`` of the stored row that draw ``draw_index[p]``
        (a flat index into :meth:`draw`'s ``(n_realisations, n_draws)`` result) picked at
        row ``t``. Needs at least one stored row. With ``slots`` (a list), the slots of every
        row's draw and insertion are appended to it: ``(drawn, written)``, shapes ``(len(rows),
        n_realisations, n_draws)`` and ``(len(rows), n_realisations)``, what :meth:`draw` and
        :meth:`insert` return row by row.
        """
        if self.filled == 0:
            raise ValueError("the reservoir is empty: insert a row before drawing")
        rows = np.asarray(rows, dtype=self.rows.dtype)
        n_rows, n_real = len(rows), self.n_realisations
        if not n_rows:
            if slots is not None:
                slots.append((np.empty((0, n_real, n_draws), dtype=np.intp), np.empty((0, n_real), dtype=np.intp)))
            return np.empty((0, len(column)), dtype=self.rows.dtype)
        filled, full, insert_bounds = self._schedule(n_rows)
        per_draw = n_real * n_draws
        bounds = np.stack([filled, insert_bounds], axis=1).reshape(-1)
        state = rng.bit_generator.state
        drawn = bounded_integers(rng, bounds, np.tile([per_draw, n_real], n_rows)) \
            if int(bounds.max(initial=1)) <= _WORD else None
        if drawn is None:  # a word numpy would reject (rare) or a bound beyond 32 bits
            rng.bit_generator.state = state
            return self._draw_insert_stepwise(rng, rows, n_draws, draw_index, column, slots)
        drawn = drawn.reshape(n_rows, per_draw + n_real)
        if slots is not None:
            slots.append((drawn[:, :per_draw].reshape(n_rows, n_real, n_draws),
                          self._writes(drawn, filled, full, per_draw)))
        sources, owner = self._replay(drawn, filled, full, per_draw)
        out = self._gather(rows, sources[:, draw_index], column)
        self._commit(rows, owner, filled, full)
        return out

    def draw_bounds(self, n_rows: int, n_draws: int) -> np.ndarray:
        """The bounds of the random integers that the next ``n_rows`` rows' :meth:`draw`
        (``n_draws`` per realisation) and :meth:`insert` take, shape ``(n_rows, n_realisations
        * (n_draws + 1))``: per row, its draw's (the slots in use) then its insertion's (1 where
        it draws nothing). ``rng.integers(0, bounds[t])`` takes exactly the random numbers of
        row ``t``'s draw and insertion; :meth:`draw_insert_drawn` then does the rest.

        >>> rng = np.random.default_rng(0)
        >>> sampler = GeometricReservoir(size=2, n_realisations=1, n_columns=1)
        >>> _ = sampler.insert(rng, np.array([5.0]))
        >>> sampler.draw_bounds(3, n_draws=2).tolist()   # 1 and then 2 slots; full from the 2nd insertion
        [[1, 1, 1], [2, 2, 2], [2, 2, 2]]
        """
        filled, _, insert_bounds = self._schedule(n_rows)
        per_draw = self.n_realisations * n_draws
        return np.concatenate([np.repeat(filled[:, None], per_draw, axis=1),
                               np.repeat(insert_bounds[:, None], self.n_realisations, axis=1)], axis=1)

    def draw_integers(self, rng: np.random.Generator, n_rows: int, n_draws: int) -> np.ndarray:
        """The random integers of the next ``n_rows`` rows' :meth:`draw` and :meth:`insert`, shaped
        as :meth:`draw_bounds`: row by row, ``rng.integers(0, bounds[t])``'s numbers, taken with one
        request to ``rng`` (:func:`bounded_integers`), or with one call per row where numpy would
        reject a word (rare) or a bound exceeds 32 bits.

        >>> sampler = GeometricReservoir(size=2, n_realisations=1, n_columns=1)
        >>> _ = sampler.insert(np.random.default_rng(0), np.array([5.0]))
        >>> a, b = np.random.default_rng(1), np.random.default_rng(1)
        >>> one_by_one = [b.integers(0, bounds).tolist() for bounds in sampler.draw_bounds(4, n_draws=2)]
        >>> sampler.draw_integers(a, 4, n_draws=2).tolist() == one_by_one
        True
        """
        bounds = self.draw_bounds(n_rows, n_draws)
        if bounds.size and int(bounds.max()) <= _WORD:
            state = rng.bit_generator.state
            drawn = bounded_integers(rng, bounds.reshape(-1))
            if drawn is not None:
                return drawn.reshape(bounds.shape)
            rng.bit_generator.state = state
        out = np.empty(bounds.shape, dtype=np.int64)
        for t, high in enumerate(bounds):
            out[t] = rng.integers(0, high)
        return out

    def draw_insert_drawn(self, rows: np.ndarray, drawn: np.ndarray, n_draws: int) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`draw_insert_many` from random integers already drawn with :meth:`draw_bounds`'s
        bounds (``drawn``, the same shape; see :meth:`draw_integers`): inserts ``rows`` and returns
        where each draw's row is, as ``(table, sources)``: ``table[sources[t, d]]`` is the row that
        draw ``d`` (a flat index into :meth:`draw`'s ``(n_realisations, n_draws)``) picked at row
        ``t``; ``table`` holds the rows stored before, then ``rows``."""
        if self.filled == 0:
            raise ValueError("the reservoir is empty: insert a row before drawing")
        rows = np.asarray(rows, dtype=self.rows.dtype)
        n_rows, per_draw = len(rows), self.n_realisations * n_draws
        filled, full, _ = self._schedule(n_rows)
        sources, owner = self._replay(np.asarray(drawn).reshape(n_rows, -1), filled, full, per_draw)
        table = np.concatenate([self.rows.reshape(-1, self.rows.shape[2]), rows])
        self._commit(rows, owner, filled, full)
        return table, sources

    def _replay(self, drawn: np.ndarray, filled: np.ndarray, full: np.ndarray, per_draw: int
                ) -> tuple[np.ndarray, np.ndarray]:
        """Per row, the cells its draws read (``realisation * size + slot`` for a row stored before,
        ``n_realisations * size + t`` for the batch's row ``t``), replaying the insertions row by
        row; and ``owner``, where the row in each cell comes from afterwards."""
        n_rows, n_real, size = len(drawn), self.n_realisations, self.size
        writes = self._writes(drawn, filled, full, per_draw)
        cell_base = np.arange(n_real) * size
        write_cells = np.where(writes < size, writes + cell_base, n_real * size)  # the last cell: a sink
        draw_cells = drawn[:, :per_draw] + np.repeat(cell_base, per_draw // n_real)
        # owner[c]: where the row now in cell c (realisation * size + slot) comes from: itself
        # (stored before these rows) or n_real * size + t for rows[t]; replayed row by row
        owner = np.arange(n_real * size + 1)
        sources = np.empty((n_rows, per_draw), dtype=np.intp)
        take, put = owner.take, owner.put
        for t, (cells, row_cells) in enumerate(zip(draw_cells, write_cells)):
            take(cells, out=sources[t])
            put(row_cells, n_real * size + t)
        return sources, owner[:-1]

    def _writes(self, drawn: np.ndarray, filled: np.ndarray, full: np.ndarray, per_draw: int) -> np.ndarray:
        """Where each row goes in each realisation, shape ``(rows, n_realisations)``: the next free
        slot, or the replacement's slot (``size``: not kept), as :meth:`insert` returns it."""
        return np.where(full[:, None], self._replacement_slots(drawn[:, per_draw:]), filled[:, None])

    def _commit(self, rows: np.ndarray, owner: np.ndarray, filled: np.ndarray, full: np.ndarray) -> None:
        """Write the rows :meth:`_replay` placed, and count them."""
        n_stored = self.n_realisations * self.size
        written = np.flatnonzero(owner >= n_stored)
        self.rows[written // self.size, written % self.size] = rows[owner[written] - n_stored]
        self.filled = int(filled[-1]) + (0 if full[-1] else 1)
        self.n_seen += len(rows)

    def _gather(self, rows: np.ndarray, sources: np.ndarray, column: np.ndarray) -> np.ndarray:
        """Values of ``column`` in the source rows: stored cells (below ``n_realisations *
        size``) as they were before ``rows``, then ``rows`` themselves (one ``take`` from the
        two side by side)."""
        n_columns = self.rows.shape[2]
        table = np.concatenate([self.rows.reshape(-1, n_columns), rows])
        return cast(np.ndarray, table.reshape(-1).take(sources * n_columns + column))

    def _draw_insert_stepwise(self, rng: np.random.Generator, rows: np.ndarray, n_draws: int,
                              draw_index: np.ndarray, column: np.ndarray,
                              slots: list[tuple[np.ndarray, np.ndarray]] | None = None) -> np.ndarray:
        """:meth:`draw_insert_many` with one :meth:`draw` and :meth:`insert` call per row."""
        out = np.empty((len(rows), len(column)), dtype=self.rows.dtype)
        realisation = draw_index // n_draws
        drawn_slots = np.empty((len(rows), self.n_realisations, n_draws), dtype=np.intp)
        written = np.empty((len(rows), self.n_realisations), dtype=np.intp)
        for t, row in enumerate(rows):
            drawn_slots[t] = self.draw(rng, n_draws)
            out[t] = self.rows[realisation, drawn_slots[t].reshape(-1)[draw_index], column]
            written[t] = self.insert(rng, row)
        if slots is not None:
            slots.append((drawn_slots, written))
        return out

    def as_dtype(self, dtype: type | np.dtype) -> None:
        """Convert the stored rows (e.g. to ``object`` when a non-numeric value arrives)."""
        self.rows = self.rows.astype(dtype)

    def state_dict(self) -> dict[str, object]:
        """The reservoirs as plain data: the rows (an array), how many are filled and seen."""
        return {"sampling": self.name, "size": self.size, "n_realisations": self.n_realisations,
                "rows": self.rows.copy(), "filled": self.filled, "n_seen": self.n_seen}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict`'s data (the same sampling, size and realisations)."""
        choice(state, "sampling", [self.name])
        choice(state, "size", [self.size])
        choice(state, "n_realisations", [self.n_realisations])
        rows = array(state, "rows", (self.n_realisations, self.size, self.rows.shape[2]), kinds="fiubO", finite=False)
        filled = integer(state, "filled", high=self.size)
        self.n_seen = integer(state, "n_seen", low=filled)
        self.rows, self.filled = rows.copy(), filled


class UniformReservoir(Reservoir):
    """Reservoir sampling (Vitter's Algorithm R): every past row is equally likely.

    After ``t`` rows each one is in a given reservoir with probability ``size / t``,
    and a draw returns any earlier row with probability ``1 / t``.
    """

    name = "uniform"

    def _replace(self, rng: np.random.Generator, row: np.ndarray) -> np.ndarray:
        slots = rng.integers(0, self.n_seen + 1, size=self.n_realisations)
        keep = slots < self.size
        if keep.any():
            self.rows[self._realisation_ids[keep], slots[keep]] = row
        return np.where(keep, slots, self.size)

    def _replacement_bounds(self, n_seen: np.ndarray) -> np.ndarray:
        return n_seen + 1

    def _replacement_slots(self, drawn: np.ndarray) -> np.ndarray:
        return np.where(drawn < self.size, drawn, self.size)


class GeometricReservoir(Reservoir):
    """The paper's geometric sampling: every new row enters, replacing a uniform slot.

    With ``p = 1 / size`` a draw at time ``s`` returns the row from time ``r`` (once
    the reservoir is full) with probability ``p * (1 - p) ** (s - r - 1)``: recent
    rows are preferred, which lets iPFI follow drift in the features' distribution.
    """

    name = "geometric"

    def _replace(self, rng: np.random.Generator, row: np.ndarray) -> np.ndarray:
        slots = rng.integers(0, self.size, size=self.n_realisations)
        self.rows[self._realisation_ids, slots] = row
        return slots

    def _replacement_bounds(self, n_seen: np.ndarray) -> np.ndarray:
        return np.full(len(n_seen), self.size)

    def _replacement_slots(self, drawn: np.ndarray) -> np.ndarray:
        return drawn


SAMPLERS: dict[str, type[Reservoir]] = {"uniform": UniformReservoir, "geometric": GeometricReservoir}


def make_sampler(name: str, size: int, n_realisations: int, n_columns: int,
                 dtype: type | np.dtype = object) -> Reservoir:
    """Build a sampler by name: ``uniform`` or ``geometric``."""
    try:
        cls = SAMPLERS[name]
    except KeyError:
        raise ValueError(f"unknown sampling {name!r}; choose one of {', '.join(SAMPLERS)}") from None
    return cls(size=size, n_realisations=n_realisations, n_columns=n_columns, dtype=dtype)
