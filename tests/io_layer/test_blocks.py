"""CSV blocks parsed in bulk give exactly the row reader's rows, values, kinds, counts and errors.

The expected rows come from the row reader alone (``blocks`` off): the bulk parser must
agree with it on every input, taking the lines itself only where they hold nothing unusual.
"""

from __future__ import annotations

import io
import json
import math

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ipfi_cli.io import blocks
from ipfi_cli.io.blocks import RowBlock, parse_block
from ipfi_cli.io.readers import RowReader
from ipfi_cli.io.values import DEFAULT_NA_VALUES, Nested, na_tokens

ORIGINAL_ARROW_FLOATS = blocks._arrow_floats


def _key(value):
    """A value with its type, NaN comparable (the row reader's ints must stay ints)."""
    if isinstance(value, float) and math.isnan(value):
        return ("nan",)
    if isinstance(value, float) and value == 0:
        return (float, math.copysign(1.0, value))
    if isinstance(value, Nested):  # a JSON object or array, compared by its text
        return ("Nested", str(value))
    return (type(value).__name__, value)


def _rows(data: bytes, *, blocks: bool, batch: int, **options):
    reader = RowReader(io.BytesIO(data), name="t.csv", **options)
    out, kinds = [], []
    for part in reader.batches(batch, blocks=blocks):
        kinds.append(type(part).__name__)
        if isinstance(part, RowBlock):  # the arrays the explainer reads hold the rows' values, bit for bit
            for name, values in part.floats.items():
                expected = np.array([float(row.values[name]) for row in part], dtype=np.float64)
                assert values.tobytes() == expected.tobytes(), name
        for row in part:
            out.append((row.number, row.line, None if row.values is None else
                        {k: _key(v) for k, v in row.values.items()}, None if row.error is None else str(row.error)))
    return out, reader.noted_missing, reader.column_kinds(), kinds


def _same(data: bytes, batch: int = 3, **options) -> list[str]:
    expected = _rows(data, blocks=False, batch=batch, **options)
    got = _rows(data, blocks=True, batch=batch, **options)
    assert got[:3] == expected[:3]
    return got[3]


NUMBERS = st.sampled_from(["1", "-4", "+3", "2.0", "-3.5", "1e3", "0.1", "1E-7", ".5", "5.", "007",
                           "12345678901234567891"])
ODD = st.sampled_from(["", "NA", "?", "nan", "-nan", "inf", "1e400", "1" * 320, "1_000", " 7", "7 ", "True", "abc",
                       "-0", "-0.0", "0", "-999", "1e", "+-1", ".", "²", "١٢", '"3"', '"a,b"', "x\ty", "-"])


@st.composite
def csv_text(draw):
    n_columns = draw(st.integers(1, 4))
    header = ",".join(f"c{i}" for i in range(n_columns))
    lines = []
    for _ in range(draw(st.integers(1, 25))):
        kind = draw(st.integers(0, 30))
        if kind == 0:
            lines.append("")  # blank line
        elif kind == 1:
            lines.append(",".join(draw(NUMBERS) for _ in range(n_columns + 1)))  # one field too many
        else:
            fields = [draw(st.one_of(NUMBERS, NUMBERS, NUMBERS, ODD)) for _ in range(n_columns)]
            lines.append(",".join(fields))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return (header + ending + ending.join(lines) + draw(st.sampled_from(["", ending]))).encode()


@pytest.fixture(params=["pyarrow-csv", "pyarrow", "float"])
def parser(request, monkeypatch):
    """Lines split and converted by pyarrow's CSV reader (blocks of any length), split in Python
    with number columns parsed by pyarrow, and by ``float``: each must agree with the rows."""
    if request.param.startswith("pyarrow"):
        pytest.importorskip("pyarrow")
        import pyarrow  # noqa: F401 - loaded, so blocks may use it
    if request.param == "pyarrow-csv":
        monkeypatch.setattr(blocks, "_ARROW_MIN_ROWS", 1)
        return request.param
    monkeypatch.setattr(blocks, "_ARROW_MIN_ROWS", 10**9)
    if request.param == "pyarrow":
        monkeypatch.setattr(blocks, "_arrow_floats", _arrow_always)
    else:
        monkeypatch.setattr(blocks, "_arrow_floats", lambda texts: None)
    return request.param


def _arrow_always(texts):
    """pyarrow's parse even for short columns (which blocks leave to ``float``)."""
    got = ORIGINAL_ARROW_FLOATS(list(texts) + ["0"] * 64)
    return None if got is None else got[:len(texts)]


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow,
                                                                  HealthCheck.function_scoped_fixture])
@given(csv_text(), st.integers(1, 6), st.sampled_from(["default", "number-token", "no-empty"]))
def test_blocks_agree_with_the_row_reader_on_any_input(parser, data, batch, tokens):
    na_values = {"default": DEFAULT_NA_VALUES, "number-token": DEFAULT_NA_VALUES | {"-999"},
                 "no-empty": frozenset({"NA"})}[tokens]
    _same(data, batch=batch, na_values=na_values)


def test_pyarrow_parses_numbers_as_float_does():
    """Every text of up to 5 characters made of number characters, and random floats' repr: pyarrow
    accepts exactly what ``float`` accepts, with the same value (fixed seed)."""
    import itertools

    pytest.importorskip("pyarrow")
    texts = ["".join(t) for n in range(1, 6) for t in itertools.product("01.eE+-", repeat=n)]
    rng = np.random.default_rng(7)
    texts += [repr(x) for x in ((rng.random(200_000) - 0.5) * 10.0 ** rng.uniform(-300, 300, 200_000)).tolist()]
    texts += [f"{x:.{d}f}" for x, d in zip(rng.uniform(-1e6, 1e6, 50_000).tolist(), rng.integers(0, 9, 50_000))]
    for chunk in range(0, len(texts), 1000):
        part = texts[chunk:chunk + 1000]
        expected = []
        for text in part:
            try:
                expected.append(float(text))
            except ValueError:
                expected.append(None)
        accepted = [t for t, e in zip(part, expected) if e is not None]
        got = ORIGINAL_ARROW_FLOATS(accepted + ["0"] * 64)
        assert got is not None
        np.testing.assert_array_equal(got[:len(accepted)], [e for e in expected if e is not None])
        for text, value in zip(part, expected):  # the refused ones, one at a time
            if value is None:
                assert ORIGINAL_ARROW_FLOATS([text] * 64) is None, text


def test_a_clean_numeric_file_is_read_in_blocks():
    rng = np.random.default_rng(0)
    lines = ["a,b,label"] + [f"{x!r},{int(k)},{'yes' if k % 2 else 'no'}" for x, k in
                             zip(rng.normal(size=300).tolist(), rng.integers(0, 9, 300).tolist())]
    kinds = _same(("\n".join(lines) + "\n").encode(), batch=50)
    assert kinds[0] == "list" and kinds[1:] == ["RowBlock"] * (len(kinds) - 1)  # once the kinds are known


def test_blocks_stop_at_an_odd_row_and_resume_after_it():
    lines = ["a,b"] + [f"{i},{i * 0.5}" for i in range(40)]
    lines[25] = "7,NA"  # a missing-value token the bulk parser leaves to the row reader
    lines[30] = "x,1"  # a bad row: text in a number column
    kinds = _same(("\n".join(lines) + "\n").encode(), batch=4)
    assert "RowBlock" in kinds and kinds.count("list") >= 3


def test_semicolons_gzip_and_a_byte_order_mark():
    import gzip

    text = "\ufeffa;b;c\n" + "".join(f"{i};{i / 3!r};t{i % 3}\n" for i in range(50))
    for data in (text.encode(), gzip.compress(text.encode())):
        assert "RowBlock" in _same(data, batch=8)


def test_a_line_the_decoder_marked_bad_is_left_to_the_row_reader():
    data = b"a,b\n" + b"".join(b"%d,%d\n" % (i, i) for i in range(20)) + b"1,\xff\n" + b"2,3\n" * 10
    _same(data, batch=5)


def test_decimal_comma_and_text_columns_stay_with_the_row_reader():
    data = ("a;b\n" + "".join(f"{i},5;{i}\n" for i in range(30))).encode()
    assert "RowBlock" not in _same(data, batch=5, decimal=",", delimiter=";")
    data = ("a,b\n" + "".join(f"{i},2021-01-{i % 28 + 1:02d}\n" for i in range(30))).encode()
    assert "RowBlock" in _same(data, batch=5)  # a text column is read in blocks too (a date is text)


def test_na_tokens_given_by_the_user():
    tokens = na_tokens(["-1", "missing"], defaults=False)
    data = ("a,b\n" + "".join(f"{i % 5 - 1},{i}\n" for i in range(40))).encode()
    _same(data, batch=6, na_values=tokens)


def test_parse_block_refuses_what_needs_the_row_reader():
    names, kinds, convert = ["a", "b"], [1, 1], [None, None]

    def parse(*lines):
        return parse_block("".join(lines).encode(), len(lines), names, kinds, convert, ",", DEFAULT_NA_VALUES,
                           first_number=1, first_line=2)

    assert isinstance(parse("1,2\n", "3,4\n"), RowBlock)
    for odd in ('"1",2\n', "1,2\r3\n", "1\n", "1,2,3\n", "\n", "1,inf\n", "1,1e400\n", "1,-0\n", "1,NA\n", "1,1_0\n",
                "1,\x00\n"):
        assert parse("1,2\n", odd) is None, odd


ODD_FIELDS = ["", "NA", "?", "nan", "-nan", "inf", "1e400", "1" * 320, "1" * 5000, "0" * 4999 + "1", "1_000",
              " 7", "7 ", "True", "abc", "-0", "-0.0", "-999", "1e", "+-1", ".", "²", "١٢", "x\ty", "-", "0x10",
              "1,5"]


@pytest.mark.parametrize("na_values", [DEFAULT_NA_VALUES | {"-999"}, frozenset({"NA"})], ids=["default", "no-empty"])
@pytest.mark.parametrize("odd", ODD_FIELDS)
def test_an_odd_field_in_a_long_block_leaves_it_to_the_row_reader(odd, na_values):
    """Blocks of 100 lines (pyarrow's CSV reader splits them when pyarrow is loaded), one with an
    odd field in a number column: the rows, values and errors are the row reader's."""
    pytest.importorskip("pyarrow")
    import pyarrow  # noqa: F401 - loaded, so blocks may use it

    lines = [f"{i},{i}.25,{i % 3}" for i in range(400)]
    lines[250] = f"250,{odd},1"
    data = ("a,b,c\n" + "\n".join(lines) + "\n").encode()
    kinds = _same(data, batch=100, na_values=na_values)
    assert kinds.count("RowBlock") >= 2  # the lines around it are taken in bulk


@pytest.mark.parametrize("delimiter", [",", ";", "\t", "|"])
def test_long_blocks_with_text_columns_and_missing_fields_at_each_delimiter(delimiter):
    """Text and number columns, empty fields and a text that looks like a number, in blocks of 100
    lines: the row reader's rows, values and kinds, at every delimiter a block may be split at."""
    pytest.importorskip("pyarrow")
    import pyarrow  # noqa: F401 - loaded, so blocks may use it

    rng = np.random.default_rng(3)
    lines = []
    for i in range(500):
        number = "" if rng.random() < 0.05 else repr(float(rng.normal()))
        label = str(rng.choice(["yes", "no", "007", "é ü", ""]))
        lines.append(delimiter.join([str(i), number, label, f"{rng.integers(0, 5)}"]))
    data = (delimiter.join(["id", "x", "label", "y"]) + "\n" + "\n".join(lines) + "\n").encode()
    kinds = _same(data, batch=100, delimiter=delimiter)
    assert kinds.count("RowBlock") >= 3


def test_lines_waiting_in_a_file_are_parsed_a_span_at_a_time(monkeypatch):
    """Once the kinds are known, the lines available are parsed by pyarrow a span of up to
    SPAN_ROWS lines per call (its fixed cost is about 0.3 ms a call) and handed out a micro-batch at
    a time; the first micro-batch's rows after the first come from that span too."""
    pytest.importorskip("pyarrow")
    import pyarrow  # noqa: F401 - loaded, so blocks may use it

    calls = []
    original = blocks._parse_with_arrow

    def counted(data, n_lines, *args, **kwargs):
        calls.append(n_lines)
        return original(data, n_lines, *args, **kwargs)

    monkeypatch.setattr(blocks, "_parse_with_arrow", counted)
    rng = np.random.default_rng(5)
    lines = [f"{x!r},{k},{'ab'[k % 2]}" for x, k in zip(rng.normal(size=5000).tolist(),
                                                       rng.integers(0, 9, 5000).tolist())]
    data = ("x,k,label\n" + "\n".join(lines) + "\n").encode()
    reader = RowReader(io.BytesIO(data), name="t.csv")
    sizes = [(type(part).__name__, len(part)) for part in reader.batches(100, blocks=True)]
    assert calls == [4999]  # one call: every line after the first, which fixes the kinds
    assert sizes == [("list", 100)] + [("RowBlock", 100)] * 49
    _same(data, batch=100)


def test_tokens_of_a_span_are_counted_only_as_its_rows_are_handed_out():
    """A text column's '?' (read as missing, and counted for the note) is counted when its row is
    handed out, not when the span ahead of it is parsed: a run that stops early says the row reader's count."""
    pytest.importorskip("pyarrow")
    import pyarrow  # noqa: F401 - loaded, so blocks may use it

    data = ("a,b\n" + "".join(f"{i},{'?' if i % 7 == 0 else 'x'}\n" for i in range(2000))).encode()
    for taken in (1, 3, 7):
        by_rows = RowReader(io.BytesIO(data), name="t.csv")
        in_blocks = RowReader(io.BytesIO(data), name="t.csv")
        parts = in_blocks.batches(100, blocks=True)
        rows = sum(len(next(parts)) for _ in range(taken))
        assert rows == 100 * taken
        for _ in zip(range(rows), by_rows):
            pass
        assert in_blocks.noted_missing == by_rows.noted_missing
        assert in_blocks.noted_missing["b"]["?"] == len(range(0, rows, 7))


def test_a_pipe_s_lines_are_parsed_as_they_arrive_never_waiting_for_more(tmp_path):
    """Through a real pipe, the lines already written are handed out (in bulk) while the writer
    waits for them to be read: nothing holds a slow stream back."""
    import os
    import threading

    read_fd, write_fd = os.pipe()
    first = ("x,y\n" + "".join(f"{i},{i / 4}\n" for i in range(3000))).encode()
    got_them = threading.Event()

    def writer():
        with os.fdopen(write_fd, "wb") as out:
            out.write(first)
            out.flush()
            assert got_them.wait(10), "the reader waited for more lines than were written"
            out.write(b"3000,0.5\n")

    thread = threading.Thread(target=writer)
    thread.start()
    seen, kinds = 0, []
    try:
        for part in RowReader(read_fd, name="pipe").batches(1000, blocks=True):
            seen += len(part)
            kinds.append(type(part).__name__)
            if seen == 3000:
                got_them.set()
    finally:
        got_them.set()
        thread.join()
    assert seen == 3001 and "RowBlock" in kinds


JSON_VALUES = st.one_of(st.integers(-5, 5), st.floats(-1e6, 1e6, allow_nan=False), st.none(),
                        st.sampled_from([2**70, 10**308, 10**400, 1.5e308, -0.0, True, "x", "?", " ? ", "NA", "",
                                         "  ", "07", [1], {"k": 1}]))


@st.composite
def jsonl_text(draw):
    keys = ["a", "b", "c"][:draw(st.integers(1, 3))]
    lines = []
    for _ in range(draw(st.integers(1, 30))):
        kind = draw(st.integers(0, 40))
        obj = {k: draw(st.one_of(JSON_VALUES, st.integers(0, 9), st.sampled_from(["u", "v"]))) for k in keys}
        if kind == 0:
            lines.append("")  # blank line
        elif kind == 1:
            lines.append("{not json")
        elif kind == 2:
            lines.append(json.dumps(dict(reversed(list(obj.items())))))  # the keys in another order
        elif kind == 3:
            lines.append(json.dumps(obj)[:-1] + ', "a": 1}')  # a key given twice
        elif kind == 4:
            lines.append(json.dumps({**obj, "z": 1}))  # a key the first row lacks
        elif kind == 5:
            lines.append(json.dumps(obj).replace('":', '" :'))
        else:
            lines.append(json.dumps(obj))
    ending = draw(st.sampled_from(["\n", "\r\n"]))
    return (ending.join(lines) + draw(st.sampled_from(["", ending]))).encode()


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(jsonl_text(), st.integers(1, 6))
def test_jsonl_blocks_agree_with_the_row_reader_on_any_input(data, batch):
    """JSONL objects read in bulk (same keys in the same order, each value of its key's kind) give the
    row reader's rows, values, kinds, tokens and errors; anything else is left to it."""
    def rows(blocks: bool):
        reader = RowReader(io.BytesIO(data), name="t.jsonl", format="jsonl")
        out = []
        for part in reader.batches(batch, blocks=blocks):
            if isinstance(part, RowBlock):
                for name, values in part.floats.items():
                    expected = np.array([float(row.values[name]) for row in part], dtype=np.float64)
                    assert values.tobytes() == expected.tobytes(), name
            out += [(row.number, row.line, None if row.values is None else
                     [(k, _key(v)) for k, v in row.values.items()], None if row.error is None else str(row.error))
                    for row in part]
        return out, reader.noted_missing, reader.column_kinds()

    assert rows(True) == rows(False)


def test_a_regular_jsonl_file_is_read_in_blocks():
    rng = np.random.default_rng(2)
    pairs = zip(rng.normal(size=400).tolist(), rng.integers(0, 9, 400).tolist())
    lines = [json.dumps({"x": float(x), "n": int(k), "label": "yes" if k % 2 else "no",
                         "note": None if k == 3 else "?" if k < 5 else "a"}) for x, k in pairs]
    data = ("\n".join(lines) + "\n").encode()
    reader = RowReader(io.BytesIO(data), name="t.jsonl")
    parts = list(reader.batches(50, blocks=True))
    assert [type(p).__name__ for p in parts] == ["list"] + ["RowBlock"] * 7
    assert reader.noted_missing["note"]["?"] == sum(1 for line in lines if '"?"' in line)


def _arrow_lines(monkeypatch) -> list[int]:
    """The number of lines of each call to pyarrow's split, as they happen."""
    calls: list[int] = []
    original = blocks._parse_with_arrow

    def counted(data, n_lines, *args, **kwargs):
        calls.append(n_lines)
        return original(data, n_lines, *args, **kwargs)

    monkeypatch.setattr(blocks, "_parse_with_arrow", counted)
    return calls


def test_an_odd_row_ahead_does_not_have_every_span_parsed_again(monkeypatch):
    """A span that needs the row reader somewhere is parsed again a micro-batch at a time up to its
    end, not tried whole again at every micro-batch before the odd row: the lines parsed stay in
    proportion to the file."""
    pytest.importorskip("pyarrow")
    import pyarrow  # noqa: F401 - loaded, so blocks may use it

    calls = _arrow_lines(monkeypatch)
    lines = [f"{i},{i}.5" for i in range(20_000)]
    lines[6000] = "6000,NA"  # a token the bulk parser leaves to the row reader
    data = ("a,b\n" + "\n".join(lines) + "\n").encode()
    kinds = _same(data, batch=100)
    assert kinds.count("RowBlock") >= 190
    assert sum(calls) < 3 * len(lines)


def test_spans_of_long_lines_are_cut_at_a_few_megabytes(monkeypatch):
    """Memory: a span holds up to SPAN_BYTES of lines (but never fewer lines than a micro-batch)."""
    pytest.importorskip("pyarrow")
    import pyarrow  # noqa: F401 - loaded, so blocks may use it

    from ipfi_cli.io import batching

    monkeypatch.setattr(batching, "SPAN_BYTES", 1 << 18)
    calls = _arrow_lines(monkeypatch)
    width = 100
    lines = [",".join(f"{(i * width + j) % 997}.25" for j in range(width)) for i in range(3000)]
    data = (",".join(f"c{j}" for j in range(width)) + "\n" + "\n".join(lines) + "\n").encode()
    line_bytes = len(lines[0]) + 1
    _same(data, batch=50)
    assert len(calls) >= 5 and max(calls) * line_bytes <= batching.SPAN_BYTES + line_bytes
    calls.clear()
    _same(data, batch=1000)  # a micro-batch longer than SPAN_BYTES: its lines in one call
    assert max(calls) >= 1000 - 1
