"""A run in the monitoring stack: where its Prometheus metrics go, and the observers a session adds.

:class:`MetricsExporter` turns the snapshots of an ``ipfi explain`` run into Prometheus
metrics (:func:`~ipfi_cli.run.metrics.stream_families`), served over HTTP while the stream runs
(``--metrics-port``), written atomically to a textfile (``--metrics-textfile``, at every
update and at the end) and pushed to a Pushgateway at the end of a finite run, replacing its group
(``--pushgateway``). :class:`~ipfi_cli.run.webhook.WebhookNotifier` (:mod:`ipfi_cli.run.webhook`)
posts each change event as it happens (``--webhook``). Both are run observers
(:class:`~ipfi_cli.run.observers.RunObserver`): the session adds them after its reporter and
events file when ``settings.monitor`` asks (:class:`StreamMonitor`); the exporter turns at most
one snapshot a second into metrics (a few floats per feature) and always the last one.

The metrics themselves (their names, types, labels and values) are built in :mod:`ipfi_cli.run.metrics`;
this module sends them where the options ask.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

from ipfi_cli.core.events import event_key
from ipfi_cli.io.prometheus import Family, MetricSet
from ipfi_cli.run.metrics import (
    OWN_LABELS,
    WEBHOOK_OUTCOMES,
    StreamNumbers,
    batch_families,
    build_families,
    comparison_families,
    end_families,
    label_families,
    parse_labels,
    ranks,
    served_families,
    stream_families,
    webhook_families,
)
from ipfi_cli.run.settings import (
    DEFAULT_METRICS_ADDR,
    DEFAULT_PUSH_JOB,
    DEFAULT_WEBHOOK_COOLDOWN,
    DEFAULT_WEBHOOK_FORMAT,
    DEFAULT_WEBHOOK_RETRIES,
)
from ipfi_cli.run.webhook import (
    ALERT_NAMES,
    WebhookNotifier,
    alertmanager_payload,
    event_id,
    event_payload,
    event_text,
)

if TYPE_CHECKING:
    from ipfi_cli.run.observers import Ranking, RunEnd, RunObserver, RunStart, Snapshot
    from ipfi_cli.run.settings import ExplainSettings

# the metric families' names (ipfi_cli.run.metrics) and the webhook's (ipfi_cli.run.webhook) stay importable from here
__all__ = ["ALERT_NAMES", "OWN_LABELS", "MetricsExporter", "MonitorSettings", "StreamMonitor", "StreamNumbers",
           "WebhookNotifier", "alertmanager_payload", "batch_families", "comparison_families", "event_id", "event_key",
           "event_payload", "event_text", "parse_labels", "publish", "ranks", "stream_families", "WEBHOOK_OUTCOMES",
           "end_families", "label_families", "served_families", "webhook_families"]


@dataclass
class MonitorSettings:
    """The monitoring options of a run."""

    metrics_port: int | None = None
    metrics_addr: str = DEFAULT_METRICS_ADDR
    metrics_textfile: str | None = None
    pushgateway: str | None = None
    push_job: str = DEFAULT_PUSH_JOB
    push_grouping: dict[str, str] = field(default_factory=dict)
    labels: dict[str, str] = field(default_factory=dict)  # constant labels (--metrics-label)
    webhook: str | None = None
    webhook_format: str = DEFAULT_WEBHOOK_FORMAT  # or "alertmanager"
    webhook_cooldown: float = DEFAULT_WEBHOOK_COOLDOWN
    webhook_retries: int = DEFAULT_WEBHOOK_RETRIES
    webhook_timeout: float = 5.0
    webhook_queue: int = 1000
    webhook_wait: float = 10.0
    interval: float = 1.0  # seconds between metric updates while the stream runs

    @property
    def metrics(self) -> bool:
        return bool(self.metrics_port is not None or self.metrics_textfile or self.pushgateway)

    @property
    def wanted(self) -> bool:
        return self.metrics or bool(self.webhook)


@runtime_checkable
class ServedModel(Protocol):
    """What the exporter reads of a served model (:class:`~ipfi_cli.models.http.HttpPredictor`)."""

    is_down: bool
    on_down: Callable[[bool], None] | None

    def stats(self) -> Any: ...

    def latency(self) -> Any: ...


@runtime_checkable
class LabelCounts(Protocol):
    """What the exporter reads of the late labels' join (:class:`~ipfi_cli.run.late_labels.JoinedReader`)."""

    given_up: int  # rows given up waiting for their label
    late: int  # labels that came after their row was given up


class MetricsExporter:
    """A run observer that keeps a :class:`MetricSet` equal to the run's numbers and sends it where asked.

    It hears the run through the observer events (:class:`~ipfi_cli.run.observers.RunStart`: the loss,
    change detection and the reference ranking; each :class:`~ipfi_cli.run.observers.Snapshot`; the
    change events) and reads besides only what it is given: the run's settings (``run``), the served
    model and the late labels' counts (:meth:`watch`), the webhook's notifier."""

    def __init__(self, settings: MonitorSettings, run: ExplainSettings, command: str = "explain") -> None:
        self.settings = settings
        self.run = run
        self.command = command
        self.metrics = MetricSet(settings.labels)
        self.server: Any = None
        self.started = time.time()
        self._info: list[Family] = []
        self._events: dict[tuple[str, str, str], int] = {}
        self._ranking: Ranking | None = None
        self._last_explained = -1
        self._last_row_time: float | None = None
        self._next = 0.0
        self.pushed = False  # the metrics reached --pushgateway
        self._ended = self.metrics  # the last numbers with the run-end gauges (after a complete run)
        self._stream: list[Family] = []
        self._publish_lock = threading.RLock()
        self.served: ServedModel | None = None  # a served model: its requests and outages (watch() sets it)
        self.labels: LabelCounts | None = None  # the late labels' join (watch() sets it)
        self.notifier: WebhookNotifier | None = None  # its posts' outcomes are counted (StreamMonitor sets it)

    def serve(self, say: Callable[..., None]) -> None:
        """Serve ``/metrics`` (``--metrics-port``) from the start: the build info until the run is set up."""
        self._info = build_families(self.command, None, self.run)
        self.metrics.set(self._info)
        if self.settings.metrics_port is not None and self.server is None:
            from ipfi_cli.io.prometheus import MetricsServer

            self.server = MetricsServer(self.metrics, self.settings.metrics_port, self.settings.metrics_addr)
            if self.settings.metrics_port == 0 or self.run.display.verbose:
                addr = self.settings.metrics_addr
                host = f"[{addr}]" if ":" in addr else addr  # an IPv6 address in a URL is in brackets
                say(f"serving metrics on http://{host}:{self.server.port}/metrics", "note")

    def watch(self, served: ServedModel | None, labels: LabelCounts | None) -> None:
        """The run is set up: its served model (``None``: a model in this process) and its late labels' join."""
        self.served, self.labels = served, labels

    # -- the observer ------------------------------------------------------------------------------
    def on_start(self, start: RunStart) -> None:
        """The run is set up: its loss is known; every change-event series starts at 0."""
        self._info = build_families(self.command, start.loss, self.run)
        self._ranking = start.ranking
        if start.detect:
            # every series the run can count exists from the start at 0, so that an alert on
            # increase() sees the first event too (a series born at 1 has no increase)
            for name in start.names:
                self._events[("importance", name, "up")] = self._events[("importance", name, "down")] = 0
            self._events[("loss", "", "up")] = self._events[("loss", "", "down")] = 0
            if start.ranking is not None:
                self._events[("ranking", "", "down")] = 0
        self._served()  # a served model's going down is published from now on
        self.metrics.set(self._info)

    def on_snapshot(self, snapshot: Snapshot) -> None:
        """The numbers as they are now, at most once per ``interval`` seconds (a few floats per feature)."""
        now = time.monotonic()
        if now < self._next:
            return
        self._next = now + self.settings.interval
        self._update(snapshot)

    def on_events(self, events: Sequence[Any]) -> None:
        for event in events:
            key = event_key(event)
            self._events[key] = self._events.get(key, 0) + 1

    def on_end(self, end: RunEnd) -> None:
        """The last numbers; after a complete run, with the run-end gauges
        (``ipfi_last_success_timestamp_seconds``, ``ipfi_duration_seconds``: the shipped rules tell an
        ended run from a stalled one by them) to the textfile and the Pushgateway; stop serving. A
        failed push is an error."""
        try:
            if end.snapshot is not None:
                self._update(end.snapshot)
            if end.status in ("ok", "stopped-on-change") and (self.settings.pushgateway
                                                               or self.settings.metrics_textfile):
                self._ended = MetricSet(self.settings.labels)
                self._ended.set([*self.metrics.families(), *end_families(self.started)])
                if self.settings.metrics_textfile:
                    from ipfi_cli.io.prometheus import write_textfile

                    write_textfile(self.settings.metrics_textfile, self._ended)
                if self.settings.pushgateway:
                    self.push()
        finally:
            self.close()

    # -- the numbers ---------------------------------------------------------------------------------
    def _update(self, snapshot: Snapshot) -> None:
        numbers = StreamNumbers.of(snapshot, self._events, self._ranking)
        if numbers.explained != self._last_explained:
            self._last_explained = numbers.explained
            if numbers.explained:
                self._last_row_time = time.time()
        numbers.last_row_time = self._last_row_time
        self._stream = stream_families(numbers, self.run.output.delta, self.started, self.run.output.bounds_method)
        self._publish_now()

    def _publish_now(self) -> None:
        """The last stream numbers with the served model's as they are now (also from a request's thread
        when the model goes down or comes back, while the run waits)."""
        with self._publish_lock:
            families = [*self._info, *self._stream]
            served = self._served()
            if served is not None:
                families += served_families(served.stats(), served.latency(), not served.is_down)
            families += self._own()
            self.metrics.set(families)
            if self.settings.metrics_textfile:
                from ipfi_cli.io.prometheus import write_textfile

                write_textfile(self.settings.metrics_textfile, self.metrics)

    def _own(self) -> list[Family]:
        """What the run lost or left out, counted: the webhook's posts by outcome (``--webhook``), the
        rows given up waiting for their labels and the labels that came too late (``--labels``)."""
        families: list[Family] = []
        if self.notifier is not None:
            families += webhook_families(self.notifier.sender.stats)
        if self.labels is not None:
            families += label_families(self.labels.given_up, self.labels.late)
        return families

    def _served(self) -> ServedModel | None:
        served = self.served
        if served is not None and served.on_down is None:
            served.on_down = lambda down: self._publish_now()
        return served

    def push(self) -> None:
        from ipfi_cli.io.prometheus import push

        push(self.settings.pushgateway or "", self._ended, self.settings.push_job, self.settings.push_grouping)
        self.pushed = True

    def close(self) -> None:
        if self.server is not None:
            self.server.close()
            self.server = None


def publish(settings: MonitorSettings, families: list[Family], started: float) -> None:
    """A finished command's families (``batch``, ``compare``), with the batch-job metrics, to
    ``--metrics-textfile`` and pushed to ``--pushgateway`` (replacing its group)."""
    from ipfi_cli.io.prometheus import push, write_textfile

    metrics = MetricSet(settings.labels)
    metrics.set([*families, *end_families(started)])
    if settings.metrics_textfile:
        write_textfile(settings.metrics_textfile, metrics)
    if settings.pushgateway:
        push(settings.pushgateway, metrics, settings.push_job, settings.push_grouping)


class StreamMonitor:
    """The exporter and the notifier a run asked for (``run.monitor``, a :class:`MonitorSettings`)."""

    def __init__(self, run: ExplainSettings, command: str = "explain") -> None:
        settings: MonitorSettings = run.monitor
        self.settings = settings
        self.command = command
        self.exporter = MetricsExporter(settings, run, command) if settings.metrics else None
        self.notifier: WebhookNotifier | None = None

    def serve(self, say: Callable[..., None]) -> None:
        """Before the run is set up: ``/metrics`` answers (with the build info)."""
        if self.exporter is not None:
            self.exporter.serve(say)

    def observers(self, say: Callable[..., None], *, served: Any = None, reader: Any = None) -> list[RunObserver]:
        """The run observers: the webhook notifier, then the exporter (at the end, the notifier's queue
        is drained first, so that the last metrics count every post's outcome). ``served``: the served
        model (:func:`~ipfi_cli.run.setup.served_model`); ``reader``: the input's (with ``--labels``, the
        join whose counts are metrics)."""
        out: list[RunObserver] = []
        if self.settings.webhook:
            self.notifier = WebhookNotifier(self.settings, say, self.command)
            out.append(self.notifier)
        if self.exporter is not None:
            self.exporter.watch(served, reader if isinstance(reader, LabelCounts) else None)
            self.exporter.notifier = self.notifier
            out.append(self.exporter)
        return out

    def close(self) -> None:
        """Stop serving and posting at once (after the observers' on_end, nothing is left)."""
        if self.exporter is not None:
            self.exporter.close()
        if self.notifier is not None:
            self.notifier.close(0.0)
