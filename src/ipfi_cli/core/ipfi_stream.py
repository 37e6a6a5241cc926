"""iPFI's stream state: the rows it stored (the reservoirs), the draws from them, and an in-memory
copy of the whole stream state (generator, reservoirs, trackers) that a failed call returns to.

The reservoirs are made at the first row, when the value types are known: floats for a model that
predicts blocks and rows of numbers, else the values as they came (objects). Conditional removal
draws from a sampler that learns every stored row instead (:mod:`~ipfi_cli.core.removal`), and the
realisations' bounds hear of every draw and insertion (:class:`~ipfi_cli.core.bounds.RealisationSpread`).
"""

from __future__ import annotations

import copy
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from ipfi_cli.core.row_values import all_numbers, check_finite_numbers
from ipfi_cli.core.samplers import make_sampler

if TYPE_CHECKING:
    from ipfi_cli.core.ipfi_parts import EstimatorParts


def check_removable(e: EstimatorParts, values: Sequence[Any]) -> None:
    """Conditional removal takes finite numbers only (see :func:`~ipfi_cli.core.row_values.check_finite_numbers`)."""
    if e._remover is not None:
        check_finite_numbers(e.columns, values)


def ensure_sampler(e: EstimatorParts, values: Sequence[Any]) -> None:
    """Make the reservoirs at the first row; objects from the first value that is not a number."""
    if e._sampler is not None and e._sampler.rows.dtype == object:
        return
    numeric = all_numbers(values)
    if e._sampler is None:
        # float storage only helps block predictors; records keep the values as they came
        dtype = np.float64 if (numeric and e.use_batch) else object
        e._sampler = make_sampler(e.sampling, e.reservoir_size, e.n_repeats, len(e.columns), dtype)
    elif not numeric and e._sampler.rows.dtype != object:
        e._sampler.as_dtype(object)


def store(e: EstimatorParts, values: Sequence[Any] | np.ndarray) -> None:
    """Store a row (after it was explained, if it was)."""
    reservoir = e._reservoir
    written = reservoir.insert(e._rng, np.asarray(values, dtype=reservoir.rows.dtype))
    if e._spread is not None:
        e._spread.stored(e.n_seen, written)
    if e._remover is not None:
        e._remover.learn(np.asarray(values))
    e.n_seen += 1


def draw_replacements(e: EstimatorParts) -> np.ndarray:
    """Draw one earlier row per (realisation, group); return the value of every replaced cell."""
    slots = e._reservoir.draw(e._rng, len(e.names))
    if e._spread is not None:
        e._spread.explained(e.n_seen, slots)
    return e.layout.replaced_values(e._reservoir.rows, slots)


def draw_conditional(e: EstimatorParts, row: np.ndarray) -> np.ndarray:
    """Conditional removal: every replaced cell drawn given the row's other columns."""
    assert e._remover is not None
    if e._spread is not None:
        e._spread.explained(e.n_seen, None)
    return e._remover.draw_groups(e._rng, row, e._group_columns, e.n_repeats).reshape(-1)


def save_stream(e: EstimatorParts) -> tuple[Any, ...]:
    """A copy of the explainer's stream state, for :func:`restore_stream`."""
    rows = e._sampler
    sampler_state = None if rows is None else (rows.rows.copy(), rows.filled, rows.n_seen)
    results = (copy.deepcopy(e._tracker), copy.deepcopy(e._spread), e.last_contributions,
               e.last_loss, e._loss_sum, copy.deepcopy(e._remover))
    return e._rng.bit_generator.state, sampler_state, e.n_seen, results


def restore_stream(e: EstimatorParts, saved: tuple[Any, ...]) -> None:
    """Put back the stream state :func:`save_stream` copied."""
    rng_state, sampler_state, n_seen, results = saved
    e._tracker, e._spread, e.last_contributions, e.last_loss, e._loss_sum, e._remover = results
    e._rng.bit_generator.state = rng_state
    if sampler_state is None:
        e._sampler = None
    else:
        e._reservoir.rows, e._reservoir.filled, e._reservoir.n_seen = sampler_state
    e.n_seen = n_seen
