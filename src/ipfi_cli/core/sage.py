"""SAGE, the Shapley values of the loss game: incremental (iSAGE) and batch (the baseline).

SAGE (Covert et al. 2020) shares the loss a model explains out among its features:
``v(S) = -E[loss(f(x_S, X_absent), y)]``, and feature ``j``'s value is its Shapley value in
that game. The permutation estimator draws a random feature ordering, adds the features
one by one and credits each with the loss decrease its arrival brings.

**iSAGE** (Muschalik et al. 2023; iXAI's ``IncrementalSage``) does this once per row of a
stream: per row, ``n_repeats`` random orderings (iXAI: one); the features not yet added are
imputed from a reservoir of earlier rows (``removal="marginal"``, one donor row per
coalition and inner sample) or drawn given the present ones (``removal="conditional"``,
the Gaussian sampler of :mod:`ipfi_cli.core.removal`). With ``n_inner`` imputations per
coalition their predictions are averaged before the loss (labels: their most frequent one, as
averaged class probabilities would pick). The full coalition's loss is the model's own. Each
step's loss decrease is folded into an exponentially weighted (or running) mean like iPFI's.

**The empty coalition** (``empty``). ``"imputed"`` (default): imputed like every other
coalition, every column from the donors, so the game is one game and a feature the model
never reads adds nothing at any step (its value is 0 in expectation, for every loss). With the
squared loss and ``n_inner = k >= 2`` each coalition's loss is corrected by its predictions'
sample variance over ``k``, and over ``K - 1`` for the reservoir of ``K`` rows they come from,
a sample itself (:func:`~ipfi_cli.core.sage_game.squared_loss_excess`): an unbiased
estimate of the loss of their expectation while the stream is stationary, so the values estimate
Covert's SAGE, ``a_j = beta_j^2 Var(x_j)`` for a linear model with independent features
(without the second correction a reservoir of 10 rows made them 10 % too large). With ``k = 1`` (the default
of the other losses) they are the Shapley values of the loss under one random imputation
(``2 a_j`` in that linear case). ``"mean"``: the smoothed marginal prediction (the running
mean of the model's outputs; for labels, the most frequent predicted label), as iXAI does;
for the linear model that gives ``(1 + 1/k) a_j - sum(a) / (k G)``: the first feature of each
ordering pays for the imputations' noise, and an unused feature comes out negative.

**The log loss** (cross-entropy, the SAGE paper's and sage-importance's for classifiers): a
coalition's prediction is the mean of its imputations' probability vectors, and the loss reads its
entry for the row's label, the mean of the imputations' probabilities of that label, which is what
the model gives for the log loss. With ``n_inner = 1`` one confident wrong imputation costs up to
34.5, so the values lie far above Covert's game (the loss of the mean over the whole marginal);
more imputations approach it. ``empty="mean"`` would need every class's probability: refused.

It also tracks the **explained loss**: the smoothed loss with no feature known minus the
model's smoothed loss, "how much does the model explain at all". Per row the contributions add
up to exactly that row's difference, so the SAGE values add up to it.
:func:`batch_sage` estimates either game (``n_inner`` donors, or every background row as
sage-importance's ``MarginalImputer`` does), so each incremental estimate has its batch baseline.

Cost per row: ``1 + n_repeats * G * n_inner`` model evaluations (``G - 1`` with
``empty="mean"``; the last step of the chain is the model's own prediction), against iPFI's
``1 + n_repeats * G``. With a
batch predictor one row's evaluations are one model call and :meth:`explain_many` puts
many rows' into one call. The orderings come from a random stream of their own (spawned
from the seed, key :data:`ORDER_STREAM`), the reservoirs' draws from the explainer's, so
for rows of numbers and marginal removal :meth:`explain_many` draws a micro-batch's
orderings with one call and its reservoir draws with one more: the numbers
:meth:`explain_one` draws row by row, in sequence. The chains, losses, marginal prediction
and folds are array operations over the micro-batch, and give :meth:`explain_one`'s bytes.
(Conditional removal fills its chains row by row: each draw depends on the sampler as it
has learned the rows before.)

>>> import numpy as np
>>> from ipfi_cli.models import FunctionPredictor
>>> model = FunctionPredictor(lambda X: 3 * X[:, 0] + X[:, 1])
>>> explainer = ISAGEEstimator(model, ["a", "b", "c"], loss="squared", smoothing="mean", n_repeats=4, seed=0)
>>> explainer.n_inner                                   # the squared loss's default
2
>>> X = np.random.default_rng(1).normal(size=(3000, 3))
>>> _ = explainer.explain_many(X, 3 * X[:, 0] + X[:, 1])
>>> {k: round(v) for k, v in explainer.importances.items()}   # a = (9, 1, 0)
{'a': 9, 'b': 1, 'c': 0}
>>> round(explainer.explained_loss)                            # the variance explained: 10
10
"""

from __future__ import annotations

import copy
from collections import deque
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.core.losses import Loss, Output, get_loss
from ipfi_cli.core.micro_batch import PendingRows, add_losses
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.core.perturbed import as_predictions, loss_targets
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.core.sage_batch import SAGEResult, batch_sage
from ipfi_cli.core.sage_game import (
    EMPTY_COALITION,
    MarginalPrediction,
    check_empty,
    check_loss,
    default_inner,
    fill_chains,
    most_frequent,
    squared_loss_excess,
)
from ipfi_cli.core.smoothing import make_smoother
from ipfi_cli.core.state_fields import generator_state, within
from ipfi_cli.errors import UsageError

__all__ = ["ORDER_STREAM", "ISAGEEstimator", "SAGEResult", "batch_sage"]

#: the spawn key of iSAGE's orderings' random stream, ``SeedSequence(seed, spawn_key=(ORDER_STREAM,))``:
#: apart from the reservoirs' (the seed's own) and from batch PFI's (keys 0, 1, ...)
ORDER_STREAM = 0x0DE125

_Marginal = MarginalPrediction  # its name before the game moved to sage_game: pickles of then are refused in
# one line (ISAGEEstimator.__setstate__), not by a missing name


class ISAGEEstimator(IPFIEstimator):
    """Anytime SAGE values of a model on a stream (see the module docstring).

    Parameters are iPFI's (:class:`~ipfi_cli.core.incremental.IPFIEstimator`), except:

    n_repeats
        Random orderings per row (iXAI: 1).
    n_inner
        Imputations per coalition; their predictions are averaged (labels: the most frequent).
        Default: 2 for the squared loss (with ``empty="imputed"``), else 1 (see
        :func:`~ipfi_cli.core.sage_game.default_inner`).
    groups
        Columns that enter the coalition together; every column takes part (SAGE shares out
        the whole explained loss), so there is no ``features``.
    loss
        ``zero-one``, ``log`` (cross-entropy: a coalition's loss is that of its imputations' mean
        probability vector), ``absolute`` or ``squared``.
    removal
        ``marginal`` or ``conditional`` (with the ``gaussian`` sampler, which can condition on
        any coalition).
    empty
        How the empty coalition is scored. ``"imputed"`` (default): like every other coalition,
        with ``n_inner`` rows whose every column is imputed, so a feature the model never reads
        gets 0 (in expectation, for any loss and ``n_inner``). ``"mean"``: with the smoothed
        marginal prediction, as iXAI's ``IncrementalSage`` does; with few ``n_inner`` that gives
        the first feature of each ordering a share of the imputations' noise (see the module
        docstring).
    """


    def __init__(
        self,
        model: Predictor,
        columns: Sequence[str],
        *,
        loss: str | Loss = "zero-one",
        alpha: float = DEFAULT_ALPHA,
        n_repeats: int = 1,
        n_inner: int | None = None,
        sampling: str = "geometric",
        reservoir_size: int = 100,
        groups: Mapping[str, Sequence[str]] | None = None,
        seed: int | None = None,
        smoothing: str = "exponential",
        removal: str = "marginal",
        conditional_sampler: str = "gaussian",
        empty: str = "imputed",
    ) -> None:
        if empty not in EMPTY_COALITION:
            raise ValueError(f"empty must be one of {', '.join(EMPTY_COALITION)}, got {empty!r}")
        if n_inner is None:
            n_inner = default_inner(get_loss(loss), empty)
        if n_inner < 1:
            raise ValueError(f"n_inner must be at least 1, got {n_inner}")
        self.n_inner = int(n_inner)
        self.empty = empty
        check_loss(get_loss(loss))
        check_empty(get_loss(loss), empty)
        super().__init__(model, columns, loss=loss, alpha=alpha, n_repeats=n_repeats, sampling=sampling,
                         reservoir_size=reservoir_size, groups=groups, seed=seed, smoothing=smoothing,
                         removal=removal, conditional_sampler=conditional_sampler)
        if self._remover is not None and not self._remover.any_subset:
            raise UsageError(f"SAGE removes whole coalitions; the {self._remover.name} sampler removes one "
                             "feature at a time: use the gaussian sampler", "--conditional-sampler")
        self._losses_tracker = make_smoother(smoothing, self.alpha, 2)  # marginal loss, model loss
        self._marginal = MarginalPrediction(self.loss.output, smoothing, self.alpha)
        self._orders: deque[np.ndarray] = deque()  # orderings drawn and not yet folded
        self._pools: deque[int] = deque()  # per row drawn and not yet scored: the reservoir's rows then
        self._order_rng = np.random.default_rng(np.random.SeedSequence(seed, spawn_key=(ORDER_STREAM,)))

    def __setstate__(self, state: dict[str, Any]) -> None:
        if "_order_rng" not in state:
            raise ValueError(_EARLIER_STREAMS)
        state.setdefault("empty", "mean")  # pickled when the empty coalition was always the mean prediction
        state.setdefault("_pools", deque())
        super().__setstate__(state)

    def _build_layout(self) -> None:
        player_of_column = np.full(len(self.columns), -1, dtype=np.intp)
        for g, cols in enumerate(self.groups.values()):
            player_of_column[cols] = g
        if (player_of_column < 0).any():
            left = [self.columns[c] for c in np.flatnonzero(player_of_column < 0)]
            raise ValueError(f"SAGE shares the loss among all the model's columns; {', '.join(left)} "
                             "would be left out (explain every column, grouping some if you like)")
        self._player_of_column = player_of_column
        imputed = self.empty == "imputed"  # the chain starts at the empty coalition, imputed too
        self._n_chain = len(self.names) - (0 if imputed else 1)
        self.block_rows = 1 + self.n_repeats * self._n_chain * self.n_inner
        self._order_base = np.tile(np.arange(len(self.names)), (self.n_repeats, 1))
        self._repeat_ids = np.arange(self.n_repeats)[:, None]
        self._one_column_players = player_of_column.tolist() == list(range(len(self.names)))
        self._steps = np.arange(-1 if imputed else 0, len(self.names) - 1)[None, :, None]
        self._ranks = np.arange(len(self.names))
        # squared loss, k >= 2 donors from a reservoir: the reservoir's own sampling is corrected too
        self._pool_corrected = imputed and self.n_inner > 1 and self.loss.name == "squared" and self._remover is None

    def _absent_masks(self, orders: np.ndarray) -> np.ndarray:
        """The columns absent at each step of this row's orderings, ``(M, G-1, C)``."""
        rank = np.empty_like(orders)
        rank[self._repeat_ids, orders] = self._ranks
        return (rank if self._one_column_players else rank[:, self._player_of_column])[:, None, :] > self._steps

    # -- state as plain data ---------------------------------------------------------------
    _state_kind = "isage"

    def settings_dict(self) -> dict[str, Any]:
        # a state saved before the choice scored the empty coalition by the mean prediction (no key)
        extra = {} if self.empty == "mean" else {"empty": self.empty}
        return {**super().settings_dict(), "n_inner": self.n_inner, **extra}

    def state_dict(self) -> dict[str, Any]:
        """iPFI's state (:meth:`IPFIEstimator.state_dict`) with the explained loss's trackers and the
        smoothed marginal prediction: plain data.

        >>> from ipfi_cli.models import FunctionPredictor
        >>> model = FunctionPredictor(lambda X: X[:, 0] + X[:, 1])
        >>> make = lambda: ISAGEEstimator(model, ["a", "b"], loss="squared", alpha=0.1, seed=3)
        >>> a, b = make(), make()
        >>> for x in (0.2, 0.7, 0.9):
        ...     _ = a.explain_one({"a": x, "b": 1 - x}, 1.0)
        >>> b.load_state_dict(a.state_dict())
        >>> a.explain_one({"a": 0.4, "b": 0.3}, 0.7).tolist() == b.explain_one({"a": 0.4, "b": 0.3}, 0.7).tolist()
        True
        """
        if self._orders:  # only inside a call that failed half way, which clears them
            raise ValueError("the explainer is in the middle of a row; its state is saved between rows")
        return {**super().state_dict(), "losses_tracker": self._losses_tracker.state_dict(),
                "marginal": self._marginal.state_dict(), "order_rng": self._order_rng.bit_generator.state}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("explainer") == self._state_kind and "order_rng" not in state:
            raise ValueError(_EARLIER_STREAMS)
        super().load_state_dict(state)
        generator_state(self._order_rng, state, "order_rng")
        losses, marginal = state["losses_tracker"], state["marginal"]
        with within("losses_tracker"):
            self._losses_tracker.load_state_dict(losses)
        with within("marginal"):
            self._marginal.load_state_dict(marginal)
        self._orders.clear()
        self._pools.clear()

    # -- results --------------------------------------------------------------------------
    def params(self) -> dict[str, Any]:
        """The settings a resumed run must share (see :class:`~ipfi_cli.core.explainer.Explainer`)."""
        return {**super().params(), "method": "sage", "n_inner": self.n_inner, "empty": self.empty}

    @property
    def marginal_loss(self) -> float:
        """Smoothed loss with no feature known: of the rows whose every column is imputed
        (``empty="imputed"``), or of the smoothed marginal prediction (``"mean"``)."""
        return float(self._losses_tracker.mean[0])

    @property
    def model_loss(self) -> float:
        """Smoothed loss of the model's predictions (every feature known)."""
        return float(self._losses_tracker.mean[1])

    @property
    def explained_loss(self) -> float:
        """``marginal_loss - model_loss``: the loss the features explain; the SAGE values add up to it."""
        return self.marginal_loss - self.model_loss

    # -- one row's evaluations ------------------------------------------------------------
    def explain_one(self, x: Mapping[str, Any], y: Any) -> np.ndarray:
        order_state = self._order_rng.bit_generator.state
        try:
            return super().explain_one(x, y)
        except Exception:
            self._orders.clear()
            self._pools.clear()
            self._order_rng.bit_generator.state = order_state
            raise

    def _fill_block(self, block: np.ndarray, row: np.ndarray) -> None:
        rng, n_chain, n_inner, _masks = self._rng, self._n_chain, self.n_inner, self._absent_masks
        orders = self._order_rng.permuted(self._order_base, axis=1)
        self._orders.append(orders)
        block[0] = row
        if n_chain == 0:
            return
        absent = _masks(orders)  # (M, G-1, C)
        n_columns = len(self.columns)
        if self._remover is None:
            if self._pool_corrected:
                self._pools.append(self._reservoir.filled)
            slots = self._reservoir.draw(rng, n_chain * n_inner)  # (M, (G-1) * n_inner)
            donors = self._reservoir.rows[self._repeat_ids, slots]
            chain = block[1:].reshape(self.n_repeats, n_chain, n_inner, n_columns)
            chain[...] = row
            np.copyto(chain, donors.reshape(chain.shape), where=absent[:, :, None, :])
        else:
            drawn = self._remover.draw_absent(rng, row, absent.reshape(-1, n_columns), n_inner)
            block[1:] = drawn.reshape(-1, n_columns)

    def _predict_records(self, x: Mapping[str, Any], values: list[Any], y: Any) -> np.ndarray:
        block = np.empty((self.block_rows, len(self.columns)), dtype=object)
        row = np.empty(len(values), dtype=object)
        row[:] = values
        self._fill_block(block, row)
        base = x if type(x) is dict and len(x) == len(self.columns) else dict(zip(self.columns, values))
        records = [base] + [dict(zip(self.columns, r)) for r in block[1:].tolist()]
        return self.model.predict_records(records, self.loss.output, y)

    def _losses(self, predicted: Any, targets: list[Any]) -> np.ndarray:
        """Per step: ``[marginal loss, model loss, chain losses (M * (G-1))]``.

        The marginal prediction is folded in here, row by row in stream order, and kept only
        when every row's losses could be computed.
        """
        predicted = as_predictions(predicted)
        n_steps, n_chain = len(targets), self.n_repeats * self._n_chain
        y = loss_targets(self.loss, targets, predicted.dtype.kind)
        predicted = predicted.reshape(n_steps, self.block_rows)
        model_losses = self.loss.compute(y, predicted[:, 0])
        chain = predicted[:, 1:].reshape(n_steps, n_chain, self.n_inner)
        chain_targets = np.repeat(y, n_chain)
        if self.loss.output is Output.LABEL:
            modal = chain.reshape(n_steps, n_chain) if self.n_inner == 1 else most_frequent(chain)
            chain_losses = self.loss.compute(chain_targets, modal.reshape(-1)).reshape(n_steps, n_chain)
        else:
            values = np.asarray(chain, dtype=np.float64)
            mean_prediction = values.mean(axis=2).reshape(-1)
            chain_losses = self.loss.compute(chain_targets, mean_prediction).reshape(n_steps, n_chain)
            if self.empty == "imputed" and self.n_inner > 1 and self.loss.name == "squared":
                pool = np.array([self._pools.popleft() for _ in range(n_steps)]) if self._pool_corrected else None
                chain_losses -= squared_loss_excess(values, pool)
        if self.empty == "imputed":  # each ordering's first step; their mean is the no-feature loss
            marginal_losses = chain_losses.reshape(n_steps, self.n_repeats, self._n_chain)[:, :, 0].mean(axis=1)
        else:
            marginal = copy.deepcopy(self._marginal)
            marginal_losses = self.loss.compute(y, marginal.update_many(predicted[:, 0]))
            self._marginal = marginal
        out = np.empty((n_steps, 2 + n_chain))
        out[:, 0], out[:, 1], out[:, 2:] = marginal_losses, model_losses, chain_losses
        return out

    def _fold(self, losses: np.ndarray) -> None:
        marginal_loss, model_loss = float(losses[0]), float(losses[1])
        orders = self._orders.popleft()
        n_players = len(self.names)
        path = np.empty((self.n_repeats, n_players + 1))
        first = n_players - self._n_chain  # 0: the chain holds the empty coalition, 1: the mean prediction's
        path[:, 0] = marginal_loss
        path[:, first:n_players] = losses[2:].reshape(self.n_repeats, self._n_chain)
        path[:, n_players] = model_loss
        contributions = np.empty((self.n_repeats, n_players))
        contributions[self._repeat_ids, orders] = path[:, :-1] - path[:, 1:]
        self.last_contributions = contributions
        self.last_loss = model_loss
        self._loss_sum += model_loss
        self._tracker.update(np.add.reduce(contributions, axis=0) / self.n_repeats)
        self._losses_tracker.update(losses[:2])

    def _fold_block(self, losses: np.ndarray, orders: np.ndarray, out: np.ndarray, contributions: np.ndarray,
                    row_losses: np.ndarray) -> None:
        """:meth:`_fold` for consecutive rows' losses (``(T, 2 + M (G-1))``) and orderings
        (``(T, M, G)``) with array operations; the estimates after each row go to ``out``.
        The same operations on the same numbers as row by row: the smoothers' ``update_many``
        are their ``update`` to the bit, the loss sum is added up in order."""
        n_rows, n_players = len(losses), len(self.names)
        path = np.empty((n_rows, self.n_repeats, n_players + 1))
        first = n_players - self._n_chain  # as in _fold
        path[:, :, 0] = losses[:, :1]
        path[:, :, first:n_players] = losses[:, 2:].reshape(n_rows, self.n_repeats, self._n_chain)
        path[:, :, n_players] = losses[:, 1:2]
        per_step = np.empty((n_rows, self.n_repeats, n_players))
        np.put_along_axis(per_step, orders, path[:, :, :-1] - path[:, :, 1:], axis=2)
        per_row = np.add.reduce(per_step, axis=1) / self.n_repeats  # = last_contribution, row by row
        out[...] = self._tracker.update_many(per_row)
        self._losses_tracker.update_many(losses[:, :2])
        self.last_contributions = per_step[-1].copy()
        self.last_loss = float(losses[-1, 1])
        add_losses(self, losses[:, 1])
        contributions[...] = per_row
        row_losses[...] = losses[:, 1]

    def _fold_pending(self, losses: np.ndarray, pending: PendingRows, out: np.ndarray, contributions: np.ndarray,
                      row_losses: np.ndarray) -> None:
        # the array path's orderings come with the pending rows; row by row's were queued by _fill_block
        orders = pending.extra if pending.extra is not None else \
            np.array([self._orders.popleft() for _ in range(len(losses))])
        self._fold_block(losses, orders, out, contributions, row_losses)

    # -- the micro-batch path: a static model, numbers, marginal removal -------------------------
    def _floats_stored(self) -> bool:
        """:meth:`_prepare_numeric` applies: marginal removal, a block predictor and a reservoir
        (if any yet) of floats. Conditional removal fills its blocks row by row (its draws depend
        on the sampler as it learns each row) and folds them at once."""
        return (self._remover is None and self.use_batch
                and (self._sampler is None or self._sampler.rows.dtype == np.float64))

    def _prepare_numeric(self, rows: np.ndarray, targets: list[Any], begin: int, buffer: np.ndarray | None
                         ) -> tuple[np.ndarray, Any]:
        """The array path: the orderings of ``rows[begin:]`` are one ``permuted`` call and their reservoir
        draws and insertions one request (:meth:`Reservoir.draw_integers`): the numbers of
        :meth:`explain_one` row by row. The donors and the reservoirs
        (:meth:`Reservoir.draw_insert_drawn`), the evaluation blocks, the losses and the folds
        (:meth:`_fold_block`) are array operations over the micro-batch."""
        part = rows[begin:]
        n_block, n_columns = self.block_rows, len(self.columns)
        orders, table, sources = self._draw_many(part)
        blocks = np.empty((len(part), n_block, n_columns)) if buffer is None else buffer[:len(part)]
        self._fill_blocks(blocks, part, orders, table, sources)
        return blocks.reshape(len(part) * n_block, n_columns), orders

    def _draw_many(self, part: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The orderings ``(T, M, G)`` and the donor rows (``table[sources]``, ``sources`` of shape
        ``(T, M (G-1) n_inner)``) of consecutive rows, which are stored in the reservoirs: the
        random numbers of :meth:`_fill_block` and :meth:`_store`, row by row.

        ``permuted`` shuffles a C-ordered array's rows one after the other, each as the call on
        that row alone would: the ``T * M`` rows at once are the ``T`` calls on ``M`` rows."""
        n_rows, n_players = len(part), len(self.names)
        orders = self._order_rng.permuted(np.tile(self._ranks, (n_rows * self.n_repeats, 1)), axis=1)
        reservoir, n_draws = self._reservoir, self._n_chain * self.n_inner
        if self._pool_corrected:  # each row's draws see the rows stored before it
            self._pools.extend(reservoir.draw_bounds(n_rows, 1)[:, 0].tolist())
        drawn = reservoir.draw_integers(self._rng, n_rows, n_draws)
        table, sources = reservoir.draw_insert_drawn(part, drawn, n_draws)
        self.n_seen += n_rows
        return orders.reshape(n_rows, self.n_repeats, n_players), table, sources

    #: rows of a micro-batch whose chains :meth:`_fill_blocks` builds at once: its scratch arrays
    #: then stay in the processor's cache (about this many cells)
    fill_cells: int = 1 << 15

    def _fill_blocks(self, blocks: np.ndarray, part: np.ndarray, orders: np.ndarray, table: np.ndarray,
                     sources: np.ndarray) -> None:
        """:meth:`_fill_block` for consecutive rows: ``blocks`` is ``(T, block_rows, C)``, the donors
        ``table[sources]`` (see :meth:`_draw_many`)."""
        blocks[:, 0] = part
        if not self._n_chain:
            return
        n_rows = len(part)
        rank = np.empty_like(orders)  # rank[t, m, g]: the step at which player g arrives
        np.put_along_axis(rank, orders, self._ranks, axis=2)
        column_rank = rank if self._one_column_players else rank[:, :, self._player_of_column]
        fill_chains(blocks[:, 1:].reshape(n_rows, -1), part, column_rank[:, :, None, None, :],
                    self._steps[:, :, :, None], self.n_inner, table, sources, self.fill_cells)

    def _save_stream_state(self) -> tuple[Any, ...]:
        mine = copy.deepcopy((self._losses_tracker, self._marginal))
        return super()._save_stream_state(), mine, self._order_rng.bit_generator.state

    def _restore_stream_state(self, saved: tuple[Any, ...]) -> None:
        base, mine, order_state = saved
        super()._restore_stream_state(base)
        self._losses_tracker, self._marginal = mine
        self._order_rng.bit_generator.state = order_state
        self._orders.clear()
        self._pools.clear()


#: why a state or pickle of an earlier iSAGE is refused
_EARLIER_STREAMS = ("an iSAGE state from an earlier ipfi, which drew the orderings from the reservoirs' random "
                    "stream; this one draws them from their own and cannot continue it: finish the run with "
                    "that ipfi, or start a new run")
