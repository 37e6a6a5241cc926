"""The shipped Grafana dashboard: every query of every panel, with Grafana's variables filled in as
Grafana fills them, returns series from a real Prometheus scraping a real ``ipfi explain`` run, and
names only metrics that run exports."""

from __future__ import annotations

import json
import re
import urllib.request
from pathlib import Path

import pytest

from ipfi_cli.monitoring import DASHBOARD

from .conftest import HGB, Prometheus, ipfi, ipfi_process, need, sample_lines, wait_for

ROWS = 1200
#: Grafana's values for the dashboard's variables: $job's "All" is its allValue (.+); $__rate_interval is
#: at least four scrape intervals (the test scrapes every second)
VARIABLES = {"$job": ".+", "$__rate_interval": "10s"}


def panel_queries() -> list[tuple[str, str]]:
    dashboard = json.loads(DASHBOARD.read_text())
    return [(panel["title"], target["expr"]) for panel in dashboard["panels"] for target in panel["targets"]]


def filled(expr: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda item: -len(item[0])):
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def test_the_dashboard_is_grafana_json_with_a_job_variable():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    assert variables["job"]["allValue"] == VARIABLES["$job"]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 8
    for panel in dashboard["panels"]:
        assert panel["targets"] and all(t["refId"] for t in panel["targets"]), panel["title"]


@pytest.mark.slow
def test_every_panel_query_returns_series_from_a_real_run(tmp_path):
    need("prometheus")
    header, *rows = sample_lines("agrawal_drift.csv")
    reference = tmp_path / "reference.csv"
    done = ipfi("batch", str(Path(HGB).parent / "agrawal_static.csv"), "-m", HGB, "-t", "class", "--seed", "1",
                "-M", "2", "--max-rows", "2000", "-q", "-o", str(reference))
    assert done.returncode == 0, done.stderr
    log, traces = tmp_path / "explain.log", tmp_path / "traces.csv"
    process = ipfi_process("explain", "-", "-m", HGB, "-t", "class", "--seed", "3", "-M", "2", "--alpha", "0.01",
                           "--bounds", "--detect", "--reference", str(reference), "--no-live", "--metrics-port", "0",
                           "-o", str(traces), stderr=log)
    prometheus = None
    try:
        port = wait_for(lambda: re.search(r"serving metrics on http://127\.0\.0\.1:(\d+)/", log.read_text()), 60,
                        "the metrics port", log).group(1)
        prometheus = Prometheus(tmp_path, {"stream": f"127.0.0.1:{port}"}, [])
        # rows in three parts (the last across the drift at row 10,000), scraped in between, so that the
        # counters rise within the rate windows and a change is detected
        parts = [rows[8800:9200], rows[9200:9600], rows[9600:8800 + ROWS + 600]]
        process.stdin.write((header + "\n").encode())
        for number, part in enumerate(parts, 1):
            process.stdin.write(("\n".join(part) + "\n").encode())
            process.stdin.flush()
            written = sum(len(p) for p in parts[:number])
            wait_for(lambda w=written: len(traces.read_text().splitlines()) - 1 >= w if traces.exists() else False,
                     120, f"{written} rows explained", log)
            wait_for(lambda w=written: prometheus.query(f"ipfi_rows_read_total >= {w}"), 30, "a scrape", prometheus.log)
        exported = {line.split("{")[0].split(" ")[0] for line in
                    urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=5).read().decode().splitlines()
                    if line and not line.startswith("#")}
        for title, expr in panel_queries():
            # the series an `unless` leaves out are a finished run's (a push, a textfile), not a live one's
            for name in re.findall(r"\b(ipfi_[a-z_]+)\b", expr.split(" unless ")[0]):
                assert name in exported, f"{title}: {name} is not a metric ipfi exports"
            answer = prometheus.query(filled(expr))
            assert answer, f"{title}: no series for {filled(expr)}"
        assert prometheus.query(filled('increase(ipfi_change_events_total{job=~"$job"}[5m]) > 0')), \
            "the drift gave no change event for the events panel to show"
        process.stdin.close()
        assert process.wait(timeout=60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        if prometheus is not None:
            prometheus.stop()
