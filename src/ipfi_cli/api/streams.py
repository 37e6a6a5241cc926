"""The streaming importance explainer of the Python API: :class:`IncrementalPFI`, one row at a
time, river style (SAGE: :mod:`ipfi_cli.api.sage`; partial dependence: :mod:`ipfi_cli.api.pdp`)."""

from __future__ import annotations

import copy
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, cast

import numpy as np

from ipfi_cli.api._shared import (
    _api_text,
    _check_columns,
    _columns_of,
    _default_loss,
    _located,
    _matcher,
    _native_label,
    _predictor,
)
from ipfi_cli.core import incremental as core_incremental
from ipfi_cli.core.explainer import make_explainer
from ipfi_cli.core.losses import Loss, unmeasurable
from ipfi_cli.core.paired import BothRemovals
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import as_predictor
from ipfi_cli.run.checks import labels_match_nothing

#: explained rows after which :meth:`IncrementalPFI.explain_one` checks that the answers can be right
_CHECK_ROWS = 25
#: rows per call of the core's explain_many in :meth:`IncrementalPFI.explain_many`
_MANY_ROWS = 1000


class _RowByRow(Exception):
    """A row :meth:`IncrementalPFI.explain_many` leaves to :meth:`IncrementalPFI.explain_one`."""


def _check_seed(seed: Any) -> None:
    """One integer seed (or ``None``): every random stream of a run is spawned from it, so a
    run is repeated from that number alone."""
    import numbers

    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, numbers.Integral)):
        raise TypeError(f"seed must be an int or None, got {type(seed).__name__}: ipfi spawns every random "
                        "stream of the explainer from one integer, so the same number repeats the run")


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
                 alpha: float = DEFAULT_ALPHA, n_repeats: int = 10, sampling: str = "geometric",
                 reservoir_size: int = 100, features: Sequence[str] | None = None,
                 groups: Mapping[str, Sequence[str]] | None = None, seed: int | None = None,
                 smoothing: str = "exponential", removal: str = "marginal",
                 conditional_sampler: str = "gaussian", bounds_method: str = "chebyshev") -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        _check_seed(seed)
        self.model = model
        self._given = {"columns": columns, "loss": loss}  # as passed, for get_params
        self.loss = _default_loss(model, loss)
        self.options: dict[str, Any] = {"alpha": alpha, "n_repeats": n_repeats, "sampling": sampling,
                        "reservoir_size": reservoir_size, "features": features, "groups": groups, "seed": seed,
                        "smoothing": smoothing, "removal": removal, "conditional_sampler": conditional_sampler,
                        "bounds_method": bounds_method}
        _check_columns(model, columns)
        self.columns = list(columns) if columns is not None else _columns_of(model)
        self._init_stream()
        if self.columns is not None:
            self._start(self.columns)
        else:
            self._check_settings()

    #: the core explainer's name in :func:`ipfi_cli.core.explainer.make_explainer`'s registry
    _method = "pfi"

    def get_params(self, deep: bool = False) -> dict[str, Any]:
        """The constructor's arguments, as given (scikit-learn's convention).

        >>> IncrementalPFI(lambda X: X[:, 0], ["a", "b"], loss="squared", seed=0).get_params()["seed"]
        0
        """
        return {"model": self.model, **self._given, **self.options}

    def __repr__(self) -> str:
        """The class and the arguments that differ from their defaults, as scikit-learn shows them.

        >>> IncrementalPFI(lambda X: X[:, 0], ["a", "b"], loss="squared", alpha=0.01, seed=0)
        IncrementalPFI(<function <lambda>>, columns=['a', 'b'], loss='squared', alpha=0.01, seed=0)
        """
        import inspect

        defaults = {name: p.default for name, p in inspect.signature(type(self).__init__).parameters.items()
                    if p.default is not inspect.Parameter.empty}
        shown = [f"{name}={value!r}" for name, value in self.get_params().items()
                 if name != "model" and name in defaults and value is not defaults[name] and value != defaults[name]]
        model = self.model
        name = f"<function {model.__name__}>" if inspect.isfunction(model) else repr(model)
        return f"{type(self).__name__}({', '.join([name, *shown])})"

    def _init_stream(self) -> None:
        self._labels = _matcher(self.model, self.loss)
        self._checked = False
        self._core: Any = None
        self._rows = 0  # explain_one calls: the row number errors name
        self._keys: dict[str, Any] | None = None  # text name -> the rows' own key, when the keys are not text
        self._inferred = False  # the columns are the first row's keys
        self._warned_keys: set[str] = set()

    def _check_settings(self) -> None:
        """Settings refused now, not at the first row, when the columns come with it: an explainer
        of one placeholder column is built and dropped (``features`` and ``groups`` wait for the
        columns)."""
        options = {**self.options, "features": None, "groups": None}
        _build(self._method, self.model, ["_"], self.loss, options)

    def _start(self, columns: Sequence[Any], *, inferred: bool = False) -> Any:
        from ipfi_cli.models.introspect import learned_features, unseen_inputs

        keys = list(columns)
        if any(not isinstance(c, str) for c in keys):  # river's iter_array and synth streams: int keys
            self._keys = {str(c): c for c in keys}
        if unseen_inputs(self.model, keys) is not None:
            learned = sorted(learned_features(self.model), key=str)
            shown = ", ".join(map(repr, learned[:6])) + (", ..." if len(learned) > 6 else "")
            rows = ", ".join(map(repr, keys[:6])) + (", ..." if len(keys) > 6 else "")
            raise ModelError(f"the river model learned the features {shown}, and none of them is a key of the rows "
                             f"({rows}): every importance would be 0; explain rows keyed as the model learned them")
        expected = getattr(as_predictor(self.model), "n_features", None)
        if expected is not None and expected != len(keys):
            shown = ", ".join(map(str, keys[:6])) + (", ..." if len(keys) > 6 else "")
            raise ModelError(f"the model was fitted on {expected} unnamed features and takes them by position, but "
                             f"the rows have {len(keys)}: {shown} (pass columns= in the order it was fitted on)")
        self.columns = [str(c) for c in keys]
        self._inferred = inferred
        self._core = _build(self._method, self.model, self.columns, self.loss, self.options, self._keys)
        return self._core

    def _adopt_keys(self, core: Any, x: Mapping[Any, Any]) -> Any:
        """Columns from a state are text; rows keyed by ints (river's synth streams) then get the
        model's predictor that renames them back, and the state carries over."""
        keys = {str(key): key for key in x}
        if not set(core.columns) <= set(keys):
            return core
        self._keys = {name: keys[name] for name in core.columns}
        state = core.state_dict()
        self._core = _build(self._method, self.model, self.columns or [], self.loss, self.options, self._keys)
        self._core.load_state_dict(state)
        return self._core

    def _named(self, values: dict[str, Any]) -> dict[Any, Any]:
        """``values`` keyed as the rows are (their int keys, when they had them)."""
        keys = self._keys
        return values if keys is None else {keys.get(name, name): v for name, v in values.items()}

    @staticmethod
    def _check_row(x: Any) -> None:
        if not hasattr(x, "keys"):
            raise TypeError(f"x must be a dict of column -> value (a row, river style), got {type(x).__name__}; "
                            "a table goes to batch_pfi")

    def _warn_late_keys(self, x: Mapping[str, Any], row: int, stacklevel: int = 3) -> None:
        """A key the first row lacked: the model never gets it (the columns are the first row's keys)."""
        columns = self.columns or []
        if len(self._warned_keys) >= 3 or len(x) <= len(columns):
            return
        known = set(columns)
        for key in x:
            if key not in known and key not in self._warned_keys:
                self._warned_keys.add(key)
                warnings.warn(f"row {row} has the key {key!r}, which the first row lacks, so the model "
                              "does not get it (the columns are the first row's keys): pass columns= to name "
                              "the model's inputs", UserWarning, stacklevel=stacklevel)
                return

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
        self._rows += 1
        self._check_row(x)
        core = self._core if self._core is not None else self._start(list(x.keys()), inferred=True)
        if self._keys is None and not all(isinstance(k, str) for k in x):
            core = self._adopt_keys(core, x)
        if self._keys is not None:
            x = {str(k): v for k, v in x.items()}
        if self._inferred:
            self._warn_late_keys(x, self._rows)
        if core.n_seen == 0 and (self._labels is None or self._labels.classes is None):
            # a river model or a served one shows its classes' spelling on the first row
            first = {c: x[c] for c in core.columns if c in x}
            self._labels = _matcher(self.model, self.loss, first if self._keys is None else self._named(first))
        with _located(self._rows):
            label = self._labels(_native_label(y)) if self._labels is not None else y
            if core.n_seen == 0:
                self._check_first_row(core, x, label)
            estimates = core.explain_one(x, label)
        if core.n_explained and not np.isfinite(estimates).all():
            from ipfi_cli.errors import ModelError

            raise ModelError(unmeasurable(self.loss, float("inf"), core.n_explained) or "not finite")
        if not self._checked and core.n_explained >= self._check_rows():
            self._checked = True
            self.check()
        return self._named(dict(zip(core.names, estimates.tolist())))

    def explain_many(self, X: Any, y: Any) -> list[dict[str, float]]:
        """Explain consecutive rows with the model as it is now: what :meth:`explain_one` gives
        row by row, to the bit (the same checks, warnings and errors, an error naming its row), with
        the model asked once for many rows where it can be (a scikit-learn model: a few ``predict``
        calls instead of one per row and draw). After a row whose estimates are not finite (the
        error), the explainer holds the rest of its batch of rows too.

        Parameters
        ----------
        X : pandas DataFrame, sequence of dicts, or 2-D array
            The rows; an array's columns are the explainer's ``columns``, in order.
        y : sequence, array or pandas Series
            Their labels or targets, one per row.

        Returns
        -------
        importances : list of dict of str to float
            The estimates after each row.

        >>> from sklearn.linear_model import LinearRegression
        >>> model = LinearRegression().fit([[0.0, 0.0], [1.0, 0.0], [0.0, 1.0]], [0.0, 2.0, 0.0])
        >>> rows = [{"a": float(i % 3), "b": float(i % 2)} for i in range(50)]
        >>> trace = IncrementalPFI(model, seed=0).explain_many(rows, [2.0 * (i % 3) for i in range(50)])
        >>> len(trace), round(trace[-1]["a"], 2), abs(trace[-1]["b"]) < 1e-12
        (50, 1.81, True)
        """
        rows = self._rows_of(X)
        labels = y.tolist() if hasattr(y, "tolist") else list(y)
        if len(labels) != len(rows):
            raise ValueError(f"X has {len(rows)} rows and y {len(labels)} labels: give one label per row")
        out: list[dict[str, float]] = []
        begin = 0
        while begin < len(rows):
            core = self._core
            if core is None or core.n_seen == 0:  # the stream's first row: stored and checked, row by row
                out.append(self.explain_one(rows[begin], labels[begin]))
                begin += 1
                continue
            end = min(len(rows), begin + _MANY_ROWS)
            if not self._checked:  # the check comes after the row that reaches its count, as explain_one's
                end = min(end, begin + max(1, self._check_rows() - core.n_explained))
            out += self._explain_part(core, rows[begin:end], labels[begin:end])
            begin = end
        return out

    def _check_rows(self) -> int:
        return _CHECK_ROWS * (8 if as_predictor(self.model).can_learn else 1)

    def _explain_part(self, core: Any, rows: list[Mapping[str, Any]], labels: list[Any]) -> list[dict[str, float]]:
        """Rows after the stream's first in one call of the core's ``explain_many`` (the model asked
        once for all of them where it can be), with :meth:`explain_one`'s numbers, checks and errors.
        Anything wrong goes row by row: the core's call changes nothing when it fails, and the rows'
        label counts and numbers are put back first."""
        from ipfi_cli.errors import ModelError

        start, matcher = self._rows, copy.deepcopy(self._labels)
        inputs, targets = [], []
        try:
            for x, y in zip(rows, labels):
                self._rows += 1
                self._check_row(x)
                if self._keys is None and not all(isinstance(k, str) for k in x):
                    raise _RowByRow  # keys to adopt: explain_one's path
                inputs.append({str(k): v for k, v in x.items()} if self._keys is not None else x)
                with _located(self._rows):
                    targets.append(self._labels(_native_label(y)) if self._labels is not None else y)
            explained = core.n_explained
            estimates = core.explain_many(inputs, targets)
        except Exception:  # noqa: BLE001 - explain_one raises it again, at its row
            self._rows, self._labels = start, matcher
            return [self.explain_one(x, y) for x, y in zip(rows, labels)]
        for t, row in enumerate(estimates):
            if self._inferred:
                self._warn_late_keys(inputs[t], start + t + 1, stacklevel=4)
            if not np.isfinite(row).all():  # as explain_one: the error names no row
                from ipfi_cli.core.losses import unmeasurable

                self._rows = start + t + 1
                raise ModelError(unmeasurable(self.loss, float("inf"), explained + t + 1) or "not finite")
        if not self._checked and core.n_explained >= self._check_rows():
            self._checked = True
            self.check()
        return [self._named(dict(zip(core.names, row))) for row in estimates.tolist()]

    def _rows_of(self, X: Any) -> list[Mapping[str, Any]]:
        """``X``'s rows as dicts: a DataFrame's records, an array's rows under ``columns``."""
        if hasattr(X, "to_dict") and hasattr(X, "columns"):  # a pandas DataFrame
            return cast(list[Mapping[str, Any]], X.to_dict("records"))
        if isinstance(X, np.ndarray):
            if X.ndim != 2:
                raise ValueError(f"X must be 2-D (rows, columns), got an array of shape {X.shape}")
            if self.columns is None or len(self.columns) != X.shape[1]:
                raise ValueError(f"X has {X.shape[1]} columns: pass the model's columns= to name them"
                                 if self.columns is None else
                                 f"X has {X.shape[1]} columns and the explainer {len(self.columns)}: "
                                 f"{', '.join(map(str, self.columns))}")
            return [dict(zip(self.columns, row)) for row in X.tolist()]
        return list(X)

    def _check_first_row(self, core: Any, x: Mapping[str, Any], label: Any) -> None:
        """The stream's first row is only stored, and later rows draw values from it: the model
        must take it, or every later row would fail on its values and be blamed for them."""
        from ipfi_cli.errors import ModelCallError, ModelError, first_line
        from ipfi_cli.run.failures import guess_column

        model = getattr(core, "model", None)
        if model is None:
            return
        row = {c: x[c] for c in core.columns if c in x}
        try:
            model.predict_records([row], core.loss.output, label)
        except ModelCallError as error:
            cause = f"{type(error.cause).__name__}: {first_line(error.cause)}"
            guess = guess_column(row, core.columns, first_line(error.cause))
            where = f"row {self._rows}" + (f", column {guess[0]!r}: {guess[1]}" if guess else
                                           ": the model failed on this row")
            raise ModelError(f"{where} ({cause}); the first row is kept to draw values from for later "
                             "rows, so the model must take it") from error.cause

    def check(self) -> None:
        """Raise :class:`~ipfi_cli.errors.ModelError` (the command line's line) when the rows so far
        cannot give an importance: no label was one of the model's classes, or every explained row
        had the loss's maximum. :meth:`explain_one` checks once by itself, after 25 explained rows
        (200 for a model that learns, which starts out wrong); call it at the end of a short stream."""
        from ipfi_cli.core.losses import unmeasurable
        from ipfi_cli.errors import ModelError

        if self._labels is not None and self._labels.none_matched:
            raise ModelError(_api_text(labels_match_nothing(self._labels)))
        if self._core is not None:
            why = unmeasurable(self.loss, self._core.mean_loss, self._core.n_explained)
            if why is not None:
                raise ModelError(_api_text(why))

    @property
    def explainer(self) -> core_incremental.IPFIEstimator | BothRemovals | None:
        """The core explainer (arrays in ``names`` order; the
        :class:`~ipfi_cli.core.explainer.Explainer` protocol), ``None`` before the first row."""
        # what make_explainer built: iPFI's (or iSAGE's) estimator, or both removals side by side (removal="both")
        return cast("core_incremental.IPFIEstimator | BothRemovals | None", self._core)

    @property
    def importances(self) -> dict[str, float]:
        return self._named(self._core.importances) if self._core is not None else {}

    @property
    def last_contribution(self) -> dict[str, float]:
        """The last explained row's contribution per feature: the loss increase averaged over the
        ``n_repeats`` draws, the value folded into each estimate (empty before the first row)."""
        if self._core is None:
            return {}
        return self._named(dict(zip(self._core.names, np.asarray(self._core.last_contribution).tolist())))

    def state_dict(self) -> dict[str, Any]:
        """What the explainer has learned, as plain data (loading it runs no code); see
        :meth:`load_state_dict`."""
        if self._core is None:
            raise ValueError("nothing explained yet: the state starts with the first row")
        return cast(dict[str, Any], self._core.state_dict())

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data, in this process or another; the settings must
        be this explainer's (a :class:`ValueError` names the first that differs). Without
        ``columns`` the state's are taken (int keys, as river's synthetic streams have, are found
        from the model, or from the next row)."""
        if self._core is None:
            columns = state.get("settings", {}).get("columns")
            if not columns:
                raise ValueError("the state names no columns: pass columns=")
            # the state spells keys as text; a river model that learned int keys names them
            from ipfi_cli.models.introspect import learned_features

            native = {str(k): k for k in learned_features(self.model) if not isinstance(k, str)}
            self._start([native.get(c, c) for c in columns])
        self._core.load_state_dict(state)

    @property
    def n_explained(self) -> int:
        return self._core.n_explained if self._core is not None else 0

    def bounds(self, delta: float = 0.05) -> dict[str, float]:
        """Confidence half-widths at level ``1 - delta`` by ``bounds_method`` (each method's
        assumptions: :mod:`ipfi_cli.core.bounds`)."""
        return self._named(self._core.bounds(delta)) if self._core is not None else {}

    @property
    def removal_fit(self) -> dict[str, float]:
        return self._named(self._core.removal_fit) if self._core is not None else {}


def _build(method: str, model: Any, columns: list[str], loss: Loss, options: dict[str, Any],
           keys: dict[str, Any] | None = None) -> Any:
    """The core explainer of ``method`` from the registry (``removal="both"``: two side by side)."""
    return make_explainer(method, _predictor(model, keys), columns, loss=loss, **options)
