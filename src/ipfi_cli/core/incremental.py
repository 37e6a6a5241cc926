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

from collections.abc import Iterable, Mapping, Sequence
from typing import Any, ClassVar, cast

import numpy as np

from ipfi_cli.core import ipfi_state
from ipfi_cli.core.bounds import MAX_BOUNDS_ALPHA, RealisationSpread, RowBounds, needs_realisations, tracker_bounds
from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.core.ipfi_stream import (
    check_removable,
    draw_conditional,
    draw_replacements,
    ensure_sampler,
    restore_stream,
    save_stream,
    store,
)
from ipfi_cli.core.layout import PermutationLayout
from ipfi_cli.core.losses import Loss, get_loss
from ipfi_cli.core.micro_batch import (
    PendingRows,
    Traces,
    explain_many,
    finish_rows,
    fold_many,
    fold_rows,
    prepare,
    prepare_numeric,
    prepare_rows,
    with_row_bounds,
)
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.core.perturbed import PerturbedPredictions
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.core.removal import ConditionalSampler, make_conditional_sampler
from ipfi_cli.core.row_values import row_values
from ipfi_cli.core.samplers import Reservoir
from ipfi_cli.core.smoothing import make_smoother


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
        alpha: float = DEFAULT_ALPHA,
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
        ipfi_state.check_options(n_repeats, sampling, reservoir_size, removal, smoothing, bounds_method, alpha)
        self.model = model
        self.columns = [str(c) for c in columns]
        self.loss = get_loss(loss)
        self.alpha = float(alpha)
        self.n_repeats = int(n_repeats)
        self.sampling = sampling
        self.reservoir_size = int(reservoir_size)
        self.seed = seed
        self.groups = resolve_groups(self.columns, features, groups)
        self.names = list(self.groups)
        self.smoothing = smoothing
        self._tracker = make_smoother(smoothing, self.alpha, len(self.names))
        self.removal = removal
        self._remover: ConditionalSampler | None = None
        if removal == "conditional":
            self._remover = make_conditional_sampler(conditional_sampler, len(self.columns), alpha=self.alpha,
                                                     smoothing=smoothing, seed=seed)
            self._group_columns = [np.array(cols, dtype=np.intp) for cols in self.groups.values()]
        self.bounds_method = bounds_method
        self._spread = (RealisationSpread(self.alpha, self.n_repeats, len(self.names), self.reservoir_size)
                        if needs_realisations(bounds_method) else None)
        self._rng = np.random.default_rng(np.random.SeedSequence(seed))
        self._sampler: Reservoir | None = None  # built at the first row, when the value types are known
        self.n_seen = 0
        self.last_contributions = np.full((self.n_repeats, len(self.names)), np.nan)
        self.last_loss = float("nan")
        self._loss_sum = 0.0
        self.last_row_bounds: np.ndarray | None = None  # explain_many(bounds_delta=...)'s
        self._build_layout()
        #: the model's calls (``n_model_calls``) and the rows they predicted (``n_predictions``)
        self._predictions = PerturbedPredictions(self.loss, self.block_rows)

    def _build_layout(self) -> None:
        """Where each replacement value goes in a row's evaluation block (:class:`PermutationLayout`)."""
        self.layout = PermutationLayout.build(self.columns, self.groups, self.n_repeats, self.reservoir_size)
        self.block_rows = self.layout.block_rows

    def __setstate__(self, state: dict[str, Any]) -> None:
        # pickled before smoothing and removal were options: the paper's exponential, marginal
        self.smoothing, self.removal, self._remover = "exponential", "marginal", None
        state.setdefault("bounds_method", "chebyshev")  # pickled before there was a choice
        state.setdefault("_spread", None)
        self.__dict__.update(state)
        if "_predictions" not in state:  # pickled before the layout and the predictions were pieces of their own
            self._build_layout()
            self._predictions = PerturbedPredictions(self.loss, self.block_rows)
            self.n_model_calls = self.__dict__.pop("n_model_calls", 0)  # 0: pickled before they were counted
            self.n_predictions = self.__dict__.pop("n_predictions", 0)

    # -- public API -------------------------------------------------------------------------
    @property
    def use_batch(self) -> bool:
        return bool(getattr(self.model, "supports_batch", False))

    @property
    def n_model_calls(self) -> int:
        """Calls to the model's ``predict_block`` / ``predict_records``."""
        return self._predictions.n_model_calls

    @n_model_calls.setter
    def n_model_calls(self, value: int) -> None:
        self._predictions.n_model_calls = value

    @property
    def n_predictions(self) -> int:
        """Rows the model's calls predicted."""
        return self._predictions.n_predictions

    @n_predictions.setter
    def n_predictions(self, value: int) -> None:
        self._predictions.n_predictions = value

    def explain_one(self, x: Mapping[str, Any], y: Any) -> np.ndarray:
        """Explain one row with the model as it is now; returns the estimates after it.

        The first row only fills the reservoir (there is nothing earlier to draw
        from), so its estimates are NaN.
        """
        values = self._row_values(x)
        check_removable(self, values)
        ensure_sampler(self, values)
        row = np.asarray(values, dtype=self._reservoir.rows.dtype)
        if self._reservoir.filled > 0:
            rng_state = self._rng.bit_generator.state
            try:
                if self.use_batch:
                    block = np.empty((self.block_rows, len(self.columns)), dtype=row.dtype)
                    self._fill_block(block, row)
                    predicted = self._predictions.predict_block(self.model, block, self.columns, [y])
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
        store(self, row)
        return self.importance_array()

    def explain_many(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray, *,
                     return_contributions: bool = False, bounds_delta: float | None = None,
                     bounds_rows: Sequence[int] | None = None) -> Any:
        """Explain consecutive rows of a *static* model; returns estimates, shape ``(T, G)``.

        With a batch predictor all rows' evaluations go to the model in one call (per
        ``max_block_cells``): :meth:`prepare`, :meth:`predict`, :meth:`finish`; the numbers are
        exactly those of calling :meth:`explain_one` row by row. ``rows`` are dicts, or a 2-D
        array in ``columns`` order.

        With ``return_contributions=True`` it returns ``(estimates, contributions, losses)``:
        per row, the contribution folded into each estimate (shape ``(T, G)``, see
        :attr:`last_contribution`) and the unperturbed loss (shape ``(T,)``); both are NaN
        on a row that was not explained (the stream's first).

        With ``bounds_delta`` (where :attr:`bounds_per_row` allows it), :attr:`last_row_bounds`
        holds afterwards the bounds after each row (of the offsets ``bounds_rows``, if given; NaN
        on the others), shape ``(T, G)``: what :meth:`bound_array` gives after that row, to the bit.
        """
        return explain_many(self, rows, targets, return_contributions, bounds_delta, bounds_rows)

    def prepare(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, targets: Sequence[Any] | np.ndarray
                ) -> PendingRows:
        """First step of :meth:`explain_many` (a static model that predicts blocks): draw the rows'
        replacements, store the rows and lay out their evaluation blocks, ``pending.block``.

        Predict that block (:meth:`predict`, or the model's ``predict_block(pending.block, columns,
        pending.output, pending.row_targets)``, alone or joined with other blocks) and give the
        predictions to :meth:`finish`; or :meth:`cancel` it. One pending micro-batch per explainer at
        a time: ``prepare(rows, y)`` + predict + ``finish`` gives :meth:`explain_many`'s bytes (a call
        made outside :meth:`predict` is not in :attr:`n_model_calls`).

        >>> from ipfi_cli.models import FunctionPredictor
        >>> model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
        >>> a, b = (IPFIEstimator(model, ["a", "b"], seed=1) for _ in range(2))
        >>> X = np.random.default_rng(0).random((50, 2)); y = (X[:, 0] > 0.5).astype(int).tolist()
        >>> pending = a.prepare(X, y)
        >>> predictions = model.predict_block(pending.block, a.columns, pending.output, pending.row_targets)
        >>> np.array_equal(a.finish(pending, predictions).estimates, b.explain_many(X, y), equal_nan=True)
        True
        """
        return prepare(self, rows, targets)

    def predict(self, pending: PendingRows) -> np.ndarray:
        """The model's predictions of ``pending.block`` (one call; none when no row is to be explained)."""
        if not len(pending.targets):
            return np.empty(0)
        return self._predictions.predict_block(self.model, pending.block, self.columns, pending.targets)

    def finish(self, pending: PendingRows, predictions: Any, *, bounds_delta: float | None = None,
               bounds_rows: Sequence[int] | None = None) -> Traces:
        """Second step: fold the predictions of ``pending.block`` in; returns the rows' :class:`Traces`
        (estimates, contributions, unperturbed losses), and with ``bounds_delta`` sets :attr:`last_row_bounds`
        as :meth:`explain_many` does. Should it fail, the explainer is as before :meth:`prepare`."""
        try:
            return with_row_bounds(self, bounds_delta, bounds_rows, pending.n_rows, pending.first > 0,
                                   lambda: self._finish(pending, predictions))
        except Exception:
            self.cancel(pending)
            raise

    def cancel(self, pending: PendingRows) -> None:
        """Return to the stream state before :meth:`prepare` made ``pending`` (the last one)."""
        if pending.saved is not None:
            self._restore_stream_state(pending.saved)

    def _prepare(self, rows: np.ndarray | list[list[Any]], targets: list[Any], buffer: np.ndarray | None
                 ) -> PendingRows:
        """:meth:`prepare` for float ``rows`` (the array path) or value lists (see :func:`prepare_rows`)."""
        return prepare_rows(self, rows, targets, buffer)

    def _prepare_numeric(self, rows: np.ndarray, targets: list[Any], begin: int, buffer: np.ndarray | None
                         ) -> tuple[np.ndarray, Any]:
        """The array path's draws, insertions and blocks of ``rows[begin:]`` (see :func:`prepare_numeric`)."""
        return prepare_numeric(self, rows, targets, begin, buffer)

    def _finish(self, pending: PendingRows, predictions: Any) -> Traces:
        return finish_rows(self, pending, predictions)

    def _fold_pending(self, losses: np.ndarray, pending: PendingRows, out: np.ndarray, contributions: np.ndarray,
                      row_losses: np.ndarray) -> None:
        """Fold consecutive rows' losses: as arrays (:func:`fold_many`) where :meth:`_fold` is this class's or
        has its array twin (:meth:`_track_many`), else row by row (a subclass may fold otherwise, to the same bits)."""
        array_fold = type(self)._fold is IPFIEstimator._fold or type(self)._track_many is not IPFIEstimator._track_many
        (fold_many if array_fold else fold_rows)(self, losses, out, contributions, row_losses)

    def _track_many(self, contributions: np.ndarray) -> np.ndarray:
        """The smoothing of consecutive rows' contributions ``(T, G)``: the estimates after each, to update's bits."""
        return self._tracker.update_many(contributions)

    @property
    def bounds_per_row(self) -> bool:
        """Whether :meth:`explain_many` can give the bounds after each row (``bounds_delta``): where
        the rows are folded in by this class's fold, which can stop after any row (iSAGE's cannot)."""
        return type(self)._fold_pending is IPFIEstimator._fold_pending

    def _save_stream_state(self) -> tuple[Any, ...]:
        return save_stream(self)

    def _restore_stream_state(self, saved: tuple[Any, ...]) -> None:
        restore_stream(self, saved)

    #: whether :func:`prepare_numeric` computes this class's numbers: a subclass that changes a row's
    #: evaluation or its folding sets it to False (or overrides :meth:`_prepare_numeric`, as iSAGE does)
    _array_path: ClassVar[bool] = True
    _row_bounds: RowBounds | None = None  # the bounds after chosen rows, while explain_many takes them

    def _floats_stored(self) -> bool:
        """The array path applies: the plain estimator (marginal removal, any smoothing), a block predictor,
        and the reservoir (if any yet) holds floats."""
        return (self._array_path and self._remover is None
                and self.use_batch and (self._sampler is None or self._sampler.rows.dtype == np.float64))

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
        # NaN too where alpha smooths over too few rows for a bound (see check_bounds_alpha)
        too_smooth = self.smoothing == "exponential" and self.alpha > MAX_BOUNDS_ALPHA
        return tracker_bounds(self._tracker, method, delta, self._spread, too_smooth)

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
        return ipfi_state.params(self)

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
        return row_values(self.columns, x)

    @property
    def _reservoir(self) -> Reservoir:
        """The sampler, which exists once the first row has been seen."""
        assert self._sampler is not None, "no row has been seen yet"
        return self._sampler

    @property
    def removal_fit(self) -> dict[str, float]:
        """With conditional removal, the sampler's rolling R^2 per column (see
        :attr:`ipfi_cli.core.removal.ConditionalSampler.fit`); empty with marginal removal."""
        return {} if self._remover is None else dict(zip(self.columns, self._remover.fit))

    def _fill_block(self, block: np.ndarray, row: np.ndarray) -> None:
        """Write one row's evaluation block into ``block`` (``block_rows`` rows): the row
        itself, then every perturbed copy."""
        block[...] = row
        replaced = draw_replacements(self) if self._remover is None else draw_conditional(self, row)
        block.put(self.layout.pair_cell, replaced)

    def _predict_records(self, x: Mapping[str, Any], values: list[Any], y: Any) -> np.ndarray:
        """The row and its perturbed copies as records (dicts), see :meth:`PerturbedPredictions.predict_records`."""
        if type(x) is dict and len(x) == len(self.columns):
            base = x
        else:  # keep only the model's columns
            base = dict(zip(self.columns, values))
        replaced = (draw_replacements(self) if self._remover is None
                    else draw_conditional(self, np.asarray(values))).tolist()
        return self._predictions.predict_records(self.model, base, replaced, self.layout, y)

    def _losses(self, predicted: Any, targets: list[Any]) -> np.ndarray:
        """Loss of every evaluation, shape ``(len(targets), block_rows)``."""
        return self._predictions.losses(predicted, targets)

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

    # -- state as plain data (ipfi_cli.core.ipfi_state) ------------------------------------------
    #: the ``explainer`` entry of :meth:`state_dict`: a state loads only into its own kind
    _state_kind: ClassVar[str] = "ipfi"

    def settings_dict(self) -> dict[str, Any]:
        """What an explainer's state depends on: explainers with equal settings can exchange states."""
        return ipfi_state.settings_dict(self)

    def state_dict(self) -> dict[str, Any]:
        """Everything the explainer has learned from the stream, as plain data (dicts, lists, numbers,
        strings and NumPy arrays; the random generator's state is a dict): loading it runs no code.
        With conditional removal the sampler's state is in it (a :class:`ValueError` for the tree
        sampler, whose river trees are not plain data); with the realisations' bounds, their spread.

        (Example: :mod:`ipfi_cli.core.ipfi_state`.)
        """
        return ipfi_state.state_dict(self)

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data; the settings must be this explainer's
        (a :class:`ValueError` names the first that differs); each field is checked as it is read
        (:mod:`~ipfi_cli.core.state_fields`: a :class:`~ipfi_cli.core.state_fields.StateFieldError` names it)."""
        ipfi_state.load_state_dict(self, state)
