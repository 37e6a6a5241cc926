"""ipfi from Python: explain a river model, a scikit-learn estimator or pipeline, or a plain
function, on a stream or on a table, without the command line.

* :class:`IncrementalPFI`: ``explain_one(x, y)`` per row, river style, returns the current
  importance of every feature as a dict.
* :func:`batch_pfi`: permutation importance of a fixed model on a whole table, returned as
  scikit-learn's ``permutation_importance`` returns it (``importances_mean``,
  ``importances_std``, ``importances``).
* :class:`IntervalPFI`: batch PFI over consecutive windows of a stream.
* :func:`load_model`: any model the command line takes (a file, an MLflow URI, a served URL).

Models are wrapped with :func:`ipfi_cli.models.as_predictor` (river: ``predict_one``;
scikit-learn: ``predict``; an adapter from :func:`load_model` or any other
:class:`~ipfi_cli.core.predictor.Predictor` as it is; otherwise a function of a 2-D array).
The loss defaults from the model: zero-one for a classifier, absolute error otherwise.

The contract is the command line's, with the same one-line messages as exceptions: a loss
that cannot measure the model is refused when the explainer is made
(:class:`~ipfi_cli.errors.ModelError`); labels are matched to the model's classes as the
command line matches them (``'True'``, ``'yes'`` and ``1`` find the class ``True``; ``1``
finds ``'1'``); labels none of which are the model's classes, every row at the loss's
maximum, or a loss that is not finite raise :class:`~ipfi_cli.errors.ModelError`
(:func:`batch_pfi` at once; :class:`IncrementalPFI` as soon as it is certain, see
:meth:`IncrementalPFI.check`).

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
from ipfi_cli.core.losses import Loss, Output, default_loss, get_loss
from ipfi_cli.models.adapters import as_predictor

__all__ = ["IncrementalPDP", "IncrementalPFI", "IncrementalSAGE", "IntervalPFI", "batch_pfi", "batch_sage",
           "load_model"]


def load_model(source: str, *, trust: Sequence[str] | None = None, learn: bool = False,
               protocol: str | None = None, headers: Mapping[str, str] | None = None, timeout: float = 30.0,
               classes: Sequence[Any] | None = None, max_answer_bytes: int | None = None) -> Any:
    """Load any model the command line takes, ready for :class:`IncrementalPFI` and :func:`batch_pfi`.

    Parameters
    ----------
    source : str
        A model file (joblib or pickle: they run code on load; ``.skops``; ``.onnx``), an
        MLflow model directory or URI (``models:/name/1``, ``runs:/...``), or a served model's
        URL (``http(s)://HOST/invocations`` for MLflow's protocol, ``.../v2/models/NAME`` for the
        Open Inference Protocol).
    trust : list of str, default=None
        The types a ``.skops`` file may hold (as ``--trust``).
    learn : bool, default=False
        The model must learn one row at a time (river's ``learn_one``).
    protocol, headers, timeout, classes, max_answer_bytes
        For a served model, as ``--protocol``, ``--header``, ``--timeout``, ``--classes`` and
        ``--max-answer-mb``. A served model does not say what it is: a classifier needs
        ``classes`` for the log loss, and ``loss=`` tells the task when it is not zero-one.

    Returns
    -------
    predictor : Predictor
        The model behind the adapter the command line uses (its ``model`` attribute, where it
        has one, is the loaded object).

    Raises
    ------
    ModelError
        One line naming the file, URI or URL (never a URL's password or a header's value).

    Examples
    --------
    >>> from ipfi_cli import load_model
    >>> load_model("no/such/model.joblib")
    Traceback (most recent call last):
    ...
    ipfi_cli.models.files.ModelFileError: no/such/model.joblib: no such model file
    """
    from ipfi_cli.models.loading import load_predictor

    if source.startswith(("http://", "https://")):
        from ipfi_cli.models.http import HttpModelError
        from ipfi_cli.models.http_options import MAX_ANSWER_BYTES, HttpOptions, resolve_protocol

        try:
            resolve_protocol(source, protocol)
        except ValueError as error:
            raise HttpModelError(str(error)) from None
        options = HttpOptions(url=source, protocol=protocol, headers=tuple((headers or {}).items()),
                              timeout=timeout, classes=tuple(classes) if classes else None,
                              max_answer_bytes=max_answer_bytes or MAX_ANSWER_BYTES)
        return load_predictor(options.display_url, http=options).predictor
    return load_predictor(source, learn=learn, trust=trust).predictor


def _task(model: Any, loss: Loss | None) -> bool:
    """True for classification: what the model says, else what the loss implies."""
    from ipfi_cli.run.labels import declared_task

    task = declared_task(getattr(model, "model", model))
    if task is not None:
        return task != "regression"
    if loss is not None:
        return loss.output is not Output.VALUE
    return bool(as_predictor(model).is_classifier)


def _default_loss(model: Any, loss: str | Loss | None) -> Loss:
    """The loss to use, checked against the model before the first row (the command line's check)."""
    from ipfi_cli.errors import ModelError
    from ipfi_cli.run.labels import LossFitError, check_loss, declared_task

    chosen = get_loss(loss) if loss is not None else None
    predictor = as_predictor(model)
    if chosen is not None and chosen.relative and not isinstance(loss, Loss):
        # "prediction-shift": needs no label, and its form depends on the model's output
        from ipfi_cli.core.losses import prediction_shift

        return prediction_shift(bool(predictor.is_classifier), predictor.classes, bool(predictor.has_proba))
    classification = _task(model, chosen)
    chosen = chosen or default_loss(classification)
    try:
        classes = predictor.classes if classification else None
        has_proba = bool(predictor.has_proba) if chosen.output is Output.PROBA else False
        check_loss(chosen, classification, declared_task(getattr(model, "model", model)), classes, has_proba)
    except LossFitError as error:
        raise ModelError(str(error).replace("--loss", "loss=").replace("loss= ", "loss=").replace(
            "--task classification", "a classification loss")) from None
    return chosen


def _matcher(model: Any, loss: Loss, first_row: Mapping[str, Any] | None = None) -> Any:
    """The command line's label matcher for this model's classes (``None`` for regression). A model
    that does not list its classes (a served one) shows them in its answer on ``first_row``."""
    from ipfi_cli.run.labels import LabelMatcher, model_classes_from_answer

    if loss.output is Output.VALUE:
        return None
    predictor = as_predictor(model)
    classes = getattr(predictor, "classes", None)
    if classes:
        return LabelMatcher(classification=True, classes=classes, fixed=not predictor.can_learn)
    if first_row is None or predictor.can_learn:
        return None
    answered = model_classes_from_answer(predictor, dict(first_row))
    return LabelMatcher(classification=True, classes=answered, fixed=False) if answered else None


def _matched(matcher: Any, y: Sequence[Any]) -> list[Any]:
    """``y`` as the model's own class values; labels none of which it has raise :class:`ModelError`."""
    from ipfi_cli.errors import ModelError
    from ipfi_cli.run.checks import labels_match_nothing

    if matcher is None:
        return list(y)
    labels = [matcher(v) for v in y]
    if matcher.none_matched:
        raise ModelError(labels_match_nothing(matcher))
    return labels


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
    smoothing : {"exponential", "mean"}, default="exponential"
        ``"mean"`` weighs every row alike (for a fixed model: converges to :func:`batch_pfi`;
        ``alpha`` is then unused).
    removal : {"marginal", "conditional", "both"}, default="marginal"
        ``"conditional"`` draws a removed feature given the row's other features (is the
        feature replaceable by the others?); numeric features only. ``"both"``: per feature
        ``f`` the estimates ``f``, ``f_conditional`` and their gap ``f_gap``.
    conditional_sampler : {"gaussian", "tree"}, default="gaussian"
        The conditional sampler: running Gaussian fit, or a river tree per feature.
    bounds_method : {"chebyshev", "normal", "realisations"}, default="chebyshev"
        How :meth:`bounds` computes half-widths (see :mod:`ipfi_cli.core.bounds`): the
        paper's Chebyshev bound, a normal interval, or the calibrated ``realisations``
        (counts reservoir rows reused across steps; needs ``n_repeats >= 2``).

    Attributes
    ----------
    importances : dict of str to float
        The current estimate per feature or group (NaN before the second row).
    removal_fit : dict of str to float
        With conditional removal: the sampler's rolling R^2 per column (near 0: the
        conditional draw is no better than a marginal one).
    n_explained : int
        Rows explained so far (the first row only fills the reservoir).
    """

    def __init__(self, model: Any, columns: Sequence[str] | None = None, *, loss: str | Loss | None = None,
                 alpha: float = 0.001, n_repeats: int = 10, sampling: str = "geometric",
                 reservoir_size: int = 100, features: Sequence[str] | None = None,
                 groups: Mapping[str, Sequence[str]] | None = None, seed: int | None = None,
                 smoothing: str = "exponential", removal: str = "marginal",
                 conditional_sampler: str = "gaussian", bounds_method: str = "chebyshev") -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.model = model
        self.loss = _default_loss(model, loss)
        self.options: dict[str, Any] = {"alpha": alpha, "n_repeats": n_repeats, "sampling": sampling,
                        "reservoir_size": reservoir_size, "features": features, "groups": groups, "seed": seed,
                        "smoothing": smoothing, "removal": removal, "conditional_sampler": conditional_sampler,
                        "bounds_method": bounds_method}
        self.columns = list(columns) if columns is not None else _columns_of(model)
        self._labels = _matcher(model, self.loss)
        self._checked = False
        self._core: core_incremental.IPFIEstimator | None = None
        if self.columns is not None:
            self._start(self.columns)

    def _start(self, columns: Sequence[str]) -> core_incremental.IPFIEstimator:
        self.columns = [str(c) for c in columns]
        self._core = _build("pfi", self.model, self.columns, self.loss, self.options)
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
        if self._labels is None and core.n_seen == 0:  # a served model shows its classes' spelling
            self._labels = _matcher(self.model, self.loss, {c: x[c] for c in core.columns if c in x})
        label = self._labels(y) if self._labels is not None else y
        estimates = core.explain_one(x, label)
        if core.n_explained and not np.isfinite(estimates).all():
            from ipfi_cli.core.losses import unmeasurable
            from ipfi_cli.errors import ModelError

            raise ModelError(unmeasurable(self.loss, float("inf"), core.n_explained) or "not finite")
        if not self._checked and core.n_explained >= _CHECK_ROWS * (8 if as_predictor(self.model).can_learn else 1):
            self._checked = True
            self.check()
        return dict(zip(core.names, estimates.tolist()))

    def check(self) -> None:
        """Raise :class:`~ipfi_cli.errors.ModelError` (the command line's line) when the rows so far
        cannot give an importance: no label was one of the model's classes, or every explained row
        had the loss's maximum. :meth:`explain_one` checks once by itself, after 25 explained rows
        (200 for a model that learns, which starts out wrong); call it at the end of a short stream."""
        from ipfi_cli.core.losses import unmeasurable
        from ipfi_cli.errors import ModelError
        from ipfi_cli.run.checks import labels_match_nothing

        if self._labels is not None and self._labels.none_matched:
            raise ModelError(labels_match_nothing(self._labels))
        if self._core is not None:
            why = unmeasurable(self.loss, self._core.mean_loss, self._core.n_explained)
            if why is not None:
                raise ModelError(why.replace("check --target and ", "check "))

    @property
    def explainer(self) -> core_incremental.IPFIEstimator | None:
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
        """Confidence half-widths at level ``1 - delta`` by ``bounds_method`` (each method's
        assumptions: :mod:`ipfi_cli.core.bounds`)."""
        return self._core.bounds(delta) if self._core is not None else {}

    @property
    def removal_fit(self) -> dict[str, float]:
        return self._core.removal_fit if self._core is not None else {}


def _build(method: str, model: Any, columns: list[str], loss: Loss, options: dict[str, Any]) -> Any:
    """The core explainer of ``method`` from the registry (``removal="both"``: two side by side)."""
    from ipfi_cli.core.explainer import make_explainer

    return make_explainer(method, as_predictor(model), columns, loss=loss, **options)


def _first_record(rows: Any, names: Sequence[str]) -> dict[str, Any] | None:
    """The table's first row as ``{column: value}`` (``None`` for an empty table)."""
    if len(rows) == 0:
        return None
    if hasattr(rows, "iloc"):
        return {c: rows.iloc[0][c] for c in names}
    first = rows[0]
    return {c: first[c] for c in names} if isinstance(first, Mapping) else dict(zip(names, list(first)))


#: explained rows after which :meth:`IncrementalPFI.explain_one` checks that the answers can be right
_CHECK_ROWS = 25


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

    return Bunch(importances_mean=result.values.mean(axis=1), importances_std=np.asarray(result.std),
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
    rows, names = _table(X, columns, model)
    chosen = _default_loss(model, loss)
    labels = _matched(_matcher(model, chosen, _first_record(rows, names)), y)
    result = core_batch.batch_pfi(as_predictor(model), rows, labels, names, loss=chosen,
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
        self._core = core_batch.IntervalPFIEstimator(as_predictor(model), [str(c) for c in columns], interval,
                                            loss=_default_loss(model, loss), n_repeats=n_repeats,
                                            features=features, groups=groups, seed=seed, n_jobs=n_jobs)

    def update(self, x: Mapping[str, Any], y: Any) -> Any:
        """Add a row; returns the window's result (as :func:`batch_pfi`) when it is full, else ``None``."""
        result = self._core.update(x, y)
        return None if result is None else _bunch(result)


class IncrementalSAGE(IncrementalPFI):
    """Incremental SAGE (iSAGE): the Shapley values of the loss game, on a stream.

    Per row, ``n_repeats`` random orderings of the features; along each, features are added
    one by one (the absent ones imputed from earlier rows, or drawn given the present ones)
    and each is credited with the loss decrease its arrival brings, folded into a smoothed
    mean like iPFI's. The values add up to :attr:`explained_loss`, the loss of the smoothed
    marginal prediction minus the model's: how much the model explains at all. See
    :mod:`ipfi_cli.core.sage` for the game and where it differs from Covert's batch SAGE.

    Parameters
    ----------
    model, columns, alpha, sampling, reservoir_size, seed, smoothing
        As in :class:`IncrementalPFI`.
    loss : {"zero-one", "absolute", "squared"}, default=None
        ``None``: zero-one for a classifier, absolute error otherwise (the log loss gives no
        marginal prediction).
    n_repeats : int, default=1
        Orderings per row (iXAI: 1).
    n_inner : int, default=1
        Imputations per coalition, their predictions averaged (labels: the most frequent).
    groups : dict of str to list of str, default=None
        Columns that enter together. Every column takes part (no ``features``).
    removal : {"marginal", "conditional", "both"}, default="marginal"
        ``"conditional"`` uses the Gaussian sampler (SAGE removes whole coalitions); ``"both"``
        as for :class:`IncrementalPFI`.

    Attributes
    ----------
    importances : dict of str to float
        The current SAGE value per feature or group.
    explained_loss, marginal_loss, model_loss : float
        The smoothed losses without features, with all, and their difference.

    Examples
    --------
    >>> import numpy as np
    >>> from ipfi_cli import IncrementalSAGE
    >>> X = np.random.default_rng(0).normal(size=(3000, 2))
    >>> explainer = IncrementalSAGE(lambda B: 2 * B[:, 0], ["a", "b"], loss="squared", n_inner=20,
    ...                             smoothing="mean", seed=0)
    >>> for x, target in zip(X.tolist(), (2 * X[:, 0]).tolist()):
    ...     values = explainer.explain_one({"a": x[0], "b": x[1]}, target)
    >>> round(explainer.explained_loss, 1), round(values["a"], 1)   # 4 * Var(a) = 4, all to "a"
    (4.0, 4.0)
    """

    def __init__(self, model: Any, columns: Sequence[str] | None = None, *, loss: str | Loss | None = None,
                 alpha: float = 0.001, n_repeats: int = 1, n_inner: int = 1, sampling: str = "geometric",
                 reservoir_size: int = 100, groups: Mapping[str, Sequence[str]] | None = None,
                 seed: int | None = None, smoothing: str = "exponential", removal: str = "marginal") -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.model = model
        self.loss = _default_loss(model, loss)
        self.options = {"alpha": alpha, "n_repeats": n_repeats, "n_inner": n_inner, "sampling": sampling,
                        "reservoir_size": reservoir_size, "groups": groups, "seed": seed, "smoothing": smoothing,
                        "removal": removal}
        self.columns = list(columns) if columns is not None else _columns_of(model)
        self._labels = _matcher(model, self.loss)  # labels matched and refused as for PFI
        self._checked = False
        self._core = None
        if self.columns is not None:
            self._start(self.columns)

    def _start(self, columns: Sequence[str]) -> core_incremental.IPFIEstimator:
        self.columns = [str(c) for c in columns]
        self._core = _build("sage", self.model, self.columns, self.loss, self.options)
        return self._core

    def _sage(self, name: str) -> float:
        return float(getattr(self._core, name)) if self._core is not None else float("nan")

    @property
    def explained_loss(self) -> float:
        return self._sage("explained_loss")

    @property
    def marginal_loss(self) -> float:
        return self._sage("marginal_loss")

    @property
    def model_loss(self) -> float:
        return self._sage("model_loss")


def batch_sage(model: Any, X: Any, y: Sequence[Any], *, columns: Sequence[str] | None = None,
               loss: str | Loss | None = None, n_permutations: int = 2000, background: Any = None,
               n_inner: int | None = None, groups: Mapping[str, Sequence[str]] | None = None,
               seed: int | None = None) -> Any:
    """SAGE values of a fixed model on a table, by the permutation estimator (Covert et al.).

    Parameters
    ----------
    model, X, y, columns, groups, seed
        As in :func:`batch_pfi`.
    loss : {"zero-one", "absolute", "squared"}, default=None
    n_permutations : int, default=2000
        Sampled (row, ordering) pairs.
    background : array-like, default=None
        Rows absent features are drawn from (default: ``X``; keep it small, a few hundred).
    n_inner : int, default=None
        ``None``: every background row, predictions averaged (sage-importance's
        ``MarginalImputer``); ``k``: ``k`` random background rows per coalition (the game
        :class:`IncrementalSAGE` estimates with ``n_inner=k``).

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
    result = core_batch_sage(as_predictor(model), rows, list(y), names, loss=_default_loss(model, loss),
                             n_permutations=n_permutations, background=background, n_inner=n_inner,
                             groups=groups, seed=seed)
    return Bunch(importances_mean=result.values, std_errors=result.std_errors, feature_names=list(result.names),
                 explained_loss=result.explained_loss, marginal_loss=result.marginal_loss,
                 model_loss=result.model_loss, n_permutations=result.n_permutations)


class IncrementalPDP:
    """Incremental partial dependence (iPDP): a PD curve per chosen feature, on a stream.

    Per row, the model is evaluated with the feature set to each grid value, and each grid
    point's value is folded into a smoothed mean. The grid spans streaming quantiles of the
    feature. No target needed: a curve's spread (:attr:`spreads`) is a label-free signal of
    change. See :mod:`ipfi_cli.core.pdp`.

    Parameters
    ----------
    model : scikit-learn estimator or pipeline, river model, or callable
    columns : list of str
        The model's inputs in order (``None``: its ``feature_names_in_``).
    features : list of str
        The numeric columns whose curves are tracked.
    grid_size : int, default=10
    quantiles : (float, float), default=(0.05, 0.95)
    grid : dict of str to list of float, default=None
        Fixed grids (all of one length).
    alpha : float, default=0.001
    smoothing : {"exponential", "mean"}, default="exponential"
    warm_up : int, default=20
        Rows that only feed the quantiles.
    target_class : default=None
        For a classifier: the curve is the probability of this class.

    Examples
    --------
    >>> import numpy as np
    >>> from ipfi_cli import IncrementalPDP
    >>> pdp = IncrementalPDP(lambda B: B[:, 0] ** 2, ["a", "b"], ["a"], grid={"a": [0.0, 1.0, 2.0]})
    >>> for x in np.random.default_rng(0).normal(size=(100, 2)).tolist():
    ...     curves = pdp.explain_one({"a": x[0], "b": x[1]})
    >>> curves["a"][1].round(2).tolist()
    [0.0, 1.0, 4.0]
    """

    def __init__(self, model: Any, columns: Sequence[str] | None, features: Sequence[str], *,
                 grid_size: int = 10, quantiles: tuple[float, float] = (0.05, 0.95),
                 grid: Mapping[str, Sequence[float]] | None = None, alpha: float = 0.001,
                 smoothing: str = "exponential", warm_up: int = 20, target_class: Any = None) -> None:
        from ipfi_cli.core.pdp import IPDPEstimator as CorePDP

        names = list(columns) if columns is not None else _columns_of(model)
        if names is None:
            raise ValueError("give columns=: the model does not name its inputs")
        self._core = CorePDP(as_predictor(model), names, features, grid_size=grid_size, quantiles=quantiles,
                             grid=grid, alpha=alpha, smoothing=smoothing, warm_up=warm_up,
                             target_class=target_class)

    def explain_one(self, x: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Fold one row in; returns per feature ``(grid values, PD values)``."""
        return self._core.explain_one(x)

    @property
    def curves(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return self._core.curves

    @property
    def spreads(self) -> dict[str, float]:
        return self._core.spreads
