"""The shipped liveness rules with a real Prometheus scraping a real ``ipfi explain --metrics-port``:
IpfiDown fires when the process is killed (kill -9: no exit code, no last words, its series vanish at
the next failed scrape), and IpfiStreamStale fires when its input stops sending rows while the process
lives (the input is a pipe the test keeps open).

The rules are the shipped ones with shorter durations (a test copy, see :func:`fast_rules`): the
shipped `for: 1m`, `for: 5m` and 10 minutes without a row would make each test last over ten minutes;
the expressions, labels and job scoping under test are otherwise unchanged."""

from __future__ import annotations

import os
import re
import signal
import time
from pathlib import Path
from typing import Any

import pytest

from ipfi_cli.monitoring import RULES

from .conftest import HGB, Prometheus, ipfi_process, need, sample_lines, wait_for

pytestmark = pytest.mark.slow

#: the test copy's durations: `for:` of IpfiDown and IpfiStreamStale, and the seconds without a row
#: that count as stale (shipped: 1m, 5m and 600)
FOR, STALE_AFTER = "2s", 5
ROWS = 300
OPTIONS = ["-t", "class", "--seed", "7", "--repeats", "2", "--no-live", "--metrics-port", "0"]


def fast_rules(folder: Path) -> Path:
    """The shipped rules with `for: 2s` for the two liveness alerts and 5 s without a row as stale."""
    import yaml

    rules = yaml.safe_load(RULES.read_text())
    changed = set()
    for group in rules["groups"]:
        for rule in group["rules"]:
            if rule["alert"] in ("IpfiDown", "IpfiStreamStale"):
                rule["for"] = FOR
                rule["expr"] = rule["expr"].replace("> 600", f"> {STALE_AFTER}")
                changed.add(rule["alert"])
    assert changed == {"IpfiDown", "IpfiStreamStale"}
    assert "> 600" not in rules["groups"][0]["rules"][1]["expr"]  # both thresholds of IpfiStreamStale
    path = folder / "rules.yml"
    path.write_text(yaml.safe_dump(rules, sort_keys=False))
    return path


def metrics_port(stderr: Path) -> int:
    found = re.search(r"serving metrics on http://127\.0\.0\.1:(\d+)/metrics", stderr.read_text())
    return int(found.group(1)) if found else 0


def trace_rows(path: Path) -> int:
    return len(path.read_text().splitlines()) - 1 if path.exists() else 0


def alerts(prometheus: Prometheus, name: str, state: str = "firing") -> list[dict[str, Any]]:
    return [a for a in prometheus.alerts() if a["labels"]["alertname"] == name and a["state"] == state]


def start_streaming(tmp_path: Path, job: str) -> tuple[Any, Path, Prometheus]:
    """An ipfi explaining ROWS rows from a pipe left open, scraped by a Prometheus (job ``job``) with the
    fast rules, until Prometheus has seen all its rows."""
    header, *rows = sample_lines("agrawal_drift.csv")
    log, traces = tmp_path / "explain.log", tmp_path / "traces.csv"
    process = ipfi_process("explain", "-", "-m", HGB, *OPTIONS, "-o", str(traces), stderr=log)
    port = wait_for(lambda: metrics_port(log), 60, "the metrics port", log)
    process.stdin.write(("\n".join([header, *rows[:ROWS]]) + "\n").encode())
    process.stdin.flush()
    wait_for(lambda: trace_rows(traces) == ROWS, 60, "the rows explained", log)
    prometheus = Prometheus(tmp_path, {job: f"127.0.0.1:{port}"}, [str(fast_rules(tmp_path))])
    wait_for(lambda: prometheus.query(f'ipfi_rows_explained_total{{job="{job}"}} == {ROWS - 1}'), 30,
             "a scrape of the rows", prometheus.log)
    return process, log, prometheus


def test_ipfi_down_fires_when_a_scraped_ipfi_is_killed(tmp_path):
    need("prometheus")
    started = time.monotonic()
    process, log, prometheus = start_streaming(tmp_path, "ipfi-payments")
    try:
        # alive: up is 1, nothing fires (the last row is fresh: the rows came a moment ago)
        assert [float(r["value"][1]) for r in prometheus.query('up{job="ipfi-payments"}')] == [1.0]
        assert alerts(prometheus, "IpfiDown", "pending") + alerts(prometheus, "IpfiDown") == []
        os.kill(process.pid, signal.SIGKILL)
        assert process.wait(timeout=10) == -signal.SIGKILL
        killed = time.monotonic()
        firing = wait_for(lambda: alerts(prometheus, "IpfiDown"), 30, "IpfiDown to fire", prometheus.log)
        fired_after = time.monotonic() - killed
        (alert,) = firing
        assert alert["labels"]["job"] == "ipfi-payments" and alert["labels"]["severity"] == "critical"
        assert alert["annotations"]["runbook_url"] == "docs/monitoring.md#runbook-ipfidown"
        assert "ipfi-payments" in alert["annotations"]["summary"]
        # a failed scrape (1 s) and the test copy's `for: 2s`, evaluated every second: within 10 s
        assert fired_after < 10, fired_after
        # the process's own series are gone: no rule on them could have said it
        assert prometheus.query('ipfi_last_row_timestamp_seconds{job="ipfi-payments"}') == []
        assert alerts(prometheus, "IpfiStreamStale", "pending") + alerts(prometheus, "IpfiStreamStale") == []
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        prometheus.stop()
    assert time.monotonic() - started < 60


def test_ipfi_stream_stale_fires_when_rows_stop_while_the_process_lives(tmp_path):
    need("prometheus")
    started = time.monotonic()
    process, log, prometheus = start_streaming(tmp_path, "ipfi-orders")
    try:
        (last_row,) = prometheus.query('ipfi_last_row_timestamp_seconds{job="ipfi-orders"}')
        firing = wait_for(lambda: alerts(prometheus, "IpfiStreamStale"), 40, "IpfiStreamStale to fire",
                          prometheus.log)
        silent = time.time() - float(last_row["value"][1])  # the same clock: ipfi's, Prometheus' and ours
        (alert,) = firing
        assert alert["labels"]["job"] == "ipfi-orders" and alert["labels"]["severity"] == "warning"
        assert alert["annotations"]["runbook_url"] == "docs/monitoring.md#runbook-ipfistreamstale"
        # no earlier than the test copy's 5 s without a row plus its `for: 2s`
        assert silent >= STALE_AFTER + 2, silent
        assert process.poll() is None, log.read_text()  # it lives: this is not IpfiDown's case
        assert alerts(prometheus, "IpfiDown", "pending") + alerts(prometheus, "IpfiDown") == []
        # rows again: the alert clears (the expression is false at the next evaluation)
        header, *rows = sample_lines("agrawal_drift.csv")
        process.stdin.write(("\n".join(rows[ROWS:ROWS + 20]) + "\n").encode())
        process.stdin.flush()
        wait_for(lambda: not alerts(prometheus, "IpfiStreamStale", "firing"), 20, "IpfiStreamStale to clear",
                 prometheus.log)
        process.stdin.close()
        assert process.wait(timeout=60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait(timeout=10)
        prometheus.stop()
    assert time.monotonic() - started < 60
