"""iPFI whose state merges: smoothing by event time (forward decay) or the running mean.

:class:`MergeablePFI` is :class:`~ipfi_cli.core.incremental.IPFIEstimator` with its row-count
smoothing replaced by a :class:`~ipfi_cli.core.decay.DecayedMean`: with ``half_life`` each row's
contribution weighs by its event time (``explain_one(x, y, time=...)``), without it every row
weighs alike (the static setting's running mean). The states of shards of one stream, each
explained by its own explainer with the same settings, merge (:func:`merge_states`) into the
state of an explainer that can go on:

* **exact** (up to floating-point rounding): the smoothed sums, hence the estimate of the
  contributions the shards computed, their weights, counts and the mean loss;
* **approximate**: the reservoirs. Shard k's contributions were computed with replacement values
  drawn from shard k's own rows, so the merged estimate equals the whole stream's estimate in
  distribution only when every shard's rows are drawn from the same distribution (shards by
  hash of a key, or interleaved); shards by a key that matters give each feature the importance
  *within* its shard (a feature constant within shards gets none), and shards split by event time
  are refused (:func:`check_not_split_by_time`: a later shard never drew the earlier rows). The merged
  reservoirs (:func:`~ipfi_cli.core.decay.merge_reservoir_rows`) are a uniform sample of all
  shards' rows for uniform sampling, an approximation for geometric sampling.

>>> from ipfi_cli.models import FunctionPredictor
>>> model = FunctionPredictor(lambda X: (X[:, 0] > 0.5).astype(int))
>>> shards = [MergeablePFI(model, ["a", "b"], seed=s, n_repeats=2) for s in (1, 2)]
>>> rng = np.random.default_rng(0)
>>> for t in range(4000):
...     a, b = rng.random(2)
...     _ = shards[t % 2].explain_one({"a": a, "b": b}, int(a > 0.5))
>>> merged = MergeablePFI(model, ["a", "b"], seed=3, n_repeats=2)
>>> merged.load_state_dict(merge_states([s.state_dict() for s in shards], seed=3))
>>> {k: round(v, 1) for k, v in merged.importances.items()}, merged.n_explained   # truth: a = 0.5, b = 0
({'a': 0.5, 'b': 0.0}, 3998)
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.decay import DecayedMean, event_time, merge_reservoir_rows
from ipfi_cli.core.incremental import IPFIEstimator
from ipfi_cli.core.row_values import RowError
from ipfi_cli.core.state_fields import StateFieldError, array, choice, fields, integer, number, within
from ipfi_cli.errors import UsageError

#: a shard that begins after more of the other shards' rows than ``RANDOM_SPLIT_RARITY * N / n`` (``n`` of the
#: ``N`` rows its own) is a shard of a split by time: a split at random (by a hashed key, or interleaved)
#: puts that many before its first row with a chance of ``exp(-RANDOM_SPLIT_RARITY)`` (under 1 in 1,000)
RANDOM_SPLIT_RARITY = 7.0


class SplitByTime(UsageError):
    """Shards of a stream split by time, whose merge would not be one run's estimate: ``index`` is
    the shard that began after the others' rows (0-based), ``str()`` says why in one line."""

    def __init__(self, index: int, detail: str) -> None:
        super().__init__(f"state {index + 1}: {detail}")
        self.index = index
        self.detail = detail


class MergeablePFI(IPFIEstimator):
    """iPFI smoothed by forward decay in event time (``half_life``) or by the running mean (``None``).

    The parameters are :class:`~ipfi_cli.core.incremental.IPFIEstimator`'s, with ``half_life``
    (in the unit of the times given) in place of ``alpha``.
    """

    def __init__(self, *args: Any, half_life: float | None = None, time_column: str | None = None,
                 **kwargs: Any) -> None:
        kwargs.pop("alpha", None)
        if kwargs.get("bounds_method") == "realisations":
            raise ValueError("bounds_method='realisations' follows the exponential smoothing by rows; smoothed "
                             "by event time or the running mean, choose 'chebyshev' or 'normal'")
        super().__init__(*args, **kwargs)
        self.half_life = half_life
        #: where rows carry their event time, when no times are given (see :func:`~ipfi_cli.core.decay.event_time`)
        self.time_column = time_column
        self._tracker: DecayedMean = DecayedMean(len(self.names), half_life=half_life)  # type: ignore[assignment]
        self._fold_times: list[float | None] = []
        self._fold_next = 0

    # -- explaining with times --------------------------------------------------------------------
    def explain_one(self, x: Mapping[str, Any], y: Any, time: float | None = None) -> np.ndarray:
        self._times_for([self._time_of(x) if time is None else time])
        return super().explain_one(x, y)

    def explain_many(self, rows: Iterable[Mapping[str, Any]] | np.ndarray,
                     targets: Sequence[Any] | np.ndarray, *, times: Sequence[float | None] | None = None,
                     return_contributions: bool = False, bounds_delta: float | None = None,
                     bounds_rows: Sequence[int] | None = None) -> Any:
        rows = rows if isinstance(rows, np.ndarray) else list(rows)
        if times is None:
            times = [None] * len(rows) if isinstance(rows, np.ndarray) else [self._time_of(x) for x in rows]
        self._times_for(list(times))
        return super().explain_many(rows, targets, return_contributions=return_contributions,
                                    bounds_delta=bounds_delta, bounds_rows=bounds_rows)

    def _time_of(self, x: Mapping[str, Any]) -> float | None:
        if self.time_column is None or self.half_life is None:
            return None
        try:
            return event_time(x[self.time_column])
        except KeyError:
            raise RowError("missing from the row (the event time)", column=self.time_column) from None
        except ValueError as error:
            raise RowError(str(error), column=self.time_column) from None

    def _times_for(self, times: list[float | None]) -> None:
        if self.half_life is not None and any(t is None for t in times):
            raise ValueError("smoothing by event time needs each row's time")
        # the first row of the stream is stored, not explained: it folds nothing
        self._fold_times = times[1:] if self.n_seen == 0 else times
        self._fold_next = 0

    def _fold(self, losses: np.ndarray) -> None:
        unperturbed = float(losses[0])
        contributions = (losses[1:] - unperturbed).reshape(self.n_repeats, len(self.names))
        time = self._fold_times[self._fold_next]
        self._fold_next += 1
        self.last_contributions = contributions
        self.last_loss = unperturbed
        self._loss_sum += unperturbed
        self._tracker.update(np.add.reduce(contributions, axis=0) / self.n_repeats, time)

    def _track_many(self, contributions: np.ndarray) -> np.ndarray:
        """:meth:`_fold`'s smoothing for consecutive rows, at their times (the micro-batch's array fold)."""
        times = self._fold_times[self._fold_next:self._fold_next + len(contributions)]
        self._fold_next += len(contributions)
        return self._tracker.update_many(contributions, times)

    # -- state --------------------------------------------------------------------------------------
    def settings_dict(self) -> dict[str, Any]:
        settings = super().settings_dict()
        settings["alpha"] = None
        settings["smoothing"] = "running mean" if self.half_life is None else {"half_life": self.half_life}
        return settings

    def params(self) -> dict[str, Any]:
        params = super().params()
        params["alpha"] = None
        params["smoothing"] = "running mean" if self.half_life is None else {"half_life": self.half_life}
        return params

    def state_dict(self) -> dict[str, Any]:
        state = super().state_dict()
        state["explainer"] = "mergeable-ipfi"
        return state

    def load_state_dict(self, state: Mapping[str, Any]) -> None:
        if state.get("explainer") != "mergeable-ipfi":
            raise ValueError(f"the state is of a {state.get('explainer')!r} explainer, not a mergeable one "
                             "(states smoothed by row count do not merge)")
        super().load_state_dict({**state, "explainer": "ipfi"})


def merge_states(states: Sequence[Mapping[str, Any]], *, seed: int | None = None) -> dict[str, Any]:
    """The state of the whole from the states of its shards (:meth:`MergeablePFI.state_dict`).

    Every state must have the same settings (a :class:`ValueError` names the first that
    differs); ``seed`` seeds the merged explainer's generator and the reservoir merge (default:
    the first state's seed). Plain data in, plain data out: no model is needed.
    """
    if not states:
        raise ValueError("nothing to merge")
    first = states[0]
    for i, state in enumerate(states):
        if state.get("explainer") != "mergeable-ipfi":
            raise ValueError(f"state {i + 1} is not of a mergeable explainer (smoothed by row count: use "
                             "--half-life with --time-column, or the running mean)")
        if "remover" in state or "spread" in state:
            raise ValueError(f"state {i + 1} has conditional removal or the realisations' bounds, whose states "
                             "do not merge")
        differing = [k for k in first["settings"] if k != "seed" and state["settings"].get(k) != first["settings"][k]]
        if differing:
            key = differing[0]
            raise ValueError(f"state {i + 1} has other settings than state 1 ({key}: {state['settings'].get(key)!r} "
                             f"vs {first['settings'][key]!r})")
    settings = dict(first["settings"])
    settings["seed"] = first["settings"]["seed"] if seed is None else seed
    rng = np.random.default_rng(np.random.SeedSequence(settings["seed"]))
    half_life = None if settings["smoothing"] == "running mean" else settings["smoothing"]["half_life"]
    n = len(settings["groups"])
    if half_life is not None:
        check_not_split_by_time([state["tracker"] for state in states])

    def tracker(state: Mapping[str, Any]) -> DecayedMean:
        t = DecayedMean(n, half_life=half_life)
        t.load_state_dict(state["tracker"])
        return t

    merged_tracker = tracker(first)
    sampler = first["sampler"]
    for state in states[1:]:
        other = tracker(state)
        if state["sampler"] is not None:
            if sampler is None:
                sampler = state["sampler"]
            else:
                # each shard's share: the rows it saw (uniform), or its decayed weight (by event time)
                # (weights as a number of rows: the rows seen, shared in proportion to the decayed weights)
                # (uniform sampling keeps every row seen alike, whatever its time: the rows it saw)
                share_a, share_b = sampler["n_seen"], state["sampler"]["n_seen"]
                if half_life is not None and settings["sampling"] != "uniform":
                    aligned_a, aligned_b = _aligned_weights(merged_tracker, other)
                    rows_seen = share_a + share_b
                    share_a = rows_seen * aligned_a / (aligned_a + aligned_b) if aligned_a + aligned_b else share_a
                    share_b = rows_seen - share_a
                rows, filled = merge_reservoir_rows(np.asarray(sampler["rows"]), sampler["filled"], share_a,
                                                    np.asarray(state["sampler"]["rows"]),
                                                    state["sampler"]["filled"], share_b, rng)
                sampler = {**sampler, "rows": rows, "filled": filled,
                           "n_seen": sampler["n_seen"] + state["sampler"]["n_seen"]}
        merged_tracker = merged_tracker.merged(other)
    later = max(states, key=lambda s: (s["tracker"]["last_time"], s["tracker"]["count"]))
    return {"explainer": "mergeable-ipfi", "settings": settings, "rng": rng.bit_generator.state,
            "tracker": merged_tracker.state_dict(), "sampler": sampler,
            "n_seen": sum(int(s["n_seen"]) for s in states),
            "last_contributions": np.asarray(later["last_contributions"]).copy(),
            "last_loss": later["last_loss"], "loss_sum": float(sum(float(s["loss_sum"]) for s in states))}


def rows_before(tracker: Mapping[str, Any], time: float) -> float:
    """About how many of a shard's explained rows came before event ``time``, its rows taken as
    spread evenly between its first and last time (a :class:`~ipfi_cli.core.decay.DecayedMean`'s
    state); 0 where its first time is unknown.

    >>> rows_before({"count": 100, "first_time": 0.0, "last_time": 50.0}, 20.0)
    40.0
    """
    count, first, last = int(tracker["count"]), float(tracker.get("first_time", -np.inf)), float(tracker["last_time"])
    if count == 0 or not np.isfinite(first) or time <= first:
        return 0.0
    if time > last:
        return float(count)
    return count * (time - first) / (last - first)


def check_not_split_by_time(trackers: Sequence[Mapping[str, Any]]) -> None:
    """Refuse shards split by time (:class:`SplitByTime`, a usage error).

    Each shard drew its replacement values from a reservoir of its own rows only. When the shards
    split the stream at random (by a hashed key, interleaved) its rows are a sample of the whole
    stream's and the merged estimate is one run's in distribution; when a shard begins after the
    other shards' rows, one run would have explained its rows with theirs in the reservoir, and no
    merge can recover what they would have given (a feature that trends over time varies less within
    a later shard than over the stream: on the daily approval polls of river's ``TrumpApproval``,
    rows 1-500 and 501-1,000 merged and continued gave 0.54 to 0.83 of one run's importances, four of
    the five outside its bounds). A shard begins too late when the other shards hold more than
    ``RANDOM_SPLIT_RARITY * N / n`` rows before its first (``n`` of the ``N`` rows its own), which a
    random split gives in under 1 in 1,000 cases.
    """
    import datetime

    total = sum(int(t["count"]) for t in trackers)
    for i, tracker in enumerate(trackers):
        own, first = int(tracker["count"]), float(tracker.get("first_time", -np.inf))
        if own == 0 or not np.isfinite(first):
            continue
        before = sum(rows_before(other, first) for j, other in enumerate(trackers) if j != i)
        if before > RANDOM_SPLIT_RARITY * total / own:
            try:
                when = datetime.datetime.fromtimestamp(first, datetime.UTC).strftime("%Y-%m-%d %H:%M:%S UTC")
            except (OverflowError, OSError, ValueError):
                when = f"{first:g} s"
            raise SplitByTime(i, f"its first explained row is of {when}, after about {before:,.0f} rows of the "
                              "other shards, which its reservoir never held: shards split by time do not merge into "
                              "one run's estimate (each drew replacement values from its own rows only); merge "
                              "shards split by a hashed key or interleaved, or go on from the earlier shard's state "
                              "with the later rows, which gives one run's numbers (ipfi explain LATER --state EARLIER "
                              "--no-skip-seen)")


def check_shard(state: Mapping[str, Any]) -> None:
    """Check the fields of one shard's explainer state that :func:`merge_states` reads (a state crafted with a
    valid checksum may hold anything): a :class:`~ipfi_cli.core.state_fields.StateFieldError` names the field."""
    state = fields(state)
    choice(state, "explainer", ["mergeable-ipfi"])
    settings = state["settings"]
    with within("settings"):
        fields(settings)
        groups = fields(settings["groups"])
        integer(settings, "seed")
        smoothing = settings["smoothing"]
        if smoothing != "running mean":
            with within("smoothing"):
                half_life = number(smoothing, "half_life", low=0.0)
            if not half_life > 0:
                raise StateFieldError("smoothing.half_life", "must be positive")
    n = len(groups)
    half = None if smoothing == "running mean" else smoothing["half_life"]
    tracker, sampler = state["tracker"], state["sampler"]
    with within("tracker"):
        DecayedMean(n, half_life=half).load_state_dict(tracker)
    if sampler is not None:
        with within("sampler"):
            rows = array(sampler, "rows", (None, None, None), kinds="fiubO", finite=False)
            filled = integer(sampler, "filled", high=rows.shape[1])
            integer(sampler, "n_seen", low=filled)
    integer(state, "n_seen")
    number(state, "loss_sum", low=0.0)
    number(state, "last_loss", low=0.0, nan=True)
    array(state, "last_contributions", (None, n), finite=False)


def _aligned_weights(a: DecayedMean, b: DecayedMean) -> tuple[float, float]:
    """The two smoothings' total weights on a common landmark."""
    merged_landmark = max(x.landmark for x in (a, b) if x.landmark is not None) \
        if a.landmark is not None or b.landmark is not None else None
    weights = []
    for x in (a, b):
        copy = x._copy()
        if merged_landmark is not None and copy.landmark is not None:
            copy._move_landmark(merged_landmark)
        weights.append(copy.weight)
    return weights[0], weights[1]
