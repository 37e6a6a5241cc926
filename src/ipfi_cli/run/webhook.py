"""Change events posted to a webhook as they are found (``--webhook``).

:class:`WebhookNotifier` is a run observer (:class:`~ipfi_cli.run.observers.RunObserver`) that
turns each change event into a body (:func:`event_payload`, or :func:`alertmanager_payload` for
``--webhook-format alertmanager``) with a stable id (:func:`event_id`), and hands it to
:class:`~ipfi_cli.io.webhook.WebhookSender`, which posts it without holding the stream back.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any, Protocol

from ipfi_cli.core.events import event_key
from ipfi_cli.io.webhook import shown_url


class WebhookSettings(Protocol):
    """What the notifier reads of the run's monitoring settings
    (:class:`~ipfi_cli.run.monitor.MonitorSettings` has it all)."""

    webhook: str | None
    webhook_format: str
    webhook_cooldown: float
    webhook_retries: int
    webhook_timeout: float
    webhook_queue: int
    webhook_wait: float
    labels: dict[str, str]
    push_job: str
    push_grouping: dict[str, str]
    pushgateway: str | None


def event_text(event: Any) -> str:
    """One line for a person (Slack's ``text``)."""
    if event.kind == "ranking":
        return (f"ipfi: the ranking departed from the reference at row {event.row:,}: nDCG@{event.k} "
                f"{event.ndcg:.3f} < {event.threshold} (top now {', '.join(event.top_current[:3])})")
    what = "the model's loss" if event.kind == "loss" else f"the importance of {event.feature}"
    return (f"ipfi: {what} went {event.direction} at row {event.row:,} (from row {event.start_row:,}): "
            f"{event.before:.4g} -> {event.after:.4g}")


def event_id(source: str, seed: int | None, event: Any) -> str:
    """The same event of the same run (same input and seed) has the same id, also after a resume."""
    key = f"{source}|{seed}|{event.row}|{'|'.join(event_key(event))}"
    return hashlib.sha256(key.encode()).hexdigest()[:16]


def event_payload(event: Any, *, event_id: str, command: str, source: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """The JSON body posted for one change event (``--webhook-format json``)::

        {"version": 1, "id": "...", "time": "2026-11-24T18:30:06Z", "command": "explain",
         "input": "data.csv", "labels": {"model": "churn"}, "text": "ipfi: ...",
         "event": {... the line --events writes ...}}
    """
    return {"version": 1, "id": event_id, "time": _now(), "command": command, "input": source,
            "labels": dict(labels), "text": event_text(event), "event": event.to_dict()}


ALERT_NAMES = {"importance": "IpfiImportanceChanged", "loss": "IpfiLossChanged", "ranking": "IpfiRankingDeparted"}
#: how long an Alertmanager alert of one event lasts (``endsAt``): as long as the shipped rule's alert for
#: the same event, which fires while the event is in its 15-minute window (prometheus-rules.yml)
ALERT_SECONDS = 900.0


def alert_labels(event: Any, *, job: str, labels: Mapping[str, str]) -> dict[str, str]:
    """The labels of the shipped rule's alert for ``event`` (prometheus-rules.yml): its name and
    severity (``critical`` for the model's loss going up, ``info`` for it going down, which no rule
    pages for; ``warning`` otherwise), the ``job`` (``--push-job``: name the scrape job the same),
    the constant labels, and the change counter's ``kind``, ``feature`` and ``direction`` (a ranking
    departure has none: the rule's nDCG series has none).

    >>> from types import SimpleNamespace as E
    >>> labels = alert_labels(E(kind="loss", feature=None, direction="up"), job="ipfi", labels={"model": "churn"})
    >>> labels["alertname"], labels["severity"], labels["job"], labels["model"], labels["kind"], "feature" in labels
    ('IpfiLossChanged', 'critical', 'ipfi', 'churn', 'loss', False)
    """
    kind, feature, direction = event_key(event)
    severity = "warning" if kind != "loss" else "critical" if direction == "up" else "info"
    out = {"alertname": ALERT_NAMES.get(kind, "IpfiChange"), "severity": severity, "job": job, **labels}
    if kind != "ranking":
        out["kind"] = kind
        if feature:  # an empty label is no label in Prometheus
            out["feature"] = feature
        out["direction"] = direction
    return out


def alertmanager_payload(event: Any, *, event_id: str, source: str, labels: Mapping[str, str],
                         resolve_after: float, job: str = "ipfi") -> list[dict[str, Any]]:
    """The body for Alertmanager's ``POST /api/v2/alerts`` (``--webhook-format alertmanager``): one
    alert with the labels of the shipped rule's alert for the same event (:func:`alert_labels`), so that
    Alertmanager takes the two for one; it ends after ``resolve_after`` seconds or :data:`ALERT_SECONDS`,
    the longer."""
    start = datetime.now(UTC)
    end = datetime.fromtimestamp(start.timestamp() + max(resolve_after, ALERT_SECONDS), UTC)
    return [{"labels": alert_labels(event, job=job, labels=labels),
             "annotations": {"summary": event_text(event), "input": source, "row": str(event.row), "id": event_id},
             "startsAt": start.isoformat().replace("+00:00", "Z"),
             "endsAt": end.isoformat().replace("+00:00", "Z")}]


def _now() -> str:
    return datetime.now(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


class WebhookNotifier:
    """A run observer that posts each change event to ``--webhook`` as it is found."""

    def __init__(self, settings: WebhookSettings, say: Any = None, command: str = "explain") -> None:
        from ipfi_cli.io.webhook import WebhookSender

        self.settings = settings
        self.command = command
        self.say = say  # (text, kind): the end-of-run line
        self.sender = WebhookSender(settings.webhook or "", queue_size=settings.webhook_queue,
                                    retries=settings.webhook_retries, timeout=settings.webhook_timeout,
                                    cooldown=settings.webhook_cooldown)
        self.source = ""
        self.seed: int | None = None
        self.closed = False

    def on_start(self, start: Any) -> None:
        self.source = start.source
        self.seed = start.seed

    def on_snapshot(self, snapshot: Any) -> None:
        pass

    def on_events(self, events: Sequence[Any]) -> None:
        import orjson

        for event in events:
            ident = event_id(self.source, self.seed, event)
            body: Any
            if self.settings.webhook_format == "alertmanager":
                # the labels the pushed or scraped series carry: --metrics-label, and --push-label when pushed
                labels = {**self.settings.labels,
                          **(self.settings.push_grouping if self.settings.pushgateway else {})}
                body = alertmanager_payload(event, event_id=ident, source=self.source, labels=labels,
                                            resolve_after=self.settings.webhook_cooldown, job=self.settings.push_job)
            else:
                body = event_payload(event, event_id=ident, command=self.command, source=self.source,
                                     labels=self.settings.labels)
            self.sender.send(orjson.dumps(body), dedup=ident, cooldown=event_key(event))

    def on_end(self, end: Any) -> None:
        """Drain the queue (at most ``webhook_wait`` seconds; 2 s after an interruption) and say what
        became of the posts."""
        wait = self.settings.webhook_wait if end.status != "interrupted" else min(2.0, self.settings.webhook_wait)
        line = self.close(wait)
        if line and self.say is not None:
            stats = self.sender.stats
            self.say(line, "warning" if stats.failed or stats.dropped else "note")

    def close(self, wait: float = 0.0) -> str | None:
        if self.closed:
            return None
        self.closed = True
        stats = self.sender.close(wait)
        return stats.summary(shown_url(self.settings.webhook or ""))
