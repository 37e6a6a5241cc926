"""Where iPFI's perturbed copies of a row put their replacement values.

One time step evaluates a block of ``1 + M * G`` rows: block row 0 is the row itself, block row
``1 + m * G + g`` has group ``g``'s columns replaced by realisation ``m``'s draw. Every replaced
cell is a *pair* ``(block row, column)``; :class:`PermutationLayout` lists them once, as the
lookup tables the block, records and micro-batch paths index with.

>>> layout = PermutationLayout.build(["a", "b", "c"], {"a": [0], "bc": [1, 2]}, n_repeats=2, reservoir_size=5)
>>> layout.block_rows, layout.pair_row.tolist(), layout.pair_col.tolist()
(5, [1, 2, 2, 3, 4, 4], [0, 1, 2, 0, 1, 2])
>>> layout.record_layout[1], layout.record_names is None   # block row 2 replaces b and c (pairs 1, 2)
([('b', 1), ('c', 2)], True)
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import cast

import numpy as np


@dataclass(frozen=True, eq=False)
class PermutationLayout:
    """The replaced cells of one row's evaluation block (see the module docstring).

    ``pair_row``, ``pair_rep``, ``pair_group``, ``pair_col``: per pair, its block row, realisation,
    group and column. ``record_layout``: per perturbed record (block row - 1), its ``(column name,
    pair)`` list; ``record_names``: with one column per group, the replaced column of each record
    (else ``None``). ``pair_draw``: each pair's slot in the ``(M, G)`` draws (``None`` when in
    order); ``pair_offset``: its cell in the ``(M, L, C)`` reservoir rows before adding
    ``slot * C``; ``pair_cell``: its cell in the ``(block_rows, C)`` block.
    """

    block_rows: int
    pair_row: np.ndarray
    pair_rep: np.ndarray
    pair_group: np.ndarray
    pair_col: np.ndarray
    record_layout: list[list[tuple[str, int]]]
    record_names: list[str] | None
    pair_draw: np.ndarray | None
    pair_offset: np.ndarray
    pair_cell: np.ndarray

    @classmethod
    def build(cls, columns: Sequence[str], groups: Mapping[str, Sequence[int]], n_repeats: int,
              reservoir_size: int) -> PermutationLayout:
        """The layout for ``groups`` (name -> column indices, in ``names`` order) of ``columns``."""
        n_groups = len(groups)
        rows, reps, grps, cols = [], [], [], []
        for m in range(n_repeats):
            for g, group in enumerate(groups.values()):
                for c in group:
                    rows.append(1 + m * n_groups + g)
                    reps.append(m)
                    grps.append(g)
                    cols.append(c)
        pair_row = np.array(rows, dtype=np.intp)
        pair_rep = np.array(reps, dtype=np.intp)
        pair_group = np.array(grps, dtype=np.intp)
        pair_col = np.array(cols, dtype=np.intp)
        block_rows = 1 + n_repeats * n_groups
        record_layout: list[list[tuple[str, int]]] = [[] for _ in range(block_rows - 1)]
        for pair, (row, col) in enumerate(zip(rows, cols)):
            record_layout[row - 1].append((columns[col], pair))
        # one column per group (the default): perturbed record i replaces one column, with pair i
        single = all(len(layout) == 1 for layout in record_layout)
        record_names = [layout[0][0] for layout in record_layout] if single else None
        draws = pair_rep * n_groups + pair_group
        pair_draw = None if np.array_equal(draws, np.arange(len(draws))) else draws
        pair_offset = pair_rep * (reservoir_size * len(columns)) + pair_col
        pair_cell = pair_row * len(columns) + pair_col
        return cls(block_rows, pair_row, pair_rep, pair_group, pair_col, record_layout, record_names, pair_draw,
                   pair_offset, pair_cell)

    @property
    def draw_index(self) -> np.ndarray:
        """Each pair's slot in the ``(M, G)`` draws, as an array even when they are in order."""
        return np.arange(len(self.pair_col)) if self.pair_draw is None else self.pair_draw

    def replaced_values(self, reservoir_rows: np.ndarray, slots: np.ndarray) -> np.ndarray:
        """The value of every replaced cell, from the ``(M, G)`` drawn ``slots`` of the ``(M, L, C)`` rows."""
        slots = slots.reshape(-1)
        if self.pair_draw is not None:
            slots = slots[self.pair_draw]
        return cast(np.ndarray, reservoir_rows.reshape(-1)[self.pair_offset + slots * reservoir_rows.shape[2]])

    def fill_blocks(self, blocks: np.ndarray, rows: np.ndarray, replaced: np.ndarray) -> None:
        """Write the evaluation blocks ``(T, block_rows, C)`` of the float ``rows`` ``(T, C)``, each
        row's copies with their ``replaced`` values ``(T, pairs)``.

        A row's copies are written as whole rows (one memcpy each, through a view of each row as one
        opaque item), not value by value: the same bytes, a third of the time."""
        n_rows, n_columns = rows.shape
        if n_columns:
            whole_row = np.dtype((np.void, rows.itemsize * n_columns))
            blocks.view(whole_row)[...] = np.ascontiguousarray(rows).view(whole_row)[:, None]
        blocks.reshape(n_rows, self.block_rows * n_columns)[:, self.pair_cell] = replaced
