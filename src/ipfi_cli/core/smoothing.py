"""Exponentially weighted mean and variance with bias correction.

The paper's iPFI update is ``phi_t = (1 - alpha) * phi_{t-1} + alpha * lambda_t``. How
it starts matters for the first ``~1/alpha`` rows:

* the paper's literal start ``phi_t0 = lambda_t0`` is unbiased for a static model but
  keeps a weight of ``(1 - alpha) ** t`` on that one row;
* a zero start (iXAI) is biased towards 0 by a factor ``(1 - alpha) ** t``
  (40 % low after 500 rows at ``alpha = 0.001``).

Here every row's weight is ``alpha * (1 - alpha) ** age`` as in the paper, and the sum
is divided by the sum of the weights. The result is a convex combination of the
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
>>> m.mean.tolist()   # (0.25 * 1 + 0.5 * 3) / 0.75
[2.333333333333333]
"""

from __future__ import annotations

import math

import numpy as np

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
    """Bias-corrected exponentially weighted mean and variance of ``n`` parallel series."""

    #: up to this many series :meth:`update_many` runs each series' recursion in Python
    #: floats (the same IEEE operations as numpy's); beyond it, one row of vectors at a time
    few_series: int = 16
    #: when a list, every update appends the moments after each value it folds (see
    #: :meth:`moments_history`); ``None`` here too, for a tracker pickled before there was a history
    history: list[tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]] | None = None

    def __init__(self, alpha: float, n: int) -> None:
        if not 0.0 < alpha <= 1.0:
            raise ValueError(f"alpha must be in (0, 1], got {alpha}")
        self.alpha = float(alpha)
        self._decay = 1.0 - self.alpha
        self.mean = np.full(n, np.nan)
        self._sum_sq_dev = np.zeros(n)  # weighted sum of squared deviations
        self.weight = 0.0  # sum of the weights
        self.sum_sq_weights = 0.0  # sum of the squared weights
        self.count = 0
        self.history = None

    def update(self, values: np.ndarray) -> np.ndarray:
        """Fold one value per series in; returns the new means (a view, do not modify)."""
        alpha = self.alpha
        if self.count == 0:
            self.mean = np.array(values, dtype=np.float64)
            self.weight = alpha
            self.sum_sq_weights = alpha * alpha
        else:
            self.weight = self.weight * self._decay + alpha
            self.sum_sq_weights = self.sum_sq_weights * self._decay * self._decay + alpha * alpha
            delta = values - self.mean
            self.mean = self.mean + (alpha / self.weight) * delta
            self._sum_sq_dev = self._sum_sq_dev * self._decay + alpha * delta * (values - self.mean)
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
        each row, shape ``(T, n)``.

        Exactly :meth:`update` row by row, to the last bit: the same operations on the same
        numbers in the same order (a closed form over the block, with weights ``(1 - alpha)
        ** k``, rounds differently, and its result would depend on where the blocks begin).
        Only the recursion itself runs per row (per series in Python floats when there are
        few, else as a few vector operations per row); the rest is done for the whole block.

        >>> a, b = ExponentialMean(0.3, 2), ExponentialMean(0.3, 2)
        >>> values = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]])
        >>> np.array_equal(a.update_many(values), [b.update(v).copy() for v in values])
        True
        """
        values = np.asarray(values, dtype=np.float64)
        means = np.empty_like(values)
        if not len(values):
            return means
        alpha, decay = self.alpha, self._decay
        start = 0
        if self.count == 0:
            means[0] = self.update(values[0])
            start = 1
        weight, sum_sq_weights = self.weight, self.sum_sq_weights
        rates = []
        record = self.history is not None
        weights: list[float] = []
        squares: list[float] = []
        for _ in range(start, len(values)):
            weight = weight * decay + alpha
            sum_sq_weights = sum_sq_weights * decay * decay + alpha * alpha
            rates.append(alpha / weight)
            if record:
                weights.append(weight)
                squares.append(sum_sq_weights)
        if len(self.mean) <= self.few_series:  # per series, in Python floats: fewer calls
            for g, column in enumerate(values[start:].T.tolist()):
                series_mean = float(self.mean[g])
                out: list[float] = []
                append = out.append
                for value, rate in zip(column, rates):
                    series_mean = series_mean + rate * (value - series_mean)
                    append(series_mean)
                means[start:, g] = out
        else:  # per row, as vectors
            mean, step = self.mean, np.empty_like(self.mean)
            subtract, multiply, add = np.subtract, np.multiply, np.add
            for value, rate, new_mean in zip(values[start:], rates, means[start:]):
                subtract(value, mean, out=step)
                multiply(rate, step, out=step)
                add(mean, step, out=new_mean)
                mean = new_mean
        if start < len(values):
            previous = np.concatenate([self.mean[None, :], means[start:-1]]) if start == 0 else means[:-1]
            increments = (alpha * (values[start:] - previous)) * (values[start:] - means[start:])
            steps = np.empty_like(increments) if record else None  # the sums after each row
            if len(self.mean) <= self.few_series:
                sums = []
                for g, column in enumerate(increments.T.tolist()):
                    total = float(self._sum_sq_dev[g])
                    if steps is None:
                        for increment in column:
                            total = total * decay + increment
                    else:
                        after: list[float] = []
                        for increment in column:
                            total = total * decay + increment
                            after.append(total)
                        steps[:, g] = after
                    sums.append(total)
                self._sum_sq_dev = np.array(sums)
            else:
                sum_sq_dev = self._sum_sq_dev
                for t, increment in enumerate(increments):
                    sum_sq_dev = sum_sq_dev * decay + increment
                    if steps is not None:
                        steps[t] = sum_sq_dev
                self._sum_sq_dev = sum_sq_dev
            if steps is not None and self.history is not None:
                self.history.append((steps, np.array(weights), np.array(squares),
                                     np.arange(self.count + 1, self.count + 1 + len(steps))))
            self.mean = means[-1].copy()
            self.weight, self.sum_sq_weights = weight, sum_sq_weights
            self.count += len(values) - start
        return means

    # -- state as plain data ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """The whole state as plain data (numbers and arrays), for :meth:`load_state_dict`."""
        return {"alpha": self.alpha, "mean": self.mean.copy(), "sum_sq_dev": self._sum_sq_dev.copy(),
                "weight": self.weight, "sum_sq_weights": self.sum_sq_weights, "count": self.count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict`'s data (the same ``alpha`` and number of series)."""
        alpha, count = number(state, "alpha"), integer(state, "count")
        if alpha != self.alpha:
            raise ValueError(f"the state is of alpha {alpha}, not {self.alpha}")
        mean = array(state, "mean", self.mean.shape, finite=count > 0)  # NaN before the first value
        sum_sq_dev = array(state, "sum_sq_dev", self.mean.shape, low=0.0)
        self.weight = number(state, "weight", low=0.0)
        self.sum_sq_weights = number(state, "sum_sq_weights", low=0.0)
        self.count = count
        self.mean, self._sum_sq_dev = mean.astype(np.float64), sum_sq_dev.astype(np.float64)


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
        self._sum_sq_dev = np.zeros(n)
        self.count = 0

    @property
    def weight(self) -> float:  # type: ignore[override]  # every value weighs 1: derived, not kept
        return float(self.count)

    @property
    def sum_sq_weights(self) -> float:  # type: ignore[override]
        return float(self.count)

    def update(self, values: np.ndarray) -> np.ndarray:
        """Fold one value per series in; returns the new means (a view, do not modify)."""
        self.count += 1
        if self.count == 1:
            self.mean = np.array(values, dtype=np.float64)
        else:
            delta = values - self.mean
            self.mean = self.mean + delta / self.count
            self._sum_sq_dev = self._sum_sq_dev + delta * (values - self.mean)
        return self.mean

    def update_many(self, values: np.ndarray) -> np.ndarray:
        """Fold the rows of ``values`` (shape ``(T, n)``) in, in order; returns the means after
        each row, shape ``(T, n)``: exactly :meth:`update` row by row (the same operations on
        the same numbers, per series in Python floats when there are few series, as
        :meth:`ExponentialMean.update_many` does).

        >>> a, b = RunningMean(2), RunningMean(2)
        >>> values = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]])
        >>> np.array_equal(a.update_many(values), [b.update(v).copy() for v in values])
        True
        """
        values = np.asarray(values, dtype=np.float64)
        means = np.empty_like(values)
        if not len(values):
            return means
        start = 0
        if self.count == 0:
            means[0] = self.update(values[0])
            start = 1
        if start == len(values):
            return means
        counts = range(self.count + 1, self.count + 1 + len(values) - start)
        if len(self.mean) <= ExponentialMean.few_series:
            sums = []
            for g, column in enumerate(values[start:].T.tolist()):
                mean, total = float(self.mean[g]), float(self._sum_sq_dev[g])
                out: list[float] = []
                append = out.append
                for value, count in zip(column, counts):
                    delta = value - mean
                    mean = mean + delta / count
                    total = total + delta * (value - mean)
                    append(mean)
                means[start:, g] = out
                sums.append(total)
            self._sum_sq_dev = np.array(sums)
        else:
            previous, sum_sq_dev = self.mean, self._sum_sq_dev
            for value, count, new_mean in zip(values[start:], counts, means[start:]):
                deviation = value - previous
                np.add(previous, deviation / count, out=new_mean)
                sum_sq_dev = sum_sq_dev + deviation * (value - new_mean)
                previous = new_mean
            self._sum_sq_dev = sum_sq_dev
        self.mean = means[-1].copy()
        self.count += len(values) - start
        return means

    # -- state as plain data ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, object]:
        """The whole state as plain data (numbers and arrays), for :meth:`load_state_dict`."""
        return {"kind": "mean", "mean": self.mean.copy(), "sum_sq_dev": self._sum_sq_dev.copy(), "count": self.count}

    def load_state_dict(self, state: dict[str, object]) -> None:
        """Continue from :meth:`state_dict`'s data (the same number of series)."""
        choice(state, "kind", ["mean"])
        count = integer(state, "count")
        mean = array(state, "mean", self.mean.shape, finite=count > 0)  # NaN before the first value
        sum_sq_dev = array(state, "sum_sq_dev", self.mean.shape, low=0.0)
        self.count = count
        self.mean, self._sum_sq_dev = mean.astype(np.float64), sum_sq_dev.astype(np.float64)


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
