"""A run in the monitoring stack: where its Prometheus metrics go, and the observers a session adds.

:class:`MetricsExporter` turns the state of an ``ipfi explain`` session into Prometheus
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
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

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


class MetricsExporter:
    """A run observer that keeps a :class:`MetricSet` equal to the run's numbers and sends it where asked."""

    def __init__(self, settings: MonitorSettings, command: str = "explain") -> None:
        self.settings = settings
        self.command = command
        self.metrics = MetricSet(settings.labels)
        self.server: Any = None
        self.session: Any = None
        self.started = time.time()
        self._info: list[Family] = []
        self._events: dict[tuple[str, str, str], int] = {}
        self._last_explained = -1
        self._last_row_time: float | None = None
        self._next = 0.0
        self.pushed = False  # the metrics reached --pushgateway
        self._ended = self.metrics  # the last numbers with the run-end gauges (after a complete run)
        self._stream: list[Family] = []
        self._publish_lock = threading.RLock()
        self.notifier: WebhookNotifier | None = None  # its posts' outcomes are counted (StreamMonitor sets it)

    def serve(self, session: Any) -> None:
        """Serve ``/metrics`` (``--metrics-port``) from the start: the build info until the run is set up."""
        self.session = session
        self._info = build_families(self.command, None, session.settings)
        self.metrics.set(self._info)
        if self.settings.metrics_port is not None and self.server is None:
            from ipfi_cli.io.prometheus import MetricsServer

            self.server = MetricsServer(self.metrics, self.settings.metrics_port, self.settings.metrics_addr)
            if self.settings.metrics_port == 0 or session.settings.verbose:
                addr = self.settings.metrics_addr
                host = f"[{addr}]" if ":" in addr else addr  # an IPv6 address in a URL is in brackets
                session.reporter.message(f"serving metrics on http://{host}:{self.server.port}/metrics", "note")

    # -- the observer ------------------------------------------------------------------------------
    def on_start(self, start: Any) -> None:
        """The run is set up: its loss is known; every change-event series starts at 0."""
        session = self.session
        self._info = build_families(self.command, session.plan.loss.name, session.settings)
        watch = session.watch
        if watch is not None:
            # every series the run can count exists from the start at 0, so that an alert on
            # increase() sees the first event too (a series born at 1 has no increase)
            for name in start.names:
                self._events[("importance", name, "up")] = self._events[("importance", name, "down")] = 0
            self._events[("loss", "", "up")] = self._events[("loss", "", "down")] = 0
            if watch.detector.reference is not None:
                self._events[("ranking", "", "down")] = 0
        self._served()  # a served model's going down is published from now on
        self.metrics.set(self._info)

    def on_snapshot(self, snapshot: Any) -> None:
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

    def on_end(self, end: Any) -> None:
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
    def _update(self, snapshot: Any) -> None:
        numbers = StreamNumbers.of(snapshot, self.session, self._events)
        if numbers.explained != self._last_explained:
            self._last_explained = numbers.explained
            if numbers.explained:
                self._last_row_time = time.time()
        numbers.last_row_time = self._last_row_time
        self._stream = stream_families(numbers, self.session.settings.delta, self.started,
                                       self.session.settings.bounds_method)
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
        reader = getattr(self.session, "reader", None)
        if reader is not None and hasattr(reader, "given_up"):  # a JoinedReader (late labels)
            families += label_families(reader.given_up, reader.late)
        return families

    def _served(self) -> Any:
        plan = getattr(self.session, "plan", None)
        if plan is None:
            return None
        from ipfi_cli.run.setup import served_model

        served = served_model(plan.loaded)
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
    """The exporter and the notifier a session asked for (``settings.monitor``)."""

    def __init__(self, settings: MonitorSettings, command: str = "explain") -> None:
        self.settings = settings
        self.command = command
        self.exporter = MetricsExporter(settings, command) if settings.metrics else None
        self.notifier: WebhookNotifier | None = None

    def serve(self, session: Any) -> None:
        """Before the run is set up: ``/metrics`` answers (with the build info)."""
        if self.exporter is not None:
            self.exporter.serve(session)

    def observers(self, session: Any) -> list[Any]:
        """The run observers: the webhook notifier, then the exporter (at the end, the notifier's queue
        is drained first, so that the last metrics count every post's outcome)."""
        out: list[Any] = []
        if self.settings.webhook:
            self.notifier = WebhookNotifier(self.settings, session.reporter.message, self.command)
            out.append(self.notifier)
        if self.exporter is not None:
            self.exporter.session = session
            self.exporter.notifier = self.notifier
            out.append(self.exporter)
        return out

    def close(self) -> None:
        """Stop serving and posting at once (after the observers' on_end, nothing is left)."""
        if self.exporter is not None:
            self.exporter.close()
        if self.notifier is not None:
            self.notifier.close(0.0)
