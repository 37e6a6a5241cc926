"""Incremental partial dependence in the Python API: :class:`IncrementalPDP`, one row at a time."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.api._shared import _columns_of
from ipfi_cli.core.params import DEFAULT_ALPHA
from ipfi_cli.models.adapters import as_predictor


class IncrementalPDP:
    """Incremental partial dependence (iPDP): a PD curve per chosen feature, on a stream.

    Per row, the model is evaluated with the feature set to each grid value, and each grid
    point's value is folded into a smoothed mean. The grid spans quantiles of the feature in
    the warm-up rows and then stays, so each value is the partial dependence at its grid value
    over the rows after the warm-up, weighted as the smoothing weighs them. No target needed:
    a curve's spread (:attr:`spreads`) is a label-free signal of change. See :mod:`ipfi_cli.core.pdp`.

    Parameters
    ----------
    model : scikit-learn estimator or pipeline, river model, or callable
    columns : list of str
        The model's inputs in order (``None``: its ``feature_names_in_``).
    features : list of str
        The numeric columns whose curves are tracked.
    grid_size : int, default=10
    quantiles : (float, float), default=(0.05, 0.95)
        A feature's grid spans these quantiles of its values in the warm-up rows.
    grid : dict of str to list of float, default=None
        Given grids (all of one length), instead of ones from the warm-up rows.
    alpha : float, default=0.001
    smoothing : {"exponential", "mean"}, default="exponential"
    warm_up : int, default=20
        Rows that only set the grid (at least 2 for a feature without a given grid).
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
                 grid: Mapping[str, Sequence[float]] | None = None, alpha: float = DEFAULT_ALPHA,
                 smoothing: str = "exponential", warm_up: int = 20, target_class: Any = None) -> None:
        from ipfi_cli.core.pdp import IPDPEstimator as CorePDP

        names = list(columns) if columns is not None else _columns_of(model)
        if names is None:
            raise ValueError("give columns=: the model does not name its inputs")
        self._core = CorePDP(as_predictor(model), names, features, grid_size=grid_size, quantiles=quantiles,
                             grid=grid, alpha=alpha, smoothing=smoothing, warm_up=warm_up,
                             target_class=target_class)
        self._rows = 0  # explain_one calls: the row number errors name

    def explain_one(self, x: Mapping[str, Any]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        """Fold one row in; returns per feature ``(grid values, PD values)``. A value of a tracked
        feature that is not a finite number raises :class:`~ipfi_cli.errors.InputError` naming the
        row (counted from 1 over the calls) and the column; the curves stay as they were."""
        from ipfi_cli.core.pdp import NonFiniteValue

        self._rows += 1
        try:
            return self._core.explain_one(x)
        except NonFiniteValue as error:
            error.row = self._rows + error.offset
            raise

    @property
    def curves(self) -> dict[str, tuple[np.ndarray, np.ndarray]]:
        return self._core.curves

    @property
    def spreads(self) -> dict[str, float]:
        return self._core.spreads
