"""Batch SAGE of a fixed model (Covert et al.'s permutation estimator): the baseline of iSAGE
(:mod:`ipfi_cli.core.sage`), for either game (``n_inner`` donors per coalition, or every
background row as sage-importance's ``MarginalImputer``)."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, cast

import numpy as np

from ipfi_cli.core.batch import as_block
from ipfi_cli.core.losses import Loss, Output, get_loss
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.core.sage_game import (
    EMPTY_COALITION,
    MarginalPrediction,
    absent_masks,
    check_empty,
    check_loss,
    most_frequent,
    player_columns,
    proba_means,
    squared_loss_excess,
)


@dataclass(frozen=True)
class SAGEResult:
    """Batch SAGE values per feature or group, with their standard errors.

    ``marginal_loss`` is the loss of the mean prediction over the background rows, and
    ``model_loss`` the model's mean loss; the values add up to about their difference.
    """

    names: list[str]
    values: np.ndarray
    std_errors: np.ndarray
    n_permutations: int
    marginal_loss: float
    model_loss: float
    n_rows: int = 0

    @property
    def explained_loss(self) -> float:
        return self.marginal_loss - self.model_loss

    # read like a PFIResult where both are a comparison's reference (ipfi compare --method sage)
    @property
    def mean(self) -> list[float]:
        return cast(list[float], self.values.tolist())

    @property
    def std(self) -> list[float]:
        """The standard errors of the values (a PFIResult's is the spread of one repeat)."""
        return cast(list[float], self.std_errors.tolist())

    @property
    def n_repeats(self) -> int:
        return self.n_permutations

    def as_dict(self) -> dict[str, float]:
        return dict(zip(self.names, self.values.tolist()))


def batch_sage(
    model: Predictor,
    rows: Any,
    targets: Sequence[Any] | np.ndarray,
    columns: Sequence[str],
    *,
    loss: str | Loss = "zero-one",
    n_permutations: int = 2000,
    background: Any = None,
    n_inner: int | None = None,
    groups: Mapping[str, Sequence[str]] | None = None,
    seed: int | None = None,
    chunk: int = 64,
    empty: str = "imputed",
) -> SAGEResult:
    """SAGE values of a fixed model by the permutation estimator (Covert et al.'s Algorithm 1).

    Each of ``n_permutations`` samples draws a row uniformly and a random ordering of the
    players, adds them one by one and credits each with the loss decrease. Absent columns
    come from the ``background`` rows (default: ``rows``): with ``n_inner=None`` every
    background row, predictions averaged (sage-importance's ``MarginalImputer``); with
    ``n_inner=k``, ``k`` background rows drawn at random per coalition (iSAGE's game), the
    empty coalition imputed alike (``empty="imputed"``; with the squared loss and ``k >= 2`` a
    coalition's loss is corrected to its mean prediction's, :func:`squared_loss_excess`) or
    scored by the mean prediction over the background (``empty="mean"``, iXAI's game). With
    every background row, the empty coalition's loss is the loss of their mean prediction. With the
    log loss a prediction is a probability vector, of which the loss reads the row's label's entry:
    the mean prediction's is the mean of the rows' probabilities of that label (sage-importance's
    cross-entropy with its ``MarginalImputer``, when ``n_inner=None``).

    >>> import numpy as np
    >>> from ipfi_cli.models import FunctionPredictor
    >>> X = np.random.default_rng(0).normal(size=(500, 2))
    >>> result = batch_sage(FunctionPredictor(lambda B: 2 * B[:, 0]), X, 2 * X[:, 0], ["a", "b"],
    ...                     loss="squared", n_permutations=400, background=X[:100], seed=0)
    >>> (np.round(result.values, 1) + 0.0).tolist()    # 2**2 * Var(a) = 4 (the sample's 3.8), 0 (+ 0.0: no -0.0)
    [3.8, 0.0]
    """
    columns = [str(c) for c in columns]
    loss = get_loss(loss)
    check_loss(loss)
    if n_inner is not None:
        check_empty(loss, empty)
    if not getattr(model, "supports_batch", False):
        raise ValueError("batch SAGE needs a model that predicts a block of rows")
    players = player_columns(columns, groups)
    names = list(players)
    player_of_column = np.empty(len(columns), dtype=np.intp)
    for g, cols in enumerate(players.values()):
        player_of_column[cols] = g
    block = as_block(rows, columns)
    y = np.empty(len(block), dtype=object)
    y[:] = list(targets)
    back = block if background is None else as_block(background, columns)
    rng = np.random.default_rng(np.random.SeedSequence(seed))
    n_players, n_columns, n_back = len(names), len(columns), len(back)
    k = n_back if n_inner is None else int(n_inner)
    if empty not in EMPTY_COALITION:
        raise ValueError(f"empty must be one of {', '.join(EMPTY_COALITION)}, got {empty!r}")
    imputed = n_inner is not None and empty == "imputed"  # the chain starts at the empty coalition
    debias = imputed and k > 1 and loss.name == "squared"
    n_chain = n_players if imputed else n_players - 1

    proba = loss.output is Output.PROBA  # the log loss: each row's probability of its label

    def predict(values: np.ndarray, targets: np.ndarray | None = None) -> np.ndarray:
        out = np.asarray(model.predict_block(values, columns, loss.output, targets if proba else None))
        return out.astype(object) if out.dtype.kind in "US" else out

    if proba:  # the marginal prediction is the background's mean probability vector: per row, its label's entry
        means = proba_means(predict, back, y.tolist())
        marginal_losses = loss.compute(y, np.array([means[label] for label in y.tolist()], dtype=np.float64))
    else:
        marginal_model = MarginalPrediction(loss.output, "mean", 1.0)
        marginal_prediction = None
        for p in predict(back).tolist():
            marginal_prediction = marginal_model.update(p)
        marginal_target = np.empty(len(block), dtype=object)
        marginal_target[:] = [marginal_prediction] * len(block)
        marginal_losses = loss.compute(y, marginal_target)
    model_losses = loss.compute(y, predict(block, y))

    scores = np.empty((n_permutations, n_players))
    no_feature = np.empty(n_permutations)  # each sample's loss with no feature known
    for start in range(0, n_permutations, chunk):
        n = min(chunk, n_permutations - start)
        picked = rng.integers(0, len(block), n)
        orders = rng.permuted(np.tile(np.arange(n_players), (n, 1)), axis=1)
        path = np.empty((n, n_players + 1))
        path[:, 0] = marginal_losses[picked]
        path[:, n_players] = model_losses[picked]
        if n_chain:
            absent = absent_masks(orders, player_of_column)  # (n, G-1, C)
            if imputed:  # every column absent first
                absent = np.concatenate([np.ones((n, 1, n_columns), dtype=bool), absent], axis=1)
            donors = back[rng.integers(0, n_back, (n, n_chain, k))] if n_inner is not None \
                else np.broadcast_to(back, (n, n_chain, n_back, n_columns))
            x = block[picked][:, None, None, :]
            evaluated = predict(np.where(absent[:, :, None, :], donors, x).reshape(-1, n_columns),
                                np.repeat(y[picked], n_chain * k) if proba else None)
            evaluated = evaluated.reshape(n, n_chain, k)
            step_targets = np.repeat(y[picked], n_chain)
            if loss.output is Output.LABEL:
                modal = most_frequent(evaluated).reshape(-1)
                steps = loss.compute(step_targets, modal).reshape(n, n_chain)
            else:
                values = np.asarray(evaluated, dtype=np.float64)
                steps = loss.compute(step_targets, values.mean(axis=2).reshape(-1)).reshape(n, n_chain)
                if debias:
                    steps -= squared_loss_excess(values)
            path[:, n_players - n_chain:n_players] = steps
        no_feature[start:start + n] = path[:, 0]
        contributions = np.empty((n, n_players))
        contributions[np.arange(n)[:, None], orders] = path[:, :-1] - path[:, 1:]
        scores[start:start + n] = contributions
    std_errors = scores.std(axis=0, ddof=1) / np.sqrt(n_permutations) if n_permutations > 1 \
        else np.full(n_players, np.nan)
    # imputed: the empty coalition's loss as the samples saw it (the values add up to it, less the model's)
    empty_loss = float(no_feature.mean()) if imputed else float(marginal_losses.mean())
    return SAGEResult(names, scores.mean(axis=0), std_errors, n_permutations, empty_loss,
                      float(model_losses.mean()), len(block))
