"""Importance-change detection on iPFI's per-row contributions, with a false-alarm guarantee.

iPFI's smoothed estimate of feature (or group) ``j`` averages per-row contributions
``lambda_t(j)`` (the loss increase of row ``t`` when ``j`` is replaced, averaged over the
``M`` realisations; :attr:`IPFIEstimator.last_contribution`). A change in the model's
reliance on ``j`` is a change in the mean of ``lambda_t(j)``. :class:`ChangeDetector` runs
one river :class:`~river.drift.ADWIN` per feature or group, and one on the model's own
per-row loss, and turns ADWIN's detections into :class:`ChangeEvent` records that say what
changed, from what to what, with which confidence, and where it ranks.

**The test (ADWIN, Bifet & Gavalda 2007, as river implements it).** ADWIN keeps a window
``W`` of the most recent values (``n`` of them, in exponential buckets) and, every ``clock``
values, checks each bucket boundary splitting ``W`` into an older part ``W0`` (``n0`` values)
and a recent part ``W1`` (``n1``). It flags a change when::

    |mean(W0) - mean(W1)| > eps_cut,
    eps_cut = sqrt(2 / m * var(W) * L) + 2 / (3 m) * L,   1/m = 1/(n0 - 4) + 1/(n1 - 4),
    L = ln(2 ln(n) / delta)

(``var(W)`` is the window's variance; the ``- 4`` is river's ``min_window_length - 1``). It
then drops the oldest buckets until no boundary is significant. The values are divided by
their range ``R`` first (``value_range``; zero-one loss: contributions lie in [-1, 1], so
``R = 2``, the loss in [0, 1], ``R = 1``), which makes ``eps_cut`` Bernstein's bound for
values in an interval of width 1.

**The guarantee.** (ADWIN's Theorem 3.1, false positives.) If the mean of the values has
not changed within the window, each cut's test errs with probability at most
``delta / ln(n)`` (Bernstein's inequality, two-sided); a check tests the bucket boundaries,
about ``5 log2(n)`` of them (river's ``max_buckets = 5`` per size), so by a union bound a
check of one detector flags a change with probability at most ``5 / ln(2) * delta ~ 7.2 *
delta`` (0.0144 at the default ``delta = 0.002``). Over a stream of ``T`` rows a detector makes
``T / clock`` checks: ``7.2 * delta * T / clock`` bounds its expected number of false alarms.
The bound is loose (a union over overlapping cuts, Bernstein with the worst-case range), and
the measured rate is far lower (none in 10 x 20,000 rows, 10 detectors, M = 10 or 3: see
``benchmarks/bench_changes.py``). Two caveats, as for :meth:`IPFIEstimator.bounds`: the
test uses the window's sample variance in place of the true one, and contributions of nearby
rows share reservoir rows, so they are not quite independent; the guarantee is for the
idealised stream of independent rows. For a loss without a known range (absolute, squared,
log) the values are not scaled unless ``value_range`` / ``loss_range`` are given, and the
range term is then in the values' own units: approximate.

**What is reported.** ADWIN says *that* the mean changed, checking bucket boundaries only;
after a detection it keeps the longest recent part of its window without a significant cut,
which may still hold many rows from before the change. The event's two windows are found
exactly instead: the detector's window (its last ``history / 2`` rows at most) is split at the
most likely change point of its mean, the row that maximises ``n0 n1 / n (mean0 - mean1)^2``
(Hinkley's estimate of a single change in mean; ``start_row``), so ``before`` and ``after`` are
the means before and from it, each with an empirical-Bernstein half-width at the level of the test,
``sqrt(2 var_i L / n_i) + 2 R L / (3 n_i)``. A detection becomes an event only if the two means
differ by at least ``min_change`` (importance or loss units, default 0.01), so a long stream
does not alert on trivial shifts. Either way the detector then restarts on the rows that
follow (river's ADWIN resets after a detection).

**A reference ranking** (``reference``): the current estimates' top-``k`` ranking is scored
against a reference importance vector by nDCG@k (:func:`ndcg_at_k`, the reference's
importances as relevances), every ``clock`` rows after ``warmup`` rows; a
:class:`RankingEvent` is raised when it falls below ``ndcg_threshold`` (default 0.9, as
SageMaker Clarify uses), once per crossing: it re-arms only after the nDCG has come back
above ``ndcg_threshold + rearm``.

>>> import numpy as np
>>> rng = np.random.default_rng(0)
>>> detector = ChangeDetector(["a", "b"], value_range=2.0, loss_range=1.0)
>>> events = []
>>> for row in range(6000):
...     relied_on = 0 if row < 3000 else 1           # the model stops using "a" for "b"
...     contributions = np.zeros(2)
...     contributions[relied_on] = float(rng.random() < 0.5)
...     events += detector.update(row, contributions, loss=float(rng.random() < 0.1))
>>> [(e.feature, e.direction, e.rank_before, e.rank_after, e.row > 3000) for e in events]
[('b', 'up', 2, 1, True), ('a', 'down', 1, 2, True)]
>>> a = events[1]
>>> round(a.before, 1), round(a.after, 1), abs(a.start_row - 3000) < 10   # each window's mean; the change point
(0.5, 0.0, True)
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import numpy as np

# ChangeEvent, RankingEvent and ndcg_at_k are this module's too (re-exported from where they live)
from ipfi_cli.core.change_windows import adwin_from_state, adwin_state, bernstein_bound, change_point, window_stats
from ipfi_cli.core.events import LOSS
from ipfi_cli.core.events import ChangeEvent as ChangeEvent
from ipfi_cli.core.events import RankingEvent as RankingEvent
from ipfi_cli.core.ranking import importance_error, top_names
from ipfi_cli.core.ranking import ndcg_at_k as ndcg_at_k

if TYPE_CHECKING:
    from ipfi_cli.core.explainer import Explainer


# -- the detector ------------------------------------------------------------------------------
def default_ranges(loss: Any) -> tuple[float | None, float | None]:
    """``(contribution range, loss range)`` for a loss (name or :class:`Loss`); ``None``: unbounded.

    >>> default_ranges("zero-one")
    (2.0, 1.0)
    """
    name = getattr(loss, "name", loss)
    return (2.0, 1.0) if name == "zero-one" else (None, None)


def _ranks(means: np.ndarray) -> np.ndarray:
    """1 + the number of strictly larger means (ties share the better rank)."""
    return cast(np.ndarray, 1 + (means[None, :] > means[:, None]).sum(axis=1))


class ChangeDetector:
    """Detects changes in a model's reliance on its features, and in its loss, on a stream.

    One river ADWIN per feature or group on the per-row contributions, and one on the
    model's per-row loss (see the module docstring for the test and its guarantee). Feed it
    every explained row with :meth:`update` (or a micro-batch with :meth:`update_many`, or
    straight from an explainer with :meth:`update_from`); it returns the events of that row.
    It pickles, and a restored detector carries on exactly as the original would.

    Parameters
    ----------
    names : list of str
        The features or groups, in the order of the contribution vectors.
    delta : float, default=0.002
        ADWIN's confidence: the false-alarm probability per check of each detector.
    min_change : float, default=0.01
        The smallest change of a mean (importance or loss units) worth an event.
    value_range, loss_range : float, default=None
        Width of the interval the contributions / the per-row losses lie in (see
        :func:`default_ranges`); ``None``: unknown, values are not scaled.
    clock : int, default=32
        ADWIN checks every ``clock`` rows (river's default); also the reference check's period.
    reference : array-like of float, default=None
        A reference importance vector in ``names`` order: check the ranking against it.
    k : int, default=None
        Top-k of the reference check (default ``min(10, len(names))``).
    ndcg_threshold : float, default=0.9
        A :class:`RankingEvent` when nDCG@k falls below it.
    rearm : float, default=0.02
        After an event the reference check re-arms once nDCG is back above ``threshold + rearm``.
    warmup : int, default=1000
        Rows before the reference check starts (the estimates are noisy at first).
    link_rows : int, default=500
        How far apart a loss event and importance events may be to be reported together.
    history : int, default=20000
        Rows whose values are kept for the events' windows (at most ``2**20`` values: fewer rows
        for many features; 9 features: 1.6 MB); a longer detector window is reported over its
        last ``history / 2`` rows, the same however the rows are fed (one by one or in
        micro-batches). The detection itself does not depend on it.

    Attributes
    ----------
    events : list of ChangeEvent and RankingEvent
        Every event so far, in order.
    n_rows : int
        Rows fed so far (rows with a NaN contribution are not counted).
    n_suppressed : int
        Detections below ``min_change``, not reported.
    """

    def __init__(self, names: Sequence[str], *, delta: float = 0.002, min_change: float = 0.01,
                 value_range: float | None = None, loss_range: float | None = None, clock: int = 32,
                 reference: Sequence[float] | np.ndarray | None = None, k: int | None = None,
                 ndcg_threshold: float = 0.9, rearm: float = 0.02, warmup: int = 1000,
                 link_rows: int = 500, history: int = 20000) -> None:
        from river.drift import ADWIN  # here, so importing this module stays cheap

        if not 0.0 < delta < 1.0:
            raise ValueError(f"delta must be in (0, 1), got {delta}")
        if min_change < 0:
            raise ValueError(f"min_change must be at least 0, got {min_change}")
        for label, value in (("value_range", value_range), ("loss_range", loss_range)):
            if value is not None and not value > 0:
                raise ValueError(f"{label} must be positive, got {value}")
        self.names = [str(n) for n in names]
        self.delta = float(delta)
        self.min_change = float(min_change)
        self.value_range = value_range
        self.loss_range = loss_range
        self.clock = int(clock)
        self.ndcg_threshold = float(ndcg_threshold)
        self.rearm = float(rearm)
        self.warmup = int(warmup)
        self.link_rows = int(link_rows)
        n = len(self.names) + 1   # the features, then the loss
        self._ranges = np.array([value_range or 1.0] * (n - 1) + [loss_range or 1.0])
        self._scale = 1.0 / self._ranges
        self._adwin_params = {"delta": self.delta, "clock": self.clock}
        self._adwins = [ADWIN(**self._adwin_params) for _ in range(n)]
        # the values of the last ``history`` rows (a ring), for the events' windows
        self._start = np.zeros(n, dtype=np.int64)   # index (into the rows fed) of each window's first row
        self.history = max(64, min(int(history), (1 << 20) // n))
        self._ring = np.zeros((self.history, n))
        self._ring_row = np.zeros(self.history, dtype=np.int64)
        self._written = 0   # rows that went into the ring
        self.n_rows = 0
        self.n_suppressed = 0
        self.events: list[ChangeEvent | RankingEvent] = []
        self._last_loss_event: int | None = None   # row of the last loss event
        self._last_importance: dict[str, int] = {}   # feature -> row of its last importance event
        self._seen_explained: int | None = None   # for update_from: the explainer's n_explained last time
        # reference ranking
        self.reference = None if reference is None else np.asarray(reference, dtype=np.float64)
        if self.reference is not None and self.reference.shape != (len(self.names),):
            raise ValueError(f"the reference has {self.reference.size} values for {len(self.names)} features")
        self.k = min(10, len(self.names)) if k is None else int(k)
        self.ndcg = float("nan")   # the last nDCG computed
        self._armed = True

    @classmethod
    def from_explainer(cls, explainer: Any, **options: Any) -> ChangeDetector:
        """A detector for an :class:`~ipfi_cli.core.explainer.Explainer` (or the Python API's
        ``IPFIEstimator``, through its ``explainer``): its names, and its loss's ranges.

        Examples
        --------
        >>> from ipfi_cli.core import IPFIEstimator
        >>> from ipfi_cli.models import FunctionPredictor
        >>> explainer = IPFIEstimator(FunctionPredictor(lambda X: X[:, 0] > 0), ["a", "b"])
        >>> detector = ChangeDetector.from_explainer(explainer, min_change=0.02)
        >>> detector.names, detector.value_range, detector.loss_range
        (['a', 'b'], 2.0, 1.0)
        """
        inner = _explainer_of(explainer)
        if inner is None:
            raise ValueError("the explainer does not know its columns yet: explain a row first, or give columns")
        value_range, loss_range = default_ranges(inner.params()["loss"])
        options.setdefault("value_range", value_range)
        options.setdefault("loss_range", loss_range)
        return cls(list(inner.names), **options)

    # -- feeding -------------------------------------------------------------------------------
    def update(self, row: int, contributions: Sequence[float] | np.ndarray, loss: float,
               estimates: Sequence[float] | np.ndarray | None = None) -> list[ChangeEvent | RankingEvent]:
        """Feed one explained row; returns its events (usually none).

        ``contributions``: the row's contribution per feature (``IPFIEstimator.last_contribution``),
        ``loss``: its unperturbed loss (``last_loss``), ``estimates``: the smoothed estimates after
        it (needed only for the reference check). A row with a NaN contribution is skipped.
        """
        n_features = len(self.names)
        values = np.empty((1, n_features + 1))
        try:
            values[0, :n_features] = contributions
        except ValueError:
            raise ValueError(f"expected {n_features} contributions, got {np.shape(contributions)}") from None
        values[0, n_features] = loss
        if np.isnan(values.sum()):
            return []
        estimates_block = None if estimates is None else np.asarray(estimates, dtype=np.float64).reshape(1, -1)
        return self._feed(np.array([row], dtype=np.int64), values, estimates_block)

    def update_many(self, rows: Sequence[int] | np.ndarray, contributions: np.ndarray,
                    losses: Sequence[float] | np.ndarray,
                    estimates: np.ndarray | None = None) -> list[ChangeEvent | RankingEvent]:
        """Feed consecutive rows (``explain_many(..., return_contributions=True)``'s output);
        the same events as :meth:`update` row by row. Rows with a NaN contribution are skipped."""
        contributions = np.asarray(contributions, dtype=np.float64)
        n_features = len(self.names)
        if contributions.ndim != 2 or contributions.shape[1] != n_features:
            raise ValueError(f"expected contributions of shape (rows, {n_features}), got {contributions.shape}")
        values = np.empty((contributions.shape[0], n_features + 1))
        values[:, :n_features] = contributions
        values[:, n_features] = np.asarray(losses, dtype=np.float64)
        rows = np.asarray(rows, dtype=np.int64)
        keep = ~np.isnan(values).any(axis=1)
        if not keep.all():
            values, rows = values[keep], rows[keep]
            estimates = None if estimates is None else np.asarray(estimates)[keep]
        events: list[ChangeEvent | RankingEvent] = []
        step = self.history // 2   # a chunk never overwrites ring rows it still needs
        for a in range(0, len(values), step):
            events += self._feed(rows[a:a + step], values[a:a + step],
                                 None if estimates is None else estimates[a:a + step])
        return events

    def update_from(self, explainer: Any, row: int | None = None) -> list[ChangeEvent | RankingEvent]:
        """Feed the row an explainer (an :class:`~ipfi_cli.core.explainer.Explainer`, or the Python
        API's ``IncrementalPFI``) has just explained.

        Call it after each ``explain_one``; ``row`` defaults to the explainer's count of rows
        seen minus one (0-based). A call with no newly explained row returns no event.
        """
        inner = _explainer_of(explainer)
        if inner is None or inner.n_explained == self._seen_explained or inner.n_explained == 0:
            return []
        self._seen_explained = inner.n_explained
        row = inner.n_seen - 1 if row is None else row
        return self.update(row, inner.last_contribution, inner.last_loss, inner.importance_array())

    # -- internals -----------------------------------------------------------------------------
    def _feed(self, rows: np.ndarray, values: np.ndarray,
              estimates: np.ndarray | None) -> list[ChangeEvent | RankingEvent]:
        t = len(values)
        if t == 0:
            return []
        first = self.n_rows
        if t == 1:
            position = first % self.history
            self._ring[position] = values[0]
            self._ring_row[position] = rows[0]
        else:
            positions = np.arange(first, first + t) % self.history
            self._ring[positions] = values
            self._ring_row[positions] = rows
        self._written = first + t
        scaled = (values * self._scale).tolist()
        adwins = self._adwins
        events: list[ChangeEvent | RankingEvent] = []
        for i in range(t):
            for j, (adwin, value) in enumerate(zip(adwins, scaled[i])):
                adwin.update(value)
                if adwin.drift_detected:
                    event = self._detected(j, first + i)
                    if event is not None:
                        events.append(event)
            if estimates is not None and self.reference is not None and (first + i + 1) % self.clock == 0:
                ranking = self._check_reference(int(rows[i]), first + i + 1, estimates[i])
                if ranking is not None:
                    events.append(ranking)
        self.n_rows = first + t
        self.events.extend(events)
        return events

    def _span(self, a: int, b: int) -> tuple[int, np.ndarray] | None:
        """The values of rows ``a .. b - 1`` (indices into the rows fed) from the ring, ``a`` moved
        up to the oldest row kept, and returned. ``None`` if no row is left."""
        # only the last ``history - history // 2`` rows before ``b``: rows a chunk of at most
        # ``history // 2`` has written beyond ``b`` cannot have overwritten those, so the windows
        # (and the events) are the same however the rows were fed
        a = max(a, self._written - self.history, b - (self.history - self.history // 2))
        if b <= a:
            return None
        return a, self._ring[np.arange(a, b) % self.history]

    def _detected(self, j: int, index: int) -> ChangeEvent | None:
        """Detector ``j`` flagged a change at row ``index`` (into the rows fed): make its event
        (or count it as suppressed), then restart its window after this row.

        The event's windows split the detector's window (its last ``history / 2`` rows at most) at
        the most likely change point, over every row (ADWIN itself looks at bucket boundaries
        only, and keeps the longest recent part without a significant cut, which may hold many
        rows from before the change)."""
        width = self._ranges[j]
        start = int(self._start[j])
        n_window = index - start + 1
        self._start[j] = index + 1
        log_term = math.log(2.0 * math.log(max(n_window, 3)) / self.delta)
        span = self._span(start, index + 1)
        if span is None:
            self.n_suppressed += 1
            return None
        a, values = span
        n = len(values)
        low = 5   # river's min_window_length
        if n < 2 * low:
            self.n_suppressed += 1
            return None
        n0 = change_point(values[:, j], low)
        n1 = n - n0
        cut = a + n0
        before, after = window_stats(values[:n0]), window_stats(values[n0:])
        mean0, mean1 = before[1][j], after[1][j]
        if abs(mean1 - mean0) < self.min_change:
            self.n_suppressed += 1
            return None
        row = int(self._ring_row[index % self.history])
        start_row = int(self._ring_row[cut % self.history])
        common: dict[str, Any] = {
            "row": row, "direction": "up" if mean1 > mean0 else "down", "before": float(mean0),
            "after": float(mean1), "before_bound": bernstein_bound(before[2][j], n0, log_term, width),
            "after_bound": bernstein_bound(after[2][j], n1, log_term, width), "n_before": n0, "n_after": n1,
            "start_row": start_row}
        if j == len(self.names):   # the loss
            features = self._changed_with(before, after, log_term, row)
            self._last_loss_event = row
            return ChangeEvent(feature=LOSS, kind="loss", features=features, **common)
        name = self.names[j]
        rank_before = int(_ranks(before[1][:-1])[j])
        rank_after = int(_ranks(after[1][:-1])[j])
        loss_row = self._last_loss_event
        if loss_row is not None and row - loss_row > self.link_rows:
            loss_row = None
        self._last_importance[name] = row
        return ChangeEvent(feature=name, kind="importance", rank_before=rank_before, rank_after=rank_after,
                           loss_row=loss_row, **common)

    def _changed_with(self, before: tuple[int, np.ndarray, np.ndarray], after: tuple[int, np.ndarray, np.ndarray],
                      log_term: float, row: int) -> tuple[str, ...]:
        """Features whose contributions changed over a loss event's windows, then those with a recent event."""
        (n0, mean0, m2_0), (n1, mean1, m2_1) = before, after
        changes = []
        for g, name in enumerate(self.names):
            bounds = (bernstein_bound(m2_0[g], n0, log_term, self._ranges[g])
                      + bernstein_bound(m2_1[g], n1, log_term, self._ranges[g]))
            change = abs(mean1[g] - mean0[g])
            if change >= self.min_change and change > bounds:
                changes.append((-change, g, name))
        listed = [name for _, _, name in sorted(changes)]
        recent = sorted((r, name) for name, r in self._last_importance.items()
                        if row - r <= self.link_rows and name not in listed)
        return tuple(listed + [name for _, name in recent])

    def _check_reference(self, row: int, count: int, estimates: np.ndarray) -> RankingEvent | None:
        if count < self.warmup or self.reference is None:
            return None
        ndcg = ndcg_at_k(estimates, self.reference, self.k)
        self.ndcg = ndcg
        if math.isnan(ndcg):
            return None
        if not self._armed:
            if ndcg >= self.ndcg_threshold + self.rearm:
                self._armed = True
            return None
        if ndcg >= self.ndcg_threshold:
            return None
        self._armed = False
        return RankingEvent(row=row, ndcg=ndcg, threshold=self.ndcg_threshold, k=self.k,
                            top_current=top_names(self.names, estimates, self.k),
                            top_reference=top_names(self.names, self.reference, self.k),
                            error=importance_error(estimates, self.reference))

    # -- results -------------------------------------------------------------------------------
    def summary(self, estimates: Sequence[float] | np.ndarray | None = None) -> dict[str, Any]:
        """What the run's final summary shows: every event, counts, and the reference check.

        With ``estimates`` (the final ones) and a reference: their nDCG@k, the paper's error
        against the reference.
        """
        out: dict[str, Any] = {
            "rows": self.n_rows, "events": [e.to_dict() for e in self.events], "suppressed": self.n_suppressed,
            "changed": sorted({e.feature for e in self.events if isinstance(e, ChangeEvent) and e.kind != LOSS}),
            "loss_changes": sum(1 for e in self.events if isinstance(e, ChangeEvent) and e.kind == LOSS),
            "ranking_events": sum(1 for e in self.events if isinstance(e, RankingEvent)),
        }
        if self.reference is not None and estimates is not None:
            estimates = np.asarray(estimates, dtype=np.float64)
            out["reference"] = {"ndcg": ndcg_at_k(estimates, self.reference, self.k), "k": self.k,
                                "threshold": self.ndcg_threshold,
                                "error": importance_error(estimates, self.reference)}
        return out

    # -- state as plain data ---------------------------------------------------------------------
    def state_dict(self) -> dict[str, Any]:
        """The detector's whole state as plain data (settings, ADWIN windows, ring, events)."""
        import dataclasses

        state = {k: v for k, v in vars(self).items() if k not in ("_adwins", "events")}
        state["_adwins"] = [adwin_state(a) for a in self._adwins]
        state["events"] = [{"event": type(e).__name__,
                            "fields": {f.name: getattr(e, f.name) for f in dataclasses.fields(e)}}
                           for e in self.events]
        return state

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from :meth:`state_dict`'s data (a detector of the same names)."""
        if list(state["names"]) != self.names:
            raise ValueError(f"the state is of a detector of {state['names']}, not of {self.names}")
        kinds: dict[str, Any] = {"ChangeEvent": ChangeEvent, "RankingEvent": RankingEvent}
        vars(self).update({k: v for k, v in state.items() if k not in ("_adwins", "events")})
        self._adwins = [adwin_from_state(a) for a in state["_adwins"]]
        self.events = [kinds[e["event"]](**e["fields"]) for e in state["events"]]


def _explainer_of(explainer: Any) -> Explainer | None:
    """The :class:`~ipfi_cli.core.explainer.Explainer` itself, or the one a wrapper holds in its
    public ``explainer`` (the Python API's ``IncrementalPFI``: ``None`` before its first row)."""
    inner: Explainer | None = getattr(explainer, "explainer", explainer)
    return inner
