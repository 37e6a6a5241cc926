"""``explain --metrics-textfile``: what the file's families say of themselves."""

from __future__ import annotations

import json

import pytest
from prometheus_client.parser import text_string_to_metric_families

from .conftest import HGB, SAMPLE, ipfi, sample_lines

pytestmark = pytest.mark.process  # the command as a user runs it


def test_the_bound_gauge_says_which_bound_it_holds(tmp_path):
    """``ipfi_feature_importance_bound`` holds the bound of ``--bounds-method`` at ``--delta`` (the ones
    ``--meta`` reports); its help text names both (it said Chebyshev whatever the method)."""
    data = tmp_path / "rows.csv"
    data.write_text("\n".join(sample_lines("agrawal_static.csv")[:401]) + "\n")
    prom, meta = tmp_path / "m.prom", tmp_path / "meta.json"
    result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "-M", "3", "--bounds-method",
                  "realisations", "--delta", "0.1", "--no-live", "-q", "--metrics-textfile", str(prom),
                  "--meta", str(meta), "-o", str(tmp_path / "t.csv"))
    assert result.returncode == 0, result.stderr
    families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
    bound = families["ipfi_feature_importance_bound"]
    assert "at level 1 - 0.1 (realisations bound" in bound.documentation
    final = json.loads(meta.read_text())["final"]
    assert {s.labels["feature"]: s.value for s in bound.samples} == final["bounds"]
    assert len(bound.samples) == 9


def test_model_counters_continue_across_a_resume(tmp_path):
    """``--state``: the model-call counters are cumulative over the run's processes, as the row
    counters are (they restarted at 0 in a resumed process). Each explained row costs one
    unperturbed prediction and one per feature and realisation: 9 features x M = 10, plus 1."""
    lines = sample_lines("agrawal_static.csv")
    first, whole = tmp_path / "first.csv", tmp_path / "whole.csv"
    first.write_text("\n".join(lines[:301]) + "\n")
    whole.write_text("\n".join(lines[:601]) + "\n")
    state = tmp_path / "run.ipfi"
    numbers = []
    for data, name in ((first, "a"), (whole, "b")):
        prom = tmp_path / f"{name}.prom"
        result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "--state", str(state),
                      "--no-live", "-q", "--metrics-textfile", str(prom), "-o", str(tmp_path / "t.csv"))
        assert result.returncode == 0, result.stderr
        families = {f.name: f for f in text_string_to_metric_families(prom.read_text())}
        numbers.append({name: families[name].samples[0].value for name in (
            "ipfi_rows_explained", "ipfi_model_predictions", "ipfi_model_calls")})
    assert numbers[0]["ipfi_rows_explained"] == 299 and numbers[1]["ipfi_rows_explained"] == 599
    assert numbers[0]["ipfi_model_predictions"] == 299 * (9 * 10 + 1)
    assert numbers[1]["ipfi_model_predictions"] == 599 * (9 * 10 + 1)
    assert numbers[1]["ipfi_model_calls"] > numbers[0]["ipfi_model_calls"] >= 1


def test_the_loss_sum_is_the_exact_running_sum_and_never_decreases(tmp_path):
    """``ipfi_model_loss_sum`` is a counter: read at pauses of a live stream it never decreases and
    equals the model's errors counted by scikit-learn (zero-one loss). It was the mean loss times the
    rows explained, which for 1 error in 49 rows is 0.9999999999999999: below the 1.0 read before,
    a counter reset to Prometheus (increase() and the IpfiLossJumped rule then went wrong)."""
    import joblib
    import pandas as pd

    from .conftest import ipfi_process, wait_for

    header, *rows = sample_lines("agrawal_static.csv")
    frame = pd.read_csv(SAMPLE / "agrawal_static.csv")
    wrong = joblib.load(HGB).predict(frame.drop(columns="class")) != frame["class"].to_numpy()
    first_wrong, second_wrong = [int(i) for i in wrong.nonzero()[0][:2]]
    assert first_wrong > 60  # rows 0..60 of the file are predicted right
    # row 0 is only stored; then 1 error in the first 49 explained rows; a second one later
    order = [0, first_wrong, *range(1, 49), second_wrong, *range(49, 60)]
    stops = [10, 49, len(order) - 1]  # rows explained at each pause
    errors = [int(wrong[order[1:n + 1]].sum()) for n in stops]  # counted by scikit-learn, not ipfi
    assert errors == [1, 1, 2]
    prom, log = tmp_path / "m.prom", tmp_path / "err.log"
    process = ipfi_process("explain", "-", "-m", HGB, "-t", "class", "--loss", "zero-one", "--seed", "1", "-M", "1",
                           "--no-live", "--metrics-textfile", str(prom), "-o", str(tmp_path / "t.csv"), stderr=log)

    def read() -> dict[str, float]:
        text = prom.read_text() if prom.exists() else ""
        return {s.name: s.value for f in text_string_to_metric_families(text) for s in f.samples}

    seen: list[float] = []
    try:
        assert process.stdin is not None
        process.stdin.write((header + "\n").encode())
        sent = 0
        for n in stops:
            process.stdin.write(("\n".join(rows[i] for i in order[sent:n + 1]) + "\n").encode())
            process.stdin.flush()
            sent = n + 1
            values = wait_for(lambda n=n: (v := read()).get("ipfi_rows_explained_total") == n and v, 60,
                              f"the textfile at {n} rows explained", log)
            seen.append(values["ipfi_model_loss_sum"])
        process.stdin.close()
        assert process.wait(timeout=60) == 0, log.read_text()
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
    assert seen == [float(e) for e in errors]  # exactly: a sum of 0s and 1s
    assert all(a <= b for a, b in zip(seen, seen[1:]))
    assert read()["ipfi_model_loss_sum"] == errors[-1]


def test_a_complete_run_ends_its_textfile_with_the_run_end_gauges(tmp_path):
    """As a pushed run does, a complete explain run's textfile ends with ipfi_last_success_timestamp_seconds
    and ipfi_duration_seconds (the README said so; they were missing): the shipped rules tell an ended
    run from a stalled one by them."""
    import time

    data = tmp_path / "rows.csv"
    data.write_text("\n".join(sample_lines("agrawal_static.csv")[:101]) + "\n")
    prom = tmp_path / "m.prom"
    before = time.time()
    result = ipfi("explain", str(data), "-m", HGB, "-t", "class", "--seed", "1", "--no-live", "-q",
                  "--metrics-textfile", str(prom), "-o", str(tmp_path / "t.csv"))
    after = time.time()
    assert result.returncode == 0, result.stderr
    values = {s.name: s.value for f in text_string_to_metric_families(prom.read_text()) for s in f.samples}
    assert before <= values["ipfi_last_success_timestamp_seconds"] <= after
    assert 0 < values["ipfi_duration_seconds"] <= after - before
    assert values["ipfi_last_row_timestamp_seconds"] <= values["ipfi_last_success_timestamp_seconds"]


def test_the_served_url_of_an_ipv6_address_has_brackets(tmp_path):
    """--metrics-addr ::1 said http://::1:PORT/metrics, which is no URL; now http://[::1]:PORT/metrics,
    and a scrape of that URL answers."""
    import re
    import urllib.request

    from .conftest import ipfi_process, wait_for

    log = tmp_path / "err.log"
    process = ipfi_process("explain", "-", "-m", HGB, "-t", "class", "--no-live", "--metrics-addr", "::1",
                           "--metrics-port", "0", "-o", str(tmp_path / "t.csv"), stderr=log)
    try:
        url = wait_for(lambda: (found := re.search(r"serving metrics on (\S+)", log.read_text())) and found.group(1),
                       60, "the metrics URL", log)
        assert re.fullmatch(r"http://\[::1\]:\d+/metrics", url), url
        with urllib.request.urlopen(url, timeout=10) as response:
            assert b"ipfi_build_info" in response.read()
    finally:
        assert process.stdin is not None
        process.stdin.close()
        process.wait(timeout=60)
