"""Incremental partial dependence (iPDP, Muschalik et al. 2023): PD curves on a stream.

For each new row ``x`` and each chosen feature ``j``, the model is evaluated on ``x`` with
``x_j`` set to each of ``grid_size`` grid values (the row's ICE curve); each grid point's
value is folded into an exponentially weighted (or running) mean, like iPFI's estimates.

The grid does not move once curves are folded in: every value is then the partial
dependence at its grid value, exactly: the weighted mean, over the rows after the warm-up,
of the model's prediction with ``x_j`` set to that value (scikit-learn's brute-force
``partial_dependence`` on those rows with ``sample_weight`` the smoothing's weights). A
feature's grid is either given (``grid``) or spans the quantiles (by default 5 % and 95 %,
as scikit-learn's ``partial_dependence`` and iPDP use; numpy's linear interpolation) of the
feature's values in the warm-up rows, set when the warm-up ends. iPDP's reference code
instead moves the grid with the quantiles of a reservoir and smooths the grid positions too:
a point's value is then a mean of predictions at positions that moved, the partial
dependence at the smoothed position only for a model linear in the feature. A grid set from
a short warm-up is where the curve is looked at, not a bias: a longer ``warm_up`` gives a grid
nearer the stream's quantiles.

The spread of a curve (the variance of its points around their mean) is iPDP's label-free
importance: it needs no target, so a change in it signals a change in the model without
labels.

Cost per row: ``grid_size`` evaluations per feature, in one model call for a batch
predictor; :meth:`IPDPEstimator.explain_many` puts many rows in one call.

>>> import numpy as np
>>> from ipfi_cli.models import FunctionPredictor
>>> pdp = IPDPEstimator(FunctionPredictor(lambda X: X[:, 0] ** 2 + X[:, 1]), ["a", "b"], ["a"],
...                      grid={"a": [-1.0, 0.0, 1.0]}, smoothing="mean")
>>> X = np.random.default_rng(0).normal(size=(2000, 2))
>>> _ = pdp.explain_many(X)
>>> grid, curve = pdp.curves["a"]          # a^2 + the mean of b over the rows after the warm-up (-0.01)
>>> grid.tolist(), np.round(curve, 2).tolist()
([-1.0, 0.0, 1.0], [0.99, -0.01, 0.99])
"""

from __future__ import annotations

import copy
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.core.predictor import Predictor
from ipfi_cli.core.smoothing import make_smoother
from ipfi_cli.errors import InputError


class NonFiniteValue(InputError):
    """A row's value of a tracked feature is not finite. ``row``: the row's place in the call,
    from 1 (``offset``: from 0), which a caller that counts rows replaces by its own number."""

    def __init__(self, message: str, *, offset: int, column: str) -> None:
        super().__init__(message, row=offset + 1, column=column)
        self.offset = offset


def _value_rows(rows: Iterable[Mapping[str, Any]] | np.ndarray, columns: list[str]) -> np.ndarray:
    """The rows as one array: floats when every value is a number, else objects (text and missing
    values as they came, for a model whose own pipeline encodes or imputes them)."""
    if isinstance(rows, np.ndarray):
        return rows if rows.dtype == object else np.asarray(rows, dtype=np.float64)
    table = [[r[c] for c in columns] for r in rows]
    try:
        return np.array(table, dtype=np.float64).reshape(len(table), len(columns))
    except (TypeError, ValueError, OverflowError):
        block = np.empty((len(table), len(columns)), dtype=object)
        block[:, :] = table
        return block


class IPDPEstimator:
    """Anytime partial-dependence curves of chosen features of a model on a stream.

    Parameters
    ----------
    model
        A :class:`~ipfi_cli.core.predictor.Predictor`.
    columns
        All the model's input columns, in order.
    features
        The numeric columns whose curves are tracked. A missing value (NaN) of one is left out of the
        grid's quantiles and replaced by the grid values, as in scikit-learn's ``partial_dependence``;
        the other columns reach the model as they are (text and NaN too, for a pipeline that encodes
        or imputes them: rows given as an object array, or as records).
    grid_size
        Points per curve (iPDP: 10).
    quantiles
        A feature's grid spans these quantiles of its values in the warm-up rows.
    grid
        Given grid values per feature (the others' grids come from the warm-up rows); their
        length is then the grid size.
    alpha, smoothing
        As for iPFI: ``exponential`` with rate ``alpha``, or ``mean``.
    warm_up
        Rows that only set the grid (its quantiles) before the first curve point (iPDP: 20);
        at least 2 when a feature has no given grid.
    target_class
        For a classifier: the curve is the probability of this class (``None``: the
        predicted value, for a regressor).
    """

    def __init__(self, model: Predictor, columns: Sequence[str], features: Sequence[str], *,
                 grid_size: int = 10, quantiles: tuple[float, float] = (0.05, 0.95),
                 grid: Mapping[str, Sequence[float]] | None = None, alpha: float = DEFAULT_ALPHA,
                 smoothing: str = "exponential", warm_up: int = 20, target_class: Any = None) -> None:
        self.model = model
        self.columns = [str(c) for c in columns]
        self.features = [str(f) for f in features]
        unknown = [f for f in self.features if f not in self.columns]
        if unknown or not self.features:
            raise ValueError(f"features must be among the columns ({', '.join(self.columns)}); got "
                             f"{', '.join(unknown) or 'none'}")
        if grid_size < 2:
            raise ValueError(f"grid_size must be at least 2, got {grid_size}")
        low, high = quantiles
        if not 0.0 <= low < high <= 1.0:
            raise ValueError(f"quantiles must satisfy 0 <= low < high <= 1, got {quantiles}")
        fixed = {str(k): np.asarray(v, dtype=np.float64) for k, v in (grid or {}).items()}
        sizes = {len(v) for v in fixed.values()}
        if len(sizes) > 1 or any(name not in self.features for name in fixed):
            raise ValueError("fixed grids must be for chosen features and all of one length")
        self.grid_size = sizes.pop() if sizes else int(grid_size)
        self._fixed = fixed
        self._index = [self.columns.index(f) for f in self.features]
        self.quantiles = (float(low), float(high))
        self.warm_up = int(warm_up)
        if self.warm_up < 2 and any(f not in fixed for f in self.features):
            raise ValueError(f"a grid from quantiles needs a warm-up of at least 2 rows, got {self.warm_up}; give "
                             "the grid, or a longer warm-up")
        #: the warm-up rows' values of the features whose grid they set; ``None`` once it is set
        self._warm: list[np.ndarray] | None = None if len(fixed) == len(self.features) else []
        self.target_class = target_class
        self.output = Output.VALUE if target_class is None else Output.PROBA
        self._tracker = make_smoother(smoothing, alpha, len(self.features) * self.grid_size)
        self._grids = np.full((len(self.features), self.grid_size), np.nan)  # NaN: not set yet
        for i, name in enumerate(self.features):
            if name in fixed:
                self._grids[i] = fixed[name]
        self.n_seen = 0

    # -- results --------------------------------------------------------------------------
    @property
    def curves(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Per feature: ``(grid values, PD values)`` as they are now (NaN before the first point;
        a grid from the warm-up rows is NaN until the warm-up ends)."""
        values = np.asarray(self._tracker.mean, dtype=np.float64).reshape(len(self.features), self.grid_size)
        return {f: (self._grids[i].copy(), values[i].copy()) for i, f in enumerate(self.features)}

    @property
    def spreads(self) -> dict[str, float]:
        """Per feature, the variance of its curve's points around their mean (iPDP's importance)."""
        return {f: float(np.var(curve)) for f, (_, curve) in self.curves.items()}

    @property
    def n_explained(self) -> int:
        return self._tracker.count

    # -- updates --------------------------------------------------------------------------
    def explain_one(self, x: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Fold one row's ICE curves in (after the warm-up); returns :attr:`curves`."""
        self.explain_many([x])
        return self.curves

    def explain_many(self, rows: Iterable[Mapping[str, Any]] | np.ndarray, chunk: int = 512, *,
                     return_grids: bool = False) -> Any:
        """Fold consecutive rows in (a static model: their evaluations share model calls).

        Returns the curves after each row, shape ``(T, features, grid_size)`` (and, with
        ``return_grids``, the grids they stand on, same shape). A failing model call leaves the
        explainer as it was before this call.
        """
        value_rows = _value_rows(rows, self.columns)
        curve_values = self._curve_values(value_rows)
        bad = np.argwhere(np.isinf(curve_values))
        if len(bad):  # the grid's quantiles would be infinite, and every curve with them
            t, i = bad[0]
            raise NonFiniteValue(f"{curve_values[t, i]} is not a finite number; a curve's grid needs "
                                 "finite values", offset=int(t), column=self.features[int(i)])
        saved = copy.deepcopy((self._tracker, self._warm, self._grids, self.n_seen))
        out = np.empty((len(value_rows), len(self.features), self.grid_size))
        out_grids = np.empty_like(out)
        try:
            for start in range(0, len(value_rows), chunk):
                part = value_rows[start:start + chunk]
                blocks, steps, grids = [], [], []
                for t, row in enumerate(part):
                    self._update_grid(row)
                    self.n_seen += 1
                    if self.n_seen > self.warm_up:
                        blocks.append(self._block(row))
                        steps.append(t)
                    grids.append(self._grids.copy())
                width = len(self.features) * self.grid_size
                predictions = self._predict(np.concatenate(blocks)).reshape(len(blocks), width) if blocks \
                    else np.empty((0, width))
                done = 0
                for t in range(len(part)):
                    if done < len(steps) and steps[done] == t:
                        self._tracker.update(predictions[done])
                        done += 1
                    out[start + t] = np.asarray(self._tracker.mean).reshape(len(self.features), self.grid_size)
                    out_grids[start + t] = grids[t]
                self._grids = grids[-1]
        except Exception:
            self._tracker, self._warm, self._grids, self.n_seen = saved
            raise
        return (out, out_grids) if return_grids else out

    def _curve_values(self, value_rows: np.ndarray) -> np.ndarray:
        """The tracked features' values as floats (NaN: missing); :class:`NonFiniteValue` for text."""
        part = value_rows[:, self._index] if len(value_rows) else np.empty((0, len(self.features)))
        if part.dtype != object:
            return np.asarray(part, dtype=np.float64)
        out = np.empty(part.shape)
        for (t, i), value in np.ndenumerate(part):
            try:
                out[t, i] = float(value)
            except (TypeError, ValueError, OverflowError):
                raise NonFiniteValue(f"partial dependence needs numbers, got {str(value)[:40]!r}", offset=int(t),
                                     column=self.features[int(i)]) from None
        return out

    def _update_grid(self, row: np.ndarray) -> None:
        """Before the row is counted: a warm-up row's values are kept; the first row after the
        warm-up sets the grid from them, leaving missing values out as scikit-learn's
        ``partial_dependence`` does (and every later row leaves it as it is)."""
        if self._warm is None:
            return
        if self.n_seen < self.warm_up:
            self._warm.append(self._curve_values(row[None, :])[0])
            return
        values = np.array(self._warm).reshape(-1, len(self.features))
        for i, name in enumerate(self.features):
            if name not in self._fixed:
                known = values[:, i][~np.isnan(values[:, i])]
                if not len(known):
                    raise ValueError(f"every value of {name!r} in the {self.warm_up} warm-up row(s) is missing: "
                                     "no grid can be set from them; give its grid, or a longer warm-up")
                low, high = np.quantile(known, self.quantiles)
                self._grids[i] = np.linspace(float(low), float(high), self.grid_size)
        self._warm = None

    def _block(self, row: np.ndarray) -> np.ndarray:
        block = np.repeat(row[None, :], len(self.features) * self.grid_size, axis=0)
        for i, column in enumerate(self._index):
            block[i * self.grid_size:(i + 1) * self.grid_size, column] = self._grids[i]
        return block

    def _predict(self, block: np.ndarray) -> np.ndarray:
        targets = None
        if self.output is Output.PROBA:
            targets = np.empty(len(block), dtype=object)
            targets.fill(self.target_class)
        if getattr(self.model, "supports_batch", False):
            predicted = self.model.predict_block(block, self.columns, self.output, targets)
        else:
            records = [dict(zip(self.columns, r)) for r in block.tolist()]
            predicted = self.model.predict_records(records, self.output, self.target_class)
        return np.asarray(predicted, dtype=np.float64)
