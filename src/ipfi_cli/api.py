"""ipfi from Python: explain a river model, a scikit-learn estimator or pipeline, or a plain
function, on a stream or on a table, without the command line.

* :class:`IncrementalPFI`: ``explain_one(x, y)`` per row, river style, returns the current
  importance of every feature as a dict.
* :func:`batch_pfi`: permutation importance of a fixed model on a whole table, returned as
  scikit-learn's ``permutation_importance`` returns it (``importances_mean``,
  ``importances_std``, ``importances``).
* :class:`IntervalPFI`: batch PFI over consecutive windows of a stream.

Models are wrapped with :func:`ipfi_cli.models.as_predictor` (river: ``predict_one``;
scikit-learn: ``predict``; otherwise a function of a 2-D array). The loss defaults from the
model: zero-one for a classifier, absolute error otherwise.

>>> from river import datasets, linear_model, preprocessing
>>> from ipfi_cli import IncrementalPFI
>>> model = preprocessing.StandardScaler() | linear_model.LogisticRegression()
>>> explainer = IncrementalPFI(model, alpha=0.01, n_repeats=3, seed=0)
>>> for x, y in datasets.Phishing():
...     importances = explainer.explain_one(x, y)
...     model.learn_one(x, y)
>>> sorted(importances, key=importances.get)[-1]   # the feature the model relies on most
'empty_server_form_handler'
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core import batch as core_batch
from ipfi_cli.core import incremental as core_incremental
from ipfi_cli.core.losses import Loss, default_loss, get_loss
from ipfi_cli.models.adapters import as_predictor

__all__ = ["IncrementalPFI", "IntervalPFI", "batch_pfi"]


def _default_loss(model: Any, loss: str | Loss | None) -> Loss:
    if loss is not None:
        return get_loss(loss)
    from ipfi_cli.run.labels import declared_task

    task = declared_task(getattr(model, "model", model))
    return default_loss(task != "regression" if task is not None else bool(as_predictor(model).is_classifier))


def _columns_of(model: Any, X: Any = None) -> list[str] | None:
    names = getattr(model, "feature_names_in_", None)
    if names is not None:
        return [str(c) for c in names]
    if X is not None and hasattr(X, "columns"):
        return [str(c) for c in X.columns]
    if isinstance(X, np.ndarray) and X.ndim == 2:
        return [f"x{i}" for i in range(X.shape[1])]
    return None


class IncrementalPFI:
    """Incremental permutation feature importance (iPFI) of a model on a stream.

    For each row ``(x, y)`` and each feature, the model is evaluated on ``x`` with the
    feature's value replaced by an earlier row's (drawn from a reservoir of past rows); the
    increase of the loss, averaged over ``n_repeats`` draws, is folded into an exponentially
    weighted mean. Works for a fixed model and for one that learns as it goes: explain a row
    with :meth:`explain_one`, then let the model learn it.

    Parameters
    ----------
    model : river model, scikit-learn estimator or pipeline, or callable
        The model to explain. It is only asked to predict; the explainer never changes it.
    columns : list of str, default=None
        The model's inputs, in the order it takes them. ``None``: the model's
        ``feature_names_in_``, else the keys of the first row explained.
    loss : {"zero-one", "absolute", "squared", "log"} or Loss, default=None
        Whose increase measures importance. ``None``: zero-one for a classifier, absolute
        error otherwise. ``"log"`` needs predicted probabilities.
    alpha : float, default=0.001
        Smoothing rate in (0, 1]: the weight of the newest row (the estimate averages roughly
        the last ``2 / alpha`` rows).
    n_repeats : int, default=10
        Draws averaged per row and feature (``M``).
    sampling : {"geometric", "uniform"}, default="geometric"
        Which earlier rows replace a value: geometric prefers recent ones (follows drift).
    reservoir_size : int, default=100
        Earlier rows kept per repeat.
    features : list of str, default=None
        Explain only these columns (default: all).
    groups : dict of str to list of str, default=None
        Columns permuted jointly and reported under one name.
    seed : int, default=None
        Seeds every random draw: the same seed and rows give the same numbers.

    Attributes
    ----------
    importances : dict of str to float
        The current estimate per feature or group (NaN before the second row).
    n_explained : int
        Rows explained so far (the first row only fills the reservoir).
    """

    def __init__(self, model: Any, columns: Sequence[str] | None = None, *, loss: str | Loss | None = None,
                 alpha: float = 0.001, n_repeats: int = 10, sampling: str = "geometric",
                 reservoir_size: int = 100, features: Sequence[str] | None = None,
                 groups: Mapping[str, Sequence[str]] | None = None, seed: int | None = None) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.model = model
        self.loss = _default_loss(model, loss)
        self.options: dict[str, Any] = {"alpha": alpha, "n_repeats": n_repeats, "sampling": sampling,
                        "reservoir_size": reservoir_size, "features": features, "groups": groups, "seed": seed}
        self.columns = list(columns) if columns is not None else _columns_of(model)
        self._core: core_incremental.IncrementalPFI | None = None
        if self.columns is not None:
            self._start(self.columns)

    def _start(self, columns: Sequence[str]) -> core_incremental.IncrementalPFI:
        self.columns = [str(c) for c in columns]
        self._core = core_incremental.IncrementalPFI(as_predictor(self.model), self.columns, loss=self.loss,
                                                     **self.options)
        return self._core

    def explain_one(self, x: Mapping[str, Any], y: Any) -> dict[str, float]:
        """Explain one row with the model as it is now.

        Parameters
        ----------
        x : dict
            The row: column -> value.
        y : object
            Its label or target.

        Returns
        -------
        importances : dict of str to float
            The estimates after this row (NaN after the first row, which has nothing
            earlier to draw from).
        """
        core = self._core if self._core is not None else self._start(list(x))
        return dict(zip(core.names, core.explain_one(x, y).tolist()))

    @property
    def explainer(self) -> core_incremental.IncrementalPFI | None:
        """The core explainer (arrays in ``names`` order; the
        :class:`~ipfi_cli.core.explainer.Explainer` protocol), ``None`` before the first row."""
        return self._core

    @property
    def importances(self) -> dict[str, float]:
        return self._core.importances if self._core is not None else {}

    @property
    def n_explained(self) -> int:
        return self._core.n_explained if self._core is not None else 0

    def bounds(self, delta: float = 0.05) -> dict[str, float]:
        """Chebyshev confidence half-widths at level ``1 - delta`` (approximate: rows share
        reservoir values, so their contributions are not quite independent)."""
        return self._core.bounds(delta) if self._core is not None else {}


def _table(X: Any, columns: Sequence[str] | None, model: Any) -> tuple[Any, list[str]]:
    names = list(columns) if columns is not None else _columns_of(model, X)
    if isinstance(X, list) and X and isinstance(X[0], Mapping):
        names = names or [str(c) for c in X[0]]
    if names is None and not isinstance(X, np.ndarray) and len(X) and not isinstance(X[0], Mapping):
        X = np.asarray(X, dtype=object)   # a list of lists: an array, columns x0, x1, ...
        if X.ndim == 2:
            X = X.astype(np.float64) if all(isinstance(v, (int, float)) for v in X.flat) else X
            names = [f"x{i}" for i in range(X.shape[1])]
    if names is None:
        raise ValueError("give columns=: the rows do not name their columns")
    return X, [str(c) for c in names]


def _bunch(result: core_batch.PFIResult) -> Any:
    from sklearn.utils import Bunch

    return Bunch(importances_mean=result.values.mean(axis=1), importances_std=result.values.std(axis=1),
                 importances=result.values, feature_names=list(result.names), baseline_loss=result.baseline_loss,
                 n_rows=result.n_rows)


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
        ``importances_mean`` and ``importances_std`` (shape ``(n_features,)``),
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
    >>> result.importances_mean.round(0)   # 2 * 3**2 * Var(x0) = 18 for x0; nothing for x1
    array([18.,  0.])
    """
    rows, names = _table(X, columns, model)
    result = core_batch.batch_pfi(as_predictor(model), rows, list(y), names, loss=_default_loss(model, loss),
                                  n_repeats=n_repeats, features=features, groups=groups, seed=seed, n_jobs=n_jobs)
    return _bunch(result)


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
        self._core = core_batch.IntervalPFI(as_predictor(model), [str(c) for c in columns], interval,
                                            loss=_default_loss(model, loss), n_repeats=n_repeats,
                                            features=features, groups=groups, seed=seed, n_jobs=n_jobs)

    def update(self, x: Mapping[str, Any], y: Any) -> Any:
        """Add a row; returns the window's result (as :func:`batch_pfi`) when it is full, else ``None``."""
        result = self._core.update(x, y)
        return None if result is None else _bunch(result)
