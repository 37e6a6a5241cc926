"""The streaming row reader: parsing, locations in messages, gzip, micro-batches through real pipes."""

from __future__ import annotations

import csv
import gzip
import io
import math
import os
import threading
import time

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipfi_cli.errors import InputError
from ipfi_cli.io import blocks
from ipfi_cli.io.readers import RowReader, open_rows
from ipfi_cli.io.values import MISSING, detect_format, parse_value


def pytest_generate_tests(metafunc):
    """The tests that read through :func:`read` run twice: row by row, and in micro-batches of 2
    with CSV lines parsed in bulk where they allow it (pyarrow's split even for a few lines)."""
    if "read" in metafunc.function.__code__.co_names:
        metafunc.parametrize("reading", ["rows", "blocks"], indirect=True)


@pytest.fixture(autouse=True)
def reading(request, monkeypatch):
    path = getattr(request, "param", "rows")
    if path == "blocks":
        monkeypatch.setattr(blocks, "_ARROW_MIN_ROWS", 1)
    monkeypatch.setitem(READING, "path", path)
    return path


READING = {"path": "rows"}


def read(data: bytes, **kw):
    reader = RowReader(io.BytesIO(data), name="t.csv", **kw)
    if READING["path"] == "rows":
        return reader, list(reader)
    return reader, [row for part in reader.batches(2, blocks=True) for row in part]


def good(rows):
    return [r.values for r in rows if r.error is None]


# -- values -------------------------------------------------------------------------------------
@pytest.mark.parametrize("text, expected", [
    ("12", 12), ("-4", -4), ("+3", 3), ("2.0", 2.0), ("-3.5", -3.5), ("1e3", 1000.0), ("0.1", 0.1),
    (" 7 ", 7), ("abc", "abc"), ("1_000", "1_000"), ("12a", "12a"), ("UP", "UP"), ("²", "²"),
])
def test_parse_value(text, expected):
    value = parse_value(text)
    assert value == expected and type(value) is type(expected)


def test_empty_field_is_nan():
    assert math.isnan(parse_value("")) and MISSING != MISSING


def test_detect_format():
    assert detect_format("a.csv") == "csv"
    assert detect_format("a.CSV.gz") == "csv"
    assert detect_format("a.jsonl.gz") == "jsonl"
    assert detect_format("a.ndjson") == "jsonl"
    assert detect_format("a.dat") is None
    assert detect_format("-") is None
    assert detect_format("a.csv", "jsonl") == "jsonl"
    with pytest.raises(ValueError, match="unknown input format"):
        detect_format(None, "xml")


def test_a_txt_file_is_read_as_its_first_line_says(tmp_path):
    """A .txt name says nothing of the format (JSON lines are exported as .txt too): the first line
    decides, as on stdin and for other names (before, a JSONL .txt was read as CSV, and a run said
    "no column 'target'; the columns are: {"age": 0.03, ...")."""
    assert detect_format("rows.txt") is None and detect_format("rows.TXT.gz") is None
    jsonl = tmp_path / "rows.txt"
    jsonl.write_text('{"a": 1, "b": "x"}\n{"a": 2.5, "b": "y"}\n')
    with open_rows(str(jsonl)) as reader:
        assert [r.values for r in reader] == [{"a": 1, "b": "x"}, {"a": 2.5, "b": "y"}]
        assert reader.format == "jsonl" and reader.columns == ["a", "b"]
    piped = tmp_path / "piped.txt"
    piped.write_text("a|b\n1|x\n")
    with open_rows(str(piped)) as reader:
        assert [r.values for r in reader] == [{"a": 1, "b": "x"}] and reader.format == "csv"


# -- CSV ----------------------------------------------------------------------------------------
def test_csv_quotes_bom_crlf_blank_lines_and_locations():
    data = b'\xef\xbb\xbfa,b\r\n1,"x,\ny"\r\n\r\n2,"say ""hi"""\n'
    reader, rows = read(data)
    assert reader.columns == ["a", "b"]
    assert [(r.number, r.line) for r in rows] == [(1, 2), (2, 5)]
    assert good(rows) == [{"a": 1, "b": "x,\ny"}, {"a": 2, "b": 'say "hi"'}]


def test_csv_last_line_without_newline():
    _, rows = read(b"a,b\n1,2\n3,4")
    assert good(rows) == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]


def test_csv_missing_values_are_nan():
    _, rows = read(b"a,b\n1,\n,x\n")
    values = good(rows)
    assert math.isnan(values[0]["b"]) and math.isnan(values[1]["a"]) and values[1]["b"] == "x"


def test_csv_wrong_number_of_fields_is_a_bad_row_and_reading_goes_on():
    _, rows = read(b"a,b\n1,2\n3\n4,5,6\n7,8\n")
    assert [r.error is None for r in rows] == [True, False, False, True]
    assert str(rows[1].error) == "t.csv: row 2 (line 3): expected 2 fields (as in the header), got 1"
    assert str(rows[2].error) == "t.csv: row 3 (line 4): expected 2 fields (as in the header), got 3"
    assert rows[3].number == 4 and rows[3].values == {"a": 7, "b": 8}


def test_rows_that_end_with_a_separator_the_header_lacks_are_named_so():
    """An export that ends every data row with ',' but not its header: pandas shifts every column by one
    (the first becomes the index) without a word; ipfi refuses each row, and its line says why."""
    _, rows = read(b"a,b,c\n1,2,x,\n3,4,y,\n")
    assert [str(r.error) for r in rows] == [
        f"t.csv: row {n} (line {n + 1}): expected 3 fields (as in the header), got 4; the last one is empty: "
        "does each row end with a separator the header does not?" for n in (1, 2)]
    _, rows = read(b"a,b\n1,2,3\n")  # a real fourth value: no such guess
    assert str(rows[0].error) == "t.csv: row 1 (line 2): expected 2 fields (as in the header), got 3"


def test_csv_numeric_column_rejects_text_later():
    _, rows = read(b"age,c\n30,x\n,y\nabc,z\n41,w\n")
    assert rows[2].error.column == "age" and rows[2].error.row == 3 and rows[2].error.line == 4
    assert "expected a number" in str(rows[2].error) and "'abc'" in str(rows[2].error)
    assert rows[3].values == {"age": 41, "c": "w"}


def test_csv_text_column_keeps_number_like_text():
    _, rows = read(b"zip,n\nA1,1\n07,2\n,3\n")
    assert [v["zip"] for v in good(rows)][:2] == ["A1", "07"]
    assert math.isnan(good(rows)[2]["zip"])


def test_csv_invalid_utf8_is_a_bad_row():
    _, rows = read(b"a,b\n1,2\n3,\xff\n5,6\n")
    assert rows[1].error is not None and rows[1].error.line == 3
    assert "not valid UTF-8" in str(rows[1].error)
    assert rows[2].values == {"a": 5, "b": 6}


@pytest.mark.parametrize("data, message", [
    (b"", "empty"), (b"\n\n", "empty"), (b"a,a\n1,2\n", "duplicate column"),
    (b"a,,Unnamed: 1\n", "field 2 is empty"),  # the name pandas would give it is taken
])
def test_csv_header_problems_raise(data, message):
    reader = RowReader(io.BytesIO(data), name="t.csv")
    with pytest.raises(InputError, match=message):
        _ = reader.columns


def test_a_header_field_without_a_name_is_named_as_pandas_names_it():
    reader = RowReader(io.BytesIO(b",a,,b\n0,1,2,3\n"), name="t.csv")
    assert reader.columns == ["Unnamed: 0", "a", "Unnamed: 2", "b"]
    assert reader.unnamed == [(1, "Unnamed: 0"), (3, "Unnamed: 2")]
    assert next(iter(reader)).values == {"Unnamed: 0": 0, "a": 1, "Unnamed: 2": 2, "b": 3}


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.lists(st.text(alphabet='ab ,"\n\r', min_size=1, max_size=6), min_size=3, max_size=3),
                min_size=1, max_size=8))
def test_csv_round_trip_of_quoted_text(table):
    buffer = io.StringIO(newline="")
    writer = csv.writer(buffer)  # excel dialect: quotes fields holding \r or \n
    writer.writerow(["x", "y", "z"])
    writer.writerows(table)
    _, rows = read(buffer.getvalue().encode())
    assert [r.error for r in rows] == [None] * len(table)
    assert [list(r.values.values()) for r in rows] == table


# -- JSONL --------------------------------------------------------------------------------------
def test_jsonl_types_nulls_blank_lines_and_bad_lines():
    data = (b'{"a": 1, "b": "x", "c": true}\n\n{"a": null, "b": "y", "c": false}\n[1]\n{bad\n'
            b'{"a": "s", "b": "z"}\n{"a": 2, "b": {"n": 1}}\n{"a": 3.5, "b": "w"}')
    reader, rows = read(data)
    assert reader.format == "jsonl" and reader.columns == ["a", "b", "c"]
    assert rows[0].values == {"a": 1, "b": "x", "c": True}
    assert math.isnan(rows[1].values["a"]) and rows[1].line == 3
    errors = [(r.number, r.line, r.error.column) for r in rows if r.error]
    assert errors == [(3, 4, None), (4, 5, None), (5, 6, "a")]
    assert "expected a JSON object" in str(rows[2].error)
    assert "not valid JSON" in str(rows[3].error)
    # a nested value is kept (the run refuses it only in a column it uses) and fixes no column's kind
    nested = rows[5].values["b"]
    assert type(nested).__name__ == "Nested" and nested.value == {"n": 1} and str(nested) == '{"n":1}'
    assert rows[-1].values == {"a": 3.5, "b": "w"} and rows[-1].number == 7


def test_jsonl_key_given_twice_is_a_bad_row_naming_it():
    """JSON lets a key repeat and its parsers keep the last value; which was meant is unknown."""
    data = (b'{"a": 1, "b": 2}\n{"a": 1, "b": 2, "a": 9}\n{"a" :1,"b":2,"b" :3}\n{"a": 4, "b" : 5}\n'
            b'{"a": 6, "b": 7, "s": "x\\": y\\": z"}\n{"a":8,"b":9,"a" :8}\n')
    _, rows = read(data)
    errors = [(r.number, r.error.column) for r in rows if r.error]
    assert errors == [(2, "a"), (3, "b"), (6, "a")]
    assert "the key 'a' is given twice" in str(rows[1].error) and "line 2" in str(rows[1].error)
    assert rows[3].values == {"a": 4, "b": 5}  # a space before the colon alone is fine
    assert rows[4].values == {"a": 6, "b": 7, "s": 'x": y": z'}  # `":` inside a string is not a key


def test_format_is_sniffed_on_unnamed_input():
    assert RowReader(io.BytesIO(b'  {"a": 1}\n')).format == "jsonl"
    assert RowReader(io.BytesIO(b"a,b\n")).format == "csv"


# -- gzip ---------------------------------------------------------------------------------------
def test_gzip_file_and_multi_member_stream(tmp_path):
    path = tmp_path / "d.csv.gz"
    path.write_bytes(gzip.compress(b"a,b\n1,2\n") + gzip.compress(b"3,4\n"))
    with open_rows(str(path)) as reader:
        assert reader.format == "csv"
        assert good(list(reader)) == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]


class Trickle(io.RawIOBase):
    """A stream that hands on at most ``size`` bytes per read, as a slow pipe does."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size, self.at = data, size, 0

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        chunk = self.data[self.at:self.at + min(self.size, n if n > 0 else self.size)]
        self.at += len(chunk)
        return chunk


@pytest.mark.parametrize("kind", ["bz2", "xz"])
@pytest.mark.parametrize("size", [1, 7, 1 << 16])
def test_bz2_and_xz_are_read_as_gzip_is(kind, size):
    """Recognised by their first bytes (also when they come a byte at a time); concatenated streams are
    read on; more than a megabyte of rows out of a few kB (the decompressors' output is capped per step)."""
    import bz2
    import lzma

    compress = bz2.compress if kind == "bz2" else lzma.compress
    text = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i % 7) for i in range(200_000))
    data = compress(text) + compress(b"-1,-2\n") if size > 1 else compress(b"a,b\n1,2\n") + compress(b"3,4\n")
    reader = RowReader(Trickle(data, size), name=f"t.csv.{kind}")  # type: ignore[arg-type]
    rows = good(list(reader))
    if size > 1:
        assert len(rows) == 200_001 and rows[-2] == {"a": 199_999, "b": 199_999 % 7} and rows[-1] == {"a": -1, "b": -2}
    else:
        assert rows == [{"a": 1, "b": 2}, {"a": 3, "b": 4}]
    cut = compress(text)[:5000]
    with pytest.raises(InputError, match=f"the {kind} data ends early"):
        list(RowReader(io.BytesIO(cut), name=f"t.csv.{kind}"))


@pytest.mark.parametrize("head, what", [
    (b"PK\x03\x04\x14\x00", "t.csv: a zip archive, which ipfi does not open"),
    (b"\xff\xfea\x00,\x00b\x00\n\x00", "t.csv: UTF-16 text (it starts with a UTF-16 byte-order mark"),
    (b"\xfe\xff\x00a\x00,\x00b\x00\n", "t.csv: UTF-16 text"),
    (b"\xff\xfe\x00\x00a\x00\x00\x00", "t.csv: UTF-32 text"),
    (b"\x28\xb5\x2f\xfd\x00\x00", "t.csv: zstd-compressed"),
])
def test_inputs_ipfi_does_not_read_are_named_at_their_first_bytes(head, what):
    for size in (1, 1 << 16):
        with pytest.raises(InputError) as error:
            _ = RowReader(Trickle(head + b"rest\n" * 10, size), name="t.csv").columns  # type: ignore[arg-type]
        assert str(error.value).startswith(what) and "line" not in str(error.value).split(":")[1]
    assert RowReader(Trickle(b"P,K\n1,2\n", 1), name="t.csv").columns == ["P", "K"]  # type: ignore[arg-type]


def test_parquet_binary_data_and_a_misnamed_gz_are_said_at_their_first_bytes(tmp_path):
    """Parquet on a pipe, binary data given as CSV and a `.gz` that is not gzip were read as CSV text
    ("a carriage return (CR) inside an unquoted field", a header of control bytes, or rows): each is
    now named as what it is, before any row."""
    import pandas as pd

    pytest.importorskip("pyarrow")
    pd.DataFrame({"a": [1.5, 2.5], "b": ["x\r", "y"]}).to_parquet(tmp_path / "t.parquet")
    parquet = (tmp_path / "t.parquet").read_bytes()
    binary = bytes(range(256)) * 8
    cases = [(parquet, "<stdin>", "<stdin>: a Parquet file (it starts with Parquet's magic bytes PAR1)"),
             (binary, "t.csv", "t.csv: binary data (a NUL byte at byte 1), not CSV or JSONL text"),
             (b"a,b\n1,2\n\x00\x01\x02", "t.csv", "t.csv: binary data (a NUL byte at byte 9)"),
             (b"a,b\n1,2\n", "t.csv.gz", "t.csv.gz: the name says gzip, but the data is not gzip-compressed: it is "
                                        "plain text; if it is CSV or JSONL text, rename it or pipe it in, "
                                        "e.g. ipfi ... - < t.csv.gz"),
             (b"a,b\n\x00", "t.jsonl.xz", "t.jsonl.xz: the name says xz, but the data is not xz-compressed: it is "
                                        "binary data (a NUL byte at byte 5)")]
    for data, name, what in cases:
        # (a pipe handing on a byte at a time shows only its first bytes: ipfi does not wait for a KiB)
        for size in (1, 1 << 16) if "byte 9" not in what and "byte 5" not in what else (1 << 16,):
            with pytest.raises(InputError) as error:
                _ = RowReader(Trickle(data, size), name=name).columns  # type: ignore[arg-type]
            message = str(error.value)
            assert message.startswith(what) and "\n" not in message, message
    # a gzip named .gz, text with control bytes other than NUL, and a NUL past the first KiB are read as before
    assert good(list(RowReader(io.BytesIO(gzip.compress(b"a,b\n1,2\n")), name="t.csv.gz"))) == [{"a": 1, "b": 2}]
    assert good(read(b"a,b\n\x01\x02\x03\x04\x05,2\n")[1]) == [{"a": "\x01\x02\x03\x04\x05", "b": 2}]
    rows = read(b"a,b\n" + b"1,2\n" * 300 + b"1,\x00\n")[1]
    assert len(good(rows)) == 300 and rows[-1].error is not None


def test_truncated_gzip_raises():
    data = gzip.compress(b"a,b\n" + b"1,2\n" * 1000)
    reader = RowReader(io.BytesIO(data[: len(data) // 2]), name="t.csv.gz")
    with pytest.raises(InputError, match="ends early"):
        list(reader)


@pytest.mark.parametrize("max_rows", [1, 1000])
def test_a_truncated_gzip_hands_out_its_complete_rows_before_the_error(max_rows):
    """A .gz cut short (an interrupted copy): every complete row before the cut reaches the micro-
    batches, then the error names the file and the line it cut (the batch under way was lost)."""
    import zlib

    text = b"a,b\n" + b"".join(b"%d,%d\n" % (i, 7 * i % 1000) for i in range(3000))
    data = gzip.compress(text)
    cut = data[: len(data) * 2 // 3]
    readable = zlib.decompressobj(wbits=31).decompress(cut)  # what zcat recovers
    complete = readable[: readable.rfind(b"\n") + 1].decode().splitlines()[1:]
    reader = RowReader(io.BytesIO(cut), name="t.csv.gz")
    got = []
    with pytest.raises(InputError, match="ends early") as error:
        for batch in reader.batches(max_rows, blocks=True):
            got.extend(batch)
    assert [f"{r.values['a']},{r.values['b']}" for r in got] == complete and len(complete) > 1000
    assert str(error.value).startswith(f"t.csv.gz: line {len(complete) + 2}: ")


# -- opening ------------------------------------------------------------------------------------
def test_open_missing_file_and_directory(tmp_path):
    with pytest.raises(InputError, match="no such file") as error:
        open_rows(str(tmp_path / "nope.csv"))
    assert str(tmp_path / "nope.csv") in str(error.value)
    with pytest.raises(InputError, match="directory"):
        open_rows(str(tmp_path))


# -- micro-batches ------------------------------------------------------------------------------
def test_batches_respect_the_cap_and_keep_every_row():
    data = b"a\n" + b"".join(b"%d\n" % i for i in range(2500))
    reader = RowReader(io.BytesIO(data))
    batches = list(reader.batches(1000))
    assert [len(b) for b in batches] == [1000, 1000, 500]
    assert [r.values["a"] for b in batches for r in b] == list(range(2500))


def _slow_writer(fd: int, parts: list[bytes], pause: float) -> None:
    with os.fdopen(fd, "wb", buffering=0) as out:
        for part in parts:
            out.write(part)
            time.sleep(pause)


def test_batches_through_a_pipe_hand_on_available_rows_at_once():
    """A fast burst becomes one batch; a row written later comes as its own batch, without waiting."""
    read_fd, write_fd = os.pipe()
    burst = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i) for i in range(50))
    writer = threading.Thread(target=_slow_writer, args=(write_fd, [burst, b"50,50\n", b"51,51\n"], 0.4))
    writer.start()
    reader = RowReader(read_fd, name="pipe")
    seen = []
    for batch in reader.batches(1000):
        seen.append((time.monotonic(), [r.number for r in batch]))
    writer.join()
    os.close(read_fd)
    assert [numbers for _, numbers in seen] == [list(range(1, 51)), [51], [52]]
    # the second batch arrived ~0.4 s after the first, not at the end of the input
    assert seen[1][0] - seen[0][0] < 0.8


def test_idle_callback_runs_while_waiting():
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=_slow_writer, args=(write_fd, [b"a\n1\n", b"2\n"], 0.6))
    writer.start()
    calls = []
    reader = RowReader(read_fd)
    batches = list(reader.batches(10, idle=lambda: calls.append(1), idle_interval=0.05))
    writer.join()
    os.close(read_fd)
    assert [len(b) for b in batches] == [1, 1]
    assert len(calls) >= 3


def test_partial_line_is_not_handed_on_until_complete():
    read_fd, write_fd = os.pipe()
    writer = threading.Thread(target=_slow_writer, args=(write_fd, [b"a,b\n1,", b"2\n"], 0.3))
    writer.start()
    reader = RowReader(read_fd)
    rows = [r.values for b in reader.batches(10) for r in b]
    writer.join()
    os.close(read_fd)
    assert rows == [{"a": 1, "b": 2}]


def test_a_named_pipe_is_read_from_its_first_byte(tmp_path):
    """A named pipe (or bash's `<(command)`, a /dev/fd path) is not sniffed for Parquet's magic bytes:
    reading them would take the header's first 4 bytes (the header came out as `Unnamed: 0, 13, ...`),
    and a second open blocks once the writer has gone."""
    from ipfi_cli.io.parquet_files import is_parquet_input

    fifo = tmp_path / "rows.fifo"
    os.mkfifo(fifo)
    text = b"salary,age,class\n1.5,30,yes\n2.5,40,no\n"

    def write() -> None:
        with open(fifo, "wb") as f:
            f.write(text)

    writer = threading.Thread(target=write)
    writer.start()
    assert not is_parquet_input(str(fifo))  # without opening it (the writer is still blocked on open)
    with open_rows(str(fifo)) as reader:
        assert reader.columns == ["salary", "age", "class"]
        assert [r.values for r in reader] == [{"salary": 1.5, "age": 30, "class": "yes"},
                                              {"salary": 2.5, "age": 40, "class": "no"}]
    writer.join(5)


# -- spreadsheets' exports -------------------------------------------------------------------------
def test_rows_of_empty_fields_are_blank_lines_but_a_quoted_empty_value_of_one_column_is_not():
    reader, rows = read(b"a,b,c\n1,x,2\n,,\n\"\",\"\",\"\"\n3,y,4\n , ,\n,,\n")
    assert good(rows)[:2] == [{"a": 1, "b": "x", "c": 2}, {"a": 3, "b": "y", "c": 4}]
    assert [(r.number, r.line) for r in rows] == [(1, 2), (2, 5), (3, 6)]  # spaces are fields, as in any row
    assert rows[2].error is not None and rows[2].error.column == "a"
    assert reader.empty_rows == 3 and reader.first_empty_line == 3
    assert "skipped 3 row(s) whose every field is empty (the first at line 3)" in reader.empty_rows_summary()
    reader, rows = read(b'a\n1\n""\n2\n')
    assert [r.values["a"] for r in rows][0] == 1 and math.isnan(rows[1].values["a"]) and reader.empty_rows == 0


@pytest.mark.parametrize("first, given", [(b"sep=;", None), (b'"sep=;"', None), (b"SEP=;", ";"), (b"\n sep=;", None)])
def test_excels_sep_line_names_the_separator_and_lines_count_it(first, given):
    data = first + b"\r\na;b\r\n1;x\r\n2;\r\nq;z\r\n"
    reader, rows = read(data, delimiter=given)
    assert reader.columns == ["a", "b"] and reader.delimiter == ";"
    offset = first.count(b"\n")
    assert [(r.number, r.line) for r in rows] == [(1, 3 + offset), (2, 4 + offset), (3, 5 + offset)]
    assert good(rows)[0] == {"a": 1, "b": "x"} and rows[2].error.column == "a"
