"""Property-based fuzzing of the CSV/JSONL readers with messy and hostile input.

Each test generates a table and the exact bytes a messy producer could write for it
(quoted fields with commas, quotes and newlines, a UTF-8 BOM, CRLF, blank lines, odd but
legal header names, very long fields, invalid UTF-8, wrong field counts, a column that
changes type mid-stream, JSONL non-object lines), then checks the reader against an
oracle written from the documented rules: every good row comes out with exactly the
generated values, every bad row comes out as an error naming its row, line and (when
one column is to blame) column, and nothing raises but :class:`InputError` for the file
as a whole. The bytes are also fed in random small chunks, as a slow pipe delivers them:
the rows must not depend on the chunking.
"""

from __future__ import annotations

import io
import math
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import assume, given, note
from hypothesis import strategies as st

from ipfi_cli.errors import InputError
from ipfi_cli.io import blocks
from ipfi_cli.io import lines as line_buffer
from ipfi_cli.io.readers import RowReader
from ipfi_cli.io.values import DEFAULT_NA_VALUES, parse_value

from .conftest import fuzz

BAD_BYTE = "\ue000"  # stands for an invalid UTF-8 byte (0xff) until the text is encoded
BOM = b"\xef\xbb\xbf"


# -- helpers ------------------------------------------------------------------------------------
class Chunked(io.RawIOBase):
    """A stream without a file descriptor that hands out its bytes in the given chunk sizes."""

    def __init__(self, data: bytes, sizes: list[int]) -> None:
        self.data, self.sizes, self.pos, self.calls = data, sizes or [1 << 16], 0, 0

    def readable(self) -> bool:
        return True

    def read1(self, n: int = -1) -> bytes:
        size = self.sizes[self.calls % len(self.sizes)]
        self.calls += 1
        out = self.data[self.pos:self.pos + min(size, n if n > 0 else size)]
        self.pos += len(out)
        return out

    read = read1

    def fileno(self) -> int:
        raise OSError("no descriptor")


@pytest.fixture(scope="module", params=["rows", "blocks"], autouse=True)
def reading(request):
    """Every test reads each input twice over: row by row, and in micro-batches of 2 with CSV lines
    parsed in bulk where they allow it (pyarrow's split even for a few lines, when installed): the
    oracle holds for both."""
    with pytest.MonkeyPatch.context() as patch:
        if request.param == "blocks":
            patch.setattr(blocks, "_ARROW_MIN_ROWS", 1)
        READING[0] = request.param
        yield request.param
        READING[0] = "rows"


READING = ["rows"]


def read_all(data: bytes, sizes: list[int] | None = None, format: str | None = None) -> tuple[Any, list[Any]]:
    """``(columns, rows)`` with rows as ``(number, line, values | error)``; or ``(InputError, [])``."""
    stream = Chunked(data, sizes) if sizes is not None else io.BytesIO(data)
    reader = RowReader(stream, name="in", format=format, delimiter=",")  # sniffing: tests/io
    try:
        columns = reader.columns
        read = reader if READING[0] == "rows" else (row for part in reader.batches(2, blocks=True) for row in part)
        rows = [(r.number, r.line, r.values if r.error is None else r.error) for r in read]
    except InputError as error:
        return error, []
    return columns, rows


def same_value(a: Any, b: Any) -> bool:
    """Equal values of the same kind (text is never equal to a number); NaN equals NaN."""
    if isinstance(a, float) and isinstance(b, float) and math.isnan(a) and math.isnan(b):
        return True
    if isinstance(a, str) or isinstance(b, str):
        return type(a) is type(b) and a == b
    return a == b


def same_rows(got: list[Any], expected: list[Any]) -> bool:
    if len(got) != len(expected):
        return False
    for (n, line, values), (n2, line2, values2) in zip(got, expected):
        if (n, line) != (n2, line2):
            return False
        if isinstance(values2, dict):
            if not isinstance(values, dict) or list(values) != list(values2):
                return False
            if not all(same_value(values[k], values2[k]) for k in values2):
                return False
        elif not isinstance(values, InputError):
            return False
    return True


def is_number_text(text: str) -> bool:
    return type(parse_value(text)) is not str


def is_missing_text(text: str) -> bool:
    """An empty field or a missing-value token (``NA``, ``nan``, ``?``...)."""
    value = parse_value(text)
    return isinstance(value, float) and math.isnan(value)


# -- CSV: strategies and oracle ----------------------------------------------------------------
# (a first line `sep=;` is Excel's, naming the separator: no header of one such column)
# (a NUL byte in the first KiB makes the input binary data, refused as a whole: no NUL in a name)
names = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters=BAD_BYTE + "\x00"),
                min_size=1, max_size=8).map(str.strip).filter(bool).filter(lambda n: not n.lower().startswith("sep="))
plain_text = st.text(alphabet=st.characters(exclude_categories=("Cs",), exclude_characters=BAD_BYTE + "\x00"),
                     min_size=1, max_size=12)
text_values = plain_text.filter(lambda s: not is_number_text(s))
number_texts = st.one_of(
    st.integers(-10**20, 10**20).map(str),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
    st.sampled_from(["0", "-0", "+3", "1e3", "-2.5E-3", ".5", "5.", "nan", "inf", "-inf", "1e400"]),
)
numberlike_text = st.sampled_from(["07", "1.50", " 7 ", "1e3", "nan", "-0"])  # must stay text in a text column


@st.composite
def csv_cells(draw: Any, kind: str) -> str:
    """One cell's text for a column of ``kind``; sometimes missing, sometimes a type clash."""
    roll = draw(st.integers(0, 19))
    if roll == 0:
        return ""
    if kind == "number":
        return draw(text_values) if roll == 1 else draw(number_texts)
    return draw(number_texts) if roll == 1 else draw(numberlike_text) if roll == 2 else draw(text_values)


@dataclass
class CsvCase:
    header: list[str]
    records: list[Any] = field(default_factory=list)  # list of cells, or "blank"
    crlf: bool = False
    bom: bool = False
    final_newline: bool = True
    quote_all: bool = False


@st.composite
def csv_cases(draw: Any) -> CsvCase:
    header = draw(st.lists(names, min_size=1, max_size=5, unique=True))
    kinds = [draw(st.sampled_from(["number", "text"])) for _ in header]
    case = CsvCase(header, crlf=draw(st.booleans()), bom=draw(st.booleans()), final_newline=draw(st.booleans()),
                   quote_all=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 12))):
        roll = draw(st.integers(0, 29))
        if roll == 0:
            case.records.append("blank")
            continue
        cells = [draw(csv_cells(kind)) for kind in kinds]
        if roll == 1:  # a wrong number of fields
            cells = cells + ["extra"] if draw(st.booleans()) or len(cells) == 1 else cells[:-1]
        elif roll == 2:  # invalid UTF-8 somewhere in the row
            i = draw(st.integers(0, len(cells) - 1))
            cells[i] = cells[i] + BAD_BYTE
        elif roll == 3:  # a very long field (beyond csv's 128 KiB field limit, or just long)
            # (after a line that cannot be parsed, reading resumes at the next line: so no field
            # after it holds a line end, which would start a record of its own)
            i = draw(st.integers(0, len(cells) - 1))
            cells = [c.replace("\n", " ").replace("\r", " ") for c in cells]
            cells[i] = "L" * draw(st.sampled_from([5_000, 200_000]))
        case.records.append(cells)
    return case


def quote(cell: str, always: bool) -> str:
    if always or any(c in cell for c in ',"\r\n') or (cell != cell.strip()):
        return '"' + cell.replace('"', '""') + '"'
    return cell


def render(case: CsvCase) -> tuple[bytes, list[int]]:
    """The file's bytes and the 1-based start line of each record (``0`` for blank lines)."""
    end = "\r\n" if case.crlf else "\n"
    parts = [",".join(quote(h, case.quote_all) for h in case.header) + end]
    starts = []
    line = 1 + parts[0].count("\n")  # a quoted header name may hold newlines
    for record in case.records:
        if record == "blank":
            text = end
            starts.append(0)
        else:
            # a lone empty cell must be quoted, or the line is blank
            text = ",".join(quote(c, case.quote_all or (len(record) == 1 and c == "")) for c in record) + end
            starts.append(line)
        parts.append(text)
        line += text.count("\n")
    body = "".join(parts)
    if not case.final_newline and body.endswith(end) and case.records and case.records[-1] != "blank":
        body = body[: -len(end)]
    data = body.encode("utf-8").replace(BAD_BYTE.encode("utf-8"), b"\xff")
    return (BOM + data if case.bom else data), starts


def csv_oracle(case: CsvCase, starts: list[int]) -> list[Any]:
    """The rows the documented rules give: ``(number, line, values)`` or ``(number, line, "error")``."""
    kinds: dict[str, str] = {}
    out: list[Any] = []
    number = 0
    for record, line in zip(case.records, starts):
        if record == "blank":
            continue
        if len(case.header) > 1 and not any(record):  # every field empty: a blank line
            continue
        number += 1
        if any(BAD_BYTE in c for c in record) or len(record) != len(case.header) \
                or any(len(c) > 131072 for c in record):
            out.append((number, line, "error"))
            continue
        values: dict[str, Any] = {}
        new_kinds = dict(kinds)
        bad = False
        for name, cell in zip(case.header, record):
            if is_missing_text(cell):  # missing: never fixes the column's kind
                values[name] = float("nan")
                continue
            kind = new_kinds.get(name)
            if kind is None:
                kind = new_kinds[name] = "number" if is_number_text(cell) else "text"
            if kind == "text":
                values[name] = cell
            elif is_number_text(cell):
                values[name] = parse_value(cell)
            else:
                bad = True
                break
        if bad:
            out.append((number, line, "error"))
            continue
        kinds = new_kinds
        out.append((number, line, values))
    return out


def check_csv(case: CsvCase, data: bytes, starts: list[int], got: tuple[Any, list[Any]]) -> None:
    columns, rows = got
    assert columns == case.header, columns
    expected = csv_oracle(case, starts)
    note(f"expected {expected!r}")
    note(f"got {rows!r}")
    assert len(rows) == len(expected)
    for (n, line, value), (n2, line2, value2) in zip(rows, expected):
        assert (n, line) == (n2, line2)
        if value2 == "error":
            assert isinstance(value, InputError), (n, value)
            message = str(value)
            assert "\n" not in message and f"row {n} (line {line})" in message
        else:
            assert isinstance(value, dict), (n, str(value))
            assert list(value) == list(value2)
            for k in value2:
                assert same_value(value[k], value2[k]), (n, k, value[k], value2[k])


@fuzz(150)
@given(csv_cases(), st.lists(st.integers(1, 9), max_size=6))
def test_csv_rows_follow_the_documented_rules_in_any_chunking(case, sizes):
    data, starts = render(case)
    note(f"data {data[:2000]!r}")
    whole = read_all(data, format="csv")
    check_csv(case, data, starts, whole)
    chunked = read_all(data, sizes, format="csv")
    assert chunked[0] == whole[0]
    assert same_rows(chunked[1], [(n, line, v if isinstance(v, dict) else v) for n, line, v in whole[1]])


# -- JSONL --------------------------------------------------------------------------------------
# (a nested value is no junk: the reader keeps it, the run refuses it only in a column it uses)
json_junk = st.sampled_from([b"[1, 2]", b'"text"', b"3", b"null", b"true", b'{"a": ', b"{'a': 1}", b"\xff\xfe{}",
                             b'{"k": 1e999}', b"NaN"])


@dataclass
class JsonCase:
    keys: list[str]
    lines: list[Any] = field(default_factory=list)  # dict, bytes (junk) or "blank"
    crlf: bool = False
    bom: bool = False


@st.composite
def jsonl_cases(draw: Any) -> JsonCase:
    keys = draw(st.lists(names, min_size=1, max_size=4, unique=True))
    kinds = {k: draw(st.sampled_from(["int", "float", "text", "bool"])) for k in keys}
    values = {"int": st.integers(-2**63, 2**63 - 1), "float": st.floats(allow_nan=False, allow_infinity=False),
              "text": plain_text, "bool": st.booleans()}
    case = JsonCase(keys, crlf=draw(st.booleans()), bom=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 12))):
        roll = draw(st.integers(0, 19))
        if roll == 0:
            case.lines.append("blank")
        elif roll == 1:
            case.lines.append(draw(json_junk))
        else:
            order = draw(st.permutations(keys))
            present = order[:draw(st.integers(1, len(order)))] if roll == 2 else order
            obj = {}
            for k in present:
                if draw(st.integers(0, 9)) == 0:
                    obj[k] = None
                elif roll == 3 and k == present[0]:  # a value of another type
                    obj[k] = draw(values[draw(st.sampled_from(sorted(values)))])
                else:
                    obj[k] = draw(values[kinds[k]])
            case.lines.append(obj)
    return case


def render_jsonl(case: JsonCase) -> bytes:
    import orjson

    end = b"\r\n" if case.crlf else b"\n"
    parts = []
    for item in case.lines:
        if item == "blank":
            parts.append(b"  " + end)
        elif isinstance(item, bytes):
            parts.append(item + end)
        else:
            parts.append(orjson.dumps(item) + end)
    data = b"".join(parts)
    return BOM + data if case.bom else data


def jsonl_oracle(case: JsonCase) -> list[Any]:
    kinds: dict[str, str] = {}
    out = []
    number = 0
    for line, item in enumerate(case.lines, 1):
        if item == "blank":
            continue
        number += 1
        if isinstance(item, bytes):  # every junk line is a bad row
            out.append((number, line, "error"))
            continue
        new_kinds = dict(kinds)
        values = {}
        bad = False
        for k, v in item.items():
            # the documented rule: null, and a string that is a missing-value token (spaces aside), are missing
            if v is None or isinstance(v, str) and (v in DEFAULT_NA_VALUES or (v.strip() and v.strip() in
                                                                                 DEFAULT_NA_VALUES)):
                values[k] = float("nan")
                continue
            kind = "text" if isinstance(v, str) else "number"
            if new_kinds.setdefault(k, kind) != kind:
                bad = True
                break
            values[k] = v
        if bad:
            out.append((number, line, "error"))
            continue
        kinds = new_kinds
        out.append((number, line, values))
    return out


@fuzz(150)
@given(jsonl_cases(), st.lists(st.integers(1, 9), max_size=6))
def test_jsonl_rows_follow_the_documented_rules_in_any_chunking(case, sizes):
    data = render_jsonl(case)
    note(f"data {data!r}")
    expected = jsonl_oracle(case)
    note(f"expected {expected!r}")
    for got in (read_all(data, format="jsonl"), read_all(data, sizes, format="jsonl")):
        columns, rows = got
        note(f"got {rows!r}")
        first_good = next((v for _, _, v in expected if isinstance(v, dict)), None)
        assert columns == (list(first_good) if first_good is not None else [])
        assert len(rows) == len(expected)
        for (n, line, value), (n2, line2, value2) in zip(rows, expected):
            assert (n, line) == (n2, line2)
            if value2 == "error":
                assert isinstance(value, InputError), (n, value)
                assert "\n" not in str(value) and f"row {n} (line {line})" in str(value)
            else:
                assert isinstance(value, dict), (n, str(value))
                assert list(value) == list(value2)
                assert all(same_value(value[k], value2[k]) for k in value2)


# -- anything at all ----------------------------------------------------------------------------
hostile_bytes = st.one_of(
    st.binary(max_size=300),
    st.lists(st.sampled_from([b"a", b",", b'"', b"\n", b"\r", b"\r\n", b"1", b"x", b"{", b"}", b":", b"\xff",
                              b"\xef\xbb\xbf", b"\x00", b"\x1f\x8b", b" ", b"nan", b"[", b"]", b'"k"']),
             max_size=80).map(b"".join),
)


@fuzz(300)
@given(hostile_bytes, st.sampled_from([None, "csv", "jsonl"]), st.lists(st.integers(1, 5), max_size=4))
def test_any_bytes_give_rows_or_one_line_errors_never_a_crash(data, format, sizes):
    for got in (read_all(data, format=format), read_all(data, sizes, format=format)):
        columns, rows = got
        if isinstance(columns, InputError):
            assert "\n" not in str(columns)
            continue
        numbers = [n for n, _, _ in rows]
        assert numbers == list(range(1, len(rows) + 1))
        for n, _line, value in rows:
            if isinstance(value, InputError):
                assert "\n" not in str(value) and f"row {n}" in str(value)
            else:
                assert isinstance(value, dict)


@fuzz(40)
@given(st.integers(2, 40), st.lists(st.integers(1, 3), min_size=1, max_size=3))
def test_bom_split_across_reads_is_still_removed(n_rows, sizes):
    data = BOM + b"a,b\n" + b"".join(b"%d,x\n" % i for i in range(n_rows))
    columns, rows = read_all(data, sizes)
    assert columns == ["a", "b"] and len(rows) == n_rows


def test_a_line_without_end_is_refused_beyond_the_cap(monkeypatch):
    monkeypatch.setattr(line_buffer, "MAX_LINE_BYTES", 1000)
    columns, rows = read_all(b"a,b\n1,2\n" + b"9" * 5000)
    assert columns == ["a", "b"] and len(rows) == 2 and rows[0][2] == {"a": 1, "b": 2}
    assert isinstance(rows[1][2], InputError) and "longer than" in str(rows[1][2])
    error, _ = read_all(b"x" * 5000)
    assert isinstance(error, InputError) and "longer than" in str(error)


@fuzz(100)
@given(csv_cases())
def test_csv_is_sniffed_as_csv_even_when_a_name_starts_with_a_brace(case):
    case.header[0] = "{" + case.header[0]
    data, _ = render(case)
    first = data.lstrip(BOM).split(b"\n")[0].strip()
    assume(not first.endswith(b"}"))  # '{x}' alone is a JSON-object-like line: ambiguous
    reader = RowReader(io.BytesIO(data))
    assert reader.format == "csv"


def test_carriage_returns_only_give_a_clear_message():
    error, _ = read_all(b"a,b\r1,2\r3,4\r")
    assert isinstance(error, InputError) and "carriage return" in str(error) and "universal" not in str(error)
    columns, rows = read_all(b"a,b\n1,x\ry\n3,4\n")
    assert isinstance(rows[0][2], InputError) and "carriage return" in str(rows[0][2])
    assert rows[1][2] == {"a": 3, "b": 4}


def test_an_unclosed_quote_is_named():
    columns, rows = read_all(b'a,b\n1,2\n"open,3\n4,5\n')
    assert rows[0][2] == {"a": 1, "b": 2}
    assert isinstance(rows[1][2], InputError) and "quote" in str(rows[1][2]) and "row 2 (line 3)" in str(rows[1][2])


def test_a_bad_row_does_not_fix_a_column_type():
    # row 1 is bad (its second value is text where 'a' held numbers), so its first value must not make 'k' a
    # text column
    columns, rows = read_all(b'{"a": 1}\n{"k": "s", "a": "x"}\n{"a": 2, "k": 5}\n', format="jsonl")
    assert isinstance(rows[1][2], InputError) and rows[2][2] == {"a": 2, "k": 5}
    columns, rows = read_all(b"a,b,c\n1,,7\n2,5,z\n3,text,8\n")
    # row 2 is bad ('c' held numbers), so its b = 5 must not make 'b' a number column
    assert isinstance(rows[1][2], InputError) and rows[1][2].column == "c"
    assert rows[2][2] == {"a": 3, "b": "text", "c": 8}
