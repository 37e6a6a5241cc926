"""A real Prometheus scrapes two running ``ipfi explain --metrics-port`` processes (a stream with a
drift and a stationary one): PromQL returns exactly the traces' last importances, and the shipped
importance alert fires on the drift and not on the stationary stream."""

from __future__ import annotations

import math
import re
import time
from pathlib import Path

import pytest

from ipfi_cli.monitoring import RULES

from .conftest import HGB, Prometheus, ipfi_process, need, sample_lines, wait_for

pytestmark = pytest.mark.slow

#: rows before the drift (and of the stationary stream's first part), and after
BEFORE, AFTER = 1000, 600
OPTIONS = ["-t", "class", "--seed", "7", "--repeats", "3", "--alpha", "0.01", "--detect", "--no-live",
           "--metrics-port", "0", "--metrics-label", "model=hgb"]


def trace_rows(path: Path) -> list[str]:
    return path.read_text().splitlines()[1:] if path.exists() else []


def metrics_port(stderr: Path) -> int:
    found = re.search(r"serving metrics on http://127\.0\.0\.1:(\d+)/metrics", stderr.read_text())
    return int(found.group(1)) if found else 0


def test_prometheus_scrapes_the_traces_last_importances_and_the_drift_fires_the_alert(tmp_path):
    need("prometheus")
    header, *drift_rows = sample_lines("agrawal_drift.csv")
    drift = drift_rows[10000 - BEFORE:10000 + AFTER]  # the concept switches at row 10,000 of the file
    steady = sample_lines("agrawal_static.csv")[1:1 + BEFORE + AFTER]
    streams = {"drift": drift, "stationary": steady}
    processes, traces, logs = {}, {}, {}
    prometheus = None
    try:
        for name in streams:
            traces[name], logs[name] = tmp_path / f"{name}.csv", tmp_path / f"{name}.log"
            processes[name] = ipfi_process("explain", "-", "-m", HGB, *OPTIONS, "-o", str(traces[name]),
                                           stderr=logs[name])
        ports = {name: wait_for(lambda n=name: metrics_port(logs[n]), 60, f"{name}'s metrics port", logs[name])
                 for name in streams}
        for name, rows in streams.items():  # the first part: no change in either
            processes[name].stdin.write(("\n".join([header, *rows[:BEFORE]]) + "\n").encode())
            processes[name].stdin.flush()
        for name in streams:
            wait_for(lambda n=name: len(trace_rows(traces[n])) == BEFORE, 120, f"{name}'s first rows", logs[name])
        prometheus = Prometheus(tmp_path, {name: f"127.0.0.1:{port}" for name, port in ports.items()}, [str(RULES)])
        # Prometheus has seen the counters at 0 before the drift arrives
        wait_for(lambda: len(prometheus.query(f"ipfi_rows_explained_total == {BEFORE - 1}")) == 2, 60,
                 "the first scrapes", prometheus.log)
        for name, rows in streams.items():
            processes[name].stdin.write(("\n".join(rows[BEFORE:]) + "\n").encode())
            processes[name].stdin.flush()
        for name in streams:
            wait_for(lambda n=name: len(trace_rows(traces[n])) == BEFORE + AFTER, 120, f"{name}'s last rows",
                     logs[name])

        names = traces["drift"].read_text().splitlines()[0].split(",")[1:]
        for name in streams:  # the processes still run (stdin is open): Prometheus scrapes their last state
            last = [float(v) for v in trace_rows(traces[name])[-1].split(",")[1:]]
            expected = {feature: value for feature, value in zip(names, last)}

            def scraped(n: str = name) -> dict[str, float]:
                result = prometheus.query(f'ipfi_feature_importance{{stream="{n}",model="hgb"}}')
                return {r["metric"]["feature"]: float(r["value"][1]) for r in result}

            wait_for(lambda e=expected, s=scraped: s() == e, 30, f"{name}'s last importances in Prometheus",
                     prometheus.log)
            assert scraped() == expected  # exactly: the exposition writes floats as repr, as the traces do
            explained = prometheus.query(f'ipfi_rows_explained_total{{stream="{name}"}}')
            assert float(explained[0]["value"][1]) == BEFORE + AFTER - 1  # the first row is only stored
            ranks = {r["metric"]["feature"]: float(r["value"][1])
                     for r in prometheus.query(f'ipfi_feature_rank{{stream="{name}"}}')}
            top = max(expected, key=lambda f: expected[f])
            assert ranks[top] == 1.0

        def firing(stream: str) -> list[dict]:
            return [a for a in prometheus.alerts() if a["labels"].get("stream") == stream and a["state"] == "firing"]

        alerts = wait_for(lambda: firing("drift"), 30, "the importance alert on the drifting stream", prometheus.log)
        # the drift moves an importance (warning) and, where the loss's change event came, the loss (critical)
        assert "IpfiImportanceChanged" in {a["labels"]["alertname"] for a in alerts}
        assert {(a["labels"]["alertname"], a["labels"]["severity"]) for a in alerts} <= {
            ("IpfiImportanceChanged", "warning"), ("IpfiLossChanged", "critical")}
        changed = {(a["labels"]["feature"], a["labels"]["direction"]) for a in alerts
                   if a["labels"]["alertname"] == "IpfiImportanceChanged"}
        assert ("salary", "down") in changed or ("age", "down") in changed, changed
        time.sleep(2)  # two more evaluations
        assert firing("stationary") == []
        events = prometheus.query('sum by (stream) (ipfi_change_events_total{kind="importance"})')
        assert {r["metric"]["stream"]: float(r["value"][1]) for r in events}["stationary"] == 0.0

        for name in streams:
            processes[name].stdin.close()
            assert processes[name].wait(timeout=60) == 0, logs[name].read_text()
    finally:
        for process in processes.values():
            if process.poll() is None:
                process.kill()
                process.wait(timeout=10)
        if prometheus is not None:
            prometheus.stop()
    assert not math.isnan(sum(expected.values()))
