"""Confidence half-widths of iPFI's estimates: what each method assumes, and the sums it reads.

An estimate is ``phi = sum_t w_t c_t / W`` with ``w_t = alpha (1 - alpha) ** age``,
``W = sum_t w_t`` and ``c_t`` the row's contribution, the mean over the ``M``
realisations of ``c_t^(m)`` (a loss increase). Each method returns a half-width ``b``
meant to satisfy ``P(|phi - E[phi]| > b) <= delta`` for a *static* model; the methods
differ in what they assume about the ``c_t``:

``chebyshev`` (the paper's)
    The ``c_t`` are independent with the variance the tracker measures (``s^2``);
    ``b = sqrt(s^2 / n_eff) / sqrt(delta)`` with Kish's effective sample size
    ``n_eff = W^2 / sum w_t^2`` (``2/alpha - 1`` in the long run). Chebyshev's inequality
    needs no distribution, so it is conservative by a factor ``1 / (sqrt(delta) z)``
    (2.3 at ``delta = 0.05``) when the normal approximation holds.
``normal``
    As ``chebyshev``, with the normal quantile: ``b = z_{1-delta/2} sqrt(s^2 / n_eff)``.
    Right when the ``c_t`` are independent and ``n_eff`` is large (the central limit
    theorem over ``n_eff`` rows). iPFI's contributions are not independent: a row stays
    in a realisation's reservoir for many steps, so every contribution that drew it
    shares its deviation. With a uniform reservoir those rows stay for good and
    this method covers less than ``1 - delta`` (measured in
    ``benchmarks/bounds_coverage.py``).
``realisations`` (calibrated)
    The ``M`` realisations draw from independent reservoirs, so *given the stream*
    their estimates ``phi^(m)`` (the same weights over ``c_t^(m)``) are independent, and
    their spread measures everything the draws add, however long a row stays in a
    reservoir. The stream's own part is counted per row, in both of a row's roles: as
    the explained row and as the replacement drawn for later rows
    (:mod:`ipfi_cli.core.influence`). With ``S_b^2`` the sample variance of the
    ``phi^(m)`` and ``V_s`` the influences' variance::

        Var(phi) = Var(E[phi | stream]) + E[Var(phi | stream)]
                 ~ V_s  +  S_b^2 / M

    The half-width is the Student-t quantile at Welch-Satterthwaite's degrees of
    freedom times the square root: ``M - 1`` for the second term, and for the first
    Satterthwaite's count over the rows' shares of it (small when a few rows carry
    much of it, as a uniform reservoir's first rows do, drawn for every later row).
    It needs ``M >= 2``, and assumes the rows are independent draws of one
    distribution (the model static, or changing slowly next to ``1 / alpha`` rows).

Every method is about the estimate's spread around its expectation: for a model that
learns, or a stream that drifts, ``E[phi]`` is the weighted mean of the changing PFI,
not today's PFI.

>>> import numpy as np
>>> spread = RealisationSpread(alpha=0.5, n_repeats=2, n=1, reservoir_size=4)
>>> spread.stored(0, np.array([0, 0]))                       # row 0 fills both reservoirs
>>> for row, contributions in ((1, [[1.0], [3.0]]), (2, [[2.0], [2.0]])):
...     spread.explained(row, np.array([[0], [0]]))          # both realisations draw slot 0
...     spread.update(np.array(contributions))
...     spread.stored(row, np.array([row, row]))
>>> [round(float(v), 6) for v in spread.means.ravel()]       # (0.25 * 1 + 0.5 * 2) / 0.75, (0.25 * 3 + 0.5 * 2) / 0.75
[1.666667, 2.333333]
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from statistics import NormalDist
from typing import Any, Protocol, cast

import numpy as np

from ipfi_cli.core.choices import BOUNDS_METHODS
from ipfi_cli.core.influence import DonorInfluence
from ipfi_cli.core.smoothing import WeightedMoments

__all__ = ["BOUNDS_METHODS", "RealisationSpread", "RowBounds", "half_width", "needs_realisations"]


def needs_realisations(method: str) -> bool:
    """True for a method that reads a :class:`RealisationSpread` (tracked only when asked)."""
    check_method(method)
    return method == "realisations"


def check_method(method: str) -> None:
    if method not in BOUNDS_METHODS:
        raise ValueError(f"unknown bounds method {method!r}; one of {', '.join(BOUNDS_METHODS)}")


#: the smallest delta: below it ``1 - delta / 2`` loses the digits the quantiles are computed from
MIN_DELTA = 1e-10
#: the largest smoothing rate a bound is given for: above it the estimate rests on fewer than
#: three rows' worth of contributions (``n_eff = 2 / alpha - 1``), too few to estimate their spread
#: (the weighted variance is then biased low by the factor ``1 - 1 / n_eff``)
MAX_BOUNDS_ALPHA = 0.5
#: the fewest rows' worth of contributions (Kish's ``n_eff``) a bound is given for: below it, two
#: rows, or one row's worth after a long gap in event time (``--half-life``), the spread is guessed
#: from one or two values (two equal ones give a bound of 0); NaN then, as before the second row
MIN_BOUNDS_EFFECTIVE_COUNT = 2.5


def check_delta(delta: float) -> None:
    if not MIN_DELTA <= delta < 1.0:
        raise ValueError(f"delta must be in [{MIN_DELTA:g}, 1), got {delta}")


def check_bounds_alpha(alpha: float) -> None:
    """A ``ValueError`` when ``alpha`` smooths over too few rows for a confidence bound."""
    if alpha > MAX_BOUNDS_ALPHA:
        raise ValueError(f"confidence bounds need alpha at most {MAX_BOUNDS_ALPHA:g}, got {alpha}: above it the "
                         "estimate rests on fewer than three rows' worth of contributions, too few to estimate "
                         "their spread")


class RealisationSpread:
    """Each realisation's own smoothed estimate, and every row's influence on the estimate.

    ``means[m]`` is ``phi^(m)``, the bias-corrected exponentially weighted mean of
    realisation ``m``'s contributions with the weights of
    :class:`~ipfi_cli.core.smoothing.ExponentialMean` (their mean over ``m`` is the
    estimate); ``influence`` is the :class:`~ipfi_cli.core.influence.DonorInfluence` of
    the rows, which needs to hear of every draw (:meth:`explained`) and insertion
    (:meth:`stored`) in the reservoirs of ``reservoir_size`` slots.
    """

    def __init__(self, alpha: float, n_repeats: int, n: int, reservoir_size: int) -> None:
        if n_repeats < 2:
            raise ValueError(f"the spread of the realisations needs at least 2 of them, got {n_repeats}")
        self.alpha = float(alpha)
        self._decay = 1.0 - self.alpha
        self.means = np.zeros((int(n_repeats), int(n)))
        self.weight = 0.0
        self.count = 0
        self.influence = DonorInfluence(self.alpha, int(n_repeats), int(n), int(reservoir_size))

    def explained(self, row: int, donor_slots: np.ndarray | None) -> None:
        """Row ``row``'s replacements were drawn from slots ``donor_slots`` (shape ``(M, G)``;
        ``None``: not from the reservoirs)."""
        self.influence.explained(row, donor_slots)

    def cancel(self, row: int) -> None:
        """Row ``row``'s draw is not followed by its contributions (its model call failed)."""
        self.influence.cancel(row)

    def stored(self, row: int, written: np.ndarray) -> None:
        """Row ``row`` was offered to the reservoirs and went to slots ``written`` (see
        :meth:`~ipfi_cli.core.samplers.Reservoir.insert`)."""
        self.influence.stored(row, written)

    def explained_stored_many(self, first_row: int, drawn: np.ndarray, written: np.ndarray) -> None:
        """Rows ``first_row, first_row + 1, ...`` were each drawn for (slots ``drawn[t]``) and then
        stored (slots ``written[t]``), in turn: :meth:`explained` then :meth:`stored` row by row."""
        self.influence.explained_stored_many(first_row, drawn, written)

    def update(self, contributions: np.ndarray) -> None:
        """Fold in the oldest drawn row's contributions, shape ``(M, n)``."""
        self.weight = self.weight * self._decay + self.alpha
        step = self.alpha / self.weight           # 1 at the first row: the means start at its values
        self.means += step * (contributions - self.means)
        self.influence.fold(contributions)
        self.count += 1

    def update_many(self, contributions: np.ndarray) -> None:
        """:meth:`update` for consecutive rows' contributions, shape ``(T, M, n)``, to the same bits."""
        alpha, decay, means = self.alpha, self._decay, self.means
        weight = self.weight
        for values in contributions:  # the means' recursion, row by row
            weight = weight * decay + alpha
            means += (alpha / weight) * (values - means)
        self.weight = weight
        self.influence.fold_many(contributions)
        self.count += len(contributions)

    def state_dict(self) -> dict[str, object]:
        """The whole state as plain data (numbers and arrays), for :meth:`load_state_dict`."""
        return {"alpha": self.alpha, "means": self.means.copy(), "weight": self.weight, "count": self.count,
                "influence": self.influence.state_dict()}

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data (the same ``alpha``, realisations and features)."""
        means = np.array(state["means"], dtype=np.float64)
        if float(state["alpha"]) != self.alpha or means.shape != self.means.shape:
            raise ValueError(f"the state is of alpha {state['alpha']} and realisations x features "
                             f"{means.shape}, not {self.alpha} and {self.means.shape}")
        if "influence" not in state:
            raise ValueError("the state's realisations bounds are of an earlier ipfi, which did not follow "
                             "each row's role as a replacement: start a new state for these bounds")
        self.influence.load_state_dict(state["influence"])
        self.means = means
        self.weight = float(state["weight"])
        self.count = int(state["count"])

    def between(self) -> np.ndarray:
        """Sample variance (``ddof=1``) of the realisations' estimates, per feature."""
        return np.asarray(self.means.var(axis=0, ddof=1))

    def stream_variance(self) -> np.ndarray:
        """The variance of the estimate's expectation given the stream, from the rows' influences."""
        return self.influence.stream_variance(self.means.mean(axis=0))

    def stream_variance_and_dof(self) -> tuple[np.ndarray, np.ndarray]:
        """:meth:`stream_variance` and its degrees of freedom (see
        :meth:`~ipfi_cli.core.influence.DonorInfluence.stream_variance_and_dof`)."""
        return self.influence.stream_variance_and_dof(self.means.mean(axis=0))


def half_width(method: str, delta: float, variance: np.ndarray, effective_count: float,
               spread: RealisationSpread | None = None) -> np.ndarray:
    """The confidence half-width of every estimate by ``method`` (see the module docstring).

    ``variance`` is the weighted variance of the contributions and ``effective_count``
    Kish's ``n_eff``, both as :class:`~ipfi_cli.core.smoothing.ExponentialMean` keeps them;
    ``spread`` is needed by ``realisations``. NaN where there is not enough yet: ``n_eff``
    below :data:`MIN_BOUNDS_EFFECTIVE_COUNT` (two rows' worth or fewer).

    >>> import numpy as np
    >>> v = np.array([0.25])
    >>> round(float(half_width("chebyshev", 0.05, v, 100.0)[0]), 4)   # 0.05 / sqrt(0.05)
    0.2236
    >>> round(float(half_width("normal", 0.05, v, 100.0)[0]), 4)      # 1.96 * 0.05
    0.098
    """
    check_method(method)
    check_delta(delta)
    variance = np.asarray(variance, dtype=np.float64)
    if method in ("chebyshev", "normal"):
        return cast(np.ndarray,
                    independent_half_widths(method, delta, variance[None, :], np.array([effective_count]))[0])
    if not effective_count >= MIN_BOUNDS_EFFECTIVE_COUNT:
        return np.full_like(variance, np.nan)
    if spread is None or spread.count < 2:
        return np.full_like(variance, np.nan)
    n_repeats = spread.means.shape[0]
    stream_part, stream_dof = spread.stream_variance_and_dof()
    draw_part = spread.between() / n_repeats
    total = stream_part + draw_part
    # Welch-Satterthwaite: the degrees of freedom of a sum of two estimated variances
    with np.errstate(divide="ignore", invalid="ignore"):
        dof = total ** 2 / (stream_part ** 2 / stream_dof + draw_part ** 2 / (n_repeats - 1))
    dof = np.where(np.isfinite(dof), dof, effective_count - 1.0)
    return _t_quantile(1.0 - delta / 2.0, dof) * np.sqrt(total)


def independent_half_widths(method: str, delta: float, variances: np.ndarray, effective_counts: np.ndarray
                            ) -> np.ndarray:
    """:func:`half_width` by ``chebyshev`` or ``normal`` for many states at once: ``variances``
    ``(T, n)`` and ``effective_counts`` ``(T,)``, one row per state; the same operations on the
    same numbers, so each row equals :func:`half_width` of that state to the bit.

    >>> import numpy as np
    >>> independent_half_widths("chebyshev", 0.05, np.array([[0.25], [0.25]]), np.array([100.0, 2.0])).round(4)
    array([[0.2236],
           [   nan]])
    """
    variances = np.asarray(variances, dtype=np.float64)
    counts = np.asarray(effective_counts, dtype=np.float64)[:, None]
    with np.errstate(divide="ignore", invalid="ignore"):
        if method == "chebyshev":
            widths = np.sqrt(variances / counts) / math.sqrt(delta)
        elif method == "normal":
            widths = NormalDist().inv_cdf(1.0 - delta / 2.0) * np.sqrt(variances / counts)
        else:
            raise ValueError(f"independent_half_widths takes chebyshev or normal, not {method!r}")
    widths[~(counts[:, 0] >= MIN_BOUNDS_EFFECTIVE_COUNT)] = np.nan
    return widths


def _t_quantile(p: float, dof: np.ndarray) -> np.ndarray:
    from scipy.stats import t

    return np.asarray(t.ppf(p, np.maximum(dof, 1.0)), dtype=np.float64)


def tracker_bounds(tracker: WeightedMoments, method: str, delta: float, spread: RealisationSpread | None,
                   too_smooth: bool) -> np.ndarray:
    """Half-widths by ``method`` from a tracker's moments (and the realisations' ``spread``); NaN before two
    values, or when ``too_smooth`` (a rate that averages too few rows for a bound)."""
    if needs_realisations(method) and spread is None:
        raise ValueError(f"bounds method {method!r} needs the realisations' spread, which this explainer "
                         f"does not keep: create it with bounds_method={method!r}")
    if tracker.count < 2 or too_smooth:
        check_delta(delta)
        return np.full(len(tracker.mean), np.nan)
    return half_width(method, delta, tracker.variance, tracker.effective_count, spread)


def row_bounds(moments: tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray], method: str, delta: float,
               n_rows: int, first_is_stored: bool, too_smooth: bool) -> np.ndarray:
    """:func:`tracker_bounds` after each of ``n_rows`` rows, from the moments recorded after each explained row
    (:meth:`~ipfi_cli.core.smoothing.ExponentialMean.moments_history`), with :func:`independent_half_widths`."""
    sum_sq_dev, weight, squares, count = moments
    if len(count) != n_rows - int(first_is_stored):
        raise AssertionError(f"{len(count)} recorded moments for {n_rows} rows")
    with np.errstate(divide="ignore", invalid="ignore"):
        variance = np.maximum(sum_sq_dev / weight[:, None], 0.0)  # WeightedMoments.variance, row by row
        effective = np.where(squares == 0.0, count.astype(np.float64), weight * weight / squares)
    widths = independent_half_widths(method, delta, variance, effective)
    widths[count < 2] = np.nan
    if too_smooth:
        widths[...] = np.nan
    if first_is_stored:
        widths = np.concatenate([np.full((1, widths.shape[1]), np.nan), widths])
    return widths


def wanted_rows(rows: Sequence[int] | None, n_rows: int) -> np.ndarray:
    """A mask of the offsets ``rows`` (``None``: all) among ``n_rows``; a ``ValueError`` for one outside."""
    wanted = np.zeros(n_rows, dtype=bool)
    offsets = np.arange(n_rows) if rows is None else np.asarray(rows, dtype=np.intp).reshape(-1)
    if len(offsets) and not (offsets.min() >= 0 and offsets.max() < n_rows):
        raise ValueError(f"bounds_rows are offsets of the call's rows, from 0 to {n_rows - 1}")
    wanted[offsets] = True
    return wanted


class BoundsSource(Protocol):
    """An explainer :class:`RowBounds` asks for its bounds."""

    names: list[str]

    def bound_array(self, delta: float = 0.05, method: str | None = None) -> np.ndarray: ...


class RowBounds:
    """The bounds after chosen rows of one :meth:`~ipfi_cli.core.incremental.IPFIEstimator.explain_many`
    call (offsets ``rows``; ``None``: all), each taken by ``e.bound_array(delta)`` as soon as its row is
    folded in, the fold cut there (:meth:`cuts`; the model's one call is not): the smoothing and the
    realisations are then as after a call that ends at that row, so these are that call's bounds, to the
    bit. ``out`` holds them, a row per row of the call, NaN on the others."""

    def __init__(self, e: BoundsSource, delta: float, rows: Sequence[int] | None, n_rows: int,
                 first_is_stored: bool) -> None:
        self.e, self.delta = e, delta
        self.out = np.full((n_rows, len(e.names)), np.nan)
        self.wanted = wanted_rows(rows, n_rows + 1)  # one more: a fold past the rows asks for nothing
        self.row = int(first_is_stored)  # the call's offset of the next row folded in

    def cuts(self, count: int) -> list[int]:
        """Where to cut the fold of the next ``count`` rows (ends, relative to them): after each wanted row,
        and at the end."""
        ends = (np.flatnonzero(self.wanted[self.row:self.row + count]) + 1).tolist()
        return ends if ends and ends[-1] == count else [*ends, count]

    def folded(self, count: int) -> None:
        """``count`` more rows are folded in: the bounds now, if the last one's are wanted."""
        self.row += count
        if self.wanted[self.row - 1]:
            self.out[self.row - 1] = self.e.bound_array(self.delta)
