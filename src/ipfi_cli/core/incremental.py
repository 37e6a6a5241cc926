"""Incremental permutation feature importance (iPFI), the paper's Algorithm 1.

For each row ``(x_t, y_t)`` and each feature (or group) ``j``, and for each of ``M``
independent realisations, iPFI replaces ``x_t``'s value(s) of ``j`` with those of an
earlier row drawn from that realisation's reservoir, and takes the loss difference
``lambda = loss(h_t(x_t with j replaced), y_t) - loss(h_t(x_t), y_t)``. The ``M``
differences are averaged and folded into a bias-corrected exponentially weighted mean
with rate ``alpha`` (see :mod:`ipfi_cli.core.smoothing`).

One row costs one unperturbed and ``G * M`` perturbed predictions (``G`` groups).
With a predictor that ``supports_batch`` they go to the model in one call, and
:meth:`IPFIEstimator.explain_many` (static models only) puts the rows of many time
steps into one call. Every random choice comes from one generator seeded by ``seed``,
drawn in the same order on every path: same seed, same numbers.

The explainer only predicts: it never changes the model. For an incrementally learned
model explain row ``t`` with ``h_t`` and then learn it
(:func:`ipfi_cli.core.prequential.explain_then_learn`).

>>> import numpy as np
>>> from ipfi_cli.models import FunctionPredictor
>>> model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))   # uses only "a"
>>> explainer = IPFIEstimator(model, ["a", "b"], loss="zero-one", alpha=0.01, seed=1)
>>> rng = np.random.default_rng(0)
>>> for _ in range(2000):
...     a, b = rng.random(2)
...     _ = explainer.explain_one({"a": a, "b": b}, int(a > 0.5))
>>> {k: round(v, 1) for k, v in explainer.importances.items()}   # truth: a = 0.5, b = 0
{'a': 0.5, 'b': 0.0}
"""

from __future__ import annotations

import copy
import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from itertools import chain
from typing import Any, ClassVar, cast

import numpy as np

from ipfi_cli.core.bounds import (
    MAX_BOUNDS_ALPHA,
    RealisationSpread,
    check_bounds_alpha,
    check_delta,
    half_width,
    independent_half_widths,
    needs_realisations,
)
from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.core.losses import ABSOLUTE, SQUARED, ZERO_ONE, Loss, Output, get_loss
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.core.removal import REMOVALS, ConditionalSampler, make_conditional_sampler
from ipfi_cli.core.samplers import SAMPLERS, Reservoir, make_sampler
from ipfi_cli.core.smoothing import ExponentialMean, make_smoother
from ipfi_cli.core.state_fields import array, fields, generator_state, integer, number, within
from ipfi_cli.errors import InputError


class RowError(InputError):
    """A row cannot be explained; ``column`` names the offending column when known."""


class NeedsNumbersError(RowError):
    """Conditional removal got a value that is not a number (text) in ``column``."""


_PLAIN_NUMBERS = (int, float)
_PLAIN_TYPES = frozenset(_PLAIN_NUMBERS)
#: values (records x the row's width) of a row's perturbed copies built and predicted in one call at most,
#: when the model takes records (river): 10,000 columns x M = 10 would be 10^9 values at once
RECORD_CELLS = 1 << 21
#: built-in losses that give the same numbers for int64/float64 targets as for the Python objects
_NUMERIC_TARGET_LOSSES = (ZERO_ONE, ABSOLUTE, SQUARED)
#: settings :meth:`IPFIEstimator.settings_dict` leaves out at these values (states of the paper's iPFI
#: stay as they were); named in messages as they are
_OMITTED_SETTINGS = {"smoothing": "exponential", "bounds_method": "chebyshev"}


def _is_number(value: Any) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, bool)


def _all_numbers(values: Sequence[Any]) -> bool:
    """True when every value is a real number (not a bool), so it can live in a float array."""
    plain = _PLAIN_NUMBERS
    return all(type(v) in plain for v in values) or all(_is_number(v) for v in values)


def _all_rows_numbers(rows: list[list[Any]]) -> bool:
    """True when every value of every row is a real number (not a bool)."""
    return set(map(type, chain.from_iterable(rows))) <= _PLAIN_TYPES or all(_all_numbers(row) for row in rows)


def loss_targets(loss: Loss, targets: list[Any], kind: str) -> np.ndarray:
    """The targets as an array for ``loss``: int64 (float64) when every target is an ``int``
    (``float``) and the predictions (of dtype kind ``kind``) are integers (floats), so a built-in
    loss compares numbers in bulk with exactly the result of comparing the Python objects; else
    an object array of the targets as they are.

    >>> loss_targets(ZERO_ONE, [1, 0], "i").dtype, loss_targets(ZERO_ONE, [1, "0"], "i").dtype
    (dtype('int64'), dtype('O'))
    """
    if loss in _NUMERIC_TARGET_LOSSES and len(targets):
        kinds = set(map(type, targets))
        try:
            if kinds == {int} and kind in "ib":
                return np.array(targets, dtype=np.int64)
            if kinds == {float} and kind == "f":
                return np.array(targets, dtype=np.float64)
        except OverflowError:  # an int beyond 64 bits: compared as a Python object
            pass
    out = np.empty(len(targets), dtype=object)
    for i, y in enumerate(targets):
        out[i] = y
    return out


class IPFIEstimator:
    """Anytime permutation feature importance of a model on a stream.

    Parameters
    ----------
    model
        A :class:`~ipfi_cli.core.predictor.Predictor` (see ``ipfi_cli.models.as_predictor``).
    columns
        All the model's input columns, in the order the model expects them.
    loss
        ``zero-one``, ``absolute``, ``squared``, ``log`` or a :class:`Loss`.
    alpha
        Smoothing rate: each new row weighs ``alpha`` (window of about ``2/alpha - 1`` rows).
    n_repeats
        ``M``, the number of independent realisations averaged (the paper uses 10).
    sampling
        ``geometric`` (recent rows preferred; follows drift) or ``uniform`` (all rows alike).
    reservoir_size
        ``L``, rows remembered per realisation.
    features, groups
        What to explain: columns one by one (default all) and named column groups
        permuted jointly (see :func:`~ipfi_cli.core.groups.resolve_groups`).
    seed
        Seeds the one random generator every draw comes from.
    smoothing
        ``exponential`` (rate ``alpha``: follows a changing model) or ``mean`` (every row
        weighs alike: converges to batch PFI for a static model; ``alpha`` is then unused).
    removal
        ``marginal`` (an earlier row's value, the paper's) or ``conditional`` (drawn given
        the row's other features by ``conditional_sampler``: see :mod:`ipfi_cli.core.removal`).
    conditional_sampler
        ``gaussian`` or ``tree``, for ``removal="conditional"``.
    bounds_method
        How :meth:`bounds` computes confidence half-widths: ``chebyshev`` (the paper's),
        ``normal`` or ``realisations`` (calibrated; needs ``n_repeats >= 2`` and keeps each
        realisation's estimate, ``M`` numbers per feature); see :mod:`ipfi_cli.core.bounds`.
    """

    #: the most cells (rows x columns) one model call of :meth:`explain_many` evaluates;
    #: 2**23 float64 cells are 64 MB, so a micro-batch of wide rows is split over several calls
    #: (measured on 300 features: a peak RSS of 260 MB instead of 7 GB, and fewer, larger calls
    #: than a small ``--batch-size`` would make)
    max_block_cells: int = 1 << 23

    def __init__(
        self,
        model: Predictor,
        columns: Sequence[str],
        *,
        loss: str | Loss = "zero-one",
        alpha: float = 0.001,
        n_repeats: int = 10,
        sampling: str = "geometric",
        reservoir_size: int = 100,
        features: Sequence[str] | None = None,
        groups: Mapping[str, Sequence[str]] | None = None,
        seed: int | None = None,
        smoothing: str = "exponential",
        removal: str = "marginal",
        conditional_sampler: str = "gaussian",
        bounds_method: str = "chebyshev",
    ) -> None:
        if n_repeats < 1:
            raise ValueError(f"n_repeats must be at least 1, got {n_repeats}")
        if needs_realisations(bounds_method) and n_repeats < 2:
            raise ValueError(f"bounds method {bounds_method!r} measures the spread of the realisations: "
                             f"it needs at least 2 repeats, got {n_repeats}")
        self.model = model
        self.columns = [str(c) for c in columns]
        self.loss = get_loss(loss)
        self.alpha = float(alpha)
        self.n_repeats = int(n_repeats)
        self.sampling = sampling
        self.reservoir_size = int(reservoir_size)
        if sampling not in SAMPLERS:  # the reservoirs are made at the first row: their settings are checked now
            raise ValueError(f"unknown sampling {sampling!r}; choose one of {', '.join(SAMPLERS)}")
        if self.reservoir_size < 1:
            raise ValueError(f"reservoir_size must be at least 1, got {reservoir_size}")
        self.seed = seed
        self.groups = resolve_groups(self.columns, features, groups)
        self.names = list(self.groups)
        self.smoothing = smoothing
        self._tracker = make_smoother(smoothing, self.alpha, len(self.names))
        if removal not in REMOVALS:
            raise ValueError(f"unknown removal {removal!r}; choose one of {', '.join(REMOVALS)}")
        self.removal = removal
        self._remover: ConditionalSampler | None = None
        if removal == "conditional":
            self._remover = make_conditional_sampler(conditional_sampler, len(self.columns), alpha=self.alpha,
                                                     smoothing=smoothing, seed=seed)
            self._group_columns = [np.array(cols, dtype=np.intp) for cols in self.groups.values()]
        if bounds_method == "realisations" and smoothing != "exponential":
            raise ValueError("bounds_method='realisations' follows the exponential smoothing; with "
                             f"smoothing={smoothing!r} choose 'chebyshev' or 'normal'")
        if needs_realisations(bounds_method):
            check_bounds_alpha(self.alpha)
        self.bounds_method = bounds_method
        self._spread = (RealisationSpread(self.alpha, self.n_repeats, len(self.names), self.reservoir_size)
                        if needs_realisations(bounds_method) else None)
        self._rng = np.random.default_rng(np.random.SeedSequence(seed))
        self._sampler: Reservoir | None = None  # built at the first row, when the value types are known
        self.n_seen = 0
        self.last_contributions = np.full((self.n_repeats, len(self.names)), np.nan)
        self.last_loss = float("nan")
        self._loss_sum = 0.0
        self.n_model_calls = 0  # calls to the model's predict_block / predict_records
        self.n_predictions = 0  # rows those calls predicted
        self._build_layout()

    # -- layout of the perturbed rows of one time step ------------------------------------
    def _build_layout(self) -> None:
        """Precompute where each replacement value goes in the evaluation block of one row.

        Block row 0 is the unperturbed row; row ``1 + m * G + g`` has group ``g``
        replaced by realisation ``m``'s draw. ``_pairs_*`` list every replaced cell.
        """
        n_groups = len(self.names)
        rows, reps, grps, cols = [], [], [], []
        for m in range(self.n_repeats):
            for g, name in enumerate(self.names):
                for c in self.groups[name]:
                    rows.append(1 + m * n_groups + g)
                    reps.append(m)
                    grps.append(g)
                    cols.append(c)
        self._pair_row = np.array(rows, dtype=np.intp)
        self._pair_rep = np.array(reps, dtype=np.intp)
        self._pair_group = np.array(grps, dtype=np.intp)
        self._pair_col = np.array(cols, dtype=np.intp)
        self.block_rows = 1 + self.n_repeats * n_groups
        # for the records path: per perturbed record, the (column name, pair index) list
        names = self.columns
        self._record_layout: list[list[tuple[str, int]]] = [[] for _ in range(self.block_rows - 1)]
        for pair, (row, col) in enumerate(zip(rows, cols)):
            self._record_layout[row - 1].append((names[col], pair))
        # one column per group (the default): perturbed record i replaces one column, with pair i
        single = all(len(layout) == 1 for layout in self._record_layout)
        self._record_names = [layout[0][0] for layout in self._record_layout] if single else None
        # flat positions: of each pair's slot in the (M, G) draws (None: in order), and of its
        # cell in the (M, L, C) reservoir rows before adding slot * C
        self._pair_draw: np.ndarray | None = self._pair_rep * n_groups + self._pair_group
        if np.array_equal(self._pair_draw, np.arange(len(self._pair_draw))):
            self._pair_draw = None
        self._pair_offset = self._pair_rep * (self.reservoir_size * len(names)) + self._pair_col
        self._pair_cell = self._pair_row * len(names) + self._pair_col  # in the (block_rows, C) block

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickled before smoothing and removal were options: the paper's exponential, marginal
        self.smoothing, self.removal, self._remover = "exponential", "marginal", None
        state.setdefault("bounds_method", "chebyshev")  # pickled before there was a choice
        state.setdefault("_spread", None)
        self.__dict__.update(state)
        if "_pair_cell" not in state:  # pickled before these lookup tables existed
            self._build_layout()
        self.__dict__.setdefault("n_model_calls", 0)  # pickled before the calls were counted
        self.__dict__.setdefault("n_predictions", 0)

    # -- public API -------------------------------------------------------------------------
    @property
    def use_batch(self) -> bool:
        return bool(getattr(self.model, "supports_batch", False))

    def explain_one(self, x: Mapping[str, Any], y: Any) -> np.ndarray:
        """Explain one row with the model as it is now; returns the estimates after it.

        The first row only fills the reservoir (there is nothing earlier to draw
        from), so its estimates are NaN.
        """
        values = self._row_values(x)
        self._check_removable(values)
        self._ensure_sampler(values)
        row = np.asarray(values, dtype=self._reservoir.rows.dtype)
        if self._reservoir.filled > 0:
            rng_state = self._rng.bit_generator.state
            try:
                if self.use_batch:
                    block = np.empty((self.block_rows, len(self.columns)), dtype=row.dtype)
                    self._fill_block(block, row)
                    predicted = self._predict_block(block, [y])
                else:
                    predicted = self._predict_records(x, values, y)
                losses = self._losses(predicted, [y])[0]
            except Exception:
                # the row is not explained: leave no trace of it, as if it never came
                self._rng.bit_generator.state = rng_state
                if self._spread is not None:
                    self._spread.cancel(self.n_seen)
                raise
            self._fold(losses)
        self._store(row)
        return self.importance_array()

    def explain_many(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray, *,
                     return_contributions: bool = False, bounds_delta: float | None = None) -> Any:
        """Explain consecutive rows of a *static* model; returns estimates, shape ``(T, G)``.

        With a batch predictor all rows' evaluations go to the model in one call; the
        numbers are exactly those of calling :meth:`explain_one` row by row.
        ``rows`` are dicts, or a 2-D array in ``columns`` order.

        With ``return_contributions=True`` it returns ``(estimates, contributions, losses)``:
        per row, the contribution folded into each estimate (shape ``(T, G)``, see
        :attr:`last_contribution`) and the unperturbed loss (shape ``(T,)``); both are NaN
        on a row that was not explained (the stream's first).

        With ``bounds_delta`` (where :attr:`bounds_per_row` allows it), :attr:`last_row_bounds`
        holds afterwards the bounds after each row, shape ``(T, G)``: what :meth:`bound_array`
        would have given after that row, to the bit.
        """
        if bounds_delta is not None and not self.bounds_per_row:
            raise ValueError(f"bounds after each row are kept for the chebyshev and normal bounds of iPFI with "
                             f"exponential smoothing, not for {type(self).__name__} with {self.bounds_method!r}")
        numeric: np.ndarray | None = None  # the rows as floats, when all are numbers (the array path)
        if isinstance(rows, np.ndarray) and rows.ndim == 2 and rows.dtype.kind in "fiu" and self._floats_stored():
            numeric = rows
            value_rows: list[list[Any]] = []
            n_rows = len(rows)
        else:
            if isinstance(rows, np.ndarray):
                value_rows = [list(r) for r in rows.tolist()] if rows.ndim == 2 else []
            else:
                value_rows = [self._row_values(x) for x in rows]
            n_rows = len(value_rows)
        targets = list(targets)
        if len(targets) != n_rows:
            raise ValueError(f"{n_rows} rows but {len(targets)} targets")
        saved = self._save_stream_state()
        contributions = np.full((n_rows, len(self.names)), np.nan) if return_contributions else None
        losses = np.full(n_rows, np.nan) if return_contributions else None
        first_is_stored = self.n_seen == 0  # the stream's first row is stored, not explained
        recorder = self._tracker if bounds_delta is not None else None
        if recorder is not None:
            check_delta(bounds_delta)  # type: ignore[arg-type]
            assert isinstance(recorder, ExponentialMean)  # bounds_per_row
            recorder.history = []  # after the saved copy: a failed call restores a tracker without it
        try:
            if numeric is None and self.use_batch and self._floats_stored() and _all_rows_numbers(value_rows):
                numeric = np.array(value_rows, dtype=np.float64).reshape(n_rows, len(self.columns))
            if numeric is not None:
                out = self._explain_many_numeric(np.asarray(numeric, dtype=np.float64), targets,
                                                 contributions, losses)
            elif not self.use_batch:
                estimates = []
                for t, (v, y) in enumerate(zip(value_rows, targets)):
                    explained = self.n_explained
                    estimates.append(self.explain_one(dict(zip(self.columns, v)), y))
                    if contributions is not None and self.n_explained > explained:
                        contributions[t], losses[t] = self.last_contribution, self.last_loss  # type: ignore[index]
                out = np.array(estimates).reshape(-1, len(self.names))
            else:
                out = self._explain_many_batched(value_rows, targets, contributions, losses)
            if bounds_delta is not None:
                self.last_row_bounds = self._row_bounds(n_rows, first_is_stored and n_rows > 0, bounds_delta)
        except Exception:
            # all or nothing: a failing model call leaves the explainer as it was before the call
            self._restore_stream_state(saved)
            raise
        finally:
            if recorder is not None:
                recorder.history = None
        return (out, contributions, losses) if return_contributions else out

    @property
    def bounds_per_row(self) -> bool:
        """Whether :meth:`explain_many` can give the bounds after each row (``bounds_delta``): the
        chebyshev and normal bounds of this class's exponential smoothing, whose moments the
        tracker records row by row (the realisations' bounds follow state it does not record)."""
        return (type(self) is IPFIEstimator and type(self._tracker) is ExponentialMean
                and self.bounds_method in ("chebyshev", "normal") and self._spread is None)

    def _row_bounds(self, n_rows: int, first_is_stored: bool, delta: float) -> np.ndarray:
        """:meth:`bound_array` after each of the last :meth:`explain_many`'s rows, from the moments
        the tracker recorded (one per explained row), with :func:`independent_half_widths`."""
        tracker = self._tracker
        assert isinstance(tracker, ExponentialMean)
        sum_sq_dev, weight, squares, count = tracker.moments_history()
        if len(count) != n_rows - int(first_is_stored):
            raise AssertionError(f"{len(count)} recorded moments for {n_rows} rows")
        with np.errstate(divide="ignore", invalid="ignore"):
            variance = np.maximum(sum_sq_dev / weight[:, None], 0.0)  # WeightedMoments.variance, row by row
            effective = np.where(squares == 0.0, count.astype(np.float64), weight * weight / squares)
        widths = independent_half_widths(self.bounds_method, delta, variance, effective)
        widths[count < 2] = np.nan
        if self.smoothing == "exponential" and self.alpha > MAX_BOUNDS_ALPHA:
            widths[...] = np.nan
        if first_is_stored:
            widths = np.concatenate([np.full((1, len(self.names)), np.nan), widths])
        return widths

    def _save_stream_state(self) -> tuple[Any, ...]:
        sampler = self._sampler
        sampler_state = None if sampler is None else (sampler.rows.copy(), sampler.filled, sampler.n_seen)
        results = (copy.deepcopy(self._tracker), copy.deepcopy(self._spread), self.last_contributions,
                   self.last_loss, self._loss_sum, copy.deepcopy(self._remover))
        return self._rng.bit_generator.state, sampler_state, self.n_seen, results

    def _restore_stream_state(self, saved: tuple[Any, ...]) -> None:
        rng_state, sampler_state, n_seen, results = saved
        self._tracker, self._spread, self.last_contributions, self.last_loss, self._loss_sum, self._remover = results
        self._rng.bit_generator.state = rng_state
        if sampler_state is None:
            self._sampler = None
        else:
            self._reservoir.rows, self._reservoir.filled, self._reservoir.n_seen = sampler_state
        self.n_seen = n_seen

    #: whether :meth:`_explain_many_numeric` computes this class's numbers: a subclass that changes
    #: a row's evaluation or its folding (SAGE's coalitions, for one) sets it to False
    _array_path: ClassVar[bool] = True

    def _floats_stored(self) -> bool:
        """The array path applies: the plain estimator (marginal removal, exponential smoothing), a
        block predictor, and the reservoir (if any yet) holds floats."""
        return (self._array_path and self._remover is None
                and type(self._tracker) is ExponentialMean
                and self.use_batch and (self._sampler is None or self._sampler.rows.dtype == np.float64))

    def _begin_micro_batch(self, rows: np.ndarray) -> tuple[np.ndarray, int]:
        """The estimates' array of a numeric micro-batch and the first row to explain: the
        stream's very first row is only stored (there is nothing to draw from yet)."""
        out = np.full((len(rows), len(self.names)), np.nan)
        if not len(rows):
            return out, 0
        if self._sampler is None:
            self._ensure_sampler(rows[0].tolist())
        if self._reservoir.filled == 0:
            out[0] = self._tracker.mean
            self._store(rows[0])
            return out, 1
        return out, 0

    def _explain_many_numeric(self, rows: np.ndarray, targets: list[Any],
                              contributions: np.ndarray | None = None, row_losses: np.ndarray | None = None
                              ) -> np.ndarray:
        """:meth:`explain_many` for rows of numbers, a micro-batch at a time with array operations.

        Per model call (at most ``max_block_cells`` cells), the reservoir's draws and
        insertions (:meth:`Reservoir.draw_insert_many`), the evaluation blocks, the loss
        differences and their means over the realisations are computed for all its rows at
        once, and the smoothing folds them in (:meth:`ExponentialMean.update_many`): the
        same random numbers and the same arithmetic as :meth:`explain_one` row by row.
        """
        n_rows, n_groups = len(rows), len(self.names)
        n_block, n_columns = self.block_rows, len(self.columns)
        out, begin = self._begin_micro_batch(rows)
        if not n_rows:
            return out
        per_call = max(1, self.max_block_cells // (n_block * max(1, n_columns)))
        draw_index = np.arange(len(self._pair_col)) if self._pair_draw is None else self._pair_draw
        # one buffer for every call: a fresh block per call costs its page faults again (wide rows)
        buffer = np.empty((min(per_call, n_rows - begin), n_block, n_columns))
        rows = np.ascontiguousarray(rows)
        # a row's copies are written as whole rows (one memcpy each, through a view of each row
        # as one opaque item), not value by value: the same bytes, a third of the time
        whole_row = np.dtype((np.void, rows.itemsize * n_columns)) if n_columns else None
        for start in range(begin, n_rows, per_call):
            end = min(start + per_call, n_rows)
            part = rows[start:end]
            slots: list[tuple[np.ndarray, np.ndarray]] | None = None if self._spread is None else []
            replaced = self._reservoir.draw_insert_many(self._rng, part, n_groups, draw_index, self._pair_col,
                                                        slots)
            if slots:  # the calibrated bounds hear of each row's draw and insertion, in stream order
                self._spread.explained_stored_many(self.n_seen, *slots[0])  # type: ignore[union-attr]
            self.n_seen += len(part)
            blocks = buffer[:len(part)]
            if whole_row is not None:
                blocks.view(whole_row)[...] = part.view(whole_row)[:, None]
            blocks.reshape(len(part), n_block * n_columns)[:, self._pair_cell] = replaced
            block = blocks.reshape(len(part) * n_block, n_columns)
            part_targets = targets[start:end]
            losses = self._losses(self._predict_block(block, part_targets), part_targets)
            self._fold_many(losses, out[start:end],
                            None if contributions is None else contributions[start:end],
                            None if row_losses is None else row_losses[start:end])
        return out

    def _fold_many(self, losses: np.ndarray, out: np.ndarray, contributions: np.ndarray | None,
                   row_losses: np.ndarray | None) -> None:
        """:meth:`_fold` for the losses of consecutive time steps (shape ``(T, block_rows)``);
        the estimates after each go to ``out``.

        The array form is :class:`ExponentialMean`'s (:meth:`ExponentialMean.update_many`);
        another smoother, or a subclass that folds otherwise (event times), folds row by row
        with :meth:`_fold`, so its numbers are those of :meth:`explain_one`."""
        if type(self._tracker) is not ExponentialMean or type(self)._fold is not IPFIEstimator._fold:
            for t, step in enumerate(losses):
                self._fold(step)
                out[t] = self._tracker.mean
                if contributions is not None and row_losses is not None:
                    contributions[t], row_losses[t] = self.last_contribution, self.last_loss
            return
        unperturbed = losses[:, 0]
        per_repeat = (losses[:, 1:] - losses[:, :1]).reshape(len(losses), self.n_repeats, len(self.names))
        per_row = np.add.reduce(per_repeat, axis=1) / self.n_repeats  # = last_contribution, row by row
        tracker = self._tracker
        assert isinstance(tracker, ExponentialMean)  # _floats_stored chose this path for it alone
        out[...] = tracker.update_many(per_row)
        if self._spread is not None:
            self._spread.update_many(per_repeat)
        self.last_contributions = per_repeat[-1].copy()
        self.last_loss = float(unperturbed[-1])
        total = self._loss_sum
        for loss in unperturbed.tolist():  # summed in order, as row by row
            total += loss
        self._loss_sum = total
        if contributions is not None and row_losses is not None:
            contributions[...] = per_row
            row_losses[...] = unperturbed

    def _fold_pending(self, losses: np.ndarray, out: np.ndarray, contributions: np.ndarray | None,
                      row_losses: np.ndarray | None) -> None:
        """:meth:`_explain_many_batched`'s fold of consecutive rows' losses: :meth:`_fold_many`
        (a subclass may fold them otherwise, to the same bits as :meth:`_fold` row by row)."""
        self._fold_many(losses, out, contributions, row_losses)

    def _explain_many_batched(self, value_rows: list[list[Any]], targets: list[Any],
                              contributions: np.ndarray | None = None, row_losses: np.ndarray | None = None
                              ) -> np.ndarray:
        # The evaluation blocks of consecutive explained rows go to the model together, in
        # calls of at most ``max_block_cells`` cells (at least one row's block), so memory
        # stays bounded whatever the width. Draws happen row by row in stream order and the
        # model never changes, so the numbers do not depend on how the rows are grouped.
        n_block, n_columns = self.block_rows, len(self.columns)
        per_call = max(1, self.max_block_cells // (n_block * max(1, n_columns)))
        out = np.full((len(value_rows), len(self.names)), np.nan)
        block: np.ndarray | None = None
        pending: list[int] = []  # rows filled into ``block`` and not yet predicted
        folded = 0  # rows of ``out`` done

        def flush() -> None:
            nonlocal folded, block
            if not pending:
                return
            pending_targets = [targets[t] for t in pending]
            filled = block[:len(pending) * n_block]  # type: ignore[index]
            losses = self._losses(self._predict_block(filled, pending_targets), pending_targets)
            # the pending rows are consecutive: only the stream's first row is not explained
            first, end = pending[0], pending[-1] + 1
            while folded < first:
                out[folded] = self._tracker.mean
                folded += 1
            self._fold_pending(losses, out[first:end], None if contributions is None else contributions[first:end],
                               None if row_losses is None else row_losses[first:end])
            folded = end
            pending.clear()

        for t, values in enumerate(value_rows):
            self._check_removable(values)
            self._ensure_sampler(values)
            row = np.asarray(values, dtype=self._reservoir.rows.dtype)
            if self._reservoir.filled > 0:
                if block is None or (block.dtype != row.dtype and block.dtype != object):
                    capacity = min(per_call, len(value_rows) - t)
                    # a non-numeric value arrived: object from here on
                    block = np.empty((capacity * n_block, n_columns), dtype=row.dtype) if block is None \
                        else block.astype(row.dtype)
                k = len(pending)
                self._fill_block(block[k * n_block:(k + 1) * n_block], row)
                pending.append(t)
                if len(pending) == len(block) // n_block:
                    flush()
            self._store(row)
        flush()
        while folded < len(value_rows):
            out[folded] = self._tracker.mean
            folded += 1
        return out

    # -- results ----------------------------------------------------------------------------
    def importance_array(self) -> np.ndarray:
        """Current estimates in ``names`` order (NaN before the first explained row)."""
        return np.array(self._tracker.mean, dtype=np.float64)

    @property
    def importances(self) -> dict[str, float]:
        """Current estimate per feature or group."""
        return dict(zip(self.names, self.importance_array().tolist()))

    @property
    def variances(self) -> dict[str, float]:
        """Weighted variance of the per-row contributions (each the mean over the M realisations)."""
        return dict(zip(self.names, self._tracker.variance.tolist()))

    def bound_array(self, delta: float = 0.05, method: str | None = None) -> np.ndarray:
        """Confidence half-widths in ``names`` order by ``method`` (default :attr:`bounds_method`);
        NaN before two explained rows, and with ``alpha`` above 0.5 (too few rows' worth for a bound)."""
        method = self.bounds_method if method is None else method
        if needs_realisations(method) and self._spread is None:
            raise ValueError(f"bounds method {method!r} needs the realisations' spread, which this explainer "
                             f"does not keep: create it with bounds_method={method!r}")
        tracker = self._tracker
        # NaN too where alpha smooths over too few rows for a bound (see check_bounds_alpha)
        if tracker.count < 2 or (self.smoothing == "exponential" and self.alpha > MAX_BOUNDS_ALPHA):
            check_delta(delta)
            return np.full(len(self.names), np.nan)
        return half_width(method, delta, tracker.variance, tracker.effective_count, self._spread)

    def bounds(self, delta: float = 0.05, method: str | None = None) -> dict[str, float]:
        """``P(|estimate - expected estimate| > bound) <= delta`` per feature, for a static model, under
        the assumptions of ``method`` (default :attr:`bounds_method`; see :mod:`ipfi_cli.core.bounds`)."""
        return dict(zip(self.names, self.bound_array(delta, method).tolist()))

    @property
    def last_contribution(self) -> np.ndarray:
        """The last explained row's contribution per feature or group, in ``names`` order: the
        loss increase averaged over the ``M`` realisations, exactly the value folded into the
        estimate (NaN before the first explained row). The row's unperturbed loss is
        :attr:`last_loss`. After :meth:`explain_many` these are its last row's; ask it for
        every row's with ``return_contributions=True``."""
        return cast(np.ndarray, np.add.reduce(self.last_contributions, axis=0) / self.n_repeats)

    @property
    def n_explained(self) -> int:
        return self._tracker.count

    def params(self) -> dict[str, Any]:
        """The settings a resumed run must share, as plain data (see :class:`~ipfi_cli.core.explainer.Explainer`)."""
        return {"method": "pfi", "columns": list(self.columns), "names": list(self.names),
                "groups": {name: list(cols) for name, cols in self.groups.items()}, "loss": self.loss.name,
                "alpha": self.alpha, "n_repeats": self.n_repeats, "sampling": self.sampling,
                "reservoir_size": self.reservoir_size, "seed": self.seed, **self._removal_params()}

    def _removal_params(self) -> dict[str, Any]:
        """Smoothing and removal, where they are not the paper's (so that older state files still match)."""
        params: dict[str, Any] = {}
        if self.smoothing != "exponential":
            params["smoothing"] = self.smoothing
        if self._remover is not None:
            params["removal"] = self.removal
            params["conditional_sampler"] = self._remover.name
        return params

    @property
    def mean_loss(self) -> float:
        """The model's mean loss on the explained rows (unperturbed predictions)."""
        return self._loss_sum / self._tracker.count if self._tracker.count else float("nan")

    @property
    def loss_sum(self) -> float:
        """The model's loss summed over the explained rows, in their order (0 before the first): it
        never decreases, where ``mean_loss * n_explained`` can by a rounding."""
        return self._loss_sum

    # -- internals --------------------------------------------------------------------------
    def _row_values(self, x: Mapping[str, Any]) -> list[Any]:
        try:
            return [x[c] for c in self.columns]
        except KeyError as error:
            raise RowError("missing from the row", column=str(error.args[0])) from None

    def _check_removable(self, values: Sequence[Any]) -> None:
        """Conditional removal draws finite numbers: another value is the row's problem, named with its
        column before anything of the row is drawn, predicted or stored (a sampler that learned a NaN
        would draw nothing but NaN from then on)."""
        if self._remover is None:
            return
        try:
            if np.isfinite(np.asarray(values, dtype=np.float64)).all():
                return
        except (TypeError, ValueError, OverflowError):
            pass
        for column, value in zip(self.columns, values):
            try:
                number = float(np.asarray(value, dtype=np.float64))
            except (TypeError, ValueError, OverflowError):
                raise NeedsNumbersError(f"conditional removal needs numbers, got {value!r} (marginal removal takes "
                                        "any value)", column=column) from None
            if number != number:
                raise RowError("missing value, which conditional removal cannot take",
                               column=column)
            if math.isinf(number):
                raise RowError(f"{number} is not a finite number, which conditional removal cannot take",
                               column=column)

    def _ensure_sampler(self, values: Sequence[Any]) -> None:
        if self._sampler is not None and self._sampler.rows.dtype == object:
            return
        numeric = _all_numbers(values)
        if self._sampler is None:
            # float storage only helps block predictors; records keep the values as they came
            dtype = np.float64 if (numeric and self.use_batch) else object
            self._sampler = make_sampler(self.sampling, self.reservoir_size, self.n_repeats,
                                         len(self.columns), dtype)
        elif not numeric and self._sampler.rows.dtype != object:
            self._sampler.as_dtype(object)

    @property
    def _reservoir(self) -> Reservoir:
        """The sampler, which exists once the first row has been seen."""
        assert self._sampler is not None, "no row has been seen yet"
        return self._sampler

    def _store(self, values: Sequence[Any] | np.ndarray) -> None:
        written = self._reservoir.insert(self._rng, np.asarray(values, dtype=self._reservoir.rows.dtype))
        if self._spread is not None:
            self._spread.stored(self.n_seen, written)
        if self._remover is not None:
            self._remover.learn(np.asarray(values))
        self.n_seen += 1

    def _draw_replacements(self) -> np.ndarray:
        """Draw one earlier row per (realisation, group); return the value of every replaced cell."""
        rows = self._reservoir.rows
        slots = self._reservoir.draw(self._rng, len(self.names))
        if self._spread is not None:
            self._spread.explained(self.n_seen, slots)
        slots = slots.reshape(-1)
        if self._pair_draw is not None:
            slots = slots[self._pair_draw]
        return cast(np.ndarray, rows.reshape(-1)[self._pair_offset + slots * rows.shape[2]])

    def _draw_conditional(self, row: np.ndarray) -> np.ndarray:
        """Conditional removal: every replaced cell drawn given the row's other columns."""
        assert self._remover is not None
        if self._spread is not None:
            self._spread.explained(self.n_seen, None)
        return self._remover.draw_groups(self._rng, row, self._group_columns, self.n_repeats).reshape(-1)

    @property
    def removal_fit(self) -> dict[str, float]:
        """With conditional removal, the sampler's rolling R^2 per column (see
        :attr:`ipfi_cli.core.removal.ConditionalSampler.fit`); empty with marginal removal."""
        return {} if self._remover is None else dict(zip(self.columns, self._remover.fit))

    def _fill_block(self, block: np.ndarray, row: np.ndarray) -> None:
        """Write one row's evaluation block into ``block`` (``block_rows`` rows): the row
        itself, then every perturbed copy."""
        block[...] = row
        replaced = self._draw_replacements() if self._remover is None else self._draw_conditional(row)
        block.put(self._pair_cell, replaced)

    def _predict_block(self, block: np.ndarray, targets: list[Any]) -> np.ndarray:
        row_targets = self._repeat_targets(self._output_targets(targets)) if self.loss.output is Output.PROBA else None
        self.n_model_calls += 1
        self.n_predictions += len(block)
        return self.model.predict_block(block, self.columns, self.loss.output, row_targets)

    def _predict_records(self, x: Mapping[str, Any], values: list[Any], y: Any) -> np.ndarray:
        """The row and its perturbed copies as records (dicts), predicted in calls of at most
        :data:`RECORD_CELLS` values each: a wide row's copies (1 + d x M dicts of d values) are never
        all in memory at once."""
        if type(x) is dict and len(x) == len(self.columns):
            base = x
        else:  # keep only the model's columns
            base = dict(zip(self.columns, values))
        replaced = (self._draw_replacements() if self._remover is None
                    else self._draw_conditional(np.asarray(values))).tolist()
        target = self._output_targets([y])[0]
        per_call = max(1, RECORD_CELLS // max(1, len(base)))
        records: list[dict[str, Any]] = [base]
        parts: list[np.ndarray] = []

        def flush() -> None:
            self.n_model_calls += 1
            self.n_predictions += len(records)
            parts.append(np.asarray(self.model.predict_records(records, self.loss.output, target)))
            records.clear()
        copy = base.copy
        if self._record_names is not None:
            for name, value in zip(self._record_names, replaced):
                if len(records) >= per_call:
                    flush()
                record = copy()
                record[name] = value
                records.append(record)
        else:
            for layout in self._record_layout:
                if len(records) >= per_call:
                    flush()
                record = copy()
                for name, pair in layout:
                    record[name] = replaced[pair]
                records.append(record)
        flush()
        return parts[0] if len(parts) == 1 else np.concatenate(parts)

    def _output_targets(self, targets: list[Any]) -> list[Any]:
        """The class whose probability the model returns per row: the label, or for a label-free
        loss its fixed class."""
        if self.loss.proba_class is not None:
            return [self.loss.proba_class] * len(targets)
        return targets

    def _repeat_targets(self, targets: list[Any]) -> np.ndarray:
        """Each step's target repeated for every row of its evaluation block (object array)."""
        once = np.empty(len(targets), dtype=object)
        for i, y in enumerate(targets):
            once[i] = y
        return np.repeat(once, self.block_rows)

    def _loss_targets(self, targets: list[Any], predicted: np.ndarray) -> np.ndarray:
        """The targets for :meth:`_losses`, each repeated for its block (see :func:`loss_targets`)."""
        return np.repeat(loss_targets(self.loss, targets, predicted.dtype.kind), self.block_rows)

    def _losses(self, predicted: Any, targets: list[Any]) -> np.ndarray:
        """Loss of every evaluation, shape ``(len(targets), block_rows)``."""
        predicted = np.asarray(predicted)
        if predicted.dtype.kind in "US":
            predicted = predicted.astype(object)
        if self.loss.relative:  # label-free: each row's unperturbed output is the "target" of its block
            reference = predicted.reshape(len(targets), self.block_rows)[:, :1]
            losses = self.loss.compute(np.repeat(reference, self.block_rows, axis=1).reshape(-1), predicted)
        else:
            losses = self.loss.compute(self._loss_targets(targets, predicted), predicted)
        return losses.reshape(len(targets), self.block_rows)

    def _fold(self, losses: np.ndarray) -> None:
        """Fold one time step's losses (the unperturbed one first) into the estimates."""
        unperturbed = float(losses[0])
        contributions = (losses[1:] - unperturbed).reshape(self.n_repeats, len(self.names))
        self.last_contributions = contributions
        self.last_loss = unperturbed
        self._loss_sum += unperturbed
        self._tracker.update(np.add.reduce(contributions, axis=0) / self.n_repeats)  # = last_contribution
        if self._spread is not None:
            self._spread.update(contributions)

    # -- state as plain data ------------------------------------------------------------------
    #: the ``explainer`` entry of :meth:`state_dict`: a state loads only into its own kind
    _state_kind: ClassVar[str] = "ipfi"

    def settings_dict(self) -> dict[str, Any]:
        """What an explainer's state depends on: explainers with equal settings can exchange states."""
        settings = {"columns": list(self.columns), "groups": {name: [int(c) for c in cols]
                                                              for name, cols in self.groups.items()},
                    "loss": self.loss.name, "alpha": self.alpha, "n_repeats": self.n_repeats,
                    "sampling": self.sampling, "reservoir_size": self.reservoir_size, "seed": self.seed}
        # only where not the paper's, so that the states of the paper's iPFI stay as they were
        if self.smoothing != "exponential":
            settings["smoothing"] = self.smoothing
        if self._remover is not None:
            settings["removal"] = self.removal
            settings["conditional_sampler"] = self._remover.name
        if self.bounds_method != "chebyshev":
            settings["bounds_method"] = self.bounds_method
        return settings

    def state_dict(self) -> dict[str, Any]:
        """Everything the explainer has learned from the stream, as plain data (dicts, lists, numbers,
        strings and NumPy arrays; the random generator's state is a dict): loading it runs no code.
        With conditional removal the sampler's state is in it (a :class:`ValueError` for the tree
        sampler, whose river trees are not plain data); with the realisations' bounds, their spread.

        >>> from ipfi_cli.models import FunctionPredictor
        >>> model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
        >>> a = IPFIEstimator(model, ["a", "b"], alpha=0.1, seed=1)
        >>> for x in (0.2, 0.7, 0.9):
        ...     _ = a.explain_one({"a": x, "b": 0.0}, int(x > 0.5))
        >>> b = IPFIEstimator(model, ["a", "b"], alpha=0.1, seed=1)
        >>> b.load_state_dict(a.state_dict())
        >>> a.explain_one({"a": 0.1, "b": 1.0}, 0).tolist() == b.explain_one({"a": 0.1, "b": 1.0}, 0).tolist()
        True
        """
        state = {"explainer": self._state_kind, "settings": self.settings_dict(), "rng": self._rng.bit_generator.state,
                 "tracker": self._tracker.state_dict(),
                 "sampler": None if self._sampler is None else self._sampler.state_dict(),
                 "n_seen": self.n_seen, "last_contributions": self.last_contributions.copy(),
                 "last_loss": self.last_loss, "loss_sum": self._loss_sum,
                 "model_calls": self.n_model_calls, "predictions": self.n_predictions}
        if self._remover is not None:
            state["remover"] = self._remover.state_dict()
        if self._spread is not None:
            state["spread"] = self._spread.state_dict()
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data; the settings must be this explainer's
        (a :class:`ValueError` names the first that differs); each field is checked as it is read
        (:mod:`~ipfi_cli.core.state_fields`: a :class:`~ipfi_cli.core.state_fields.StateFieldError` names it)."""
        state = fields(state)
        if state.get("explainer") != self._state_kind:
            raise ValueError(f"the state belongs to another kind of explainer (explainer: state "
                             f"{state.get('explainer')!r}, here {self._state_kind!r})")
        mine = self.settings_dict()
        theirs = state.get("settings", {})
        with within("settings"):
            fields(theirs)
        differing = [key for key in [*mine, *(k for k in theirs if k not in mine)]
                     if theirs.get(key) != mine.get(key)]
        if differing:
            key = differing[0]
            default = _OMITTED_SETTINGS.get(key)  # settings_dict leaves out these defaults
            raise ValueError(f"the state belongs to an explainer with other settings ({key}: state "
                             f"{theirs.get(key, default)!r}, here {mine.get(key, default)!r})")
        generator_state(self._rng, state, "rng")
        tracker = state["tracker"]
        with within("tracker"):
            self._tracker.load_state_dict(tracker)
        sampler = state["sampler"]
        if sampler is None:
            self._sampler = None
        else:
            with within("sampler"):
                rows = np.asarray(fields(sampler)["rows"])
                self._sampler = make_sampler(self.sampling, self.reservoir_size, self.n_repeats, len(self.columns),
                                             rows.dtype if rows.dtype.kind in "fiubO" else np.dtype(object))
                self._sampler.load_state_dict(sampler)
        self.n_seen = integer(state, "n_seen")
        # NaN before the first row explained
        self.last_contributions = array(state, "last_contributions", self.last_contributions.shape,
                                        finite=False).astype(np.float64)
        self.last_loss = number(state, "last_loss", low=0.0, nan=True)
        self._loss_sum = number(state, "loss_sum", low=0.0)
        # the model's calls so far (a state saved before they were kept starts them at 0 again)
        self.n_model_calls = integer(state, "model_calls") if "model_calls" in state else 0
        self.n_predictions = integer(state, "predictions") if "predictions" in state else 0
        if self._remover is not None:
            remover = state["remover"]
            with within("remover"):
                self._remover.load_state_dict(remover)
        if self._spread is not None:
            spread = state["spread"]
            with within("spread"):
                self._spread.load_state_dict(spread)

