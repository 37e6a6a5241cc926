"""ipfi's own health, counted: webhook posts by outcome, rows given up waiting for their labels,
labels that came too late, process metrics; the same counts in ``--meta``; and ``--max-lost``,
which turns what was lost beyond a threshold into exit 4 (by default: a warning and the counts).

The receivers are real HTTP servers on 127.0.0.1 (:class:`.conftest.Receiver`): one that answers
500 to every post, one that hangs. The expected counts come from the events file of a run without
a webhook and from the traces (rows written), never from the counters under test."""

from __future__ import annotations

import json
import random
import re
import urllib.request
from pathlib import Path

import pytest

from .conftest import HGB, ipfi, sample_lines
from .test_webhook import EXPLAIN, drift_stream, plain_run  # noqa: F401 - module fixtures


def textfile_samples(path: Path) -> dict[str, float]:
    """``name{labels}`` -> value of a Prometheus text file (comments left out)."""
    samples = {}
    for line in path.read_text().splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            samples[name] = float(value)
    return samples


# -- process metrics ------------------------------------------------------------------------------------------
def test_a_scrape_has_the_process_metrics_and_a_textfile_has_not(tmp_path):
    """The registry is ipfi's own (not prometheus_client's default one), so the process collectors are
    registered on it: a scrape of a live ipfi shows its memory, CPU and file descriptors."""
    from ipfi_cli.io.prometheus import Family, MetricSet, MetricsServer, write_textfile

    metrics = MetricSet({"model": "churn"})
    metrics.set([Family("ipfi_rows_read_total", "counter", "Rows read.", (), [((), 3)])])
    server = MetricsServer(metrics, 0)
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{server.port}/metrics", timeout=5) as response:
            scraped = response.read().decode()
    finally:
        server.close()
    assert 'ipfi_rows_read_total{model="churn"} 3.0' in scraped
    resident = re.search(r"^process_resident_memory_bytes (\S+)$", scraped, re.M)
    assert resident is not None and float(resident.group(1)) > 1e6  # a Python process holds megabytes
    assert re.search(r"^process_open_fds \d", scraped, re.M) and "python_info{" in scraped
    write_textfile(str(tmp_path / "ipfi.prom"), metrics)  # outlives the process: no process_* in it
    assert "process_" not in (tmp_path / "ipfi.prom").read_text()


# -- the webhook's posts --------------------------------------------------------------------------------------
def failing_run(stream: Path, url: str, folder: Path, *extra: str):
    textfile, meta = folder / "ipfi.prom", folder / "meta.json"
    result = ipfi("explain", str(stream), *EXPLAIN, "--webhook", url, "--webhook-retries", "1",
                  "--webhook-cooldown", "0", "--metrics-textfile", str(textfile), "--meta", str(meta), *extra)
    return result, textfile_samples(textfile) if textfile.exists() else {}, (
        json.loads(meta.read_text()) if meta.exists() else {})


@pytest.mark.slow
def test_a_receiver_answering_500_to_every_post_is_counted_and_changes_nothing_else(
        drift_stream, plain_run, receiver_factory, tmp_path):  # noqa: F811 - module fixtures
    traces, events = plain_run
    receiver = receiver_factory(status=500)
    result, metrics, meta = failing_run(drift_stream, receiver.url, tmp_path)
    assert result.returncode == 0, result.stderr  # by default: a warning and the counts
    assert result.stdout == traces  # the same bytes
    assert f"ipfi: warning: --webhook http://127.0.0.1:{receiver.server.server_address[1]}/***: 0 of " \
           f"{len(events)} post(s) delivered" in result.stderr
    assert receiver.bodies == [] and sum(receiver.attempts.values()) == 2 * len(events)  # each tried twice
    assert metrics['ipfi_webhook_posts_total{outcome="failed"}'] == len(events)
    assert metrics['ipfi_webhook_posts_total{outcome="delivered"}'] == 0
    assert metrics['ipfi_webhook_posts_total{outcome="dropped"}'] == 0
    assert meta["webhook"] == {"queued": len(events), "delivered": 0, "failed": len(events), "dropped": 0,
                               "suppressed": 0, "duplicates": 0, "retries": len(events)}
    assert meta["lost"] == len(events) and meta["status"] == "ok"


@pytest.mark.slow
def test_a_receiver_that_hangs_is_counted_and_max_lost_turns_it_into_exit_4(
        drift_stream, plain_run, receiver_factory, tmp_path):  # noqa: F811 - module fixtures
    traces, events = plain_run
    receiver = receiver_factory()
    receiver.gate.clear()  # every post hangs (30 s; the sender's timeout is 5 s)
    result, metrics, meta = failing_run(drift_stream, receiver.url, tmp_path, "--max-lost", str(len(events) - 1))
    assert result.returncode == 4, result.stderr
    assert result.stdout == traces  # everything written before the exit code
    lost = sum(metrics[f'ipfi_webhook_posts_total{{outcome="{o}"}}'] for o in ("failed", "dropped"))
    assert lost == len(events) and metrics['ipfi_webhook_posts_total{outcome="delivered"}'] == 0
    assert meta["lost"] == len(events) and meta["webhook"]["delivered"] == 0
    assert result.stderr.splitlines()[-1] == (f"ipfi: error: lost {len(events)} ({len(events)} webhook post(s) not "
                                              f"delivered), more than --max-lost {len(events) - 1}")


# -- late labels ---------------------------------------------------------------------------------------------
N_ROWS = 3000
LATE_OPTIONS = ["-m", HGB, "-t", "class", "--seed", "5", "--repeats", "2", "--no-live"]


@pytest.fixture(scope="module")
def late_streams(tmp_path_factory):
    """The features of 3,000 rows of agrawal_drift.csv with an id, and their labels: a quarter of them
    (drawn with seed 38) put after the labels of the next 326 rows (up to 271 places late), the others in
    their rows' order."""
    folder = tmp_path_factory.mktemp("late")
    header, *lines = sample_lines("agrawal_drift.csv")
    rows = [line.rsplit(",", 1) for line in lines[:N_ROWS]]
    features = folder / "features.csv"
    features.write_text(f"id,{header.rsplit(',', 1)[0]}\n" + "".join(f"r{i},{x}\n" for i, (x, _) in enumerate(rows)))
    rng = random.Random(38)
    order = sorted(range(N_ROWS), key=lambda i: i + (326.5 if rng.random() < 0.25 else 0))
    assert 250 < max(order.index(i) - i for i in range(N_ROWS)) <= 326
    labels = folder / "labels.csv"
    labels.write_text("id,class\n" + "".join(f"r{i},{rows[i][1]}\n" for i in order))
    return folder, features, labels


@pytest.mark.slow
def test_rows_given_up_waiting_for_their_labels_are_counted_and_max_lost_exits_4(late_streams, tmp_path):
    folder, features, labels = late_streams
    textfile, meta_path = tmp_path / "ipfi.prom", tmp_path / "meta.json"
    common = ["explain", str(features), *LATE_OPTIONS, "--labels", str(labels), "--id", "id", "--label-wait", "100"]
    result = ipfi(*common, "--metrics-textfile", str(textfile), "--meta", str(meta_path))
    assert result.returncode == 0, result.stderr
    written = {int(line.split(",", 1)[0]) for line in result.stdout.splitlines()[1:]}
    given_up = N_ROWS - len(written)  # the rows the traces do not have
    assert 0.15 * N_ROWS < given_up < 0.35 * N_ROWS  # about a quarter, as in the issue (1,519 of 6,000)
    assert f"{given_up:,} row(s) got no label within --label-wait (100 rows)" in result.stderr
    meta = json.loads(meta_path.read_text())
    assert meta["labels"]["given_up"] == given_up and meta["lost"] == given_up
    assert meta["labels"]["matched"] == N_ROWS - given_up
    assert meta["labels"]["late"] + meta["labels"]["unmatched"] == given_up  # every label came, some too late
    metrics = textfile_samples(textfile)
    assert metrics["ipfi_label_rows_given_up_total"] == given_up
    assert metrics["ipfi_labels_late_total"] == meta["labels"]["late"]
    below = ipfi(*common, "-q", "--max-lost", str(given_up - 1))
    assert below.returncode == 4 and below.stdout == result.stdout
    assert below.stderr == (f"ipfi: error: lost {given_up:,} ({given_up:,} row(s) given up waiting for their "
                            f"label), more than --max-lost {given_up - 1:,}\n")
    at = ipfi(*common, "-q", "--max-lost", str(given_up))
    assert at.returncode == 0 and at.stderr == ""
