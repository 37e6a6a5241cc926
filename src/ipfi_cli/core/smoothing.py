"""Exponentially weighted mean and variance with bias correction.

The paper's iPFI update is ``phi_t = (1 - alpha) * phi_{t-1} + alpha * lambda_t``. How
it starts matters for the first ``~1/alpha`` rows:

* the paper's literal start ``phi_t0 = lambda_t0`` is unbiased for a static model but
  keeps a weight of ``(1 - alpha) ** t`` on that one row;
* a zero start (iXAI) is biased towards 0 by a factor ``(1 - alpha) ** t``
  (40 % low after 500 rows at ``alpha = 0.001``).

Here every row's weight is ``alpha * (1 - alpha) ** age`` as in the paper, and the sum
is divided by the sum of the weights: the decayed sum
``S_t = (1 - alpha) S_{t-1} + alpha x_t`` over the decayed weight ``W_t = (1 - alpha) W_{t-1} + alpha``,
two linear recursions that a micro-batch runs as :func:`scipy.signal.lfilter` does (its compiled
routine, :mod:`ipfi_cli.core.linear_filter`), to the bits of row by row. The result is a convex combination of the
per-row contributions, so it is unbiased for a static model from the first explained
row, no row weighs more than a recent one, and after ``~3/alpha`` rows it equals
the paper's estimator. The variance is the weighted variance of the contributions
(West's update); ``sum_sq_weights`` tracks ``sum(w_i^2)`` so that the variance of the
estimate itself, if the contributions were independent, is
``variance * sum_sq_weights / weight ** 2``.

>>> import numpy as np
>>> m = ExponentialMean(alpha=0.5, n=1)
>>> for value in (1.0, 3.0):
...     _ = m.update(np.array([value]))
>>> m.mean.tolist()   # (0.25 * 1 + 0.5 * 3) / 0.75 = 7/3
[2.3333333333333335]
"""

from __future__ import annotations

import math

import numpy as np

from ipfi_cli.core.linear_filter import recursion_filter
from ipfi_cli.core.state_fields import array, choice, integer, number


class WeightedMoments:
    """Results shared by the weighted means here and in :mod:`ipfi_cli.core.decay`.

    A subclass keeps ``mean``, ``_sum_sq_dev`` (weighted sum of squared deviations),
    ``weight`` (sum of weights), ``sum_sq_weights`` and ``count``.
    """

    mean: np.ndarray
    _sum_sq_dev: np.ndarray
    count: int
    weight: float
    sum_sq_weights: float

    @property
    def variance(self) -> np.ndarray:
        """Weighted variance of the values (population form); NaN before two values."""
        if self.count < 2:
            return np.full_like(self.mean, np.nan)
        return np.maximum(self._sum_sq_dev / self.weight, 0.0)

    @property
    def effective_count(self) -> float:
        """Kish's effective sample size ``weight**2 / sum_sq_weights``: the count when every value
        weighs alike, ``2/alpha - 1`` in the limit for exponential weights."""
        if not self.count:
            return 0.0
        if self.sum_sq_weights == 0.0:  # alpha so small that its square underflows: the weights are equal
            return float(self.count)
        return self.weight * self.weight / self.sum_sq_weights

    def standard_error(self) -> np.ndarray:
        """Standard deviation of the mean if the values were independent."""
        if self.count < 2:
            return np.full_like(self.mean, np.nan)
        return np.sqrt(self.variance / self.effective_count)

    def confidence_bound(self, delta: float = 0.05) -> np.ndarray:
        """Chebyshev half-width: ``P(|mean - E[mean]| > bound) <= delta`` for independent values."""
        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        return self.standard_error() / math.sqrt(delta)


class ExponentialMean(WeightedMoments):
    """Exponentially weighted mean and variance of ``n`` parallel series, as a decayed sum over a
    decayed weight.

    Each series keeps the decayed sum ``S_t = (1 - alpha) S_{t-1} + alpha x_t``, the weight
    ``W_t = (1 - alpha) W_{t-1} + alpha`` and ``sum_sq_weights`` likewise; the mean is ``S_t / W_t``
    (the bias-corrected mean of the module docstring). The weighted sum of squared deviations
    follows West's update, ``M_t = (1 - alpha) M_{t-1} + alpha (x_t - mean_{t-1}) (x_t - mean_t)``.
    Every one of these is a first-order linear recursion: :meth:`update_many` runs them over a
    micro-batch with :func:`scipy.signal.lfilter`, whose operations are :meth:`update`'s, so any
    split of the rows into calls gives the same bits.
    """

    #: when a list, every update appends the moments after each value it folds (see
    #: :meth:`moments_history`); ``None`` here too, for a tracker pickled before there was a history
    history: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None = None

    def __init__(self, alpha: float, n: int) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = float(alpha)
        self._decay = 1.0 - self.alpha
        self.mean = np.full(n, np.nan)
        self._sum = np.zeros(n)  # the decayed sum of the values
        self._sum_sq_dev = np.zeros(n)  # weighted sum of squared deviations
        self.weight = 0.0  # sum of the weights
        self.sum_sq_weights = 0.0  # sum of the squared weights
        self.count = 0
        self.history = None

    def update(self, values: np.ndarray) -> np.ndarray:
        """Fold one value per series in; returns the new means (a view, do not modify): the operations of
        :meth:`update_many`'s recursions on one row."""
        values = np.asarray(values, dtype=np.float64)
        alpha, decay = self.alpha, self._decay
        self.weight = alpha + decay * self.weight
        self.sum_sq_weights = alpha * alpha + (decay * decay) * self.sum_sq_weights
        self._sum = alpha * values + decay * self._sum
        previous = values if self.count == 0 else self.mean
        self.mean = self._sum / self.weight
        self._sum_sq_dev = (alpha * (values - previous)) * (values - self.mean) + decay * self._sum_sq_dev
        self.count += 1
        if self.history is not None:
            self.history.append((self._sum_sq_dev[None, :].copy(), np.array([self.weight]),
                                 np.array([self.sum_sq_weights]), np.array([self.count])))
        return self.mean

    def moments_history(self) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
        """The moments after each value folded since :attr:`history` was set to a list: the
        weighted sums of squared deviations ``(T, n)``, the weights, the squared weights' sums and
        the counts ``(T,)``, each exactly as the tracker held them then."""
        chunks = self.history or []
        n = len(self.mean)
        if not chunks:
            return np.empty((0, n)), np.empty(0), np.empty(0), np.empty(0, dtype=np.int64)
        return (np.concatenate([c[0] for c in chunks]), np.concatenate([c[1] for c in chunks]),
                np.concatenate([c[2] for c in chunks]), np.concatenate([c[3] for c in chunks]))

    def update_many(self, values: np.ndarray) -> np.ndarray:
        """Fold the rows of ``values`` (shape ``(T, n)``) in, in order; returns the means after
        each row, shape ``(T, n)``: :meth:`update` row by row, to the last bit, whatever the rows'
        grouping into calls (each recursion is one :func:`scipy.signal.lfilter` over the rows).

        >>> a, b = ExponentialMean(0.3, 2), ExponentialMean(0.3, 2)
        >>> values = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]])
        >>> np.array_equal(a.update_many(values), [b.update(v).copy() for v in values])
        True
        """
        values = np.asarray(values, dtype=np.float64)
        if not len(values):
            return np.empty_like(values)
        alpha, decay = self.alpha, self._decay
        steps = len(values)
        ones = np.ones(steps)
        weights = _recursion(decay, alpha * ones, self.weight)
        squares = _recursion(decay * decay, (alpha * alpha) * ones, self.sum_sq_weights)
        sums = _recursion(decay, alpha * values, self._sum)
        means: np.ndarray = sums / weights[:, None]
        previous = np.empty_like(values)
        previous[0] = values[0] if self.count == 0 else self.mean
        previous[1:] = means[:-1]
        increments = (alpha * (values - previous)) * (values - means)
        sum_sq_dev = _recursion(decay, increments, self._sum_sq_dev)
        if self.history is not None:
            self.history.append((sum_sq_dev, weights, squares, np.arange(self.count + 1, self.count + 1 + steps)))
        self.mean, self._sum, self._sum_sq_dev = means[-1].copy(), sums[-1].copy(), sum_sq_dev[-1].copy()
        self.weight, self.sum_sq_weights = float(weights[-1]), float(squares[-1])
        self.count += steps
        return means

    # -- state as plain data ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """The whole state as plain data (numbers and arrays), for :meth:`load_state_dict`."""
        return {"alpha": self.alpha, "mean": self.mean.copy(), "sum": self._sum.copy(),
                "sum_sq_dev": self._sum_sq_dev.copy(), "weight": self.weight, "sum_sq_weights": self.sum_sq_weights,
                "count": self.count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict`'s data (the same ``alpha`` and number of series). A state
        saved before the decayed sum was kept continues from ``mean * weight``."""
        alpha, count = number(state, "alpha"), integer(state, "count")
        if alpha != self.alpha:
            raise ValueError(f"the state is of alpha {alpha}, not {self.alpha}")
        mean = array(state, "mean", self.mean.shape, finite=count > 0)  # NaN before the first value
        sum_sq_dev = array(state, "sum_sq_dev", self.mean.shape, low=0.0)
        weight = number(state, "weight", low=0.0)
        if "sum" in state:
            decayed = array(state, "sum", self.mean.shape).astype(np.float64)
        else:
            decayed = mean.astype(np.float64) * weight if count else np.zeros(self.mean.shape)
        self.weight = weight
        self.sum_sq_weights = number(state, "sum_sq_weights", low=0.0)
        self.count = count
        self.mean, self._sum_sq_dev = mean.astype(np.float64), sum_sq_dev.astype(np.float64)
        self._sum = decayed


class RunningMean(WeightedMoments):
    """Mean and variance of ``n`` parallel series where every value weighs alike (Welford).

    The static-model counterpart of :class:`ExponentialMean` (iXAI's Welford tracker): it
    forgets nothing, so for a model that does not change it converges to batch PFI instead
    of averaging the last ``~2/alpha`` rows. Same interface: ``update``, ``mean``,
    ``variance``, ``count``, ``weight``, ``sum_sq_weights``, ``effective_count`` (the count
    itself), ``standard_error`` and ``confidence_bound``.

    >>> import numpy as np
    >>> m = RunningMean(n=1)
    >>> for value in (1.0, 3.0, 5.0):
    ...     _ = m.update(np.array([value]))
    >>> m.mean.tolist(), m.variance.tolist(), round(float(m.standard_error()[0]), 4)
    ([3.0], [2.6666666666666665], 0.9428)
    """

    alpha = 0.0  # nothing is forgotten

    def __init__(self, n: int) -> None:
        self.mean = np.full(n, np.nan)
        self._sum = np.zeros(n)  # the sum of the values
        self._sum_sq_dev = np.zeros(n)
        self.count = 0

    @property
    def weight(self) -> float:  # type: ignore[override]  # every value weighs 1: derived, not kept
        return float(self.count)

    @property
    def sum_sq_weights(self) -> float:  # type: ignore[override]
        return float(self.count)

    def update(self, values: np.ndarray) -> np.ndarray:
        """Fold one value per series in; returns the new means (a view, do not modify): the operations of
        :meth:`update_many` on one row."""
        values = np.asarray(values, dtype=np.float64)
        self.count += 1
        self._sum = values + self._sum
        previous = values if self.count == 1 else self.mean
        self.mean = self._sum / float(self.count)
        self._sum_sq_dev = (values - previous) * (values - self.mean) + self._sum_sq_dev
        return self.mean

    def update_many(self, values: np.ndarray) -> np.ndarray:
        """Fold the rows of ``values`` (shape ``(T, n)``) in, in order; returns the means after
        each row, shape ``(T, n)``: the running sum over the count, and Welford's sum of squared
        deviations, each a running sum (:func:`scipy.signal.lfilter`): :meth:`update` row by row to the
        bit, whatever the rows' grouping into calls.

        >>> a, b = RunningMean(2), RunningMean(2)
        >>> values = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]])
        >>> np.array_equal(a.update_many(values), [b.update(v).copy() for v in values])
        True
        """
        values = np.asarray(values, dtype=np.float64)
        if not len(values):
            return np.empty_like(values)
        steps = len(values)
        sums = _recursion(1.0, values, self._sum)
        counts = np.arange(self.count + 1, self.count + 1 + steps, dtype=np.float64)
        means = sums / counts[:, None]
        previous = np.empty_like(values)
        previous[0] = values[0] if self.count == 0 else self.mean
        previous[1:] = means[:-1]
        sum_sq_dev = _recursion(1.0, (values - previous) * (values - means), self._sum_sq_dev)
        self.mean, self._sum, self._sum_sq_dev = means[-1].copy(), sums[-1].copy(), sum_sq_dev[-1].copy()
        self.count += steps
        return means

    # -- state as plain data ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """The whole state as plain data (numbers and arrays), for :meth:`load_state_dict`."""
        return {"kind": "mean", "mean": self.mean.copy(), "sum": self._sum.copy(),
                "sum_sq_dev": self._sum_sq_dev.copy(), "count": self.count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict`'s data (the same number of series)."""
        choice(state, "kind", ["mean"])
        count = integer(state, "count")
        mean = array(state, "mean", self.mean.shape, finite=count > 0)  # NaN before the first value
        sum_sq_dev = array(state, "sum_sq_dev", self.mean.shape, low=0.0)
        self.count = count
        self.mean, self._sum_sq_dev = mean.astype(np.float64), sum_sq_dev.astype(np.float64)
        # a state saved before the sum was kept continues from mean * count
        self._sum = (array(state, "sum", self.mean.shape).astype(np.float64) if "sum" in state
                     else self.mean * float(count) if count else np.zeros(self.mean.shape))


#: the smoothing strategies by name: ``exponential`` forgets (follows a changing model), ``mean``
#: weighs every row alike (converges to batch PFI for a static model)
SMOOTHINGS = ("exponential", "mean")


def make_smoother(name: str, alpha: float, n: int) -> ExponentialMean | RunningMean:
    """Build a smoother by name: ``exponential`` (rate ``alpha``) or ``mean`` (``alpha`` unused)."""
    if name == "exponential":
        return ExponentialMean(alpha, n)
    if name == "mean":
        return RunningMean(n)
    raise ValueError(f"unknown smoothing {name!r}; choose one of {', '.join(SMOOTHINGS)}")


#: micro-batches shorter than this run the recursion as a loop of the same operations (the same bits):
#: a short run, or one that reads a few rows at a time, loads no compiled routine (and where scipy's
#: cannot be loaded on its own, does not import scipy.signal, ~70 ms of CPU)
LOOP_ROWS = 64


def _recursion(decay: float, inputs: np.ndarray, start: np.ndarray | float) -> np.ndarray:
    """``y_t = inputs_t + decay * y_{t-1}`` from ``y_{-1} = start`` along the first axis, every ``y_t``
    (lfilter's routine, :func:`~ipfi_cli.core.linear_filter.recursion_filter`: ``decay * y`` and one
    addition per step, the same bits at any split;
    under :data:`LOOP_ROWS` rows the same two operations in a loop)."""
    if len(inputs) < LOOP_ROWS:
        out = np.empty(inputs.shape, dtype=np.float64)
        previous = np.asarray(start, dtype=np.float64)
        for t in range(len(inputs)):
            previous = decay * previous + inputs[t]
            out[t] = previous
        return out
    return recursion_filter()(decay, inputs, start)
