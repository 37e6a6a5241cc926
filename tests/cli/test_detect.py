"""``ipfi explain --detect``: change events through the real command, on the sample drift stream
(Agrawal's labelling function changes at row 10,001), with the static model fitted before it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ipfi_cli.core.change_windows import adwin_saves_as_data

from .conftest import SAMPLE, head_lines, parse_csv

BASE = ["-t", "class", "-M", "3", "--seed", "1", "--every", "500", "-q"]


@pytest.fixture(scope="module")
def around_drift(tmp_path_factory) -> Path:
    """Rows 8,001 to 12,000 of the drift stream: the concept changes at row 2,001 of this file."""
    path = tmp_path_factory.mktemp("detect") / "drift.csv"
    path.write_text(head_lines(SAMPLE / "agrawal_drift.csv", 4000, start=8000))
    return path


@pytest.fixture(scope="module")
def stationary(tmp_path_factory) -> Path:
    path = tmp_path_factory.mktemp("detect") / "stationary.csv"
    path.write_text(head_lines(SAMPLE / "agrawal_drift.csv", 4000))
    return path


def events_of(path: Path) -> list[dict]:
    return [json.loads(line) for line in path.read_text().splitlines()]


def test_a_drift_is_an_event_and_fail_on_change_exits_3(run, hgb, around_drift, tmp_path):
    events = tmp_path / "events.jsonl"
    result = run("explain", around_drift, "-m", hgb, *BASE, "--events", events, "--fail-on-change")
    assert result.exit_code == 3, result.stderr
    found = events_of(events)
    by_feature = {e["feature"]: e for e in found}
    # the model, fitted on the first concept, loses its footing: its loss goes up, salary falls
    assert by_feature["loss"]["direction"] == "up" and by_feature["salary"]["direction"] == "down"
    assert all(2000 < e["row"] < 2000 + 500 for e in found if e["feature"] in ("loss", "salary"))
    salary = by_feature["salary"]
    assert salary["before"] > salary["after"] + 0.1 and salary["rank_before"] == 1
    assert set(salary) >= {"row", "kind", "feature", "direction", "before", "before_bound", "after", "after_bound",
                           "change", "n_before", "n_after", "start_row", "rank_before", "rank_after", "loss_row"}
    assert abs(salary["start_row"] - 2001) < 100  # the change point, estimated


def test_no_event_on_a_stationary_stream(run, hgb, stationary, tmp_path):
    events = tmp_path / "events.jsonl"
    result = run("explain", stationary, "-m", hgb, *BASE, "--events", events, "--fail-on-change")
    assert result.exit_code == 0, result.stderr
    assert events.read_text() == ""


@pytest.mark.skipif(not adwin_saves_as_data(), reason="this river's ADWIN cannot be saved as plain data "
                    "(--detect with --state then says so in one line)")
def test_stop_on_change_stops_and_a_resumed_run_reports_the_same_events(run, hgb, around_drift, tmp_path):
    whole = tmp_path / "whole.jsonl"
    run("explain", around_drift, "-m", hgb, *BASE, "--events", whole, "-o", tmp_path / "whole.csv",
        "--batch-size", "100")
    state, events, traces = tmp_path / "run.state", tmp_path / "events.jsonl", tmp_path / "traces.csv"
    common = ["explain", around_drift, "-m", hgb, *BASE, "--events", events, "-o", traces, "--state", state,
              "--batch-size", "100", "--checkpoint-every", "100"]
    stopped = run(*common, "--stop-on-change")
    assert stopped.exit_code == 3, stopped.stderr
    first = events_of(events)
    assert first and first[0] == events_of(whole)[0]
    last = int(parse_csv(traces.read_text())[-1]["row"])
    assert last < 2600  # it stopped soon after the change
    # the message names the change's row, and the last row written when the micro-batch went on
    said = " ".join(stopped.stderr.split())
    assert f"stopped at the first change (row {first[0]['row']:,})" in said, said
    assert (f"the traces run to row {last:,}" in said) == (last > first[0]["row"]), said
    resumed = run(*common)
    assert resumed.exit_code == 0, resumed.stderr
    assert events.read_text() == whole.read_text()
    assert traces.read_text() == (tmp_path / "whole.csv").read_text()


@pytest.mark.skipif(not adwin_saves_as_data(), reason="this river's ADWIN cannot be saved as plain data")
def test_a_run_resumed_with_stop_on_change_stops_at_its_next_change_only(run, hgb, tmp_path):
    """Resumed with --stop-on-change, a run used to stop again after one micro-batch, exit 3, naming the
    change it had already stopped at: a supervisor restarting on exit 3 was paged at every restart. The
    stream: the drift at row 10,001 (rows 8,001-10,000 of the first concept, then the second), then the
    first concept again at row 4,001 of this file."""
    data = tmp_path / "back_and_forth.csv"
    lines = head_lines(SAMPLE / "agrawal_drift.csv", 4000, start=8000).splitlines(keepends=True)
    data.write_text("".join(lines + lines[1:2001]))  # 6,000 rows: the concept changes at 2,001 and at 4,001
    whole = tmp_path / "whole.jsonl"
    assert run("explain", data, "-m", hgb, *BASE, "--events", whole, "-o", tmp_path / "whole.csv",
               "--batch-size", "100").exit_code == 0
    changes = sorted({e["row"] for e in events_of(whole)})
    assert changes[0] < 2600 and changes[-1] > 4000  # both changes are found
    state, events, traces = tmp_path / "run.state", tmp_path / "events.jsonl", tmp_path / "traces.csv"
    common = ["explain", data, "-m", hgb, *BASE, "--events", events, "-o", traces, "--state", state,
              "--batch-size", "100", "--stop-on-change"]
    first = run(*common)
    assert first.exit_code == 3 and f"stopped at the first change (row {changes[0]:,})" in " ".join(
        first.stderr.split())
    stops = [changes[0]]
    for _ in range(len(changes)):  # each run goes on to the first change after the rows already written
        written = int(parse_csv(traces.read_text())[-1]["row"])
        result = run(*common)
        if result.exit_code == 0:
            break
        said = " ".join(result.stderr.split())
        expected = min(row for row in changes if row > written)
        assert result.exit_code == 3 and f"stopped at the next change (row {expected:,})" in said, said
        stops.append(expected)
    assert result.exit_code == 0, result.stderr
    assert any(row > 4000 for row in stops)  # it stopped at the second drift too, not only at the first
    assert events.read_text() == whole.read_text()
    assert traces.read_text() == (tmp_path / "whole.csv").read_text()


def test_a_reference_ranking_that_departs_is_an_event(run, hgb, stationary, tmp_path):
    """A reference that ranks elevel and car first (as `ipfi batch` writes it): the model relies on
    salary and age, so once the checks start (after 1,000 rows) the ranking departs, once."""
    reference = tmp_path / "reference.csv"
    names = ["salary", "commission", "age", "elevel", "car", "zipcode", "hvalue", "hyears", "loan"]
    weights = {"elevel": 0.5, "car": 0.3}
    reference.write_text("feature,importance\n" + "".join(f"{n},{weights.get(n, 0.0)}\n" for n in names))
    events = tmp_path / "events.jsonl"
    result = run("explain", stationary, "-m", hgb, *BASE[:-1], "--reference", reference, "--events", events,
                 "--no-live")  # not quiet: the summary shows the reference check
    assert result.exit_code == 0, result.stderr
    rankings = [e for e in events_of(events) if e["kind"] == "ranking"]
    assert len(rankings) == 1 and rankings[0]["row"] > 1000 and rankings[0]["ndcg"] < 0.9
    assert rankings[0]["top_reference"][:2] == ["elevel", "car"] and rankings[0]["top_current"][0] == "salary"
    assert "against the reference: nDCG@" in result.stderr
    trace = tmp_path / "trace.csv"  # a trace file's last record is a reference too
    trace.write_text("row," + ",".join(names) + "\n9," + ",".join(str(weights.get(n, 0.0)) for n in names) + "\n")
    again = run("explain", stationary, "-m", hgb, *BASE, "--reference", trace, "--events", "-")
    assert again.exit_code == 0 and '"kind":"ranking"' in again.stderr


def test_detection_options_are_checked(run, hgb, stationary):
    result = run("explain", stationary, "-m", hgb, "-t", "class", "--change-delta", "2")
    assert result.exit_code == 2 and "--change-delta" in result.stderr
    missing = run("explain", stationary, "-m", hgb, "-t", "class", "--reference", "/nonexistent.csv")
    assert missing.exit_code == 1 and "no such file" in missing.stderr


def test_the_same_events_whatever_the_micro_batches(run, hgb, around_drift, tmp_path):
    """Same seed, same bytes: rows explained 7 at a time or 1,000 at a time give the same events."""
    found = []
    for size in ("7", "1000"):
        events = tmp_path / f"events{size}.jsonl"
        result = run("explain", around_drift, "-m", hgb, *BASE, "--events", events, "--batch-size", size)
        assert result.exit_code == 0, result.stderr
        found.append(events.read_bytes())
    assert found[0] == found[1] and found[0].count(b"\n") >= 2
