"""Prometheus exposition: a run's numbers served over HTTP, written as a textfile, or pushed.

``prometheus_client`` is imported here and nowhere else. A :class:`MetricSet` holds the
samples of one moment of a run (set all at once, so one scrape never mixes two moments:
an importance and its rank always come from the same row); what the samples are is
decided by the run layer (:mod:`ipfi_cli.run.metrics`). Three ways out, as the Prometheus
documentation recommends them:

* :func:`serve`: an HTTP endpoint (``/metrics``) for a long-running ``ipfi explain``;
* :func:`write_textfile`: an atomic file for node_exporter's textfile collector (cron runs);
* :func:`push`: a Pushgateway, replacing the run's group (PUT, as prometheus_client's
  ``push_to_gateway``): the group holds the last complete run's series and no older run's.

>>> metrics = MetricSet({"model": "churn"})
>>> metrics.set([Family("ipfi_feature_importance", "gauge", "Importance.", ("feature",),
...                     [(("age",), 0.25)])])
>>> print(exposition(metrics).decode().strip())
# HELP ipfi_feature_importance Importance.
# TYPE ipfi_feature_importance gauge
ipfi_feature_importance{feature="age",model="churn"} 0.25
"""

from __future__ import annotations

import os
import re
import tempfile
import threading
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ipfi_cli.errors import OutputError
from ipfi_cli.io.targets import new_file_mode
from ipfi_cli.io.urls import failure_reason, shown_url, split_credentials

#: a Prometheus label name (``__`` is reserved for Prometheus itself)
LABEL_NAME = re.compile(r"^[a-zA-Z_][a-zA-Z0-9_]*$")


def check_label_name(name: str, reserved: Sequence[str] = ()) -> str | None:
    """Why ``name`` cannot be a label name, or ``None``.

    >>> check_label_name("model") is None
    True
    >>> check_label_name("2fast")
    "'2fast' is not a Prometheus label name (letters, digits and _, not starting with a digit)"
    """
    if not LABEL_NAME.match(name):
        return f"{name!r} is not a Prometheus label name (letters, digits and _, not starting with a digit)"
    if name.startswith("__"):
        return f"{name!r}: label names starting with __ are reserved for Prometheus"
    if name in reserved:
        return f"{name!r} is a label ipfi sets itself ({', '.join(reserved)})"
    return None


@dataclass
class Family:
    """One metric family: its name, type (``gauge``, ``counter``, ``summary``, ``histogram`` or
    ``info``), help, label names and samples ``(label values, value)``. A ``counter``'s name ends in
    ``_total``; a ``summary``'s samples are ``(label values, (count, sum))``; a ``histogram``'s
    ``(label values, (buckets, sum))`` with ``buckets`` the cumulative ``[(upper bound, count)]``
    ending at ``+Inf``."""

    name: str
    type: str
    help: str
    labels: tuple[str, ...] = ()
    samples: list[tuple[tuple[str, ...], Any]] = field(default_factory=list)


class MetricSet:
    """The families of one moment of a run, with constant labels added to every sample.

    It is a ``prometheus_client`` collector: :meth:`set` replaces everything at once, under a
    lock, and a scrape (:meth:`collect`) reads one consistent moment.
    """

    def __init__(self, constant_labels: Mapping[str, str] | None = None) -> None:
        self.constant_labels = dict(constant_labels or {})
        self._families: list[Family] = []
        self._lock = threading.Lock()

    def set(self, families: list[Family]) -> None:
        with self._lock:
            self._families = families

    def families(self) -> list[Family]:
        with self._lock:
            return list(self._families)

    def collect(self) -> Iterator[Any]:
        from prometheus_client.core import (
            CounterMetricFamily,
            GaugeMetricFamily,
            HistogramMetricFamily,
            InfoMetricFamily,
            SummaryMetricFamily,
        )

        constant_names = tuple(self.constant_labels)
        constant_values = tuple(self.constant_labels.values())
        for family in self.families():
            names = [*family.labels, *constant_names]
            metric: Any
            if family.type == "counter":
                # prometheus_client adds _total itself
                metric = CounterMetricFamily(family.name.removesuffix("_total"), family.help, labels=names)
            elif family.type == "summary":
                metric = SummaryMetricFamily(family.name, family.help, labels=names)
            elif family.type == "histogram":
                metric = HistogramMetricFamily(family.name, family.help, labels=names)
            elif family.type == "info":
                metric = InfoMetricFamily(family.name.removesuffix("_info"), family.help, labels=constant_names)
                for _values, info in family.samples:
                    metric.add_metric(list(constant_values), info)
                yield metric
                continue
            else:
                metric = GaugeMetricFamily(family.name, family.help, labels=names)
            for values, value in family.samples:
                labels = [*values, *constant_values]
                if family.type == "summary":
                    count, total = value
                    metric.add_metric(labels, count_value=count, sum_value=total)
                elif family.type == "histogram":
                    buckets, total = value
                    metric.add_metric(labels, [(_bound(b), c) for b, c in buckets], sum_value=total)
                else:
                    metric.add_metric(labels, value)
            yield metric


def _bound(bound: float) -> str:
    return "+Inf" if bound == float("inf") else repr(float(bound))


def registry(metrics: MetricSet, process: bool = False) -> Any:
    """A registry of its own holding ``metrics`` (never the process-wide default one); with
    ``process``, prometheus_client's process and platform collectors too (``process_*``,
    ``python_info``: what a scrape of a live process shows; a textfile or a push outlives it)."""
    from prometheus_client import CollectorRegistry, PlatformCollector, ProcessCollector

    reg = CollectorRegistry(auto_describe=False)
    reg.register(metrics)
    if process:
        ProcessCollector(registry=reg)
        PlatformCollector(registry=reg)
    return reg


def exposition(metrics: MetricSet) -> bytes:
    """The text exposition format of ``metrics`` (what a scrape returns)."""
    from prometheus_client import generate_latest

    return bytes(generate_latest(registry(metrics)))


class MetricsServer:
    """``/metrics`` over HTTP on ``addr:port`` in a daemon thread, until :meth:`close`."""

    def __init__(self, metrics: MetricSet, port: int, addr: str = "127.0.0.1") -> None:
        from prometheus_client import start_http_server

        try:
            self._server, self._thread = start_http_server(port, addr=addr,
                                                                  registry=registry(metrics, process=True))
        except OSError as error:
            raise OutputError(f"--metrics-port {port}: cannot serve the metrics on {addr}:{port} "
                              f"({error.strerror or error})") from None
        self.port = int(self._server.server_address[1])  # the real port (port 0: a free one)

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(timeout=5)


def write_textfile(path: str, metrics: MetricSet) -> None:
    """Write ``metrics`` to ``path`` atomically (a temporary file in the same folder, renamed), as
    node_exporter's textfile collector wants: it never reads half a file."""
    folder = os.path.dirname(os.path.abspath(path))
    try:
        mode = new_file_mode(path)
        handle, temporary = tempfile.mkstemp(prefix=".ipfi-", suffix=".prom.tmp", dir=folder)
        try:
            with os.fdopen(handle, "wb") as f:
                f.write(exposition(metrics))
            os.chmod(temporary, mode | 0o444)  # node_exporter, another user, must read it
            os.replace(temporary, path)
        except BaseException:
            if os.path.exists(temporary):
                os.unlink(temporary)
            raise
    except OSError as error:
        raise OutputError(f"{path}: cannot write the metrics textfile ({error.strerror or error})") from None


def push(url: str, metrics: MetricSet, job: str, grouping: Mapping[str, str], timeout: float = 10.0) -> None:
    """Push ``metrics`` to the Pushgateway at ``url`` under ``job`` and the grouping labels, replacing
    the group (PUT): no series of an earlier push to it stays (with push-add, POST, a metric this run
    does not have, such as a ranking nDCG from an earlier run with --reference, stayed); other groups
    are left as they are. A
    ``user:password@`` in the URL is sent as HTTP basic authentication (the Pushgateway's
    ``--web.config.file``), as ``--webhook`` sends it; a query string stays the request's query
    (prometheus_client appends the API path to the URL as text, which put it inside the query).
    Messages show the URL as :func:`~ipfi_cli.io.urls.shown_url` does: no password, path or query."""
    import urllib.parse

    from prometheus_client import push_to_gateway
    from prometheus_client.exposition import default_handler


    try:
        bare, authorization = split_credentials(url)
        parts = urllib.parse.urlsplit(bare)
        gateway = urllib.parse.urlunsplit(parts._replace(query="", fragment=""))  # the API path goes after it

        def handler(url: str, method: str, timeout: float | None, headers: list[tuple[str, str]],
                    data: bytes) -> Any:
            if parts.query:
                url = f"{url}?{parts.query}"
            if authorization is not None:
                headers.append(("Authorization", authorization))
            return default_handler(url, method, timeout, headers, data)

        push_to_gateway(gateway, job=job, registry=registry(metrics), grouping_key=dict(grouping),
                           timeout=timeout, handler=handler)
    except (OSError, ValueError) as error:  # urllib's URLError and HTTPError are OSErrors; a bad URL
        raise OutputError(f"--pushgateway {shown_url(url)}: the push failed ({failure_reason(error, url)})"
                          ) from None

