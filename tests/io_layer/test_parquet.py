"""The Parquet reader: values, missing values and column rules as in CSV, partitions, memory per batch."""

from __future__ import annotations

import datetime
import decimal
import io
import math

import pytest

pa = pytest.importorskip("pyarrow")
pq = pytest.importorskip("pyarrow.parquet")

from ipfi_cli.errors import InputError, UsageError  # noqa: E402
from ipfi_cli.io.parquet import ParquetRowReader  # noqa: E402
from ipfi_cli.io.parquet_files import is_parquet_input  # noqa: E402
from ipfi_cli.io.readers import RowReader, open_rows  # noqa: E402


def same(a, b) -> bool:
    """Equal values, NaN equal to NaN, and of the same type."""
    if isinstance(a, float) and math.isnan(a):
        return isinstance(b, float) and math.isnan(b)
    return a == b and type(a) is type(b)


def test_values_and_missing_values_as_the_csv_reader_reads_them(tmp_path):
    csv_text = b"n,x,s,label\n1,0.5,a,yes\n,NaN,NA,no\n3,,?,yes\n4,2.5, N/A ,no\n"
    table = pa.table({"n": pa.array([1, None, 3, 4], pa.int64()), "x": [0.5, float("nan"), None, 2.5],
                      "s": ["a", "NA", "?", " N/A "], "label": ["yes", "no", "yes", "no"]})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    csv_rows = [r.values for r in RowReader(io.BytesIO(csv_text), name="t.csv")]
    with open_rows(str(path)) as reader:
        assert reader.format == "parquet" and reader.columns == ["n", "x", "s", "label"]
        rows = list(reader)
        assert [r.number for r in rows] == [1, 2, 3, 4] and all(r.line is None for r in rows)
        for got, expected in zip([r.values for r in rows], csv_rows):
            assert all(same(got[k], expected[k]) for k in expected), (got, expected)
        assert reader.noted_missing == {"s": {"?": 1}}  # as the CSV reader counts UCI's token
        assert "'s' (1)" in reader.noted_missing_summary()


def test_other_arrow_types(tmp_path):
    table = pa.table({
        "flag": [True, None], "code": pa.array(["eu", "us"]).dictionary_encode(),
        "price": pa.array([decimal.Decimal("1.25"), None], pa.decimal128(5, 2)),
        "when": pa.array([datetime.datetime(2024, 5, 1, 13, 0), None], pa.timestamp("s")),
        "day": pa.array([datetime.date(2024, 5, 1), None]), "nothing": pa.array([None, None], pa.null())})
    path = tmp_path / "t.parquet"
    pq.write_table(table, path)
    first, second = [r.values for r in ParquetRowReader(str(path))]
    assert first == {"flag": True, "code": "eu", "price": 1.25, "when": "2024-05-01 13:00:00", "day": "2024-05-01",
                     "nothing": first["nothing"]}
    assert math.isnan(first["nothing"]) and all(math.isnan(v) for k, v in second.items() if k != "code")


def test_nested_columns_are_left_out_of_rows_and_named(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"a": [1, 2], "tags": [[1, 2], []], "b": ["x", "y"]}), path)
    reader = ParquetRowReader(str(path))
    assert reader.columns == ["a", "tags", "b"]  # listed, so --drop tags names a known column
    assert [r.values for r in reader] == [{"a": 1, "b": "x"}, {"a": 2, "b": "y"}]
    assert list(reader.unreadable) == ["tags"]
    assert reader.unreadable["tags"].startswith(f"{path}: column 'tags' holds list<")


def test_folder_of_hive_partitions_in_sorted_order(tmp_path):
    for region, start in (("us", 10), ("eu", 0)):
        folder = tmp_path / "data" / f"region={region}"
        folder.mkdir(parents=True)
        for part in (1, 0):
            pq.write_table(pa.table({"a": [start + 2 * part, start + 2 * part + 1]}),
                           folder / f"part-{part}.parquet")
    (tmp_path / "data" / "_SUCCESS").write_text("")
    (tmp_path / "data" / "region=eu" / ".part-0.parquet.crc").write_text("")
    reader = open_rows(str(tmp_path / "data"))
    assert reader.columns == ["a", "region"]
    assert [(r.values["region"], r.values["a"]) for r in reader] == [
        ("eu", 0), ("eu", 1), ("eu", 2), ("eu", 3), ("us", 10), ("us", 11), ("us", 12), ("us", 13)]
    glob = open_rows(str(tmp_path / "data" / "region=us" / "*.parquet"))
    assert [r.values["a"] for r in glob] == [10, 11, 12, 13] and glob.columns == ["a"]


def test_a_glob_over_hive_folders_adds_their_keys_as_pyarrow_reads_them(tmp_path):
    """A glob's matches get the partition keys of the folders below its fixed part, as pyarrow's
    dataset of the same files with that base folder has them (before, a glob dropped them)."""
    import glob as globbing

    import pyarrow.dataset as ds

    root = tmp_path / "logs"
    pq.write_to_dataset(pa.table({"a": [1, 2, 3, 4], "region": ["eu", "us", "eu", "süd"], "day": [1, 1, 2, 2]}),
                        root, partition_cols=["region", "day"])
    pattern = str(root / "region=*" / "*" / "*.parquet")
    files = sorted(globbing.glob(pattern))
    expected = ds.dataset(files, partitioning="hive", partition_base_dir=str(root)).to_table().to_pylist()
    reader = open_rows(pattern)
    assert reader.columns == ["a", "region", "day"]
    assert sorted((r.values["a"], r.values["region"], r.values["day"]) for r in reader) == sorted(
        (e["a"], e["region"], e["day"]) for e in expected)
    assert {e["region"] for e in expected} == {"eu", "us", "süd"}  # decoded, as pyarrow reads it
    inside = open_rows(str(root / "region=eu" / "*" / "*.parquet"))  # the fixed part's own key is not added
    assert inside.columns == ["a", "day"] and sorted(r.values["a"] for r in inside) == [1, 3]


def test_partition_folder_names_are_decoded_as_pyarrow_and_pandas_read_them(tmp_path):
    """pyarrow percent-encodes partition values it writes (region=s%C3%BCd, region=a%20b); the rows
    hold the values pyarrow (and so pandas) reads back, and a '+' stays a '+'."""
    root = tmp_path / "data"
    regions = ["süd", "a b", "x+y", "p/q", None]
    pq.write_to_dataset(pa.table({"a": [1, 2, 3, 4, 5], "region": regions}), root, partition_cols=["region"])
    assert (root / "region=s%C3%BCd").is_dir() and (root / "region=a%20b").is_dir()
    table = pq.read_table(root)
    expected = dict(zip(table["a"].to_pylist(), table["region"].to_pylist()))
    assert expected == dict(zip([1, 2, 3, 4, 5], regions))
    rows = list(open_rows(str(root)))
    got = {r.values["a"]: r.values["region"] for r in rows}
    assert {a: region for a, region in got.items() if region == region} == {a: expected[a] for a in (1, 2, 3, 4)}
    assert math.isnan(got[5])  # __HIVE_DEFAULT_PARTITION__ is a missing value
    # a key name is decoded too; a name that is not UTF-8 once decoded is refused as pyarrow refuses it
    pq.write_table(pa.table({"a": [1]}), tmp_path / "p.parquet")
    (tmp_path / "k" / "r%C3%A9gion=%C3%A9").mkdir(parents=True)
    pq.write_table(pa.table({"a": [1]}), tmp_path / "k" / "r%C3%A9gion=%C3%A9" / "p.parquet")
    reader = open_rows(str(tmp_path / "k"))
    assert reader.columns == ["a", "région"] and [r.values for r in reader] == [{"a": 1, "région": "é"}]
    (tmp_path / "bad" / "region=%FF").mkdir(parents=True)
    pq.write_table(pa.table({"a": [1]}), tmp_path / "bad" / "region=%FF" / "p.parquet")
    with pytest.raises(InputError, match="the partition folder name '%FF' cannot be decoded"):
        open_rows(str(tmp_path / "bad"))


def test_a_column_whose_type_changes_between_files_gives_bad_rows_as_in_csv(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    pq.write_table(pa.table({"age": [30, 40], "s": ["x", "y"]}), folder / "a.parquet")
    pq.write_table(pa.table({"age": ["old", None], "s": ["z", "w"]}), folder / "b.parquet")
    rows = list(open_rows(str(folder)))
    assert [r.error is None for r in rows] == [True, True, False, True]
    assert str(rows[2].error) == (f"{folder / 'b.parquet'}: row 3, column 'age': expected a number (the column "
                                  "held numbers before), got 'old'")
    csv_rows = list(RowReader(io.BytesIO(b"age,s\n30,x\n40,y\nold,z\n,w\n"), name="t.csv"))
    assert str(csv_rows[2].error).endswith("expected a number (the column held numbers before), got 'old'")


def test_files_with_other_columns_are_refused_before_any_row(tmp_path):
    folder = tmp_path / "d"
    folder.mkdir()
    pq.write_table(pa.table({"a": [1], "b": [2]}), folder / "1.parquet")
    pq.write_table(pa.table({"a": [1], "c": [2]}), folder / "2.parquet")
    with pytest.raises(InputError, match=r"2.parquet: the files do not have the same columns: this one lacks 'b'; "
                                         r"has 'c' in addition"):
        open_rows(str(folder))


@pytest.mark.parametrize("name", ["a.csv", "a.jsonl.gz", "a.tsv"])
def test_a_glob_of_csv_or_jsonl_files_says_that_a_glob_is_read_as_parquet(tmp_path, name):
    """'logs/*.csv' is read as Parquet, as every glob is: the one line says so, naming the file, instead
    of pyarrow's "Parquet magic bytes not found in footer" (a glob of .parquet files is read as before)."""
    folder = tmp_path / "logs"
    folder.mkdir()
    (folder / name).write_bytes(b"a,b\n1,2\n")
    pattern = str(folder / ("*" + name[1:]))
    with pytest.raises(InputError) as refused:
        open_rows(pattern)
    assert str(refused.value) == (f"{pattern}: matches {folder / name}, which is not a Parquet file: a pattern "
                                  "is read as Parquet files; give CSV and JSONL files one at a time (or their "
                                  "rows through standard input)")
    pq.write_table(pa.table({"a": [1]}), folder / "b.parquet")
    assert [r.values for r in open_rows(str(folder / "*.parquet"))] == [{"a": 1}]


def test_text_option_reads_a_numeric_column_as_text(tmp_path):
    path = tmp_path / "t.parquet"
    pq.write_table(pa.table({"zip": [2139, None], "x": [1.5, 2.0]}), path)
    reader = open_rows(str(path))
    with pytest.raises(UsageError, match="no such input column: nope"):
        reader.keep_as_text(["nope"])
    reader.keep_as_text(["zip"])
    first, second = [r.values for r in reader]
    assert first == {"zip": "2139", "x": 1.5} and math.isnan(second["zip"])
    assert reader.column_kinds() == {"zip": "text", "x": "number"}


def test_detection():
    assert is_parquet_input("a.parquet") and is_parquet_input("x.csv", "parquet")
    assert not is_parquet_input("a.csv") and not is_parquet_input("-") and not is_parquet_input("a.parquet", "csv")


def test_memory_is_one_record_batch_not_the_file(tmp_path):
    """Arrow's allocations while reading the first rows stay near one batch (1,000 rows), far below
    the whole file's 400,000 rows x 4 float columns (12.8 MB)."""
    import numpy as np

    path = tmp_path / "big.parquet"
    rng = np.random.default_rng(0)
    pq.write_table(pa.table({c: rng.random(400_000) for c in "abcd"}), path, row_group_size=10_000)
    reader = ParquetRowReader(str(path), batch_rows=1000)
    rows = iter(reader)
    before = pa.total_allocated_bytes()
    peak = 0
    for _ in range(5000):
        next(rows)
        peak = max(peak, pa.total_allocated_bytes() - before)
    whole = 400_000 * 4 * 8
    assert peak < whole / 10, (peak, whole)
    reader.close()
