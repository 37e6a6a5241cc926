"""Late labels (``--labels --id --label-wait``): the traces are the same bytes as with the labels
inline, whether the labels come from a file (1 to 5,000 rows late, or early) or from a file that
grows while the features come through a pipe; rows whose label never comes are counted and not
explained; at most --label-wait rows wait."""

from __future__ import annotations

import io
import os
import random
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from ipfi_cli.io.labels import LabelStream
from ipfi_cli.io.readers import RowReader
from ipfi_cli.run.late_labels import JoinedReader, LabelWait

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
HGB = str(SAMPLE / "agrawal_hgb.joblib")
N_ROWS = 6000
OPTIONS = ["-m", HGB, "-t", "class", "--seed", "5", "--repeats", "2", "--no-live", "-q"]


def ipfi(*args: str, **kwargs) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "ipfi_cli", *args], capture_output=True, text=True, env=env,
                          timeout=300, **kwargs)


def make_streams(folder: Path, n_rows: int):
    """``n_rows`` rows of agrawal_drift.csv: inline (id, features, class), the features alone, the rows,
    and the traces of the inline file."""
    header, *lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()
    rows = [line.rsplit(",", 1) for line in lines[:n_rows]]
    names = header.rsplit(",", 1)[0]
    inline = folder / "inline.csv"
    inline.write_text(f"id,{header}\n" + "".join(f"r{i},{x},{y}\n" for i, (x, y) in enumerate(rows)))
    features = folder / "features.csv"
    features.write_text(f"id,{names}\n" + "".join(f"r{i},{x}\n" for i, (x, _) in enumerate(rows)))
    result = ipfi("explain", str(inline), *OPTIONS)
    assert result.returncode == 0, result.stderr
    return folder, features, rows, result.stdout


@pytest.fixture(scope="module")
def streams(tmp_path_factory):
    return make_streams(tmp_path_factory.mktemp("late"), 6000)


@pytest.fixture(scope="module")
def small_streams(tmp_path_factory):
    return make_streams(tmp_path_factory.mktemp("late_small"), 1500)


def labels_in_order(rows, order) -> str:
    return "id,class\n" + "".join(f"r{i},{rows[i][1]}\n" for i in order)


@pytest.mark.slow
def test_labels_up_to_5000_rows_late_or_early_give_the_inline_traces(streams):
    folder, features, rows, inline_traces = streams
    rng = random.Random(11)
    # each label's place in the labels stream is its row's place moved by up to 5,000 rows either way
    order = sorted(range(len(rows)), key=lambda i: i + rng.randint(-5000, 5000))
    lateness = [order.index(i) - i for i in range(0, len(rows), 500)]
    assert max(lateness) > 1000 and min(lateness) < -1000
    labels = folder / "labels.csv"
    labels.write_text(labels_in_order(rows, order))
    result = ipfi("explain", str(features), *OPTIONS, "--labels", str(labels), "--id", "id")
    assert result.returncode == 0, result.stderr
    assert result.stdout == inline_traces


@pytest.mark.slow
def test_labels_from_a_growing_file_while_the_features_come_through_a_pipe(small_streams, tmp_path):
    _, features, rows, inline_traces = small_streams
    header, *feature_lines = features.read_text().splitlines()
    labels = tmp_path / "labels.csv"
    labels.write_text("id,class\n")
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src")}
    process = subprocess.Popen([sys.executable, "-m", "ipfi_cli", "explain", "-", *OPTIONS, "--labels", str(labels),
                                "--id", "id", "--labels-follow"], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    out: list[bytes] = []
    reader = threading.Thread(target=lambda: out.append(process.stdout.read()), daemon=True)  # type: ignore[union-attr]
    reader.start()
    rng = random.Random(3)
    # features in chunks; each row's label follows 1 to 1,000 rows later, appended to the file
    process.stdin.write((header + "\n").encode())  # type: ignore[union-attr]
    due: list[tuple[int, int]] = sorted((i + rng.randint(1, 1000), i) for i in range(len(rows)))
    written = 0
    for start in range(0, len(rows), 250):
        chunk = feature_lines[start:start + 250]
        process.stdin.write(("\n".join(chunk) + "\n").encode())  # type: ignore[union-attr]
        process.stdin.flush()  # type: ignore[union-attr]
        sent = start + len(chunk)
        ready = [i for when, i in due[written:] if when <= sent]
        written += len(ready)
        with open(labels, "a") as f:
            f.write("".join(f"r{i},{rows[i][1]}\n" for i in ready))
        time.sleep(0.02)
    process.stdin.close()  # type: ignore[union-attr]
    with open(labels, "a") as f:
        f.write("".join(f"r{i},{rows[i][1]}\n" for _, i in due[written:]))
    assert process.wait(timeout=240) == 0, process.stderr.read()  # type: ignore[union-attr]
    reader.join(timeout=30)
    assert out[0].decode() == inline_traces


@pytest.mark.slow
def test_rows_whose_label_never_comes_are_counted_and_not_explained(small_streams, tmp_path):
    _, features, rows, _ = small_streams
    missing = set(range(100, len(rows), 7))  # every 7th row from row 101 on has no label
    labels = tmp_path / "labels.csv"
    labels.write_text(labels_in_order(rows, [i for i in range(len(rows)) if i not in missing]))
    result = ipfi("explain", str(features), *OPTIONS[:-1], "--labels", str(labels), "--id", "id",
                  "--label-wait", "300")  # not quiet: the count is a warning
    assert result.returncode == 0, result.stderr
    written = [int(line.split(",", 1)[0]) for line in result.stdout.splitlines()[1:]]
    assert written == [i + 1 for i in range(len(rows)) if i not in missing]  # row numbers are the input's
    assert f"{len(missing):,} row(s) got no label within --label-wait (300 rows)" in result.stderr


# -- the join, in-process ---------------------------------------------------------------------------------------
def joined(features: str, labels: Path, wait: str) -> JoinedReader:
    reader = RowReader(io.BytesIO(features.encode()), name="features")
    return JoinedReader(reader, LabelStream(str(labels), "id", "y", follow=False), "id", "y", LabelWait.parse(wait))


def test_memory_is_bounded_by_the_label_wait_and_what_is_given_up_does_not_depend_on_timing(tmp_path):
    n, wait = 2000, 50
    features = "id,x\n" + "".join(f"{i},{i * 0.5}\n" for i in range(n))
    # labels in blocks of 100, each block reversed: row i's label is up to 99 labels late
    order = [b + 99 - k for b in range(0, n, 100) for k in range(100)]
    labels = tmp_path / "labels.csv"
    labels.write_text("id,y\n" + "".join(f"{i},{i % 2}\n" for i in order))
    outcomes = set()
    for _ in range(3):
        join = joined(features, labels, str(wait))
        rows = [row for batch in join.batches(64) for row in batch]
        join.close()
        assert join.max_waiting <= wait
        assert all(row.values["y"] == int(row.values["id"]) % 2 for row in rows)  # every row got its own label
        assert [int(r.values["id"]) for r in rows] == sorted(int(r.values["id"]) for r in rows)  # input order
        assert join.given_up + len(rows) == n and join.given_up > 0
        outcomes.add((join.given_up, tuple(r.number for r in rows)))
    assert len(outcomes) == 1

    # with room for the lateness, nothing is given up
    join = joined(features, labels, "100")
    rows = [row for batch in join.batches(64) for row in batch]
    join.close()
    assert len(rows) == n and join.given_up == 0 and join.max_waiting <= 100


@pytest.mark.parametrize("last, said, unsaid", [
    ("99,1", "1 label(s) matched no row", "gave again"),  # a label whose row never comes
    ("1,1", "1 label(s) gave again the id of a row that had its label already", "matched no row"),  # a repeat
])
def test_labels_without_a_row_are_counted_and_repeats_said_as_such(tmp_path, last, said, unsaid):
    labels = tmp_path / "labels.csv"
    labels.write_text(f"id,y\n1,0\n2,1\n{last}\n")
    join = joined("id,x\n1,0.5\n2,0.25\n", labels, "10")
    rows = [row for batch in join.batches() for row in batch]
    join.close()
    assert [(r.values["id"], r.values["y"]) for r in rows] == [("1", 0), ("2", 1)]
    summary = " ".join(join.summary())
    assert said in summary and unsaid not in summary


def test_bad_wait_values_are_usage_errors():
    from ipfi_cli.errors import UsageError

    for text in ("0", "1.5", "soon", "-3"):
        with pytest.raises(UsageError):
            LabelWait.parse(text)


def test_labels_of_rows_already_given_up_do_not_stop_the_join(tmp_path):
    """The labels of rows 101-125 come 300 labels late, with --label-wait 20: those 25 rows are given
    up, and their labels, when they come, are dropped and counted. Kept as labels waiting for a row,
    more than 20 of them stopped the join for good and every later row was given up (exit 0)."""
    n = 1500
    features = "id,x\n" + "".join(f"{i},{i * 0.5}\n" for i in range(n))
    late = list(range(101, 126))
    order = [i for i in range(n) if i not in late]
    order = order[:400] + late + order[400:]
    labels = tmp_path / "labels.csv"
    labels.write_text("id,y\n" + "".join(f"{i},{i % 2}\n" for i in order))
    join = joined(features, labels, "20")
    rows = [row for batch in join.batches(64) for row in batch]
    join.close()
    assert [int(r.values["id"]) for r in rows] == [i for i in range(n) if i not in late]
    assert join.given_up == 25 and join.late == 25
    said = " ".join(join.summary())
    assert "25 row(s) got no label" in said and "25 label(s) came after their row had been given up" in said


def test_a_missing_label_is_a_bad_row_located_in_the_labels_file(tmp_path):
    """An empty label in the labels file was blamed on the features file (its row, a column it does not
    have); the bad row now names the labels file's row and line, and the other rows go on."""
    features = "id,x\n" + "".join(f"{i},{i * 0.5}\n" for i in range(10))
    labels = tmp_path / "labels.csv"
    order = [9, 8, 7, 6, 5, 4, 3, 2, 1, 0]  # reversed: the labels file's rows are not the features'
    labels.write_text("id,y\n" + "".join(f"{i},{'' if i == 7 else i % 2}\n" for i in order))
    join = joined(features, labels, "20")
    rows = [row for batch in join.batches(4) for row in batch]
    join.close()
    bad = [row for row in rows if row.error is not None]
    assert len(rows) == 10 and len(bad) == 1 and bad[0].number == 8  # the features' row of id 7
    assert str(bad[0].error) == f"{labels}: row 3 (line 4), column 'y': missing label"
