"""What ipfi tells Prometheus: the metric families of a run, built from its numbers.

:func:`stream_families` turns the numbers of an ``ipfi explain`` session at one moment
(:class:`StreamNumbers`) into metric families; :func:`end_families` adds the gauges of a run that
ended well; :func:`batch_families` and :func:`comparison_families` are ``ipfi batch``'s and
``ipfi compare``'s. Where they go (served, written to a textfile, pushed) is
:mod:`ipfi_cli.run.monitor`'s business; the text format is :mod:`ipfi_cli.io.prometheus`'s.

The metrics (all with the constant labels of ``--metrics-label``):

========================================  ========  =====================  ==========================================
name                                      type      labels                 value
========================================  ========  =====================  ==========================================
``ipfi_feature_importance``               gauge     feature                the current importance (loss units)
``ipfi_feature_importance_bound``         gauge     feature                its confidence half-width (``--delta``)
``ipfi_feature_rank``                     gauge     feature                1 = most important (ties share)
``ipfi_model_loss``                       summary                          the model's loss: ``_sum`` and ``_count``
``ipfi_ranking_ndcg``                     gauge                            nDCG@k against ``--reference``
``ipfi_change_events_total``              counter   kind, feature,         change events
                                                    direction
``ipfi_rows_read_total``                  counter                          rows read (explained, stored or skipped)
``ipfi_rows_explained_total``             counter                          rows explained
``ipfi_rows_skipped_total``               counter                          bad rows skipped
``ipfi_model_calls_total``                counter                          calls to the model
``ipfi_model_predictions_total``          counter                          rows those calls predicted
``ipfi_last_row_timestamp_seconds``       gauge                            Unix time the last row was explained
``ipfi_start_timestamp_seconds``          gauge                            Unix time the run started
``ipfi_last_success_timestamp_seconds``   gauge                            the end of a complete run (textfile, push)
``ipfi_duration_seconds``                 gauge                            its duration (textfile, push)
``ipfi_model_up``                         gauge                            served model: 1 answering, 0 waited for
``ipfi_model_requests_total``             counter   outcome                tries by outcome: ok, unavailable (an
                                                                           outage's), error (500), refused (4xx)
``ipfi_model_retries_total``              counter                          requests sent again after a failure
``ipfi_model_outages_total``              counter                          times the model became unreachable
``ipfi_model_request_duration_seconds``   histogram                        answered requests' latency
``ipfi_webhook_posts_total``              counter   outcome                --webhook posts: delivered, failed (after
                                                                           retries, or refused), dropped (queue full,
                                                                           unsent at the end), suppressed (cooldown)
``ipfi_label_rows_given_up_total``        counter                          --labels: rows given up waiting for their
                                                                           label (never explained)
``ipfi_labels_late_total``                counter                          labels that came after their row was
                                                                           given up (dropped)
``ipfi_build_info``                       gauge 1                          version, python
``ipfi_run_info``                         gauge 1                          command, loss, mode, sampling
========================================  ========  =====================  ==========================================

Served over HTTP (``--metrics-port``), the registry also holds prometheus_client's process and
platform collectors (``process_*``: CPU seconds, resident memory, open file descriptors, start time;
``python_info``); a textfile or a push, which outlive the process, does not.

The smoothed loss is ``rate(ipfi_model_loss_sum[w]) / rate(ipfi_model_loss_count[w])``: the
mean over the window ``w`` the query chooses (the summary is the Prometheus way to expose it).
"""

from __future__ import annotations

import math
import platform
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from ipfi_cli.errors import UsageError
from ipfi_cli.io.prometheus import Family, check_label_name
from ipfi_cli.version import __version__

__all__ = ["OWN_LABELS", "WEBHOOK_OUTCOMES", "StreamNumbers", "batch_families", "build_families",
           "comparison_families", "end_families", "label_families", "parse_labels", "ranks", "served_families",
           "stream_families", "webhook_families"]

#: label names ipfi sets on some metric: a --metrics-label cannot take them
OWN_LABELS = ("feature", "kind", "direction", "version", "python", "command", "loss", "mode", "sampling",
              "quantile", "job", "instance", "outcome", "le")


def parse_labels(pairs: Sequence[str] | None, option: str, reserved: Sequence[str] = OWN_LABELS) -> dict[str, str]:
    """``["model=churn", "env=prod"]`` -> ``{"model": "churn", "env": "prod"}``; a bad pair is a usage error.

    >>> parse_labels(["model=churn", "env=prod"], "--metrics-label")
    {'model': 'churn', 'env': 'prod'}
    """
    labels: dict[str, str] = {}
    for pair in pairs or []:
        name, sep, value = pair.partition("=")
        name = name.strip()
        if not sep:
            raise UsageError(f"expected name=value, got {pair!r}", option)
        problem = check_label_name(name, reserved)
        if problem:
            raise UsageError(problem, option)
        if name in labels:
            raise UsageError(f"label {name!r} given twice", option)
        labels[name] = value
    return labels


def ranks(values: Sequence[float]) -> list[int]:
    """1 + the number of strictly larger values (ties share the better rank).

    >>> ranks([0.1, 0.3, 0.1, 0.0])
    [2, 1, 2, 4]
    """
    return [1 + sum(1 for other in values if other > v) for v in values]


def build_families(command: str, loss: str | None, settings: Any) -> list[Family]:
    families = [Family("ipfi_build_info", "info", "The ipfi that runs.",
                       samples=[((), {"version": __version__, "python": platform.python_version()})])]
    if loss is not None:
        mode = "learning" if settings.model.learn else "static"
        families.append(Family("ipfi_run_info", "info", "What the run computes: the loss the importances are in, "
                               "learning or static.",
                               samples=[((), {"command": command, "loss": loss, "mode": mode,
                                              "sampling": settings.params.sampling})]))
    return families


class SnapshotFigures(Protocol):
    """What :meth:`StreamNumbers.of` reads of a run's snapshot (:class:`~ipfi_cli.run.observers.Snapshot`)."""

    names: Sequence[str]
    importances: Sequence[float]
    bounds: Sequence[float]
    rows: int
    explained: int
    skipped: int
    loss_sum: float
    model_calls: int
    predictions: int


class RankingReference(Protocol):
    """``--reference`` (:class:`~ipfi_cli.run.observers.Ranking`): the importances, nDCG's k, the threshold."""

    @property
    def reference(self) -> Sequence[float]: ...

    @property
    def k(self) -> int: ...

    @property
    def threshold(self) -> float: ...


@dataclass
class StreamNumbers:
    """The numbers of an ``explain`` session at one moment (all read together)."""

    names: list[str]
    importances: list[float]
    bounds: list[float]
    loss_sum: float
    explained: int
    rows_read: int
    skipped: int
    model_calls: int
    predictions: int
    last_row_time: float | None
    ndcg: float | None
    ndcg_threshold: float | None
    events: dict[tuple[str, str, str], int]

    @classmethod
    def of(cls, snapshot: SnapshotFigures, events: dict[tuple[str, str, str], int],
           ranking: RankingReference | None = None) -> StreamNumbers:
        """The numbers of ``snapshot`` (what the traces hold, and the model calls), with the change
        events counted so far and, with ``--reference`` (``ranking``), the ranking's nDCG@k."""
        importances = [float(v) for v in snapshot.importances]
        explained = int(snapshot.explained)
        ndcg = threshold = None
        if ranking is not None:
            threshold = float(ranking.threshold)
            if explained:
                from ipfi_cli.core.ranking import ndcg_at_k

                ndcg = float(ndcg_at_k(importances, ranking.reference, ranking.k))
        # the explainer's running sum: mean * count can be 1 ulp below an earlier value, a counter reset
        loss_sum = float(snapshot.loss_sum) if explained else 0.0
        return cls(names=list(snapshot.names), importances=importances, bounds=[float(b) for b in snapshot.bounds],
                   loss_sum=loss_sum, explained=explained, rows_read=int(snapshot.rows) + int(snapshot.skipped),
                   skipped=int(snapshot.skipped), model_calls=int(snapshot.model_calls),
                   predictions=int(snapshot.predictions), last_row_time=None, ndcg=ndcg,
                   ndcg_threshold=threshold, events=dict(events))


def stream_families(numbers: StreamNumbers, delta: float, started: float, bounds_method: str = "chebyshev"
                    ) -> list[Family]:
    """The metric families of a stream's numbers (an importance not estimated yet is left out);
    ``delta`` and ``bounds_method`` (``--bounds-method``) are the bound's, for its help text."""
    known = [j for j, v in enumerate(numbers.importances) if not math.isnan(v)]
    present = [numbers.importances[j] for j in known]
    order = ranks(present)
    families = [
        Family("ipfi_feature_importance", "gauge",
               "The feature's current importance: the smoothed increase of the model's loss when its value is "
               "replaced by an earlier row's (in units of the loss of ipfi_run_info).", ("feature",),
               [((numbers.names[j],), numbers.importances[j]) for j in known]),
        Family("ipfi_feature_importance_bound", "gauge",
               f"Half-width of the importance's confidence interval at level 1 - {delta} ({bounds_method} "
               "bound, see ipfi explain --bounds-method).", ("feature",),
               [((numbers.names[j],), numbers.bounds[j]) for j in known if not math.isnan(numbers.bounds[j])]),
        Family("ipfi_feature_rank", "gauge", "The feature's rank by current importance (1 = most important; ties "
               "share the better rank).", ("feature",),
               [((numbers.names[j],), float(rank)) for j, rank in zip(known, order)]),
        Family("ipfi_model_loss", "summary", "The model's loss on the explained rows (unperturbed predictions).",
               (), [((), (numbers.explained, numbers.loss_sum))]),
        Family("ipfi_rows_read_total", "counter", "Rows read: explained, stored (a stream's first) or skipped.",
               (), [((), numbers.rows_read)]),
        Family("ipfi_rows_explained_total", "counter", "Rows explained.", (), [((), numbers.explained)]),
        Family("ipfi_rows_skipped_total", "counter", "Bad rows skipped (--on-bad-row skip).", (),
               [((), numbers.skipped)]),
        Family("ipfi_model_calls_total", "counter", "Calls the explainer made to the model.", (),
               [((), numbers.model_calls)]),
        Family("ipfi_model_predictions_total", "counter", "Rows the model predicted in those calls.", (),
               [((), numbers.predictions)]),
        Family("ipfi_change_events_total", "counter", "Change events: of a feature's importance (kind importance), "
               "of the model's loss (kind loss), of the ranking against --reference (kind ranking).",
               ("kind", "feature", "direction"),
               [(key, count) for key, count in sorted(numbers.events.items())]),
        Family("ipfi_start_timestamp_seconds", "gauge", "Unix time the run started.", (), [((), started)]),
    ]
    if numbers.last_row_time is not None:
        families.append(Family("ipfi_last_row_timestamp_seconds", "gauge", "Unix time the last row was explained.",
                               (), [((), numbers.last_row_time)]))
    if numbers.ndcg is not None and not math.isnan(numbers.ndcg):
        families.append(Family("ipfi_ranking_ndcg", "gauge", "nDCG@k of the current ranking against --reference "
                               "(1 = the same top-k order).", (), [((), numbers.ndcg)]))
    if numbers.ndcg_threshold is not None:
        families.append(Family("ipfi_ranking_ndcg_threshold", "gauge", "The nDCG below which the ranking has "
                               "departed from --reference (--ndcg-threshold).", (), [((), numbers.ndcg_threshold)]))
    return families


#: every outcome a served model's try can have (each series exists from the start, at 0)
MODEL_OUTCOMES = ("ok", "unavailable", "error", "refused")


def served_families(stats: Mapping[str, Any], latency: tuple[Sequence[float], Sequence[int], float],
                    up: bool) -> list[Family]:
    """The served model's families (``--model-url``), from
    :meth:`~ipfi_cli.models.http.HttpPredictor.stats` and its ``latency()`` histogram.

    >>> [f.name for f in served_families({"outcomes": {"ok": 2}, "retried": 0, "outages": 0},
    ...                                  ((0.1, 1.0), [1, 1, 0], 0.6), True)]  # doctest: +NORMALIZE_WHITESPACE
    ['ipfi_model_up', 'ipfi_model_requests_total', 'ipfi_model_retries_total', 'ipfi_model_outages_total',
     'ipfi_model_request_duration_seconds']
    """
    bounds, counts, total = latency
    cumulative, running = [], 0
    for bound, count in zip([*bounds, math.inf], counts):
        running += count
        cumulative.append((float(bound), running))
    outcomes = stats.get("outcomes", {})
    return [
        Family("ipfi_model_up", "gauge", "Whether the served model answers (1) or ipfi is waiting for it to come "
               "back (0, see --model-wait).", (), [((), 1.0 if up else 0.0)]),
        Family("ipfi_model_requests_total", "counter", "Tries of requests to the served model by outcome: ok, "
               "unavailable (refused connection, timeout, 408/429/502/503/504), error (500), refused (other 4xx, "
               "too large).", ("outcome",), [((o,), int(outcomes.get(o, 0))) for o in MODEL_OUTCOMES]),
        Family("ipfi_model_retries_total", "counter", "Requests to the served model sent again after a failure.",
               (), [((), int(stats.get("retried", 0)))]),
        Family("ipfi_model_outages_total", "counter", "Times the served model became unreachable.", (),
               [((), int(stats.get("outages", 0)))]),
        Family("ipfi_model_request_duration_seconds", "histogram", "Seconds the served model took to answer a "
               "request (answered tries).", (), [((), (cumulative, float(total)))]),
    ]


#: every outcome of a --webhook post (each series exists from the start, at 0)
WEBHOOK_OUTCOMES = ("delivered", "failed", "dropped", "suppressed")


def webhook_families(stats: Any) -> list[Family]:
    """The webhook's own counts (:class:`~ipfi_cli.io.webhook.WebhookStats`): what became of the posts.

    >>> from ipfi_cli.io.webhook import WebhookStats
    >>> family, = webhook_families(WebhookStats(queued=3, sent=1, failed=1, dropped=2))
    >>> family.samples
    [(('delivered',), 1), (('failed',), 1), (('dropped',), 2), (('suppressed',), 0)]
    """
    counts = {"delivered": stats.sent, "failed": stats.failed, "dropped": stats.dropped,
              "suppressed": stats.suppressed}
    return [Family("ipfi_webhook_posts_total", "counter", "Change events posted to --webhook by outcome: delivered "
                   "(2xx), failed (refused, or failing after every retry), dropped (the queue was full, or still "
                   "unsent at the end of the run), suppressed (within --webhook-cooldown).", ("outcome",),
                   [((o,), int(counts[o])) for o in WEBHOOK_OUTCOMES])]


def label_families(given_up: int, late: int) -> list[Family]:
    """The late labels' counts (``--labels``): rows never explained for want of their label."""
    return [Family("ipfi_label_rows_given_up_total", "counter", "Rows given up waiting for their label "
                   "(--label-wait): never explained.", (), [((), int(given_up))]),
            Family("ipfi_labels_late_total", "counter", "Labels that came after their row had been given up "
                   "(dropped).", (), [((), int(late))])]


def end_families(started: float) -> list[Family]:
    """The gauges of a run that ended well, published (textfile, Pushgateway) at its end."""
    now = time.time()
    return [Family("ipfi_last_success_timestamp_seconds", "gauge", "Unix time the last run that published these "
                   "metrics ended (complete runs only).", (), [((), now)]),
            Family("ipfi_duration_seconds", "gauge", "How long that run took.", (), [((), now - started)])]


def comparison_families(records: Sequence[Mapping[str, Any]], loss: str) -> list[Family]:
    """The metric families of ``ipfi compare``'s records: each method's error against its reference
    (the last window's, for a learning comparison), and batch PFI's importances."""
    from ipfi_cli.version import __version__

    errors: dict[tuple[str, str, str, str], float] = {}
    batch: list[tuple[tuple[str, ...], float]] = []
    for record in records:
        if record.get("method") == "batch":
            if record.get("importance") is not None:
                batch.append(((str(record["feature"]),), float(record["importance"])))
            continue
        if record.get("error") is None:
            continue
        key = tuple("" if record.get(k) is None else (f"{record[k]:g}" if k == "alpha" else str(record[k]))
                    for k in ("method", "sampling", "alpha", "ordering"))
        errors[key] = float(record["error"])  # type: ignore[index]
    families = [
        Family("ipfi_build_info", "info", "The ipfi that ran.",
               samples=[((), {"version": __version__, "python": platform.python_version()})]),
        Family("ipfi_run_info", "info", "What the run computed.",
               samples=[((), {"command": "compare", "loss": loss, "mode": "comparison", "sampling": "several"})]),
        Family("ipfi_comparison_error", "gauge", "The paper's error of a method's final importances against the "
               "reference (normalised shares, L1 distance, in [0, 2]).", ("method", "sampling", "alpha", "ordering"),
               sorted(errors.items())),
    ]
    if batch:
        families.append(Family("ipfi_feature_importance", "gauge", "Batch PFI's importance of the feature (the "
                               "reference of the comparison).", ("feature",), batch))
    return families


def batch_families(names: Sequence[str], means: Sequence[float], stds: Sequence[float], n_rows: int,
                   baseline_loss: float, loss: str, command: str = "batch") -> list[Family]:
    """The metric families of a batch PFI result."""
    from ipfi_cli.version import __version__

    order = ranks([float(m) for m in means])
    return [
        Family("ipfi_build_info", "info", "The ipfi that ran.",
               samples=[((), {"version": __version__, "python": platform.python_version()})]),
        Family("ipfi_run_info", "info", "What the run computed.",
               samples=[((), {"command": command, "loss": loss, "mode": "static", "sampling": "permutation"})]),
        Family("ipfi_feature_importance", "gauge", "The feature's batch permutation importance (mean over the "
               "repeats; in units of the loss of ipfi_run_info).", ("feature",),
               [((str(n),), float(m)) for n, m in zip(names, means)]),
        Family("ipfi_feature_importance_std", "gauge", "Its standard deviation over the repeats.", ("feature",),
               [((str(n),), float(sd)) for n, sd in zip(names, stds) if not math.isnan(float(sd))]),
        Family("ipfi_feature_rank", "gauge", "The feature's rank (1 = most important; ties share).", ("feature",),
               [((str(n),), float(r)) for n, r in zip(names, order)]),
        Family("ipfi_model_loss", "summary", "The model's loss on the rows (unpermuted).", (),
               [((), (n_rows, float(baseline_loss) * n_rows))]),
        Family("ipfi_rows_read_total", "counter", "Rows read.", (), [((), n_rows)]),
    ]
