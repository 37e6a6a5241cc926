"""A served model's requests on the wire: each sent once, on every framing a conforming server uses;
several in flight with the numbers unchanged; outages waited out; a failing server given up on.

The servers (:mod:`sources.wire`) are real HTTP servers on 127.0.0.1 in this process's threads,
serving the same fitted forest as the joblib file, so the traces must be byte for byte those of
the model loaded in-process. They count the POSTs they receive: the reference for ipfi's counts.
"""

from __future__ import annotations

import json
import socket
import time
from typing import Any

import pytest

from sources.wire import FRAMINGS, WireServer

SERVED = ("--task", "classification", "-t", "class", "--seed", 11, "-q")


@pytest.fixture(scope="module")
def reference(forest, data_csv) -> dict[str, str]:
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    runner = CliRunner()
    path = str(forest[1])
    common = [str(data_csv), "-m", path, "-t", "class", "--seed", "11", "-q"]
    explain = runner.invoke(app, ["explain", *common, "--no-live"])
    batch = runner.invoke(app, ["batch", *common])
    assert explain.exit_code == 0 and batch.exit_code == 0, explain.stderr + batch.stderr
    return {"explain": explain.stdout, "batch": batch.stdout}


@pytest.fixture
def serve(forest):
    servers: list[WireServer] = []

    def start(framing: str = "keep-alive", **options: Any) -> WireServer:
        server = WireServer(forest[0], framing, **options)
        servers.append(server)
        return server
    yield start
    for server in servers:
        server.close()


@pytest.mark.parametrize("framing", FRAMINGS)
def test_each_request_is_sent_once(run, serve, data_csv, reference, tmp_path, framing):
    """--retries 0: a request sent twice (an answer left unread on a kept-alive connection) would fail."""
    server = serve(framing)
    meta = tmp_path / "meta.json"
    result = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--retries", 0,
                 "--max-request-rows", 700, "--meta", meta)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == reference["explain"]
    stats = json.loads(meta.read_text())["http"]
    assert stats["retried"] == 0 and stats["outcomes"] == {"ok": server.posts}
    assert stats["requests"] == server.posts and server.posts > 15  # many requests on each connection
    if framing == "keep-alive":
        assert server.connections <= 1 + 4  # the first requests' and one per request in flight (--concurrency 4)
    assert sum(server.rows) == stats["rows_sent"]


def test_no_rows_are_asked_twice(run, serve, data_csv, reference):
    """explain asks the first row once (two checks want its answer); batch asks the unperturbed rows
    once (screened, then the baseline)."""
    server = serve()
    result = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live")
    assert result.exit_code == 0 and result.stdout == reference["explain"]
    assert server.rows.count(1) == 1
    server.rows.clear()
    result = run("batch", data_csv, "--model-url", server.url, *SERVED, "--concurrency", 1)
    assert result.exit_code == 0 and result.stdout == reference["batch"]
    n = 150
    # the first row (the classes' type), the rows once, then 9 features x 10 repeats of permuted rows
    assert server.rows[:2] == [1, n] and sum(server.rows) == 1 + n + 9 * 10 * n


def test_requests_in_flight_give_the_same_bytes(run, serve, data_csv, reference):
    server = serve(delay=0.05)
    one = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--max-request-rows", 1000,
              "--concurrency", 1)
    assert one.exit_code == 0 and one.stdout == reference["explain"]
    assert server.most_in_flight == 1
    many = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--max-request-rows", 1000,
               "--concurrency", 4)
    assert many.exit_code == 0 and many.stdout == reference["explain"]
    assert server.most_in_flight == 4  # a micro-batch of ~13,500 rows is 14 requests of 1,000


def test_an_outage_is_waited_out(run, serve, data_csv, reference, monkeypatch):
    """503 for two seconds (the model is loading): the run waits, says so, and gives the same bytes."""
    from ipfi_cli.models import http_policy as http

    monkeypatch.setattr(http, "FIRST_NOTICE", 0.5)
    monkeypatch.setattr(http, "MAX_PAUSE", 0.5)
    server = serve()
    server.plan = [503] * 6  # pauses 0.25, 0.5, 0.5, ... (capped here at 0.5 s): 2.75 s of waiting
    started = time.monotonic()
    result = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--retries", 0,
                 "--concurrency", 1)
    assert result.exit_code == 0, result.stderr
    assert result.stdout == reference["explain"]
    assert time.monotonic() - started > 2.0
    lines = result.stderr.splitlines()
    assert any("model unreachable for" in line and "waiting up to 5m (--model-wait)" in line
               and "HTTP 503" in line for line in lines), result.stderr
    assert any("the model answers again, after" in line for line in lines), result.stderr


def test_an_outage_longer_than_model_wait_stops_the_run(run, serve, data_csv, tmp_path):
    server = serve()
    server.plan = [503] * 1000
    started = time.monotonic()
    result = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--model-wait", "1.5s")
    assert result.exit_code == 1
    assert 1.4 < time.monotonic() - started < 6.0
    line = result.stderr.strip().splitlines()[-1]
    assert "did not answer for 1.5 s (--model-wait 1.5 s)" in line and "HTTP 503" in line, result.stderr


def test_a_refused_connection_is_an_outage_too(run, serve, data_csv, reference, forest, monkeypatch):
    """The server goes away (connections refused) and comes back on the same port."""
    import threading

    from ipfi_cli.models import http_policy as http

    monkeypatch.setattr(http, "FIRST_NOTICE", 0.5)
    server = serve()
    port, url = server.port, server.url
    server.close()
    # the port held meanwhile, bound but not listening (the kernel refuses connections to it): no
    # other process of the test run can take it before the server comes back
    holder = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    holder.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    holder.bind(("127.0.0.1", port))
    back: list[WireServer] = []

    def come_back() -> None:
        holder.close()
        back.append(serve(port=port))

    timer = threading.Timer(2.0, come_back)
    timer.start()
    try:
        result = run("explain", data_csv, "--model-url", url, *SERVED, "--no-live", "--retries", 0)
    finally:
        timer.join()
        holder.close()
    # the server is asked for its metadata first: that waits as well
    assert result.exit_code == 0, result.stderr
    assert result.stdout == reference["explain"]
    assert "connection refused" in result.stderr and back and back[0].posts > 0


def test_a_failing_server_is_tried_retries_times(run, serve, data_csv):
    server = serve()
    server.plan = [500] * 10
    result = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--retries", 2)
    assert result.exit_code == 1
    assert server.posts == 3
    assert "gave up after 3 tries (--retries 2): HTTP 500" in result.stderr


def test_model_wait_is_a_duration(run, data_csv):
    result = run("explain", data_csv, "--model-url", "http://127.0.0.1:9/invocations", *SERVED,
                 "--model-wait", "5 minutes")
    assert result.exit_code == 2 and "--model-wait" in result.stderr and "not a duration" in result.stderr


def test_the_model_dependency_in_the_metrics(run, serve, data_csv, reference, tmp_path, monkeypatch):
    """While the model is waited for, the textfile says it is down (ipfi_model_up 0); at the end it
    counts the tries by outcome, the retries, the outage and the answered requests' latency, as
    the server counted them."""
    import threading

    from ipfi_cli.models import http_policy as http

    monkeypatch.setattr(http, "MAX_PAUSE", 0.3)
    server = serve()
    server.plan = [503] * 4
    textfile = tmp_path / "ipfi.prom"
    seen: set[str] = set()
    done = threading.Event()

    def watch() -> None:
        while not done.is_set():
            if textfile.exists():
                seen.update(line for line in textfile.read_text().splitlines() if line.startswith("ipfi_model_up"))
            time.sleep(0.02)
    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        result = run("explain", data_csv, "--model-url", server.url, *SERVED, "--no-live", "--concurrency", 1,
                     "--metrics-textfile", textfile, "--meta", tmp_path / "meta.json")
    finally:
        done.set()
        watcher.join()
    assert result.exit_code == 0 and result.stdout == reference["explain"], result.stderr
    assert "ipfi_model_up 0.0" in seen
    text = textfile.read_text()
    answered = server.posts - 4
    for line in ("ipfi_model_up 1.0", f'ipfi_model_requests_total{{outcome="ok"}} {answered}.0',
                 'ipfi_model_requests_total{outcome="unavailable"} 4.0', "ipfi_model_retries_total 4.0",
                 "ipfi_model_outages_total 1.0", f"ipfi_model_request_duration_seconds_count {answered}.0",
                 f'ipfi_model_request_duration_seconds_bucket{{le="+Inf"}} {answered}.0'):
        assert line in text.splitlines(), (line, text)
    stats = json.loads((tmp_path / "meta.json").read_text())["http"]
    assert stats["outcomes"] == {"ok": answered, "unavailable": 4} and stats["retried"] == 4
    assert stats["outages"] == 1 and stats["waited_seconds"] > 0.25 + 0.3
