"""Each stored row's influence on iPFI's estimate, in both of its roles, for the calibrated bounds.

A row ``s`` enters the estimate ``phi = sum_t w_t c_t / W`` twice: as the explained row
(its own contribution ``c_s``, weight ``w_s``) and as the *donor* whose values replace a
feature of later rows ``t`` (in every contribution ``c_t^(m, j)`` whose draw picked it).
Its influence in realisation ``m`` and feature ``j``, centred on the estimate, is::

    U_s^(m) = w_s (c_s^(m) - phi)  +  sum over the draws of s, (w_t (c_t^(m) - phi))
            = P_s^(m) - phi Q_s^(m)

with ``P`` the weighted sum of those contributions and ``Q`` the sum of their weights.
The variance of the estimate's expectation given the stream is (a Hajek projection)
about ``sum_s E[U_s]^2 / W^2``, where the expectation is over the reservoirs' draws.
The ``M`` realisations draw independently, so for ``m != m'`` the product
``U_s^(m) U_s^(m')`` estimates ``E[U_s]^2`` without the draws' own noise::

    stream variance ~ sum_s sum_{m != m'} U_s^(m) U_s^(m') / (M (M - 1) W^2)

Counting only the explained role (the rows' contributions as if independent) misses
``Var(g) + 2 Cov(h, g)`` per row (``h`` and ``g`` a row's mean effect as explained row
and as donor), which is what made that bound cover 80-86 % in the worst cells of
``benchmarks/bounds_coverage.py`` at delta 0.05.

Memory: ``P`` and ``Q`` for each row still held by some realisation's reservoir (at most
``M * reservoir_size`` rows, ``2 M G`` numbers each); a row that has left every reservoir
can be drawn no more, and its products are folded into twelve sums per feature.

The events come in stream order: :meth:`DonorInfluence.explained` when a row's
replacements are drawn, :meth:`DonorInfluence.stored` when it is offered to the
reservoirs, :meth:`DonorInfluence.fold` when its contributions are known (possibly after
later rows were drawn and stored: a micro-batch's model call). A micro-batch's events come
at once, with array operations and the same bits: :meth:`DonorInfluence.explained_stored_many`
and :meth:`DonorInfluence.fold_many`.

>>> import numpy as np
>>> influence = DonorInfluence(alpha=0.5, n_repeats=2, n=1, reservoir_size=1)
>>> influence.stored(0, np.array([0, 0]))                 # row 0 fills both reservoirs' one slot
>>> influence.explained(1, np.array([[0], [0]]))         # row 1 draws row 0 in both realisations
>>> influence.stored(1, np.array([0, 0]))                 # and replaces it
>>> influence.fold(np.array([[1.0], [1.2]]))             # row 1's contributions
>>> # around an estimate of 0.5, rows 1 (explained) and 0 (donor) each have U = (0.5, 0.7):
>>> # (2 * 0.5 * 0.7 + 2 * 0.5 * 0.7) / (M (M - 1) = 2) / (W^2 = 1)
>>> round(float(influence.stream_variance(np.array([0.5]))[0]), 6)
0.7
"""

from __future__ import annotations

import copy
from bisect import bisect_left
from collections import deque
from collections.abc import Mapping
from typing import Any

import numpy as np

__all__ = ["DonorInfluence"]

_REBASE = 1e30  # the newest row's weight beyond which every kept sum is scaled back to 1 (the
# fourth powers of the sums, kept for the degrees of freedom, stay far from overflow)


class DonorInfluence:
    """Per stored row, its weighted contributions as explained row and as donor (see the module).

    ``alpha`` is the smoothing rate (the explained rows' weights are ``(1 - alpha) ** -t`` up
    to one common factor, which cancels), ``n_repeats`` the realisations ``M``, ``n`` the
    features, ``reservoir_size`` the slots of each realisation's reservoir.
    """

    def __init__(self, alpha: float, n_repeats: int, n: int, reservoir_size: int) -> None:
        self.alpha = float(alpha)
        self.n_repeats, self.n, self.reservoir_size = int(n_repeats), int(n), int(reservoir_size)
        self.slot_rows = np.full((self.n_repeats, self.reservoir_size), -1, dtype=np.int64)
        self.slot_positions = np.full(self.slot_rows.shape, -1, dtype=np.intp)  # their kept positions
        capacity = self.n_repeats * self.reservoir_size + 1
        self.sums = np.zeros((capacity, self.n_repeats, self.n))      # P per kept row
        self.weights = np.zeros((capacity, self.n_repeats, self.n))   # Q per kept row
        self.holders = np.zeros(capacity, dtype=np.int64)             # reservoirs holding the row
        # the (realisation, feature) of each entry of a row's flattened (M, G) donors
        self._realisation = np.repeat(np.arange(self.n_repeats), self.n)
        self._feature = np.tile(np.arange(self.n), self.n_repeats)
        self.index: dict[int, int] = {}                               # row number -> kept position
        self._free = list(range(capacity - 1, -1, -1))
        self.closed = np.zeros((12, self.n))  # the sums of the rows no reservoir holds (see _products)
        self.newest_weight = 0.0             # the last explained row's weight
        self.total_weight = 0.0              # W, in the same units
        # rows drawn for and not yet folded: (row number, its donors' kept positions (M, G) or None,
        # rows that left the reservoirs when it was stored); a donor's position is kept until the
        # rows drawn before it left are folded
        self._pending: deque[tuple[int, np.ndarray | None, list[int]]] = deque()

    def __setstate__(self, state: dict[str, Any]) -> None:
        # a tracker pickled before the index arrays were kept gets them here
        self.__dict__.update(state)
        if "_realisation" not in state:
            self._realisation = np.repeat(np.arange(self.n_repeats), self.n)
            self._feature = np.tile(np.arange(self.n), self.n_repeats)
        if "slot_positions" not in state:  # pickled between calls: nothing pending
            self.slot_positions = self._positions_of(self.slot_rows)

    def __deepcopy__(self, memo: dict[int, Any]) -> DonorInfluence:
        # a run copies the tracker before each micro-batch (to restore it if the model fails): its
        # arrays, dict and lists hold only numbers, so they are copied whole, not item by item
        twin = object.__new__(type(self))
        for name, value in self.__dict__.items():
            twin.__dict__[name] = value.copy() if isinstance(value, (np.ndarray, dict, list)) \
                else copy.deepcopy(value, memo)
        return twin

    def _positions_of(self, slot_rows: np.ndarray) -> np.ndarray:
        index = self.index
        return np.array([[index.get(int(r), -1) if r >= 0 else -1 for r in row] for row in slot_rows.tolist()],
                        dtype=np.intp).reshape(slot_rows.shape)

    # -- events, in stream order -----------------------------------------------------------------
    def explained(self, row: int, donor_slots: np.ndarray | None) -> None:
        """Row ``row`` is being explained; ``donor_slots[m, g]`` is the reservoir slot realisation
        ``m`` drew for feature ``g`` (``None`` when the replacements come from elsewhere:
        conditional removal)."""
        donors = None if donor_slots is None else \
            np.take_along_axis(self.slot_positions, np.asarray(donor_slots, dtype=np.intp), axis=1)
        self._pending.append((int(row), donors, []))

    def cancel(self, row: int) -> None:
        """Row ``row`` was drawn for but not explained (its model call failed): forget the draw."""
        if self._pending and self._pending[-1][0] == row:
            self._pending.pop()

    def stored(self, row: int, written: np.ndarray) -> None:
        """Row ``row`` went into the slots ``written[m]`` (``reservoir_size``: not stored in ``m``)."""
        position = self._position(row)
        left: list[int] = []   # rows no reservoir holds from now on: this one, or those it evicted
        for m, slot in enumerate(np.asarray(written).tolist()):
            if slot >= self.reservoir_size:
                continue
            old = int(self.slot_rows[m, slot])
            if old >= 0:
                self.holders[self.index[old]] -= 1
                if not self.holders[self.index[old]]:
                    left.append(old)
            self.slot_rows[m, slot] = row
            self.slot_positions[m, slot] = position
            self.holders[position] += 1
        if not self.holders[position]:
            left.append(row)
        # a row that left may still be the donor of rows drawn before this one and not yet folded:
        # it is released with this row's contributions, which come after theirs
        if self._pending and self._pending[-1][0] == row:
            self._pending[-1][2].extend(left)
        else:                                      # not explained, or already folded
            self._release(left)

    def explained_stored_many(self, first_row: int, drawn: np.ndarray, written: np.ndarray) -> None:
        """Rows ``first_row, first_row + 1, ...`` were each drawn for (slots ``drawn[t]``, shape
        ``(M, G)``) and then stored (slots ``written[t]``, shape ``(M,)``), in turn: exactly
        :meth:`explained` then :meth:`stored` row by row, with array operations.

        Each slot's occupant when a row draws from it, and the row each write evicts, follow from
        the writes sorted by slot; a row leaves the reservoirs at the eviction that takes its
        last holder (a new row not stored anywhere, at once), in the order of the writes."""
        drawn = np.asarray(drawn, dtype=np.intp)
        written = np.asarray(written, dtype=np.intp)
        n_rows, n_real = written.shape
        if not n_rows:
            return
        size = self.reservoir_size
        positions = np.array([self._position(row) for row in range(first_row, first_row + n_rows)], dtype=np.intp)
        kept = written < size
        write_t, write_m = np.nonzero(kept)                     # in the order of the writes
        cells = write_m * size + written[write_t, write_m]
        order = np.lexsort((write_t, cells))                    # by slot, then in time
        slot_cells, slot_t = cells[order], write_t[order]
        new_slot = np.ones(len(order), dtype=bool)
        new_slot[1:] = slot_cells[1:] != slot_cells[:-1]
        before_rows, before_positions = self.slot_rows.reshape(-1), self.slot_positions.reshape(-1)
        previous_t = np.roll(slot_t, 1)
        # the occupant each write evicts: the slot's previous writer in these rows, else the one before
        evicted_position = np.empty(len(order), dtype=np.intp)
        evicted_position[order] = np.where(new_slot, before_positions[slot_cells], positions[previous_t])
        evicted_row = np.empty(len(order), dtype=np.int64)
        evicted_row[order] = np.where(new_slot, before_rows[slot_cells], first_row + previous_t)
        # each draw's donor: the last writer of its slot before the row, else the occupant before
        draw_cells = (drawn + (np.arange(n_real) * size)[None, :, None]).reshape(n_rows, -1)
        keys = slot_cells * (n_rows + 1) + slot_t
        query = draw_cells * (n_rows + 1) + np.arange(n_rows)[:, None]
        if len(keys):
            last = np.maximum(np.searchsorted(keys, query, side="left") - 1, 0)
            found = (slot_cells[last] == draw_cells) & (keys[last] < query)
            donors = np.where(found, positions[slot_t[last]], before_positions[draw_cells])
        else:  # no row was kept: every draw reads the slots as they were
            donors = before_positions[draw_cells]
        # holders: a row leaves at the eviction that takes its last one
        holders = self.holders
        np.add.at(holders, positions, kept.sum(axis=1))
        evicts = np.flatnonzero(evicted_position >= 0)
        counts = np.bincount(evicted_position[evicts], minlength=len(holders))
        holders -= counts
        reverse = evicts[::-1]
        gone, last_eviction = np.unique(evicted_position[reverse], return_index=True)
        leaving = holders[gone] == 0
        left_writes = reverse[last_eviction[leaving]]           # the eviction each leaving row left at
        left_at = np.concatenate([write_t[left_writes] * (n_real + 1) + write_m[left_writes],
                                  np.flatnonzero(~kept.any(axis=1)) * (n_real + 1) + n_real])
        left_rows = np.concatenate([evicted_row[left_writes], first_row + np.flatnonzero(~kept.any(axis=1))])
        sequence = np.argsort(left_at, kind="stable")
        left: list[list[int]] = [[] for _ in range(n_rows)]
        for at, row in zip((left_at[sequence] // (n_real + 1)).tolist(), left_rows[sequence].tolist()):
            left[at].append(row)
        # the slots afterwards: each one's last writer
        last_write = np.ones(len(order), dtype=bool)
        last_write[:-1] = slot_cells[1:] != slot_cells[:-1]
        np.put(self.slot_rows, slot_cells[last_write], first_row + slot_t[last_write])  # flat (C-order) cells
        np.put(self.slot_positions, slot_cells[last_write], positions[slot_t[last_write]])
        donors = donors.reshape(drawn.shape)
        append = self._pending.append
        for t in range(n_rows):
            append((first_row + t, donors[t], left[t]))

    def fold(self, contributions: np.ndarray) -> None:
        """The oldest pending row's contributions, shape ``(M, G)``."""
        row, donors, left = self._pending.popleft()
        step = 1.0 if self.newest_weight == 0.0 else self.newest_weight / (1.0 - self.alpha)
        if step > _REBASE:
            self._rescale(1.0 / self.newest_weight)
            step = 1.0 / (1.0 - self.alpha)
        self.newest_weight = step
        self.total_weight += step
        weighted = step * np.asarray(contributions, dtype=np.float64)
        own = self._position(row)
        self.sums[own] += weighted
        self.weights[own] += step
        if donors is not None:
            where = donors.ravel()
            np.add.at(self.sums, (where, self._realisation, self._feature), weighted.ravel())
            np.add.at(self.weights, (where, self._realisation, self._feature), step)
        self._release(left)

    def fold_many(self, contributions: np.ndarray) -> None:
        """:meth:`fold` for the oldest ``len(contributions)`` pending rows (shape ``(T, M, G)``), in
        order, to the same bits: the rows' own sums and their donors' are added with array
        operations (a cell's additions keep their order), the rows that leave are folded into the
        closed sums in the order :meth:`fold` would, and the weights' rescaling cuts the block."""
        contributions = np.asarray(contributions, dtype=np.float64)
        start, n_rows, decay = 0, len(contributions), 1.0 - self.alpha
        while start < n_rows:
            steps: list[float] = []
            newest, total = self.newest_weight, self.total_weight
            for _ in range(start, n_rows):
                step = 1.0 if newest == 0.0 else newest / decay
                if step > _REBASE:
                    break
                steps.append(step)
                newest = step
                total += step
            if not steps:  # the weights are rescaled at this row: as fold does
                self.fold(contributions[start])
                start += 1
                continue
            end = start + len(steps)
            self._fold_block(contributions[start:end], steps)
            self.newest_weight, self.total_weight = newest, total
            start = end

    def _fold_block(self, contributions: np.ndarray, steps: list[float]) -> None:
        """:meth:`fold_many` for rows whose weights need no rescaling (``steps``, in order)."""
        pending = [self._pending.popleft() for _ in steps]
        step = np.array(steps)
        weighted = step[:, None, None] * contributions
        own = np.array([self._position(row) for row, _, _ in pending], dtype=np.intp)
        # distinct rows: one addition per cell, and before any later row's donor additions to it
        self.sums[own] += weighted
        self.weights[own] += step[:, None, None]
        donors = [d for _, d, _ in pending]
        if donors[0] is not None:
            where: np.ndarray = np.concatenate(donors).reshape(-1)  # type: ignore[arg-type]
            n_rows = len(steps)
            realisation, feature = np.tile(self._realisation, n_rows), np.tile(self._feature, n_rows)
            np.add.at(self.sums, (where, realisation, feature), weighted.reshape(-1))  # in row order
            np.add.at(self.weights, (where, realisation, feature), np.repeat(step, self._realisation.size))
        self._release([row for _, _, left in pending for row in left])

    # -- the variance --------------------------------------------------------------------------------
    def stream_variance(self, estimate: np.ndarray) -> np.ndarray:
        """The variance of the estimate's expectation given the stream, per feature (NaN before any
        explained row); ``estimate`` is the current estimate, the centre of every influence."""
        return self.stream_variance_and_dof(estimate)[0]

    def stream_variance_and_dof(self, estimate: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`stream_variance`, and its degrees of freedom by Satterthwaite: the variance is a
        sum over rows of ``a_s``, each row's products, so ``(sum_s a_s)^2 / sum_s a_s^2``; few
        rows that weigh much (a uniform reservoir's first rows, drawn for every later row) give
        few degrees of freedom. Infinite before any explained row."""
        if self.total_weight == 0.0:
            return np.full(self.n, np.nan), np.full(self.n, np.inf)
        phi = np.asarray(estimate, dtype=np.float64)
        # in row order, so that the sums' rounding does not depend on where rows were kept (resumes); the
        # rows drawn for and not yet folded in (a micro-batch's, its bounds taken row by row) hold nothing
        # yet and are left out, as if they had not come
        rows = sorted(self.index)
        if self._pending:
            rows = rows[:bisect_left(rows, self._pending[0][0])]
        kept = np.array([self.index[row] for row in rows], dtype=np.intp)
        totals = self.closed + _products(self.sums[kept], self.weights[kept])
        a, b, c = totals[0] - totals[3], totals[1] - totals[4], totals[2] - totals[5]
        cross = a - 2 * phi * b + phi * phi * c
        aa, bb, cc, ab, ac, bc = totals[6:]
        squares = (aa + 4 * phi * phi * bb + phi ** 4 * cc - 4 * phi * ab + 2 * phi * phi * ac
                   - 4 * phi ** 3 * bc)
        pairs = self.n_repeats * (self.n_repeats - 1)
        with np.errstate(divide="ignore", invalid="ignore"):
            dof = np.where(squares > 0, cross * cross / squares, np.inf)
        return np.maximum(cross, 0.0) / pairs / (self.total_weight * self.total_weight), dof

    # -- bookkeeping ---------------------------------------------------------------------------------
    def _position(self, row: int) -> int:
        position = self.index.get(row)
        if position is None:
            if not self._free:
                self._grow()
            position = self._free.pop()
            self.index[row] = position
        return position

    def _grow(self) -> None:
        old = len(self.holders)
        self.sums = np.concatenate([self.sums, np.zeros_like(self.sums)])
        self.weights = np.concatenate([self.weights, np.zeros_like(self.weights)])
        self.holders = np.concatenate([self.holders, np.zeros_like(self.holders)])
        self._free.extend(range(2 * old - 1, old - 1, -1))

    def _release(self, rows: list[int]) -> None:
        """Fold the rows among ``rows`` that no reservoir holds any more into the closed sums, one
        after another in their order (the sums' rounding is that of adding them one by one)."""
        released: list[int] = []
        for row in rows:
            position = self.index.get(row)
            if position is None or self.holders[position] > 0:
                continue
            del self.index[row]
            released.append(position)
        if not released:
            return
        positions = np.array(released, dtype=np.intp)
        terms = _row_products(self.sums[positions], self.weights[positions])
        if len(released) == 1:
            self.closed += terms[0]
        else:  # accumulate adds in order: closed + terms[0] + terms[1] + ...
            self.closed = np.add.accumulate(np.concatenate([self.closed[None], terms]), axis=0)[-1]
        self.sums[positions] = 0.0
        self.weights[positions] = 0.0
        self._free.extend(released)

    def _rescale(self, factor: float) -> None:
        self.sums *= factor
        self.weights *= factor
        self.total_weight *= factor
        self.newest_weight *= factor
        self.closed[:6] *= factor * factor
        self.closed[6:] *= factor ** 4

    # -- state as plain data ---------------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """The whole state as plain data; taken between calls (nothing pending)."""
        if self._pending:
            raise ValueError("rows are drawn for and not yet explained: take the state between calls")
        rows = sorted(self.index)
        positions = np.array([self.index[r] for r in rows], dtype=np.intp)
        return {"slot_rows": self.slot_rows.copy(), "rows": np.array(rows, dtype=np.int64),
                "sums": self.sums[positions].copy(), "weights": self.weights[positions].copy(),
                "closed": self.closed.copy(), "newest_weight": self.newest_weight,
                "total_weight": self.total_weight}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data (the same realisations, features and reservoir)."""
        slot_rows = np.array(state["slot_rows"], dtype=np.int64)
        if slot_rows.shape != self.slot_rows.shape:
            raise ValueError(f"the state's reservoirs are {slot_rows.shape}, not {self.slot_rows.shape}")
        fresh = DonorInfluence(self.alpha, self.n_repeats, self.n, self.reservoir_size)
        self.__dict__.update(fresh.__dict__)
        self.slot_rows = slot_rows
        sums = np.array(state["sums"], dtype=np.float64).reshape(-1, self.n_repeats, self.n)
        weights = np.array(state["weights"], dtype=np.float64).reshape(sums.shape)
        for row, s, w in zip(np.asarray(state["rows"]).tolist(), sums, weights):
            position = self._position(int(row))
            self.sums[position], self.weights[position] = s, w
            self.holders[position] = int(np.count_nonzero(slot_rows == row))
        self.slot_positions = self._positions_of(slot_rows)
        self.closed = np.array(state["closed"], dtype=np.float64).reshape(12, self.n)
        self.newest_weight = float(state["newest_weight"])
        self.total_weight = float(state["total_weight"])


def _row_products(sums: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """:func:`_products` of each row alone, shape ``(rows, 12, G)``: ``_products(sums[r:r + 1],
    weights[r:r + 1])`` is ``_row_products(sums, weights)[r]``, to the bit."""
    p, q = sums.sum(axis=1), weights.sum(axis=1)
    pp, pq, qq = p * p, p * q, q * q
    p2, pw, w2 = (sums * sums).sum(1), (sums * weights).sum(1), (weights * weights).sum(1)
    a, b, c = pp - p2, pq - pw, qq - w2
    return np.stack([pp, pq, qq, p2, pw, w2, a * a, b * b, c * c, a * b, a * c, b * c], axis=1)


def _products(sums: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """For rows' ``P`` and ``Q`` (shape ``(rows, M, G)``), sums over rows, per feature, from which
    ``sum_s a_s`` and ``sum_s a_s^2`` follow for any ``phi``, with
    ``a_s = sum_{m != m'} (P^m - phi Q^m)(P^m' - phi Q^m') = A_s - 2 phi B_s + phi^2 C_s``:
    ``(sum_m P)^2, (sum_m P)(sum_m Q), (sum_m Q)^2, sum_m P^2, sum_m P Q, sum_m Q^2`` (whose
    differences give ``A, B, C``), then ``A^2, B^2, C^2, A B, A C, B C``."""
    p, q = sums.sum(axis=1), weights.sum(axis=1)
    pp, pq, qq = p * p, p * q, q * q
    p2, pw, w2 = (sums * sums).sum(1), (sums * weights).sum(1), (weights * weights).sum(1)
    a, b, c = pp - p2, pq - pw, qq - w2
    return np.stack([pp.sum(0), pq.sum(0), qq.sum(0), p2.sum(0), pw.sum(0), w2.sum(0),
                     (a * a).sum(0), (b * b).sum(0), (c * c).sum(0), (a * b).sum(0), (a * c).sum(0),
                     (b * c).sum(0)])
