"""iPFI over a micro-batch of a static model's rows, in two steps around the model's predictions.

:meth:`~ipfi_cli.core.incremental.IPFIEstimator.prepare` draws every row's replacements, stores
the rows and lays their evaluation blocks out (a :class:`PendingRows`);
:meth:`~ipfi_cli.core.incremental.IPFIEstimator.finish` turns the model's predictions of those
blocks into losses and folds them into the estimates (the :class:`Traces`). Between the two the
caller predicts ``pending.block``, alone or joined with other explainers' blocks, or while the
previous micro-batch is being folded. For rows of numbers, :func:`prepare_numeric` and
:func:`fold_many` do a micro-batch with array operations: the random numbers and the arithmetic of
:meth:`~ipfi_cli.core.incremental.IPFIEstimator.explain_one` row by row.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple, Protocol

import numpy as np

from ipfi_cli.core.bounds import MAX_BOUNDS_ALPHA, RowBounds, check_delta, row_bounds, wanted_rows
from ipfi_cli.core.ipfi_parts import EstimatorParts
from ipfi_cli.core.ipfi_stream import check_removable, ensure_sampler, store
from ipfi_cli.core.losses import Output
from ipfi_cli.core.row_values import all_rows_numbers
from ipfi_cli.core.smoothing import ExponentialMean


@dataclass
class PendingRows:
    """Rows drawn and stored, waiting for the model's predictions of their evaluation blocks.

    ``block``: the evaluation rows to predict, ``block_rows`` per explained row, in the model's
    column order; ``output``: what the model returns for them (labels, probabilities or values);
    ``row_targets``: the class per block row whose probability the model gives (``Output.PROBA``),
    else ``None``. ``n_rows`` rows were given, of which the first ``first`` (at most the stream's
    very first row) were only stored; ``before`` holds their estimates. ``saved`` is the stream state
    before :meth:`~ipfi_cli.core.incremental.IPFIEstimator.prepare` (``cancel`` returns to it).
    """

    block: np.ndarray
    output: Output
    row_targets: np.ndarray | None
    targets: list[Any]
    n_rows: int
    first: int
    before: np.ndarray
    extra: Any = None  # what a subclass keeps for its fold (iSAGE: the orderings)
    saved: tuple[Any, ...] | None = None


class Traces(NamedTuple):
    """Per row of a micro-batch: the estimates after it ``(T, G)``, the contribution folded in
    ``(T, G)`` and the unperturbed loss ``(T,)`` (NaN on a row only stored)."""

    estimates: np.ndarray
    contributions: np.ndarray
    losses: np.ndarray


class MicroBatchEstimator(EstimatorParts, Protocol):
    """An estimator these functions run a micro-batch for: :class:`~ipfi_cli.core.ipfi_parts.EstimatorParts`
    and the steps of :class:`~ipfi_cli.core.incremental.IPFIEstimator` that take a :class:`PendingRows`."""

    def prepare(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray
                ) -> PendingRows: ...

    def predict(self, pending: PendingRows) -> np.ndarray: ...

    def explain_many(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray, *,
                     return_contributions: bool = False, bounds_delta: float | None = None,
                     bounds_rows: Sequence[int] | None = None) -> Any: ...

    def bound_array(self, delta: float = 0.05, method: str | None = None) -> np.ndarray: ...

    def _prepare(self, rows: np.ndarray | list[list[Any]], targets: list[Any], buffer: np.ndarray | None
                 ) -> PendingRows: ...

    def _prepare_numeric(self, rows: np.ndarray, targets: list[Any], begin: int, buffer: np.ndarray | None
                         ) -> tuple[np.ndarray, Any]: ...

    def _finish(self, pending: PendingRows, predictions: Any) -> Traces: ...

    def _fold_pending(self, losses: np.ndarray, pending: PendingRows, out: np.ndarray, contributions: np.ndarray,
                      row_losses: np.ndarray) -> None: ...

    def _track_many(self, contributions: np.ndarray) -> np.ndarray: ...


def prepare_numeric(explainer: MicroBatchEstimator, rows: np.ndarray, targets: list[Any], begin: int,
                    buffer: np.ndarray | None) -> tuple[np.ndarray, Any]:
    """The evaluation blocks of the float ``rows[begin:]`` (``(T * block_rows, C)``, written into
    ``buffer`` when given), after drawing and storing them with
    :meth:`~ipfi_cli.core.samplers.Reservoir.draw_insert_many`."""
    e, layout = explainer, explainer.layout
    part = np.ascontiguousarray(rows[begin:])
    slots: list[tuple[np.ndarray, np.ndarray]] | None = None if e._spread is None else []
    replaced = e._reservoir.draw_insert_many(e._rng, part, len(e.names), layout.draw_index, layout.pair_col, slots)
    if slots and e._spread is not None:  # the calibrated bounds hear of each row's draw and insertion, in order
        e._spread.explained_stored_many(e.n_seen, *slots[0])
    e.n_seen += len(part)
    shape = (len(part), e.block_rows, len(e.columns))
    blocks = np.empty(shape) if buffer is None else buffer[:len(part)]
    layout.fill_blocks(blocks, part, replaced)
    return blocks.reshape(len(part) * e.block_rows, len(e.columns)), None


def fold_many(explainer: MicroBatchEstimator, losses: np.ndarray, out: np.ndarray, contributions: np.ndarray,
              row_losses: np.ndarray) -> None:
    """:meth:`~ipfi_cli.core.incremental.IPFIEstimator._fold` for the losses of consecutive time
    steps (shape ``(T, block_rows)``); the estimates, contributions and unperturbed losses after
    each go to ``out``, ``contributions`` and ``row_losses``.

    The tracker folds the micro-batch with ``update_many``, to the bit its ``update`` row by row."""
    e = explainer
    unperturbed = losses[:, 0]
    per_repeat = (losses[:, 1:] - losses[:, :1]).reshape(len(losses), e.n_repeats, len(e.names))
    per_row = np.add.reduce(per_repeat, axis=1) / e.n_repeats  # = last_contribution, row by row
    begin, bounds = 0, e._row_bounds
    for end in [len(losses)] if bounds is None else bounds.cuts(len(losses)):  # cut where a row's bounds are due
        out[begin:end] = e._track_many(per_row[begin:end])
        if e._spread is not None:
            e._spread.update_many(per_repeat[begin:end])
        if bounds is not None:
            bounds.folded(end - begin)
        begin = end
    e.last_contributions = per_repeat[-1].copy()
    e.last_loss = float(unperturbed[-1])
    add_losses(e, unperturbed)
    contributions[...] = per_row
    row_losses[...] = unperturbed


def fold_rows(e: MicroBatchEstimator, losses: np.ndarray, out: np.ndarray, contributions: np.ndarray,
              row_losses: np.ndarray) -> None:
    """:func:`fold_many` row by row with ``e._fold`` (another smoothing, or a subclass's own fold)."""
    for t, step in enumerate(losses):
        e._fold(step)
        if e._row_bounds is not None:
            e._row_bounds.folded(1)
        out[t] = e._tracker.mean
        contributions[t], row_losses[t] = e.last_contribution, e.last_loss


def add_losses(e: MicroBatchEstimator, losses: np.ndarray) -> None:
    """Add consecutive rows' unperturbed losses to the loss sum, in order (as row by row)."""
    total = e._loss_sum
    for loss in losses.tolist():
        total += loss
    e._loss_sum = total


def as_rows(e: MicroBatchEstimator, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray
            ) -> tuple[np.ndarray | None, list[list[Any]], int]:
    """The rows as floats (when all are numbers and the array path applies), else as value lists."""
    numeric: np.ndarray | None = None
    value_rows: list[list[Any]] = []
    if isinstance(rows, np.ndarray) and rows.ndim == 2 and rows.dtype.kind in "fiu" and e._floats_stored():
        numeric = rows
    elif isinstance(rows, np.ndarray):
        value_rows = [list(r) for r in rows.tolist()] if rows.ndim == 2 else []
    else:
        value_rows = [e._row_values(x) for x in rows]
    n_rows = len(numeric) if numeric is not None else len(value_rows)
    if len(targets) != n_rows:
        raise ValueError(f"{n_rows} rows but {len(targets)} targets")
    if numeric is None and e.use_batch and e._floats_stored() and all_rows_numbers(value_rows):
        numeric = np.array(value_rows, dtype=np.float64).reshape(n_rows, len(e.columns))
    return (None if numeric is None else np.asarray(numeric, dtype=np.float64)), value_rows, n_rows


def explain_rows(e: MicroBatchEstimator, value_rows: list[list[Any]], targets: list[Any]) -> Traces:
    """``explain_many`` row by row with ``explain_one`` (a records model)."""
    traces = Traces(np.full((len(value_rows), len(e.names)), np.nan),
                    np.full((len(value_rows), len(e.names)), np.nan), np.full(len(value_rows), np.nan))
    for t, (v, y) in enumerate(zip(value_rows, targets)):
        explained = e.n_explained
        traces.estimates[t] = e.explain_one(dict(zip(e.columns, v)), y)
        if e.n_explained > explained:
            traces.contributions[t], traces.losses[t] = e.last_contribution, e.last_loss
            if e._row_bounds is not None:
                e._row_bounds.folded(1)
    return traces


def prepare_rows(e: MicroBatchEstimator, rows: np.ndarray | list[list[Any]], targets: list[Any],
                 buffer: np.ndarray | None) -> PendingRows:
    """``prepare`` for float ``rows`` (the array path: ``e._prepare_numeric``) or value lists (row by row:
    ``e._fill_block``); ``buffer`` for the float blocks, to reuse."""
    before = np.empty((0, len(e.names)))
    begin = 0
    if isinstance(rows, np.ndarray):
        if len(rows) and e._sampler is None:
            ensure_sampler(e, rows[0].tolist())
        if len(rows) and e._reservoir.filled == 0:  # the stream's very first row is only stored
            before = e._tracker.mean[None, :].copy()
            store(e, rows[0])
            begin = 1
        if len(rows) > begin:
            block, extra = e._prepare_numeric(rows, targets, begin, buffer)
        else:
            block, extra = np.empty((0, len(e.columns))), None
    else:
        block, extra = np.empty((0, len(e.columns))), None
        n_block = e.block_rows
        k = 0
        for values in rows:
            check_removable(e, values)
            ensure_sampler(e, values)
            row = np.asarray(values, dtype=e._reservoir.rows.dtype)
            if e._reservoir.filled > 0:
                if k == 0 or (block.dtype != row.dtype and block.dtype != object):
                    # a non-numeric value arrived: object from here on
                    block = np.empty(((len(rows) - begin) * n_block, len(e.columns)), dtype=row.dtype) \
                        if k == 0 else block.astype(row.dtype)
                e._fill_block(block[k * n_block:(k + 1) * n_block], row)
                k += 1
            else:
                before, begin = e._tracker.mean[None, :].copy(), begin + 1
            store(e, row)
    explained = targets[begin:]
    return PendingRows(block, e.loss.output, e._predictions.row_targets(explained), explained, len(rows),
                       begin, before, extra)


def finish_rows(e: MicroBatchEstimator, pending: PendingRows, predictions: Any) -> Traces:
    """``finish``: the losses of the predictions of ``pending.block``, folded in by ``e._fold_pending``."""
    n_rows, first = pending.n_rows, pending.first
    traces = Traces(np.full((n_rows, len(e.names)), np.nan), np.full((n_rows, len(e.names)), np.nan),
                    np.full(n_rows, np.nan))
    traces.estimates[:first] = pending.before
    if pending.targets:
        losses = e._losses(predictions, pending.targets)
        e._fold_pending(losses, pending, traces.estimates[first:], traces.contributions[first:],
                        traces.losses[first:])
    return traces


def explain_many(e: MicroBatchEstimator, rows: Iterable[Mapping[str, Any]] | np.ndarray,
                 targets: Sequence[Any] | np.ndarray, return_contributions: bool, bounds_delta: float | None,
                 bounds_rows: Sequence[int] | None = None) -> Any:
    """``e.explain_many``: all or nothing (a failure restores the stream state before the call); the bounds
    after its rows by :func:`with_row_bounds`."""
    if bounds_delta is not None and not e.bounds_per_row:
        raise ValueError(f"bounds after each row are not kept for {type(e).__name__}")
    numeric, value_rows, n_rows = as_rows(e, rows, targets)
    targets = list(targets)
    saved = e._save_stream_state()
    first_is_stored = e.n_seen == 0 and n_rows > 0  # the stream's first row is stored, not explained

    def explain() -> Traces:
        if numeric is None and not e.use_batch:
            return explain_rows(e, value_rows, targets)
        return explain_blocks(e, numeric, value_rows, targets)
    try:
        traces = with_row_bounds(e, bounds_delta, bounds_rows, n_rows, first_is_stored, explain)
    except Exception:
        # all or nothing: a failing model call leaves the explainer as it was before the call
        e._restore_stream_state(saved)
        raise
    return tuple(traces) if return_contributions else traces.estimates


def with_row_bounds(e: MicroBatchEstimator, delta: float | None, rows: Sequence[int] | None, n_rows: int,
                    first_is_stored: bool, fold: Callable[[], Traces]) -> Traces:
    """``fold()`` (which folds ``n_rows`` rows in, the first only stored if ``first_is_stored``); with ``delta``,
    ``e.last_row_bounds`` gets the bounds after each row (those of the offsets ``rows``, the others' NaN): the
    exponential smoothing's chebyshev and normal bounds from the moments its tracker records row by row
    (:func:`~ipfi_cli.core.bounds.row_bounds`), any other's by ``e.bound_array`` when the fold reaches the row
    (:class:`~ipfi_cli.core.bounds.RowBounds`)."""
    if delta is None:
        return fold()
    if not e.bounds_per_row:
        raise ValueError(f"bounds after each row are not kept for {type(e).__name__}")
    check_delta(delta)
    wanted = wanted_rows(rows, n_rows)
    recorder = e._tracker if _records_moments(e) else None
    if isinstance(recorder, ExponentialMean):
        recorder.history = []  # after the caller's saved copy: a failed call restores a tracker without it
    else:
        e._row_bounds = RowBounds(e, delta, rows, n_rows, first_is_stored)
    try:
        traces = fold()
        if isinstance(recorder, ExponentialMean):
            too_smooth = e.smoothing == "exponential" and e.alpha > MAX_BOUNDS_ALPHA
            e.last_row_bounds = row_bounds(recorder.moments_history(), e.bounds_method, delta, n_rows,
                                           first_is_stored, too_smooth)
            e.last_row_bounds[~wanted] = np.nan  # computed for every row at once: only those asked for
        elif e._row_bounds is not None:
            e.last_row_bounds = e._row_bounds.out
        return traces
    finally:
        if isinstance(recorder, ExponentialMean):
            recorder.history = None
        e._row_bounds = None


def _records_moments(e: MicroBatchEstimator) -> bool:
    """Whether the bounds after each row come from the moments the tracker records: the exponential
    smoothing's chebyshev and normal bounds (the realisations' read state it does not record)."""
    return type(e._tracker) is ExponentialMean and e.bounds_method in ("chebyshev", "normal") and e._spread is None


def explain_blocks(e: MicroBatchEstimator, numeric: np.ndarray | None, value_rows: list[list[Any]], targets: list[Any]
                   ) -> Traces:
    """Consecutive rows through ``_prepare``, ``predict`` and ``_finish``, in model calls of at most
    ``max_block_cells`` cells (at least one row's block), so memory stays bounded whatever the width;
    the model never changes, so the numbers do not depend on how the rows are grouped."""
    n_rows = len(numeric) if numeric is not None else len(value_rows)
    per_call = max(1, e.max_block_cells // (e.block_rows * max(1, len(e.columns))))
    begin = int(e._sampler is None or e._reservoir.filled == 0)
    buffer = None if numeric is None or n_rows <= begin else \
        np.empty((min(per_call, n_rows - begin), e.block_rows, len(e.columns)))
    parts = []
    cuts = list(range(begin + per_call, n_rows, per_call))  # the stream's first row: no block
    for start, end in zip([0, *cuts], [*cuts, n_rows]) if n_rows else ():
        part = numeric[start:end] if numeric is not None else value_rows[start:end]
        pending = e._prepare(part, targets[start:end], buffer)
        parts.append(e._finish(pending, e.predict(pending)))
    if not parts:
        return Traces(np.full((0, len(e.names)), np.nan), np.full((0, len(e.names)), np.nan), np.full(0, np.nan))
    return Traces(*(np.concatenate(arrays) for arrays in zip(*parts)))


def prepare(e: MicroBatchEstimator, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray
            ) -> PendingRows:
    """``e.prepare``: the pending rows keep the stream state before them (``saved``)."""
    if not e.use_batch:
        raise ValueError("prepare/finish need a model that predicts blocks of rows (supports_batch); "
                         "use explain_many")
    numeric, value_rows, _ = as_rows(e, rows, targets)
    saved = e._save_stream_state()
    try:
        pending = e._prepare(numeric if numeric is not None else value_rows, list(targets), None)
    except Exception:
        e._restore_stream_state(saved)
        raise
    pending.saved = saved
    return pending

