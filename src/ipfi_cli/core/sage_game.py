"""The loss game that iSAGE and batch SAGE share: its players, the columns absent at each step
of an ordering, the marginal prediction (the empty coalition's), the losses it can be played with.

>>> import numpy as np
>>> absent_masks(np.array([[1, 0, 2]]), np.array([0, 1, 2])).astype(int).tolist()   # player 1 first, then 0
[[[1, 0, 1], [0, 0, 1]]]
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from ipfi_cli.core.choices import EMPTY_COALITION_NAMES
from ipfi_cli.core.groups import resolve_groups
from ipfi_cli.core.losses import Loss, Output
from ipfi_cli.core.smoothing import make_smoother
from ipfi_cli.core.state_fields import array, within
from ipfi_cli.errors import UsageError


def player_columns(columns: Sequence[str], groups: Mapping[str, Sequence[str]] | None) -> dict[str, list[int]]:
    """Every column belongs to one player: SAGE shares out the whole loss, so none may be left out."""
    resolved = resolve_groups(columns, None, groups)
    return resolved


def absent_masks(orders: np.ndarray, player_of_column: np.ndarray) -> np.ndarray:
    """For orderings ``(n, G)`` of the players, the columns absent at steps ``1 .. G-1``: ``(n, G-1, C)``."""
    n, n_players = orders.shape
    rank = np.empty_like(orders)  # rank[i, g]: the step at which player g arrives in ordering i
    rank[np.arange(n)[:, None], orders] = np.arange(n_players)
    column_rank = rank[:, player_of_column]  # (n, C)
    return column_rank[:, None, :] > np.arange(n_players - 1)[None, :, None]


def most_frequent(labels: np.ndarray) -> np.ndarray:
    """The most frequent label along the last axis (ties: the first to appear), as an object array."""
    from collections import Counter

    flat = labels.reshape(-1, labels.shape[-1])
    out = np.empty(len(flat), dtype=object)
    out[:] = [Counter(row).most_common(1)[0][0] for row in flat.tolist()]
    return out.reshape(labels.shape[:-1])


def check_loss(loss: Loss) -> None:
    """SAGE's losses; a loss it cannot play is a usage error naming ``--loss`` (a ``ValueError`` too).

    The log loss (cross-entropy, the SAGE paper's and sage-importance's for classifiers) plays: a
    coalition's prediction is the mean of its imputations' probability vectors, and its loss needs
    only that mean's entry for the row's label, the mean of the imputations' probabilities of that
    label (what the log loss's model output is). The label-free ``prediction-shift`` on probabilities
    compares each prediction with the row's own, which no mean prediction stands for."""
    if loss.output is Output.PROBA and loss.relative:
        raise UsageError(f"SAGE needs the model's marginal prediction, which the {loss.name} loss (on predicted "
                         "probabilities, against the row's own) does not give: use the zero-one, log, absolute or "
                         "squared loss", "--loss")


def check_empty(loss: Loss, empty: str) -> None:
    """iSAGE's ``empty="mean"`` scores the empty coalition by the smoothed mean prediction: for the log loss
    that is the mean probability vector, of which the model gives only the row's label's entry; a usage
    error naming ``--empty-coalition``."""
    if empty == "mean" and loss.output is Output.PROBA:
        from ipfi_cli.errors import UsageError

        raise UsageError("with the log loss the empty coalition's smoothed mean prediction would need every class's "
                         "probability for every row, and the model gives the label's only: use --empty-coalition "
                         "imputed", "--empty-coalition")


def proba_means(predict: Any, background: np.ndarray, labels: Sequence[Any]) -> dict[Any, float]:
    """Per label: its probability averaged over the ``background`` rows, the entry of the marginal
    prediction (the mean probability vector) the log loss reads. ``predict(rows, targets)`` gives
    each row's probability of its target."""
    means: dict[Any, float] = {}
    for label in dict.fromkeys(labels):
        targets = np.empty(len(background), dtype=object)
        targets[:] = [label] * len(background)
        means[label] = float(np.mean(np.asarray(predict(background, targets), dtype=np.float64)))
    return means


class MarginalPrediction:
    """The smoothed marginal prediction: a running mean of values, or the modal predicted label."""

    def __init__(self, output: Output, smoothing: str, alpha: float) -> None:
        self.output = output
        self._values = make_smoother(smoothing, alpha, 1)
        self._weights: dict[Any, float] = {}
        self._decay = 1.0 - alpha if smoothing == "exponential" else 1.0
        self._step = alpha if smoothing == "exponential" else 1.0

    def update(self, prediction: Any) -> Any:
        """Fold one model output in; returns the marginal prediction after it."""
        if self.output is Output.VALUE:
            return float(self._values.update(np.array([float(prediction)]))[0])
        weights = self._weights
        if self._decay != 1.0:
            for label in weights:
                weights[label] *= self._decay
        weights[prediction] = weights.get(prediction, 0.0) + self._step
        return max(weights, key=weights.__getitem__)

    def update_many(self, predictions: np.ndarray) -> np.ndarray:
        """Fold model outputs in, in order; the marginal prediction after each (an object array):
        exactly :meth:`update` one by one (a running mean folds its block at once)."""
        out = np.empty(len(predictions), dtype=object)
        if len(predictions) == 1:  # explain_one
            out[0] = self.update(np.asarray(predictions).tolist()[0])
            return out
        if self.output is Output.VALUE:
            out[:] = self._values.update_many(np.asarray(predictions, dtype=np.float64)[:, None])[:, 0].tolist()
            return out
        # per label, its weight after each prediction (-inf before it first comes), in Python floats
        # with update's operations; the first label of the largest weight, as max() picks it
        weights, decay, step = self._weights, self._decay, self._step
        values = np.asarray(predictions).tolist()
        labels = list(dict.fromkeys([*weights, *values]))
        code = {label: k for k, label in enumerate(labels)}
        codes = [code[v] for v in values]
        history = np.empty((len(labels), len(values)))
        for k, label in enumerate(labels):
            weight = weights.get(label)
            series: list[float] = []
            append = series.append
            for c in codes:
                if weight is not None and decay != 1.0:
                    weight = weight * decay
                if c == k:
                    weight = (0.0 if weight is None else weight) + step
                append(-np.inf if weight is None else weight)
            history[k] = series
            if weight is not None:
                weights[label] = weight
        out[:] = [labels[k] for k in np.argmax(history, axis=0).tolist()]
        return out

    def state_dict(self) -> dict[str, Any]:
        """The marginal prediction as plain data: the running mean's state, and the labels' weights
        in the order the labels came (ties go to the first)."""
        return {"values": self._values.state_dict(), "labels": list(self._weights),
                "weights": np.array(list(self._weights.values()), dtype=np.float64)}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data."""
        values = state["values"]
        with within("values"):
            self._values.load_state_dict(values)
        labels = list(state["labels"])
        weights = array(state, "weights", (len(labels),), kinds="fiu", low=0.0).astype(np.float64).tolist()
        self._weights = dict(zip(labels, weights))


#: how the empty coalition is scored (see :class:`~ipfi_cli.core.sage.ISAGEEstimator`'s ``empty``)
EMPTY_COALITION = EMPTY_COALITION_NAMES


def default_inner(loss: Loss, empty: str = "imputed") -> int:
    """Imputations per coalition when not given: 2 for the squared loss with the empty coalition
    imputed (the least for which :func:`squared_loss_excess` makes each coalition's loss its mean
    prediction's, Covert et al.'s SAGE), else 1 (iXAI's default).

    >>> from ipfi_cli.core.losses import get_loss
    >>> squared = get_loss("squared")
    >>> default_inner(squared), default_inner(get_loss("zero-one")), default_inner(squared, "mean")
    (2, 1, 1)
    """
    return 2 if empty == "imputed" and loss.name == "squared" else 1


def squared_loss_excess(predictions: np.ndarray, pool: np.ndarray | None = None) -> np.ndarray:
    """What the squared loss of the mean of ``k`` imputed predictions (last axis, ``k >= 2``)
    exceeds that of their expectation by, estimated without bias: their sample variance over
    ``k``. Subtracted, a coalition's loss estimates the loss of its mean prediction, as in
    Covert et al.'s SAGE, instead of a loss inflated by the imputations' spread.

    ``pool``: the donors were drawn (with replacement) from this many rows, themselves a sample
    of the stream (a reservoir), one count per row of ``predictions``' first axis. The mean over
    ``N`` such rows misses the expectation by a variance of ``sigma^2 / N``, which inflates the
    loss too (by ``1/N`` of the coalition's spread: 10 % with 10 rows); the sample variance
    over ``N - 1`` estimates it without bias. A pool of one row gives no spread to measure (0).

    >>> squared_loss_excess(np.array([[1.0, 3.0]])).tolist()   # variance 2, over k = 2
    [1.0]
    >>> squared_loss_excess(np.array([[1.0, 3.0]]), pool=np.array([5])).tolist()   # 2/2 + 2/(5 - 1)
    [1.5]
    """
    spread = predictions.var(axis=-1, ddof=1)
    excess = spread / predictions.shape[-1]
    if pool is not None:
        pool = np.asarray(pool, dtype=np.float64).reshape((-1,) + (1,) * (spread.ndim - 1))
        excess = excess + np.divide(spread, pool - 1, out=np.zeros_like(spread), where=pool > 1)
    return cast(np.ndarray, excess)


def fill_chains(chains: np.ndarray, rows: np.ndarray, later: np.ndarray, steps: np.ndarray, n_inner: int,
                table: np.ndarray, sources: np.ndarray, fill_cells: int) -> None:
    """Write consecutive rows' coalition chains: per row (``chains[t]``, its chain's cells in a row), each
    step's copies of ``rows[t]`` with the donors' cells ``table[sources[t]]`` where the column arrives
    ``later`` than the ``steps``; about ``fill_cells`` cells at a time, so the scratch arrays stay in the
    processor's cache."""
    n_rows, n_columns = rows.shape
    step = max(1, fill_cells // chains.shape[1])
    for start in range(0, n_rows, step):
        end = min(start + step, n_rows)
        chain = chains[start:end]
        chain.reshape(end - start, -1, n_columns)[...] = rows[start:end, None, :]
        absent = np.greater(later[start:end], steps)  # (t, M, G-1, 1, C)
        if n_inner > 1:
            absent = np.repeat(absent, n_inner, axis=3)
        # the donor's cell where absent, bit for bit: x ^ ((x ^ donor) * absent); a masked copy
        # (np.copyto with where) takes twice as long
        bits = chain.view(np.uint64)
        mixed = table.take(sources[start:end], axis=0).reshape(end - start, -1).view(np.uint64)
        mixed ^= bits
        mixed *= absent.reshape(end - start, -1).view(np.uint8)
        bits ^= mixed
