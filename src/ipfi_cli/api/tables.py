"""The batch baselines of the Python API, on a whole table: :func:`batch_pfi`, :class:`IntervalPFI`
over windows of a stream, and :func:`batch_sage`; results as scikit-learn Bunches."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipfi_cli.api._shared import (
    _api_text,
    _bunch,
    _default_loss,
    _first_record,
    _labels_of,
    _located,
    _matched,
    _matcher,
    _predictor,
    _table,
    _text_keys,
)
from ipfi_cli.core import batch as core_batch
from ipfi_cli.core.losses import Loss, UnmeasurableError
from ipfi_cli.errors import ModelError


def batch_pfi(model: Any, X: Any, y: Sequence[Any], *, columns: Sequence[str] | None = None,
              loss: str | Loss | None = None, n_repeats: int = 10, features: Sequence[str] | None = None,
              groups: Mapping[str, Sequence[str]] | None = None, seed: int | None = None,
              n_jobs: int | None = None) -> Any:
    """Permutation feature importance of a fixed model on a whole table (batch PFI).

    Per feature or group: the mean increase of the loss when its column(s) are shuffled
    across the rows, scaled by ``N / (N - 1)`` so that it is unbiased (a shuffle leaves some
    rows in place), over ``n_repeats`` shuffles.

    Parameters
    ----------
    model : river model, scikit-learn estimator or pipeline, or callable
    X : DataFrame, 2-D array or list of dicts
        The rows.
    y : array-like
        Their labels or targets.
    columns : list of str, default=None
        The model's inputs in order. ``None``: the model's ``feature_names_in_``, the
        DataFrame's columns, the dicts' keys, or ``x0, x1, ...`` for an array.
    loss : {"zero-one", "absolute", "squared", "log"} or Loss, default=None
        ``None``: zero-one for a classifier, absolute error otherwise.
    n_repeats : int, default=10
        Shuffles per feature.
    features, groups : default=None
        What to explain, as in :class:`IncrementalPFI`.
    seed : int, default=None
        Seeds the shuffles; each group draws from its own stream, so ``n_jobs`` never
        changes a number.
    n_jobs : int, default=None
        Parallel workers (joblib), one group per task.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``importances_mean`` and ``importances_std`` (shape ``(n_features,)``; the standard
        deviation of the repeats with ``ddof=1``, the sample standard deviation, as ``ipfi batch``
        prints it: it estimates the spread of one repeat without the bias of ``ddof=0``, which
        matters at the usual 5-10 repeats; NaN for one repeat),
        ``importances`` (``(n_features, n_repeats)``), ``feature_names``, ``baseline_loss``
        and ``n_rows``. Like scikit-learn's ``permutation_importance``, but of the loss's
        increase (a score's decrease there) and with the ``N / (N - 1)`` scaling.

    Examples
    --------
    >>> import numpy as np
    >>> from sklearn.linear_model import LinearRegression
    >>> from ipfi_cli import batch_pfi
    >>> rng = np.random.default_rng(0)
    >>> X = rng.normal(size=(2000, 2))
    >>> model = LinearRegression().fit(X, 3 * X[:, 0])
    >>> result = batch_pfi(model, X, 3 * X[:, 0], loss="squared", n_repeats=5, seed=0)
    >>> result.importances_mean.round(0) + 0.0   # 2 * 3**2 * Var(x0) = 18 for x0; nothing for x1 (not -0)
    array([18.,  0.])
    """
    X, keys = _text_keys(X)
    rows, names = _table(X, columns, model)
    chosen = _default_loss(model, loss)
    y = _labels_of(y, len(rows))
    first = _first_record(rows, names)
    if keys is not None and first is not None:  # the model answers on the row keyed as it learned it
        first = {keys[c]: v for c, v in first.items()}
    matcher = _matcher(model, chosen, first)
    labels = _matched(matcher, y)
    try:
        with _located(None):
            result = core_batch.batch_pfi(_predictor(model, keys), rows, labels, names, loss=chosen,
                                          n_repeats=n_repeats, features=features, groups=groups, seed=seed,
                                          n_jobs=n_jobs)
    except UnmeasurableError as error:
        raise ModelError(_api_text(str(error))) from None
    bunch = _bunch(result)
    if keys is not None:  # named as the rows name them
        bunch.feature_names = [keys.get(name, name) for name in bunch.feature_names]
    return bunch


class IntervalPFI:
    """Batch PFI over consecutive windows of ``interval`` rows of a stream (the baseline iPFI is
    compared with for a learning model): call :meth:`update` after the model learned each row.

    Parameters
    ----------
    model : river model, scikit-learn estimator or pipeline, or callable
    columns : list of str
        The model's inputs.
    interval : int
        Rows per window (at least 2).
    loss, n_repeats, features, groups, seed, n_jobs
        As in :func:`batch_pfi`; window ``k`` draws from seed stream ``k``.
    """

    def __init__(self, model: Any, columns: Sequence[str], interval: int, *, loss: str | Loss | None = None,
                 n_repeats: int = 10, features: Sequence[str] | None = None,
                 groups: Mapping[str, Sequence[str]] | None = None, seed: int | None = None,
                 n_jobs: int | None = None) -> None:
        if columns is None:
            raise ValueError("give columns=: the model's inputs, in order")
        self._core = core_batch.IntervalPFIEstimator(_predictor(model), [str(c) for c in columns], interval,
                                            loss=_default_loss(model, loss), n_repeats=n_repeats,
                                            features=features, groups=groups, seed=seed, n_jobs=n_jobs)

    def update(self, x: Mapping[str, Any], y: Any) -> Any:
        """Add a row; returns the window's result (as :func:`batch_pfi`) when it is full, else ``None``."""
        result = self._core.update(x, y)
        return None if result is None else _bunch(result)


def batch_sage(model: Any, X: Any, y: Sequence[Any], *, columns: Sequence[str] | None = None,
               loss: str | Loss | None = None, n_permutations: int = 2000, background: Any = None,
               n_inner: int | None = None, groups: Mapping[str, Sequence[str]] | None = None,
               seed: int | None = None, empty: str = "imputed") -> Any:
    """SAGE values of a fixed model on a table, by the permutation estimator (Covert et al.).

    Parameters
    ----------
    model, X, y, columns, groups, seed
        As in :func:`batch_pfi`.
    loss : {"zero-one", "log", "absolute", "squared"}, default=None
        With ``log`` (cross-entropy), a coalition's loss is that of the mean probability vector of its
        imputations (with ``n_inner=None``, of every background row: sage-importance's game).
    n_permutations : int, default=2000
        Sampled (row, ordering) pairs.
    background : array-like, default=None
        Rows absent features are drawn from (default: ``X``; keep it small, a few hundred).
        ``ipfi batch --method sage`` uses ``--background 64`` rows of ``X`` drawn with the seed:
        ``X[np.sort(np.random.default_rng(np.random.SeedSequence(seed)).choice(len(X), 64,
        replace=False))]`` gives its numbers, with ``n_inner`` its ``--inner`` (by default
        :class:`IncrementalSAGE`'s: 2 for the squared loss, else 1; ``--inner all`` is ``None``).
    n_inner : int, default=None
        ``None``: every background row, predictions averaged (sage-importance's
        ``MarginalImputer``); ``k``: ``k`` random background rows per coalition (the game
        :class:`IncrementalSAGE` estimates with ``n_inner=k``).
    empty : {"imputed", "mean"}, default="imputed"
        With ``n_inner``: the empty coalition imputed as the others, or scored by the mean
        prediction over the background (iXAI's game); as :class:`IncrementalSAGE`'s.

    Returns
    -------
    result : sklearn.utils.Bunch
        ``importances_mean`` and ``std_errors`` (per feature), ``feature_names``, ``explained_loss``,
        ``marginal_loss``, ``model_loss``.

    Examples
    --------
    >>> import numpy as np
    >>> from ipfi_cli import batch_sage
    >>> X = np.random.default_rng(0).normal(size=(1000, 2))
    >>> result = batch_sage(lambda B: 2 * B[:, 0], X, 2 * X[:, 0], loss="squared", n_permutations=500,
    ...                     background=X[:100], seed=0)
    >>> result.importances_mean.round(1), result.feature_names   # about 4 Var(x0) = 4, and 0
    (array([3.9, 0. ]), ['x0', 'x1'])
    """
    from sklearn.utils import Bunch

    from ipfi_cli.core.sage import batch_sage as core_batch_sage

    rows, names = _table(X, columns, model)
    labels = list(_labels_of(y, len(rows)))
    result = core_batch_sage(_predictor(model), rows, labels, names, loss=_default_loss(model, loss),
                             n_permutations=n_permutations, background=background, n_inner=n_inner,
                             groups=groups, seed=seed, empty=empty)
    return Bunch(importances_mean=result.values, std_errors=result.std_errors, feature_names=list(result.names),
                 explained_loss=result.explained_loss, marginal_loss=result.marginal_loss,
                 model_loss=result.model_loss, n_permutations=result.n_permutations)
