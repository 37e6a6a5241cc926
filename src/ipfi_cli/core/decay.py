"""Smoothing that merges: forward decay by event time, and the running mean.

iPFI's default smoothing counts rows (``phi_t = (1 - alpha) phi_{t-1} + alpha lambda_t``), so its
result depends on the order of the rows: two shards of a stream smoothed separately cannot be
combined into the smoothing of the whole. Two smoothings that do merge:

* **Forward decay by event time** (Cormode, Shkapenyuk, Srivastava, Xu, ICDE 2009). A row at
  time ``t_i`` weighs ``g(t_i - L) = 2 ** ((t_i - L) / half_life)`` against a landmark ``L``; at
  query time ``t`` its share is ``g(t_i - L) / g(t - L) = 2 ** (-(t - t_i) / half_life)``, the
  exponential decay by age. The smoothed value is the weighted mean
  ``sum g(t_i - L) lambda_i / sum g(t_i - L)``, in which ``g(t - L)`` cancels: it does not depend
  on the order the rows came in, and the weighted sums of two shards **add**. A row half a
  half-life older weighs ``1/sqrt(2)`` as much, whatever the rows' rate.
* **The running mean** (``half_life=None``): every row weighs 1, the static setting's estimator.

Both keep the weighted mean, the weight ``W``, the weighted sum of squared deviations ``M2``
(West's update, Chan et al.'s merge) and ``sum w**2``. Merging two is exact in arithmetic:
``W = Wa + Wb``, ``mean = ma + (mb - ma) Wb / W``, ``M2 = M2a + M2b + (mb - ma)**2 Wa Wb / W``;
in floating point the merged mean differs from the one-pass mean by rounding only (relative
1e-12 in the tests).

Weights ``2 ** ((t - L) / h)`` overflow after ~1,000 half-lives, and their squares (the bounds'
effective count) after ~500, so the landmark moves forward in steps of :data:`LANDMARK_STEP`
half-lives (the sums are scaled by ``2 ** -step``; the mean is unchanged). Landmarks sit on that
grid, so two states are aligned by scaling the older one.

>>> a, b, whole = DecayedMean(1, half_life=3600.0), DecayedMean(1, half_life=3600.0), DecayedMean(1, half_life=3600.0)
>>> for t, x in [(0, 1.0), (1800, 3.0), (3600, 2.0), (7200, 5.0)]:
...     _ = whole.update(np.array([x]), t)
...     _ = (a if t % 3600 else b).update(np.array([x]), t)
>>> merged = a.merged(b)   # weights 1, sqrt(2), 2, 4: (1 + 3 sqrt(2) + 4 + 20) / (7 + sqrt(2))
>>> round(float(merged.mean[0]), 12) == round(float(whole.mean[0]), 12), round(float(whole.mean[0]), 4)
(True, 3.4754)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, cast

import numpy as np

from ipfi_cli.core.smoothing import WeightedMoments
from ipfi_cli.core.state_fields import StateFieldError, array, choice, integer, number

#: the landmark moves forward in steps of this many half-lives: a weight stays below 2**256 and its
#: square below 2**512 (with 512, a square reached 2**1024 = inf after 512 half-lives, and every
#: bound of a longer stream was NaN). A state saved on the old grid of 512 is on this one too.
LANDMARK_STEP = 256


def parse_duration(text: str) -> float:
    """Seconds in a duration such as ``90s``, ``30m``, ``1h``, ``1.5d``, ``2w`` or a plain number of seconds.

    >>> [parse_duration(t) for t in ["1h", "30m", "90", "1.5d", "250ms"]]
    [3600.0, 1800.0, 90.0, 129600.0, 0.25]
    """
    units = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0, "w": 604800.0}
    value = text.strip().lower()
    for unit in sorted(units, key=len, reverse=True):
        if value.endswith(unit):
            number, scale = value[:-len(unit)], units[unit]
            break
    else:
        number, scale = value, 1.0
    try:
        seconds = float(number) * scale
    except ValueError:
        raise ValueError(f"not a duration: {text!r} (for example 90s, 30m, 1h, 2d)") from None
    if not (seconds > 0 and math.isfinite(seconds)):
        raise ValueError(f"a duration must be positive, got {text!r}")
    return seconds


#: 9999-12-31 23:59:59 UTC in seconds since 1970 (the last second ISO 8601 text can give)
_LAST_SECOND = 253402300799.0


def event_time(value: Any) -> float:
    """A row's event time in seconds: a number (seconds since the epoch) or ISO 8601 text
    (``2024-05-01 13:00:00``, ``2024-05-01T13:00:00+02:00``; without an offset: UTC).

    Seconds given as text (a column whose other values are ISO text) are seconds too. A time after
    the year 9999 is refused: epoch milliseconds or microseconds taken for seconds would weigh
    every row alike.

    >>> event_time("1970-01-01 01:00:00"), event_time(90), event_time("1970-01-01T02:00:00+01:00")
    (3600.0, 90.0, 3600.0)
    >>> event_time("1714568430.5")
    1714568430.5
    """
    import datetime

    if isinstance(value, str):
        try:
            value = float(value.strip())
        except ValueError:
            pass
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        if value != value or math.isinf(value):
            raise ValueError("the event time is missing")
        if abs(value) > _LAST_SECOND:
            raise ValueError(f"the event time {value!r} is after the year 9999 as seconds since 1970: are these "
                             "milliseconds? give seconds")
        return float(value)
    if isinstance(value, str):
        try:
            moment = datetime.datetime.fromisoformat(value.strip())
        except ValueError:
            raise ValueError(f"not a time: {value!r} (expected seconds or ISO 8601 text)") from None
        if moment.tzinfo is None:
            moment = moment.replace(tzinfo=datetime.UTC)
        return moment.timestamp()
    raise ValueError(f"not a time: {value!r}")


class DecayedMean(WeightedMoments):
    """Weighted mean and variance of ``n`` parallel series, weighted by forward decay in event time
    (``half_life`` in the times' unit) or, with ``half_life=None``, alike (the running mean).

    The interface of :class:`~ipfi_cli.core.smoothing.ExponentialMean` (``mean``, ``count``,
    ``variance``, ``effective_count``, ``confidence_bound``), with a time per update, and
    :meth:`merged`.
    """

    def __init__(self, n: int, *, half_life: float | None = None) -> None:
        if half_life is not None and not half_life > 0:
            raise ValueError(f"half_life must be positive, got {half_life}")
        self.half_life = None if half_life is None else float(half_life)
        self.mean = np.full(n, np.nan)
        self._sum_sq_dev = np.zeros(n)
        self.weight = 0.0
        self.sum_sq_weights = 0.0
        self.count = 0
        self.landmark: float | None = None  # on the grid of LANDMARK_STEP half-lives
        self.first_time = math.inf
        self.last_time = -math.inf

    # -- weights ------------------------------------------------------------------------------
    def _grid(self, time: float) -> float:
        assert self.half_life is not None
        step = LANDMARK_STEP * self.half_life
        return math.floor(time / step) * step

    def _move_landmark(self, landmark: float) -> None:
        """Rescale the sums to a later landmark (the mean is unchanged)."""
        if self.landmark is None or landmark <= self.landmark:
            self.landmark = landmark if self.landmark is None else self.landmark
            return
        assert self.half_life is not None
        scale = 2.0 ** (-(landmark - self.landmark) / self.half_life)
        self.weight *= scale
        self.sum_sq_weights *= scale * scale
        self._sum_sq_dev = self._sum_sq_dev * scale
        self.landmark = landmark

    def _weight(self, time: float | None) -> float:
        if self.half_life is None:
            return 1.0
        if time is None or not math.isfinite(time):
            raise ValueError("forward decay needs each row's event time")
        self._move_landmark(self._grid(time))
        assert self.landmark is not None
        return cast(float, 2.0 ** ((time - self.landmark) / self.half_life))  # a float: the base is positive

    # -- updating ------------------------------------------------------------------------------
    def update(self, values: np.ndarray, time: float | None = None) -> np.ndarray:
        """Fold one value per series in, at event ``time`` (ignored by the running mean)."""
        w = self._weight(time)
        if time is not None:
            self.first_time = min(self.first_time, float(time))
            self.last_time = max(self.last_time, float(time))
        if self.count == 0:
            self.mean = np.array(values, dtype=np.float64)
            self.weight = w
            self.sum_sq_weights = w * w
        else:
            self.weight += w
            self.sum_sq_weights += w * w
            delta = values - self.mean
            self.mean = self.mean + (w / self.weight) * delta
            self._sum_sq_dev = self._sum_sq_dev + w * delta * (values - self.mean)
        self.count += 1
        return self.mean

    def update_many(self, values: np.ndarray, times: Sequence[float | None] | None = None) -> np.ndarray:
        """Fold the rows of ``values`` (shape ``(T, n)``) in, at event ``times``; returns the means after each
        row, shape ``(T, n)``: :meth:`update` row by row, to the last bit, whatever the rows' grouping into
        calls. The weights' sums and the sum of squared deviations are running sums over the rows (between
        the landmark's moves); the mean's own recursion, ``mean + (w / W) (x - mean)``, whose rate changes
        every row, stays a loop over the rows: no array operation rounds as it does, and a decayed sum over
        the weight instead (as :class:`~ipfi_cli.core.smoothing.ExponentialMean` keeps) would change 9 % of
        the running mean's estimates on the agrawal sample beyond 1e-14 of themselves (those near 0 wholly:
        0 against 1e-17).

        >>> a, b = DecayedMean(2, half_life=2.0), DecayedMean(2, half_life=2.0)
        >>> values, times = np.array([[1.0, 2.0], [0.5, -1.0], [3.0, 0.25]]), [0.0, 1.5, 4.0]
        >>> np.array_equal(a.update_many(values, times), [b.update(v, t).copy() for v, t in zip(values, times)])
        True
        """
        values = np.asarray(values, dtype=np.float64)
        steps = len(values)
        means = np.empty_like(values)
        given: list[Any] = [None] * steps if times is None else list(times)
        if self.half_life is not None and any(t is None or not math.isfinite(t) for t in given):
            raise ValueError("forward decay needs each row's event time")
        for t in given:
            if t is not None:
                self.first_time, self.last_time = min(self.first_time, float(t)), max(self.last_time, float(t))
        begin = 0
        while begin < steps:  # runs of rows of one landmark, moved (the sums rescaled) at a run's first row
            if self.half_life is None:
                end, weights = steps, np.ones(steps)
            else:
                self._weight(given[begin])
                landmark, half_life, end = cast(float, self.landmark), self.half_life, begin + 1
                while end < steps and self._grid(given[end]) <= landmark:
                    end += 1
                weights = np.array([2.0 ** ((t - landmark) / half_life) for t in given[begin:end]])  # _weight's
            self._fold_run(values[begin:end], weights, means[begin:end])
            begin = end
        return means

    def _fold_run(self, values: np.ndarray, weights: np.ndarray, means: np.ndarray) -> None:
        """:meth:`update` for rows of one landmark, of ``weights``; the means after each go to ``means``."""
        first = self.count == 0
        weight = np.add.accumulate(np.concatenate([[0.0 if first else self.weight], weights]))[1:]
        squares = np.add.accumulate(np.concatenate([[0.0 if first else self.sum_sq_weights], weights * weights]))[1:]
        rates = weights / weight
        deltas = np.zeros_like(values)
        mean = values[0].copy() if first else self.mean
        means[0] = mean
        for t in range(int(first), len(values)):  # the mean's recursion: update's operations, row by row
            delta = values[t] - mean
            mean = mean + rates[t] * delta
            deltas[t], means[t] = delta, mean
        increments = (weights[:, None] * deltas) * (values - means)
        increments[0] = self._sum_sq_dev if first else self._sum_sq_dev + increments[0]
        self._sum_sq_dev = np.add.accumulate(increments, axis=0)[-1]
        self.mean, self.weight, self.sum_sq_weights = mean, float(weight[-1]), float(squares[-1])
        self.count += len(values)

    def merged(self, other: DecayedMean) -> DecayedMean:
        """The smoothing of both shards' rows together (Chan et al.'s merge, landmarks aligned)."""
        if self.half_life != other.half_life or self.mean.shape != other.mean.shape:
            raise ValueError(f"cannot merge smoothings of half-life {self.half_life} and {other.half_life}")
        out = DecayedMean(self.mean.size, half_life=self.half_life)
        a, b = self._copy(), other._copy()
        if self.half_life is not None and a.landmark is not None and b.landmark is not None:
            landmark = max(a.landmark, b.landmark)
            a._move_landmark(landmark)
            b._move_landmark(landmark)
        out.landmark = a.landmark if a.landmark is not None else b.landmark
        if a.count == 0 or b.count == 0:
            source = b if a.count == 0 else a
            vars(out).update({k: v for k, v in vars(source).items()})
            out.count = a.count + b.count
            out.first_time, out.last_time = min(a.first_time, b.first_time), max(a.last_time, b.last_time)
            return out
        out.weight = a.weight + b.weight
        out.sum_sq_weights = a.sum_sq_weights + b.sum_sq_weights
        delta = b.mean - a.mean
        out.mean = a.mean + delta * (b.weight / out.weight)
        out._sum_sq_dev = a._sum_sq_dev + b._sum_sq_dev + delta * delta * (a.weight * b.weight / out.weight)
        out.count = a.count + b.count
        out.first_time, out.last_time = min(a.first_time, b.first_time), max(a.last_time, b.last_time)
        return out

    def _copy(self) -> DecayedMean:
        out = DecayedMean.__new__(DecayedMean)
        vars(out).update({k: (v.copy() if isinstance(v, np.ndarray) else v) for k, v in vars(self).items()})
        return out

    # -- results -------------------------------------------------------------------------------
    # -- state as plain data -----------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        return {"half_life": self.half_life, "mean": self.mean.copy(), "sum_sq_dev": self._sum_sq_dev.copy(),
                "weight": self.weight, "sum_sq_weights": self.sum_sq_weights, "count": self.count,
                "landmark": self.landmark, "first_time": self.first_time, "last_time": self.last_time}

    def load_state_dict(self, state: dict[str, Any]) -> None:
        if self.half_life is None:
            choice(state, "half_life", [None])
        elif number(state, "half_life") != self.half_life:
            raise ValueError(f"the state is of half-life {state['half_life']}, not {self.half_life}")
        count = integer(state, "count")
        mean = array(state, "mean", self.mean.shape, finite=count > 0)  # NaN before the first value
        sum_sq_dev = array(state, "sum_sq_dev", self.mean.shape, low=0.0)
        self.weight, self.sum_sq_weights = number(state, "weight", low=0.0), number(state, "sum_sq_weights", low=0.0)
        if "landmark" not in state:
            raise StateFieldError("landmark", "is missing")
        landmark = None if self.half_life is None or state["landmark"] is None else number(state, "landmark")
        if self.half_life is None:
            choice(state, "landmark", [None])
        # -inf before the first event time
        last_time = number(state, "last_time", infinite=True)
        if last_time == math.inf:
            raise StateFieldError("last_time", "must be finite or -inf, not inf")
        self.mean, self._sum_sq_dev = mean.astype(np.float64), sum_sq_dev.astype(np.float64)
        self.count, self.landmark, self.last_time = count, landmark, last_time
        # saved before the first time was kept: unknown, as early as any (a merge cannot tell its span)
        self.first_time = (number(state, "first_time", infinite=True) if "first_time" in state
                           else math.inf if count == 0 else -math.inf)


# -- reservoirs ------------------------------------------------------------------------------------
def merge_reservoir_rows(rows_a: np.ndarray, filled_a: int, seen_a: float, rows_b: np.ndarray, filled_b: int,
                         seen_b: float, rng: np.random.Generator) -> tuple[np.ndarray, int]:
    """Merge two shards' reservoirs (shape ``(M, L, C)``) into one of the same size.

    The rule, per realisation: the merged reservoir takes ``k`` rows of shard A and ``L - k`` of
    shard B, ``k`` drawn from the hypergeometric distribution of a uniform sample of ``L`` rows
    from ``seen_a + seen_b`` (``seen`` are the rows each shard saw, or their decayed weights), each
    shard's rows chosen uniformly among its reservoir's. When both inputs are uniform samples of
    their shards (uniform sampling, all rows alike) the result is distributed exactly as a uniform
    reservoir of the whole stream; with weights (geometric sampling, forward decay) it is an
    approximation: the shares follow the weights, but within a shard the rows keep that shard's
    sampling.
    """
    size = rows_a.shape[1]
    filled = min(size, filled_a + filled_b)
    like = rows_a if rows_a.dtype == object or rows_b.dtype != object else rows_b
    out = np.empty_like(like) if like.dtype == object else np.zeros_like(like)  # slots not filled: zeros, not leftovers
    total_a, total_b = max(int(round(seen_a)), filled_a), max(int(round(seen_b)), filled_b)
    for m in range(rows_a.shape[0]):
        if filled_a == 0 or filled_b == 0:
            k = min(filled, filled_a)
        else:
            k = int(rng.hypergeometric(total_a, total_b, filled))
            k = min(max(k, filled - filled_b), filled_a)  # what each reservoir can give
        take_a = rng.choice(filled_a, size=k, replace=False) if k else np.empty(0, dtype=np.intp)
        take_b = rng.choice(filled_b, size=filled - k, replace=False) if filled - k else np.empty(0, dtype=np.intp)
        chosen = np.concatenate([rows_a[m, take_a], rows_b[m, take_b]])
        out[m, :filled] = chosen[rng.permutation(filled)]
    return out, filled
