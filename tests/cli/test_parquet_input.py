"""Parquet input through the commands: the same table as CSV and as Parquet gives the same bytes.

The Parquet files are written by pandas from the CSV (as a user converts an export), as one
file and as a folder of Hive partitions; the expected bytes are those of the CSV run.
"""

from __future__ import annotations

from pathlib import Path

import pytest

pytest.importorskip("pyarrow")

DATA = Path(__file__).resolve().parents[1] / "data"


def to_parquet(csv_path: Path, out: Path) -> Path:
    import pandas as pd

    pd.read_csv(csv_path, keep_default_na=False, na_values=[""]).to_parquet(out, index=False)
    return out


def to_partitions(csv_path: Path, folder: Path, n_parts: int = 3) -> Path:
    """The rows split in order into ``n_parts`` files ``part-0.parquet``... of one folder."""
    import numpy as np
    import pandas as pd

    frame = pd.read_csv(csv_path, keep_default_na=False, na_values=[""])
    folder.mkdir()
    for i, part in enumerate(np.array_split(np.arange(len(frame)), n_parts)):
        frame.iloc[part].to_parquet(folder / f"part-{i}.parquet", index=False)
    (folder / "_SUCCESS").write_text("")
    return folder


@pytest.fixture(scope="module")
def agrawal_parquet(agrawal_small, tmp_path_factory) -> tuple[Path, Path]:
    base = tmp_path_factory.mktemp("parquet")
    return to_parquet(agrawal_small, base / "agrawal.parquet"), to_partitions(agrawal_small, base / "agrawal")


@pytest.fixture(scope="module")
def adult(tmp_path_factory) -> tuple[Path, Path, str]:
    """300 rows of UCI Adult (text columns, empty fields) as CSV and Parquet, and a pipeline fitted on them."""
    import joblib
    import pandas as pd
    from sklearn.compose import make_column_transformer
    from sklearn.impute import SimpleImputer
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import OneHotEncoder, StandardScaler

    base = tmp_path_factory.mktemp("adult")
    csv_path = DATA / "adult_300.csv"
    frame = pd.read_csv(csv_path)
    X, y = frame.drop(columns="class"), frame["class"]
    text = [c for c in X if X[c].dtype.kind not in "biuf"]
    numbers = [c for c in X if c not in text]
    model = make_pipeline(
        make_column_transformer(
            (make_pipeline(SimpleImputer(strategy="constant", fill_value="missing"),
                           OneHotEncoder(handle_unknown="ignore")), text),
            (make_pipeline(SimpleImputer(strategy="median"), StandardScaler()), numbers)),
        LogisticRegression(max_iter=2000)).fit(X, y)
    joblib.dump(model, base / "adult.joblib")
    return csv_path, to_parquet(csv_path, base / "adult.parquet"), str(base / "adult.joblib")


def same_stdout(run, csv_args, parquet_args):
    a, b = run(*csv_args), run(*parquet_args)
    assert a.exit_code == 0, a.output
    assert b.exit_code == 0, b.output
    assert a.stdout and a.stdout == b.stdout
    return a, b


@pytest.mark.parametrize("which", ["file", "folder"])
def test_explain_batch_compare_parquet_equal_csv(run, agrawal_small, agrawal_parquet, hgb, which):
    parquet = agrawal_parquet[0 if which == "file" else 1]
    common = ["-m", hgb, "-t", "class", "--seed", "3"]
    same_stdout(run, ["explain", agrawal_small, *common, "-M", "2", "--no-live"],
                ["explain", parquet, *common, "-M", "2", "--no-live"])
    same_stdout(run, ["batch", agrawal_small, *common, "-M", "2", "-q"], ["batch", parquet, *common, "-M", "2", "-q"])
    if which == "file":
        same_stdout(run, ["compare", agrawal_small, *common, "-K", "1", "-M", "1"],
                    ["compare", parquet, *common, "-K", "1", "-M", "1"])


def test_glob_and_learning_model_equal_csv(run, drift_csv, hoeffding, tmp_path):
    folder = to_partitions(drift_csv, tmp_path / "drift", n_parts=2)
    common = ["-m", hoeffding, "-t", "class", "--learn", "--seed", "5", "-M", "2", "--no-live"]
    same_stdout(run, ["explain", drift_csv, *common], ["explain", str(folder / "part-*.parquet"), *common])


def test_real_data_with_text_and_missing_values(run, adult):
    csv_path, parquet, model = adult
    common = ["-m", model, "-t", "class", "--seed", "7", "-M", "2"]
    same_stdout(run, ["explain", csv_path, *common, "--every", "25", "--no-live"],
                ["explain", parquet, *common, "--every", "25", "--no-live"])
    same_stdout(run, ["batch", csv_path, *common, "-q"], ["batch", parquet, *common, "-q"])


def test_by_a_partition_key_that_pyarrow_percent_encodes(run, agrawal_small, hgb, tmp_path):
    """pq.write_to_dataset writes region=s%C3%BCd/ and region=a%20b/; the keys are those pandas reads."""
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    frame = pd.read_csv(agrawal_small).iloc[:40]
    frame["region"] = ["süd" if i % 2 else "a b" for i in range(len(frame))]
    root = tmp_path / "by_region"
    pq.write_to_dataset(pa.Table.from_pandas(frame, preserve_index=False), root, partition_cols=["region"])
    assert sorted(p.name for p in root.iterdir()) == ["region=a%20b", "region=s%C3%BCd"]
    result = run("explain", root, "-m", hgb, "-t", "class", "--by", "region", "-M", "1", "--no-live", "-q")
    assert result.exit_code == 0, result.stderr
    keys = {line.split(",", 1)[0] for line in result.stdout.splitlines()[1:]}
    assert keys == set(pd.read_parquet(root)["region"].astype(str)) == {"süd", "a b"}


def test_bad_rows_reported_and_skipped_alike(run, agrawal_small, hgb, tmp_path):
    """A missing label is a bad row in both formats; skipping it gives the same traces."""
    lines = agrawal_small.read_text().splitlines()
    lines[5] = lines[5].rsplit(",", 1)[0] + ","  # no label (the Parquet column becomes float with a null)
    bad_csv = tmp_path / "bad.csv"
    bad_csv.write_text("\n".join(lines) + "\n")
    parquet = to_parquet(bad_csv, tmp_path / "bad.parquet")
    common = ["-m", hgb, "-t", "class", "--seed", "3", "-M", "1", "--no-live"]
    a, b = same_stdout(run, ["explain", bad_csv, *common, "--on-bad-row", "skip"],
                       ["explain", parquet, *common, "--on-bad-row", "skip"])
    failed = run("explain", parquet, *common)
    assert failed.exit_code != 0
    assert "row 5" in failed.stderr and "(line" not in failed.stderr, failed.stderr


def test_stdin_and_unreadable_inputs_are_refused_in_one_line(run, tmp_path, hgb):
    result = run("explain", "-", "-m", hgb, "-t", "class", "--format", "parquet", "--no-live", input=b"")
    assert result.exit_code == 2 and "stdin" in result.stderr
    empty = tmp_path / "empty"
    empty.mkdir()
    result = run("explain", empty, "-m", hgb, "-t", "class", "--no-live")
    assert result.exit_code == 1 and "is a directory with no .parquet file" in result.stderr
    fake = tmp_path / "fake.parquet"
    fake.write_bytes(b"PAR1 not really")
    result = run("explain", fake, "-m", hgb, "-t", "class", "--no-live")
    assert result.exit_code == 1 and "fake.parquet" in result.stderr and "Parquet" in result.stderr
    assert "Traceback" not in result.stderr


def test_a_parquet_run_stops_and_continues_as_from_csv(run, agrawal_small, agrawal_parquet, hgb, tmp_path):
    """--state with Parquet input: a run on the first 120 rows continued on the whole folder gives the
    bytes of one uninterrupted run on the CSV."""
    import pandas as pd

    common = ["-m", hgb, "-t", "class", "--seed", "3", "-M", "2", "--no-live", "-q"]
    expected = run("explain", agrawal_small, *common)
    first = tmp_path / "first.parquet"
    pd.read_parquet(agrawal_parquet[0]).iloc[:120].to_parquet(first, index=False)
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert run("explain", first, *common, "-o", out, "--state", state).exit_code == 0
    result = run("explain", agrawal_parquet[1], *common, "-o", out, "--state", state)
    assert result.exit_code == 0, result.stderr
    assert out.read_text() == expected.stdout


def with_list_column(parquet: Path, out: Path) -> Path:
    """The file with a column of lists (tags, as an export of nested records holds) inserted second."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    table = pq.read_table(parquet)
    tags = pa.array([[f"t{i % 3}"] * (i % 2) for i in range(table.num_rows)], pa.list_(pa.string()))
    pq.write_table(table.add_column(1, "tags", tags), out)
    return out


def test_a_list_column_the_run_does_not_use_is_skipped(run, adult, drift_csv, hoeffding, tmp_path):
    """A model naming its inputs never sees the list column; a river model takes every column, so
    the list column is refused unless left out with --drop, and then the run equals the CSV's."""
    csv_path, parquet, model = adult
    listed = with_list_column(parquet, tmp_path / "adult_tags.parquet")
    common = ["-m", model, "-t", "class", "--seed", "7", "-M", "2", "--every", "25", "--no-live"]
    same_stdout(run, ["explain", csv_path, *common], ["explain", listed, *common])
    drift = with_list_column(to_parquet(drift_csv, tmp_path / "drift.parquet"), tmp_path / "drift_tags.parquet")
    common = ["-m", hoeffding, "-t", "class", "--learn", "--seed", "5", "-M", "2", "--no-live"]
    refused = run("explain", drift, *common)
    assert refused.exit_code == 1 and refused.stdout == ""
    assert "column 'tags' holds list<" in refused.stderr and "--drop 'tags'" in refused.stderr, refused.stderr
    same_stdout(run, ["explain", drift_csv, *common], ["explain", drift, *common, "--drop", "tags"])
    refused = run("explain", listed, "-m", model, "-t", "class", "--by", "tags", "--no-live")
    assert refused.exit_code == 1 and "column 'tags' holds list<" in refused.stderr, refused.stderr
