"""The shipped Grafana dashboard: every query names only metrics ipfi exports (the families of
``ipfi_cli.run.metrics``), keeps its source apart (live scraped streams, pushed runs, textfile runs:
one variable each) and ranks features per stream; and every query, with Grafana's variables filled in
as Grafana fills them for "All", returns series from a real Prometheus scraping a real ``ipfi explain``
run, a Pushgateway holding a pushed run and a textfile of a finished run."""

from __future__ import annotations

import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from ipfi_cli.monitoring import DASHBOARD

from .conftest import HGB, ROOT, Prometheus, ipfi, ipfi_process, need, sample_lines, wait_for

ROWS = 1200
#: Grafana's values for the dashboard's variables: "All" is each one's allValue (.+); $__rate_interval is
#: at least four scrape intervals (the test scrapes every second)
VARIABLES = {"$job": ".+", "$push_job": ".+", "$textfile_job": ".+", "$__rate_interval": "10s"}
#: each source's variable, and the label it picks
SOURCES = {"$job": "job", "$push_job": "exported_job", "$textfile_job": "job"}
#: PromQL's words that are not metric names (functions are followed by "(")
KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right", "offset", "bool"}


def panels() -> list[dict[str, Any]]:
    return [panel for panel in json.loads(DASHBOARD.read_text())["panels"] if panel["type"] != "row"]


def panel_queries() -> list[tuple[str, str]]:
    return [(panel["title"], target["expr"]) for panel in panels() for target in panel["targets"]]


def filled(expr: str) -> str:
    for name, value in sorted(VARIABLES.items(), key=lambda item: -len(item[0])):
        expr = expr.replace(name, value)
    assert "$" not in expr, expr
    return expr


def exported_names() -> set[str]:
    """The series names ipfi exports: each Family of ipfi_cli/run/metrics.py (read from its source), with
    a summary's _sum and _count and a histogram's _bucket, _sum and _count."""
    source = (ROOT / "src" / "ipfi_cli" / "run" / "metrics.py").read_text()
    names: set[str] = set()
    for name, kind in re.findall(r'Family\(\s*"(ipfi_\w+)",\s*"(\w+)"', source):
        names.add(name)
        names.update({"summary": [f"{name}_sum", f"{name}_count"],
                      "histogram": [f"{name}_bucket", f"{name}_sum", f"{name}_count"]}.get(kind, []))
    assert {"ipfi_feature_importance", "ipfi_model_loss_sum", "ipfi_last_success_timestamp_seconds"} <= names
    return names


def metric_names(expr: str) -> set[str]:
    """The metric names an expression selects: its identifiers outside label matchers, label lists,
    ranges and strings that are neither functions (followed by "(") nor PromQL's keywords."""
    bare = re.sub(r'"(?:[^"\\]|\\.)*"', '""', expr)
    bare = re.sub(r"\{[^}]*\}|\[[^]]*\]", " ", bare)
    bare = re.sub(r"\b(by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", bare)
    return {m.group(1) for m in re.finditer(r"\b([a-zA-Z_:][\w:]*)\b(?!\s*\()", bare)
            if m.group(1) not in KEYWORDS and not m.group(1)[0].isdigit()}


def test_the_dashboard_is_grafana_json_with_a_variable_per_source():
    dashboard = json.loads(DASHBOARD.read_text())
    assert dashboard["uid"] and dashboard["schemaVersion"] >= 36
    variables = {v["name"]: v for v in dashboard["templating"]["list"]}
    for name in SOURCES:
        assert variables[name[1:]]["allValue"] == VARIABLES[name]
    ids = [panel["id"] for panel in dashboard["panels"]]
    assert len(ids) == len(set(ids)) and len(ids) >= 8
    for panel in panels():
        assert panel["targets"] and all(t["refId"] for t in panel["targets"]), panel["title"]


def test_metric_names_are_found_in_a_query():
    assert metric_names('topk without (feature) (5, ipfi_a{job=~"$job", x="unless"} unless on(job) ipfi_b)') == {
        "ipfi_a", "ipfi_b"}
    assert metric_names("rate(ipfi_c_sum[5m]) / rate(up[5m]) > bool 0") == {"ipfi_c_sum", "up"}


def test_every_query_names_only_metrics_ipfi_exports():
    exported = exported_names()
    for title, expr in panel_queries():
        names = metric_names(expr)
        assert names and names <= exported, f"{title}: {sorted(names - exported)} are not metrics ipfi exports"
    for variable in json.loads(DASHBOARD.read_text())["templating"]["list"][1:]:
        selector = re.fullmatch(r"label_values\((.+), (\w+)\)", variable["definition"])
        assert selector is not None and metric_names(selector.group(1)) <= exported, variable["name"]


def test_each_query_keeps_to_one_source_and_ranks_within_each_stream():
    for title, expr in panel_queries():
        used = [name for name in SOURCES if name + '"' in expr]
        assert len(used) == 1, f"{title}: one source's variable, not {used}"
        (variable,) = used
        # every selector is that source's: its variable, and exported_job empty (set) for scraped or textfile
        # series (pushed ones)
        for selector in re.findall(r"ipfi_\w+(\{[^}]*\})?", expr):
            if selector:  # the unless/and filters match by labels (on(job, instance)) instead
                assert f'{SOURCES[variable]}=~"{variable}"' in selector, (title, selector)
                assert (variable == "$push_job") == ('exported_job=""' not in selector), (title, selector)
        if "topk" in expr:  # per stream: the top 5 of each series group, never across streams
            assert "topk without (feature) (5," in expr, title
        # the published sources' panels show values, not rates (a published series does not move)
        assert ("rate(" in expr or "increase(" in expr) <= (variable == "$job"), title
    titles = [panel["title"] for panel in panels()]
    assert sum(title.startswith("Top features") for title in titles) == 3


class Textfile:
    """node_exporter's textfile collector, as far as Prometheus sees it: the file's text at /metrics."""

    def __init__(self, path: Path) -> None:
        class Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 - the stdlib's name
                body = path.read_bytes()
                self.send_response(200)
                self.send_header("Content-Type", "text/plain; version=0.0.4")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.target = f"127.0.0.1:{self.server.server_address[1]}"
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.mark.slow
def test_every_panel_query_returns_series_from_a_real_run(tmp_path, pushgateway):
    need("prometheus")
    header, *rows = sample_lines("agrawal_drift.csv")
    reference = tmp_path / "reference.csv"
    done = ipfi("batch", str(Path(HGB).parent / "agrawal_static.csv"), "-m", HGB, "-t", "class", "--seed", "1",
                "-M", "2", "--max-rows", "2000", "-q", "-o", str(reference))
    assert done.returncode == 0, done.stderr
    # a finished run across the drift: pushed (job nightly) and written as a textfile
    published = tmp_path / "published.csv"
    published.write_text("\n".join([header, *rows[9400:10600]]) + "\n")
    textfile = tmp_path / "ipfi.prom"
    done = ipfi("explain", str(published), "-m", HGB, "-t", "class", "--seed", "3", "-M", "2", "--alpha", "0.01",
                "--detect", "--no-live", "-q", "--pushgateway", pushgateway, "--push-job", "nightly",
                "--metrics-textfile", str(textfile), "-o", str(tmp_path / "published-traces.csv"))
    assert done.returncode == 0, done.stderr
    files = Textfile(textfile)
    log, traces = tmp_path / "explain.log", tmp_path / "traces.csv"
    process = ipfi_process("explain", "-", "-m", HGB, "-t", "class", "--seed", "3", "-M", "2", "--alpha", "0.01",
                           "--bounds", "--detect", "--reference", str(reference), "--no-live", "--metrics-port", "0",
                           "-o", str(traces), stderr=log)
    prometheus = None
    try:
        port = wait_for(lambda: re.search(r"serving metrics on http://127\.0\.0\.1:(\d+)/", log.read_text()), 60,
                        "the metrics port", log).group(1)
        prometheus = Prometheus(tmp_path, {"stream": f"127.0.0.1:{port}", "pushgateway": pushgateway.split("//")[1],
                                           "node": files.target}, [])
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
            wait_for(lambda w=written: prometheus.query(f'ipfi_rows_read_total{{job="stream"}} >= {w}'), 30,
                     "a scrape", prometheus.log)
        wait_for(lambda: prometheus.query('ipfi_last_success_timestamp_seconds{exported_job="nightly"}')
                 and prometheus.query('ipfi_last_success_timestamp_seconds{job="node"}'), 30,
                 "the published run's series", prometheus.log)
        exported = exported_names()
        sources = {"$job": {"stream"}, "$push_job": {"nightly"}, "$textfile_job": {"node"}}
        for title, expr in panel_queries():
            assert metric_names(expr) <= exported, title
            answer = prometheus.query(filled(expr))
            assert answer, f"{title}: no series for {filled(expr)}"
            # the series are the panel's source's only (sources kept apart)
            (variable,) = [name for name in SOURCES if name + '"' in expr]
            assert {r["metric"].get(SOURCES[variable]) for r in answer} == sources[variable], (title, answer)
            if "topk" in expr:
                assert len(answer) == 5, (title, answer)
        # the published run's loss panels are numbers, not NaN (its series do not move: no rate)
        for title, expr in panel_queries():
            if "loss" in title.lower() and "$job" not in expr:
                values = [float(r["value"][1]) for r in prometheus.query(filled(expr))]
                assert values and all(0.0 <= v < 1.0 for v in values), (title, values)
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
        files.stop()
