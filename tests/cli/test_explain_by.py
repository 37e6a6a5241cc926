"""``ipfi explain --by``: one explainer per key, each key's traces those of a run on its rows alone.

The reference for a key is a run of the command on a file holding only that key's rows (the same
lines of the same file) with the key columns dropped (--drop: a key is not a feature), and the same
--seed; the keyed traces, the key columns taken off, must be the same bytes.
"""

from __future__ import annotations

import csv
import io
import json
from pathlib import Path

import pytest

from tests.cli.conftest import SAMPLE, head_lines
from tests.conftest import needs_adwin_state

ELEC = SAMPLE / "elec2_excerpt.csv"  # real data: the Elec2 electricity market (Harries 1999), an excerpt
ELEC_MODEL = str(SAMPLE / "elec2_hgb.joblib")


@pytest.fixture(scope="module")
def elec(tmp_path_factory) -> Path:
    """300 rows of Elec2 (every day of the week)."""
    path = tmp_path_factory.mktemp("by") / "elec.csv"
    path.write_text(head_lines(ELEC, 300))
    return path


def key_files(source: Path, by: list[str], keys: list[tuple[str, ...]], folder: Path) -> dict[tuple[str, ...], Path]:
    """For each key, a file of the source's header and the lines of that key's rows, as they are."""
    lines = source.read_text().splitlines()
    header = lines[0].split(",")
    where = [header.index(c) for c in by]
    files = {}
    for key in keys:
        mine = [line for line in lines[1:] if tuple(line.split(",")[i] for i in where) == key]
        path = folder / ("key_" + "_".join(key) + ".csv")
        path.write_text("\n".join([lines[0], *mine]) + "\n")
        files[key] = path
    return files


def of_key(traces: str, n_key_columns: int, key: tuple[str, ...]) -> str:
    """The records of ``key`` in a keyed CSV trace (and its header), the key columns taken off."""
    lines = traces.splitlines()
    out = [",".join(lines[0].split(",")[n_key_columns:])]
    for line in lines[1:]:
        fields = line.split(",")
        if tuple(fields[:n_key_columns]) == key:
            out.append(",".join(fields[n_key_columns:]))
    return "\n".join(out) + "\n"


def explain(run, source, *options):
    result = run("explain", source, "-m", ELEC_MODEL, "-t", "class", "--seed", "7", "--no-live", "-q", *options)
    assert result.exit_code == 0, result.stderr
    return result.stdout


def test_each_key_traces_equal_a_run_on_its_rows_alone(run, elec, tmp_path):
    keyed = explain(run, elec, "--by", "day", "--every", "3", "--bounds")
    assert keyed.splitlines()[0].startswith("day,row,date,period,")  # the key first, then the key's row number
    days = sorted({line.split(",")[0] for line in keyed.splitlines()[1:]})
    assert days == [str(d) for d in range(1, 8)]
    for key, path in key_files(elec, ["day"], [(d,) for d in days], tmp_path).items():
        alone = explain(run, path, "--drop", "day", "--every", "3", "--bounds")
        assert of_key(keyed, 1, key) == alone, key


@pytest.fixture(scope="module")
def drift_shards(tmp_path_factory) -> Path:
    """400 rows around the function drift of agrawal_drift.csv, with a key column `shard`: a and b in turn, c
    every tenth row."""
    lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()
    path = tmp_path_factory.mktemp("by") / "drift_shards.csv"
    shards = ["c" if i % 10 == 9 else "ab"[i % 2] for i in range(400)]
    path.write_text("\n".join([lines[0] + ",shard", *(line + "," + shard
                                                     for line, shard in zip(lines[9801:10201], shards))]) + "\n")
    return path


@needs_adwin_state  # --detect saved in a state
def test_eviction_gives_the_same_bytes(run, drift_shards, hgb, tmp_path):
    """--max-keys 1 and 2 (keys evicted and restored at almost every row) write what no eviction writes,
    the change events too."""
    outputs = []
    for limit in ([], ["--max-keys", "1"], ["--max-keys", "2"]):
        events = tmp_path / f"events{len(outputs)}.jsonl"
        result = run("explain", drift_shards, "-m", hgb, "-t", "class", "--seed", "7", "--no-live", "-q", "--by",
                     "shard", "--every", "5", "--batch-size", "50", "--detect", "--events", events, *limit)
        assert result.exit_code == 0, result.stderr
        outputs.append((result.stdout, events.read_bytes()))
    assert outputs[1] == outputs[0] and outputs[2] == outputs[0]
    assert outputs[0][1], "the test should see change events"
    first = json.loads(outputs[0][1].splitlines()[0])
    assert set(first["key"]) == {"shard"} and "row" in first


@pytest.mark.parametrize("method", [["--method", "sage"], ["--removal", "both", "--bounds-method", "realisations"]])
def test_eviction_of_sage_and_conditional_gives_the_same_bytes(run, drift_shards, hgb, method):
    """SAGE, and both removals with the realisations' bounds: their state is plain data too, so --max-keys 1
    (a key evicted and restored at almost every row) writes what no limit writes."""
    outputs = []
    for limit in ([], ["--max-keys", "1"]):
        result = run("explain", drift_shards, "-m", hgb, "-t", "class", "--seed", "7", "--no-live", "-q", "--by",
                     "shard", "--every", "5", "--batch-size", "50", "--bounds", "-M", "2", *method, *limit)
        assert result.exit_code == 0, result.stderr
        outputs.append(result.stdout)
    assert outputs[1] == outputs[0] and len(outputs[0].splitlines()) > 50


@needs_adwin_state  # --detect saved in a state
@pytest.mark.parametrize("then", [[], ["--max-keys", "2"]], ids=["then-unlimited", "then-max-keys"])
def test_state_resume_equals_one_run(run, elec, tmp_path, then):
    """A run stopped after 150 rows and continued from --state writes the bytes of one run (traces and
    events), every key resumed, those evicted too (the continued run evicting keys as well, or not)."""
    whole = tmp_path / "whole.csv"
    common = ["--by", "day", "--every", "4", "--detect"]
    explain(run, elec, *common, "-o", whole, "--events", tmp_path / "whole.jsonl")
    first = tmp_path / "first.csv"
    first.write_text(head_lines(elec, 150))
    traces, state, events = tmp_path / "traces.csv", tmp_path / "run.state", tmp_path / "events.jsonl"
    explain(run, first, *common, "-o", traces, "--events", events, "--state", state, "--checkpoint-every", "40",
            "--max-keys", "2")
    explain(run, elec, *common, "-o", traces, "--events", events, "--state", state, "--checkpoint-every", "40",
            *then)
    assert traces.read_bytes() == whole.read_bytes()
    assert events.read_bytes() == (tmp_path / "whole.jsonl").read_bytes()
    # a keyed state is not continued without --by (named in one line)
    result = run("explain", elec, "-m", ELEC_MODEL, "-t", "class", "--seed", "7", "--no-live", "-q",
                 "--every", "4", "--detect", "-o", traces, "--state", state)
    assert result.exit_code != 0 and "--by" in result.stderr


def test_multi_column_key_and_jsonl_layout(run, agrawal_small, hgb, tmp_path):
    """--by elevel,car on the sample data: the two key columns start each record (JSONL: the first fields);
    the keys with the most rows equal runs on their rows alone."""
    source = tmp_path / "agrawal.csv"
    source.write_text(head_lines(agrawal_small, 200))
    base = ["-m", hgb, "-t", "class", "--seed", "2", "--no-live", "-q", "--every", "2"]
    keyed = run("explain", source, *base, "--by", "elevel,car")
    assert keyed.exit_code == 0, keyed.stderr
    rows = list(csv.reader(io.StringIO(keyed.stdout)))
    assert rows[0][:3] == ["elevel", "car", "row"]
    counts: dict[tuple[str, ...], int] = {}
    for record in rows[1:]:
        counts[tuple(record[:2])] = counts.get(tuple(record[:2]), 0) + 1
    biggest = sorted(counts, key=lambda k: (-counts[k], k))[:2]
    for key, path in key_files(source, ["elevel", "car"], biggest, tmp_path).items():
        alone = run("explain", path, *base, "--drop", "elevel,car")
        assert of_key(keyed.stdout, 2, key) == alone.stdout, key
    jsonl = run("explain", source, *base, "--by", "elevel,car", "--output-format", "jsonl")
    record = json.loads(jsonl.stdout.splitlines()[0])
    assert list(record)[:3] == ["elevel", "car", "row"]


def test_missing_key_value_is_a_bad_row(run, elec, tmp_path):
    lines = elec.read_text().splitlines()
    fields = lines[5].split(",")
    fields[1] = ""  # row 5 has no day
    lines[5] = ",".join(fields)
    source = tmp_path / "missing.csv"
    source.write_text("\n".join(lines) + "\n")
    result = run("explain", source, "-m", ELEC_MODEL, "-t", "class", "--seed", "7", "--no-live", "--by", "day")
    assert result.exit_code == 1
    assert "row 5 (line 6), column 'day': no value in this --by key column" in result.stderr
    assert len(result.stdout.splitlines()) == 1 + 4  # the header and the 4 rows before it, written
    skipped = explain(run, source, "--by", "day", "--on-bad-row", "skip")
    # the row is no key's: every key's traces are those of the input without it
    without = tmp_path / "without.csv"
    without.write_text("\n".join(lines[:5] + lines[6:]) + "\n")
    whole = explain(run, without, "--by", "day")
    assert skipped.splitlines()[1:] != [] and skipped == whole


@pytest.mark.parametrize("options, says", [
    (["--by", "day", "--learn"], "--learn"),
    (["--by", "day", "--labels", "labels.csv", "--id", "date"], "--labels"),
    (["--by", "day", "--metrics-port", "0"], "metrics"),
    (["--max-keys", "2"], "needs --by"),
    (["--by", "day", "--removal", "conditional", "--conditional-sampler", "tree", "--max-keys", "2"], "only by pickle"),
    (["--by", "day", "--removal", "conditional", "--conditional-sampler", "tree", "--state", "x.state"],
     "only by pickle"),
    (["--by", "class"], "the --target"),
    (["--by", "nope"], "no such input column: nope"),
    (["--by", "day", "--features", "day,period"], "is a key column"),
])
def test_refused_before_the_first_row(run, elec, tmp_path, options, says):
    out = tmp_path / "traces.csv"
    options = [str(tmp_path / o) if o.endswith((".csv", ".state")) and o != "labels.csv" else o for o in options]
    result = run("explain", elec, "-m", ELEC_MODEL, "-t", "class", "--no-live", "-o", out, *options)
    assert result.exit_code == 2, result.stderr
    assert says in " ".join(result.stderr.split())
    assert not out.exists() or out.read_text() == ""
    assert not (tmp_path / "x.state").exists()


def test_key_column_named_like_a_trace_field(run, tmp_path, hgb, agrawal_small):
    lines = agrawal_small.read_text().splitlines()
    source = tmp_path / "row.csv"
    source.write_text("\n".join([lines[0] + ",row"] + [line + ",a" for line in lines[1:50]]) + "\n")
    result = run("explain", source, "-m", hgb, "-t", "class", "--no-live", "--by", "row")
    assert result.exit_code != 0 and "the key column 'row' has the name of a trace field" in result.stderr


def test_summary_and_meta_are_per_key(run, elec, tmp_path):
    meta = tmp_path / "meta.json"
    result = run("explain", elec, "-m", ELEC_MODEL, "-t", "class", "--seed", "7", "--no-live", "--by", "day",
                 "--meta", meta, "-o", tmp_path / "t.csv")
    assert result.exit_code == 0
    assert "7 keys" in result.stderr and "day=1" in result.stderr
    data = json.loads(meta.read_text())
    assert [k["key"] for k in data["keys"]] == [{"day": d} for d in (2, 3, 4, 5, 6, 7, 1)]  # as they first came
    assert sum(k["rows"] for k in data["keys"]) == data["rows"]["processed"] == 300
    assert data["final"] is None and set(data["keys"][0]["importances"]) == {
        "date", "period", "nswprice", "nswdemand", "vicprice", "vicdemand", "transfer"}


def test_a_key_that_is_an_infinite_number_is_not_written_as_null(run, elec, tmp_path):
    """A key column holding inf (or 1e400, read as inf): CSV writes the key as inf; JSONL, --meta and the
    events file write the same text, not null (a missing key, which is a bad row)."""
    from ipfi_cli.run.key_runs import KeyedEvent

    lines = elec.read_text().splitlines()
    zones = {"1": "inf", "2": "1e400", "3": "-inf"}  # the other days: 7
    day = lines[0].split(",").index("day")
    source = tmp_path / "zones.csv"
    source.write_text("\n".join([lines[0] + ",zone"] + [
        line + "," + zones.get(line.split(",")[day], "7") for line in lines[1:]]) + "\n")
    base = ["--by", "zone", "--drop", "day"]
    as_csv = list(csv.reader(io.StringIO(explain(run, source, *base))))[1:]
    meta = tmp_path / "meta.json"
    as_jsonl = [json.loads(line) for line in explain(run, source, *base, "-F", "jsonl", "--meta", meta).splitlines()]
    assert [r[0] for r in as_csv] == [str(r["zone"]) for r in as_jsonl]  # the same records, the same keys
    assert {r["zone"] for r in as_jsonl} == {"inf", "-inf", 7}
    first_came = [{"zone": 7 if z == "7" else z} for z in dict.fromkeys(r[0] for r in as_csv)]
    assert [k["key"] for k in json.loads(meta.read_text())["keys"]] == first_came
    event = KeyedEvent({"key": {"zone": float("-inf"), "day": 2}, "row": 5})
    assert event.to_dict() == {"key": {"zone": "-inf", "day": 2}, "row": 5}


def test_python_explain_stream_by(elec, tmp_path):
    """explain_stream takes the key columns (Selection.by) and KeySpec(max_keys=) as the command takes --by and
    --max-keys."""
    import joblib

    from ipfi_cli.run.explain import explain_stream
    from ipfi_cli.run.plan import Selection
    from ipfi_cli.run.settings import KeySpec, OutputSpec

    rows = [{k: (v if k == "class" else float(v)) for k, v in row.items()}
            for row in csv.DictReader(io.StringIO(elec.read_text()))]
    model = joblib.load(ELEC_MODEL)
    outputs = []
    for limit in (None, 1):
        out = tmp_path / f"traces{limit}.csv"
        session = explain_stream(model, rows, target=Selection(target="class", by=("day",)), seed=1,
                                 keys=KeySpec(max_keys=limit), output=OutputSpec(path=str(out)))
        assert session.status.value == "ok"
        outputs.append(out.read_text())
    assert outputs[0] == outputs[1]
    assert outputs[0].startswith("day,row,date,") and {line.split(",")[0] for line in outputs[0].splitlines()[1:]} \
        == {str(row["day"]) for row in rows} == {f"{d}.0" for d in range(1, 8)}


def test_a_keyed_sage_run_gives_each_keys_explained_loss_which_its_values_add_up_to(run, drift_shards, hgb,
                                                                                       tmp_path):
    """With --by, SAGE's explained loss was reported nowhere, so no key's values could be checked."""
    meta = tmp_path / "meta.json"
    result = run("explain", drift_shards, "-m", hgb, "-t", "class", "--seed", "3", "--no-live", "-q", "--by",
                 "shard", "--method", "sage", "--smoothing", "mean", "--meta", meta)
    assert result.exit_code == 0, result.stderr
    keys = json.loads(meta.read_text())["keys"]
    assert [k["key"]["shard"] for k in keys] == ["a", "b", "c"]
    for key in keys:
        assert key["explained_loss"] == pytest.approx(sum(key["importances"].values()), abs=1e-12)
        assert key["explained_loss"] == pytest.approx(key["marginal_loss"] - key["model_loss"], abs=1e-12)
        assert key["explained_loss"] > 0


def test_the_end_restores_each_evicted_key_once_and_writes_nothing_for_it(run, hgb, tmp_path, monkeypatch):
    """At the end, every evicted key was restored (and another evicted, written) for its last record, again
    for the summary table and again for the checks: 3 restores per key, ~2.7 ms each, with Ctrl-C deferred.
    Now one, and nothing evicted or written; the records and --meta are those of a run without eviction."""
    from ipfi_cli.io.spill import SpillStore

    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()
    n_keys = 12
    rows = [f"{line},k{i % n_keys}" for i, line in enumerate(lines[1:1 + 4 * n_keys])]  # 4 rows per key
    data = tmp_path / "keys.csv"
    data.write_text("\n".join([lines[0] + ",shop", *rows]) + "\n")
    counts = {"read": 0, "written": 0}
    read, write = SpillStore.__getitem__, SpillStore.__setitem__

    def counted_read(self, key):
        value = read(self, key)  # (a key never saved raises KeyError: not a read)
        counts["read"] += 1
        return value

    def counted_write(self, key, value):
        counts["written"] += 1
        return write(self, key, value)

    monkeypatch.setattr(SpillStore, "__getitem__", counted_read)
    monkeypatch.setattr(SpillStore, "__setitem__", counted_write)
    outputs = []
    for limit in ([], ["--max-keys", "2"]):
        meta = tmp_path / f"meta{len(outputs)}.json"
        result = run("explain", data, "-m", hgb, "-t", "class", "--seed", "3", "--no-live", "--by", "shop",
                     "--every", "1000", "--batch-size", "100", "--meta", meta, *limit)
        assert result.exit_code == 0, result.stderr
        outputs.append((result.stdout, json.loads(meta.read_text()).get("keys")))
    # one micro-batch: each key explained once, 10 evicted (written once); at the end each read once
    assert counts == {"read": n_keys - 2, "written": n_keys - 2}, counts
    assert outputs[1] == outputs[0] and outputs[0][0].count("\n") == 1 + n_keys and outputs[0][1]
