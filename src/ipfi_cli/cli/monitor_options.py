"""The monitoring options: Prometheus metrics (scraped, textfile, pushed) and the webhook.

Defined once for ``explain``, ``batch`` and ``compare``; :func:`monitor_settings` checks them
and builds the run layer's :class:`~ipfi_cli.run.monitor.MonitorSettings`. Nothing heavy is
imported here (prometheus_client is imported by the run, only when an option asks for it).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.errors import UsageError
from ipfi_cli.run.settings import (
    DEFAULT_METRICS_ADDR,
    DEFAULT_PUSH_JOB,
    DEFAULT_WEBHOOK_COOLDOWN,
    DEFAULT_WEBHOOK_FORMAT,
    DEFAULT_WEBHOOK_RETRIES,
)

if TYPE_CHECKING:
    from ipfi_cli.run.monitor import MonitorSettings

PANEL_MONITORING = "Monitoring (Prometheus, webhook)"

MetricsPortOpt = Annotated[Optional[int], typer.Option(
    "--metrics-port", min=0, max=65535, help="Serve Prometheus metrics on http://ADDR:PORT/metrics while the stream "
    "runs (the current importances, their bounds and ranks, the loss, rows, model calls, change events; see "
    "docs/monitoring.md). 0: a free port, said on stderr.", rich_help_panel=PANEL_MONITORING,
    show_default=False, metavar="PORT")]
MetricsAddrOpt = Annotated[str, typer.Option(
    "--metrics-addr", help="The address --metrics-port listens on (0.0.0.0: every interface).",
    rich_help_panel=PANEL_MONITORING, metavar="ADDR")]
MetricsTextfileOpt = Annotated[Optional[str], typer.Option(
    "--metrics-textfile", help="Write the metrics to this file, atomically, for node_exporter's textfile collector "
    "(name it *.prom): every second while the stream runs, and at the end.", rich_help_panel=PANEL_MONITORING,
    show_default=False, metavar="PATH")]
MetricsLabelOpt = Annotated[Optional[list[str]], typer.Option(
    "--metrics-label", help="A constant label on every metric, NAME=VALUE (repeatable; e.g. model=churn).",
    rich_help_panel=PANEL_MONITORING, show_default=False, metavar="NAME=VALUE")]
PushgatewayOpt = Annotated[Optional[str], typer.Option(
    "--pushgateway", help="At the end of a complete run, push the metrics to this Pushgateway, replacing the "
    "group of --push-job and --push-label (a failed run pushes nothing, so the last good run's numbers stay), with "
    "ipfi_last_success_timestamp_seconds.",
    rich_help_panel=PANEL_MONITORING, show_default=False, metavar="URL")]
PushJobOpt = Annotated[str, typer.Option(
    "--push-job", help="The Pushgateway job name.", rich_help_panel=PANEL_MONITORING, metavar="NAME")]
PushLabelOpt = Annotated[Optional[list[str]], typer.Option(
    "--push-label", help="A Pushgateway grouping label, NAME=VALUE (repeatable): runs with other values keep "
    "their own series.", rich_help_panel=PANEL_MONITORING, show_default=False, metavar="NAME=VALUE")]
WebhookOpt = Annotated[Optional[str], typer.Option(
    "--webhook", help="POST each change event as JSON to this URL as it happens (implies --detect), from a "
    "background queue that never holds the stream back; retried; what was not delivered is counted at the end.",
    rich_help_panel=PANEL_MONITORING, show_default=False, metavar="URL")]
WebhookFormatOpt = Annotated[str, typer.Option(
    "--webhook-format", help="json: ipfi's payload (with a Slack-ready 'text'); alertmanager: a list of alerts for "
    "Alertmanager's /api/v2/alerts.", rich_help_panel=PANEL_MONITORING, metavar="json|alertmanager")]
WebhookCooldownOpt = Annotated[float, typer.Option(
    "--webhook-cooldown", min=0.0, help="Seconds after a post during which events of the same kind, feature and "
    "direction are not posted again (counted as suppressed).", rich_help_panel=PANEL_MONITORING, metavar="SECONDS")]
WebhookRetriesOpt = Annotated[int, typer.Option(
    "--webhook-retries", min=0, help="Retries of a post that failed for a reason that may pass (no connection, "
    "timeout, HTTP 408/429/5xx), with exponential back-off from 0.5 s.", rich_help_panel=PANEL_MONITORING)]

MaxLostOpt = Annotated[Optional[int], typer.Option(
    "--max-lost", min=0, help="Exit 4 (after writing everything) when the run lost more than N: rows given up "
    "waiting for their labels (--labels, --label-wait) plus change events not delivered to --webhook (failed or "
    "dropped). Without it, a warning and the counts (--meta, the metrics) only. 0: lose nothing.",
    rich_help_panel=PANEL_MONITORING, show_default=False, metavar="N")]


def _shown(url: str) -> str:
    """``url`` for a usage error: its password, path and query as ``***`` (``shown_url``), also
    where it has no scheme (``user:secret@host/token``).

    >>> _shown("pushgateway:9091"), _shown("http://u:pw@h:99999/x?token=1"), _shown("http://[::1/hook")
    ('pushgateway:9091', 'http://u:***@h:99999/***', '***')
    """
    from ipfi_cli.io.urls import shown_url

    if "://" in url:
        return shown_url(url)
    return shown_url("http://" + url).removeprefix("http://")


def monitor_settings(*, metrics_port: int | None = None, metrics_addr: str = DEFAULT_METRICS_ADDR,
                     metrics_textfile: str | None = None, metrics_label: list[str] | None = None,
                     pushgateway: str | None = None, push_job: str = DEFAULT_PUSH_JOB,
                     push_label: list[str] | None = None, webhook: str | None = None,
                     webhook_format: str = DEFAULT_WEBHOOK_FORMAT, webhook_cooldown: float = DEFAULT_WEBHOOK_COOLDOWN,
                     webhook_retries: int = DEFAULT_WEBHOOK_RETRIES) -> MonitorSettings | None:
    """Check the monitoring options and return the run's ``MonitorSettings`` (``None``: none asked)."""
    for option, url in (("--pushgateway", pushgateway), ("--webhook", webhook)):
        from ipfi_cli.io.urls import check_url

        problem = check_url(url) if url is not None else None
        if problem is not None:  # before the first row, not at the first post or the end of the run
            shown = _shown(url or "")
            raise usage_error(problem if shown == "***" else f"{problem}, got {shown}", option)
    if webhook_format not in ("json", "alertmanager"):
        raise usage_error(f"choose json or alertmanager, got {webhook_format!r}", "--webhook-format")
    if not push_job or "/" in push_job:
        raise usage_error(f"a job name without '/', got {push_job!r}", "--push-job")
    if (metrics_port is None and metrics_textfile is None and pushgateway is None and webhook is None
            and not metrics_label and not push_label):
        return None  # nothing asked: the run's monitoring module (and its imports) is not loaded
    from ipfi_cli.run.metrics import parse_labels
    from ipfi_cli.run.monitor import MonitorSettings

    try:
        labels = parse_labels(metrics_label, "--metrics-label")
        grouping = parse_labels(push_label, "--push-label", reserved=("job",))
    except UsageError as error:
        raise usage_error(error.message, error.option) from None
    clash = sorted(name for name in labels.keys() & grouping.keys() if labels[name] != grouping[name])
    if clash:  # each pushed series would carry two values of one label
        name = clash[0]
        raise usage_error(f"label {name!r} is {grouping[name]!r} here but {labels[name]!r} in --metrics-label: give "
                          "it once, or the same value in both", "--push-label")
    settings = MonitorSettings(metrics_port=metrics_port, metrics_addr=metrics_addr, metrics_textfile=metrics_textfile,
                               pushgateway=pushgateway, push_job=push_job, push_grouping=grouping, labels=labels,
                               webhook=webhook, webhook_format=webhook_format, webhook_cooldown=webhook_cooldown,
                               webhook_retries=webhook_retries)
    if (labels or grouping or push_label) and not settings.metrics and not webhook:
        raise usage_error("needs --metrics-port, --metrics-textfile, --pushgateway or --webhook",
                          "--metrics-label" if labels else "--push-label")
    return settings if settings.wanted else None
