"""Property-based fuzzing of the whole ``ipfi explain`` command with messy input.

A small table is generated with the mess real streams have (missing values, infinities,
text in a number column, a label never seen before, a missing or text label, wrong field
counts, invalid UTF-8, blank lines, CRLF, a BOM, odd extra columns, JSONL non-object lines
and missing keys) and run through the command in-process. An oracle written from the
documented rules says which rows are good and which is the first bad one; then:

* exit 0: the trace records are exactly the core's numbers (``IPFIEstimator.explain_one``,
  and ``learn_one`` with ``--learn``) on the good rows, with their row numbers; stderr is
  empty (``-q``): no warnings leak;
* exit 1: stderr is one line ``ipfi: error: ...`` naming the row (and the column when one
  is to blame), and the records written before are a prefix of the good rows' records;
* never a traceback, never an "unexpected" error, never other exit codes.
"""

from __future__ import annotations

import copy
import csv
import io
import math
import pickle
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import joblib
import numpy as np
from hypothesis import example, given, note
from hypothesis import strategies as st
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.io.values import DEFAULT_NA_VALUES, parse_value

from .conftest import fuzz
from .test_fuzz_readers import BAD_BYTE, BOM, is_number_text, names, quote

#: a NUL byte in the first KiB makes the input binary data (ipfi_cli.io.sources), refused as a whole
BINARY_PROBE = 1024

INPUTS = ["a", "b"]
TARGET = "y"
SEED = 11
REPEATS = 2


# -- generated tables ----------------------------------------------------------------------------
number_cell = st.one_of(st.floats(-3, 3, allow_nan=False).map(lambda v: repr(round(v, 3))),
                        st.integers(-3, 3).map(str))
input_cell = st.one_of(number_cell, number_cell, number_cell, number_cell, st.just(""),
                       st.sampled_from(["inf", "-inf", "1e400", "x", "oops, quoted", "nan", "1e39"]))
label_cell = st.one_of(st.sampled_from(["0", "1"]), st.sampled_from(["0", "1"]), st.sampled_from(["", "7", "maybe"]))


@dataclass
class Table:
    header: list[str]
    rows: list[Any] = field(default_factory=list)  # dict column -> cell text; "blank"; ("count", cells); ("utf8", dict)
    crlf: bool = False
    bom: bool = False


@st.composite
def tables(draw: Any) -> Table:
    extras = draw(st.lists(names.filter(lambda n: n not in ("a", "b", "y", "row")), max_size=2, unique=True))
    header = draw(st.permutations(INPUTS + [TARGET] + extras))
    table = Table(list(header), crlf=draw(st.booleans()), bom=draw(st.booleans()))
    for _ in range(draw(st.integers(0, 14))):
        roll = draw(st.integers(0, 24))
        cells = {"a": draw(input_cell), "b": draw(input_cell), "y": draw(label_cell)}
        for extra in extras:
            cells[extra] = draw(st.one_of(number_cell, st.text(max_size=5).filter(lambda s: BAD_BYTE not in s)))
        if roll == 0:
            table.rows.append("blank")
        elif roll == 1:
            table.rows.append(("count", [cells[h] for h in header] + ["surplus"]))
        elif roll == 2:
            table.rows.append(("utf8", cells))
        else:
            table.rows.append(cells)
    return table


def render_csv(table: Table) -> tuple[bytes, list[int]]:
    end = "\r\n" if table.crlf else "\n"
    parts = [",".join(quote(h, False) for h in table.header) + end]
    starts, line = [], 1 + parts[0].count("\n")
    for row in table.rows:
        if row == "blank":
            text = end
            starts.append(0)
        else:
            if isinstance(row, tuple) and row[0] == "count":
                cells = row[1]
            else:
                values = row[1] if isinstance(row, tuple) else row
                cells = [values[h] for h in table.header]
                if isinstance(row, tuple):  # invalid UTF-8 in the first cell
                    cells = [cells[0] + BAD_BYTE] + cells[1:]
            text = ",".join(quote(c, len(cells) == 1 and c == "") for c in cells) + end
            starts.append(line)
        parts.append(text)
        line += text.count("\n")
    data = "".join(parts).encode().replace(BAD_BYTE.encode(), b"\xff")
    return (BOM + data if table.bom else data), starts


# -- the oracle ----------------------------------------------------------------------------------
@dataclass
class Expected:
    inputs: list[str]  # the model's inputs, in the traces' order
    good: list[tuple[int, dict[str, Any], Any]]  # (row number, values, label) of the rows explained
    failure: tuple[int, str | None] | None  # (row, column) of the first bad row that stops the run


def missing_text(cell: str) -> bool:
    value = parse_value(cell)
    return isinstance(value, float) and math.isnan(value)


def missing_json(value: Any) -> bool:
    """``null``, or a string that is a missing-value token (surrounding spaces ignored)."""
    return value is None or (isinstance(value, str) and (value == "" or (bool(value.strip())
                                                                         and value.strip() in DEFAULT_NA_VALUES)))


def oracle(table: Table, learn: bool, skip: bool) -> Expected:
    # the tree names its inputs; the river model takes every column but the target
    inputs = [h for h in table.header if h != TARGET] if learn else INPUTS
    kinds: dict[str, str] = {}
    good: list[tuple[int, dict[str, Any], Any]] = []
    number = 0
    for row in table.rows:
        if row == "blank":
            continue
        number += 1
        problem: tuple[int, str | None] | None = None
        if isinstance(row, tuple):
            problem = (number, None)
        else:
            values: dict[str, Any] = {}
            learned = dict(kinds)
            for name in table.header:
                cell = row[name]
                if missing_text(cell):  # empty or a missing-value token: never fixes a kind
                    values[name] = math.nan
                    continue
                kind = learned.setdefault(name, "number" if is_number_text(cell) else "text")
                if kind == "text":
                    values[name] = cell
                elif is_number_text(cell):
                    values[name] = parse_value(cell)
                else:
                    problem = (number, name)
                    break
            if problem is None:
                kinds = learned
                label = values[TARGET]
                if isinstance(label, float) and math.isnan(label):
                    problem = (number, TARGET)
                else:
                    if not learn and isinstance(label, str) and label in ("0", "1"):
                        label = int(label)  # the tree's classes are 0 and 1; river's model knows none
                    for name in inputs:
                        v = values[name]
                        if isinstance(v, float) and (math.isinf(v) or (learn and math.isnan(v))):
                            problem = (number, name)
                            break
        if problem is None:
            good.append((number, {c: values[c] for c in inputs}, label))
        elif not skip:
            return Expected(inputs, good, problem)
    return Expected(inputs, good, None)


def core_records(model_path: Path, learn: bool, inputs: list[str], good: list[Any], every: int) -> list[list[float]]:
    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import as_predictor

    model = pickle.loads(model_path.read_bytes()) if learn else joblib.load(model_path)
    predictor = as_predictor(copy.deepcopy(model))
    explainer = IPFIEstimator(predictor, inputs, n_repeats=REPEATS, seed=SEED)
    records = []
    for i, (number, values, label) in enumerate(good, 1):
        estimates = explainer.explain_one(values, label)
        if learn:
            predictor.learn_one(values, label)
        if i % every == 0 or i == len(good):
            records.append([float(number), *estimates.tolist()])
    return records


def all_wrong(model_path: Path, learn: bool, inputs: list[str], good: list[Any]) -> bool:
    """Every explained row (all but the first) has zero-one loss 1: the documented rule says the
    run cannot measure an importance (exit 1, one line), whatever the traces say."""
    from ipfi_cli.models import as_predictor

    model = pickle.loads(model_path.read_bytes()) if learn else joblib.load(model_path)
    predictor = as_predictor(copy.deepcopy(model))
    from ipfi_cli.core.losses import Output

    wrong = []
    for i, (_, values, label) in enumerate(good):
        if i > 0:
            predicted = predictor.predict_records([dict(values)], Output.LABEL, None)[0]
            wrong.append(predicted != label)
        if learn:
            predictor.learn_one(values, label)
    return bool(wrong) and all(wrong)


def refused_by_tree(value: Any) -> bool:
    """What scikit-learn's tree refuses: text that does not convert to a float, and values beyond
    the 32-bit float range (it accepts NaN, and converts number-like text such as "1.5")."""
    try:
        number = float(value)
    except (TypeError, ValueError):
        return True
    return abs(number) > float(np.finfo(np.float32).max)


def parse_traces(text: str, fmt: str, inputs: list[str]) -> list[list[float]]:
    import orjson

    if fmt == "csv":
        rows = list(csv.reader(io.StringIO(text)))
        assert rows and rows[0] == ["row", *inputs], rows[:1]
        return [[float(v) if v != "" else math.nan for v in r] for r in rows[1:]]
    out = []
    for line in text.split("\n")[:-1]:  # (not splitlines: a name may hold U+0085 or U+2028)
        record = orjson.loads(line)
        assert list(record) == ["row", *inputs]
        out.append([math.nan if v is None else float(v) for v in record.values()])
    return out


def same_records(a: list[list[float]], b: list[list[float]]) -> bool:
    return len(a) == len(b) and all(
        len(x) == len(y) and all(u == v or (math.isnan(u) and math.isnan(v)) for u, v in zip(x, y))
        for x, y in zip(a, b))


def run_command(data: bytes, model: Path, learn: bool, skip: bool, every: int, fmt: str,
                input_path: Path | None = None) -> Any:
    args = ["explain", "-m", str(model), "-t", TARGET, "-M", str(REPEATS), "--seed", str(SEED), "-q",
            "--every", str(every), "-F", fmt, "--on-bad-row", "skip" if skip else "fail"]
    if learn:
        args.append("--learn")
    if input_path is not None:
        input_path.write_bytes(data)
        args.append(str(input_path))
        return CliRunner().invoke(app, args, catch_exceptions=False)
    return CliRunner().invoke(app, args, input=data, catch_exceptions=False)


def check(result: Any, expected: Expected, model: Path, learn: bool, every: int, fmt: str,
          text_in: dict[int, dict[str, Any]], skip: bool = False) -> None:
    note(f"exit {result.exit_code}; stderr {result.stderr!r}; stdout {result.stdout[:3000]!r}")
    assert "Traceback" not in result.stderr and "error: unexpected" not in result.stderr
    assert result.exit_code in (0, 1)
    lines = result.stderr.strip().splitlines()
    inputs = expected.inputs
    if not inputs:  # JSONL without one good object and a model that does not name its inputs
        assert result.stdout == ""
        assert result.exit_code == 1 and len(lines) == 1 and lines[0].startswith("ipfi: error: "), lines
        if expected.failure is None:
            assert "no row was explained" in lines[0]
        else:
            assert f"row {expected.failure[0]} (line " in lines[0]
        return
    # the static tree refuses text that is not a number and numbers beyond 32-bit floats: with
    # --on-bad-row skip such a row is skipped alone; else the run stops at it, naming the row
    # (and, where it names one, a column holding such a value)
    good, failure = expected.good, expected.failure
    if not learn:
        refused = [n for n, values, _ in good if any(refused_by_tree(values[c]) for c in inputs)]
        if skip:
            good = [g for g in good if g[0] not in refused]
        elif refused and (failure is None or refused[0] < failure[0]):
            assert result.exit_code == 1
            assert len(lines) == 1 and lines[0].startswith("ipfi: error: "), lines
            assert f"row {refused[0]} (line " in lines[0], lines[0]
            found = re.search(r"row (\d+) \(line \d+\), column '(\w)'", lines[0])
            if found:
                assert refused_by_tree(text_in[int(found.group(1))].get(found.group(2))), lines[0]
            written = parse_traces(result.stdout, fmt, inputs)
            full = core_records(model, learn, inputs, [g for g in good if g[0] < refused[0]], every)
            assert same_records(written, full)
            return
    if failure is None and not learn and good and not any(label in (0, 1) for _, _, label in good):
        # labels none of which is a class of the tree: refused before any record (rows are held until one matches)
        assert result.exit_code == 1 and len(lines) == 1, lines
        assert "no label is one of the model's classes" in lines[0], lines[0]
        assert parse_traces(result.stdout, fmt, inputs) == []
        return
    if failure is None and len(good) < 2:  # nothing explained is not success
        assert result.exit_code == 1
        assert lines[-1].startswith("ipfi: error: ") and "no row was explained" in lines[-1], lines
        return
    full = core_records(model, learn, inputs, good, every)
    if failure is None and all_wrong(model, learn, inputs, good):
        assert result.exit_code == 1 and len(lines) == 1, lines
        assert "has the maximal zero-one loss" in lines[0], lines[0]
        assert same_records(parse_traces(result.stdout, fmt, inputs), full)  # every record written stays
        return
    if failure is None:
        assert result.exit_code == 0, result.stderr
        assert result.stderr == ""  # -q: no notes or warnings
        assert same_records(parse_traces(result.stdout, fmt, inputs), full)
        return
    assert result.exit_code == 1
    assert len(lines) == 1 and lines[0].startswith("ipfi: error: "), lines
    row, column = failure
    assert f"row {row} (line " in lines[0], (lines[0], failure)
    if column is not None:
        assert f"column {column!r}" in lines[0], (lines[0], failure)
    written = parse_traces(result.stdout, fmt, inputs)
    assert same_records(written, [r for r in full if r[0] < row][:len(written)])


@fuzz(100)
@given(tables(), st.booleans(), st.booleans(), st.sampled_from([1, 1, 3]), st.sampled_from(["csv", "jsonl"]))
# a NUL byte in an extra column's cell of the first row (found by this test): binary data, refused whole
@example(Table(["a", "b", "y", "0", "00"], [("count", ["0.0", "0.0", "0", "0.0", "\x00", "surplus"])]),
         False, False, 1, "csv")
def test_explain_csv_works_or_names_the_row(models, table, learn, skip, every, fmt):
    data, _ = render_csv(table)
    note(f"input {data!r}")
    expected = oracle(table, learn, skip)
    note(f"expected {expected}")
    model = models["learn" if learn else "static"]
    result = run_command(data, model, learn, skip, every, fmt)
    nul = data.find(b"\x00", 0, BINARY_PROBE)
    if nul >= 0:  # binary data, refused as a whole before any row (as the readers' fuzz oracle has it)
        note(f"exit {result.exit_code}; stderr {result.stderr!r}")
        assert result.exit_code == 1 and result.stdout == ""
        assert result.stderr.startswith(f"ipfi: error: <stdin>: binary data (a NUL byte at byte {nul + 1}), not CSV "
                                        "or JSONL text") and result.stderr.count("\n") == 1, result.stderr
        return
    check(result, expected, model, learn, every, fmt, {n: v for n, v, _ in expected.good}, skip)


# -- JSONL input ---------------------------------------------------------------------------------
json_input = st.one_of(st.floats(-3, 3, allow_nan=False).map(lambda v: round(v, 3)), st.integers(-3, 3),
                       st.floats(-3, 3, allow_nan=False), st.none(), st.sampled_from(["x", "1.5", True]))
json_label = st.one_of(st.sampled_from([0, 1, 0, 1, "1", None, 7, "maybe", 1.0]))
json_junk = st.sampled_from([b"[1, 2]", b"null", b'"text"', b'{"a": ', b'{"a": 1e999, "b": 1, "y": 0}',
                             b'{"a": {"n": 1}, "b": 1, "y": 0}', b"\xff{}"])


@st.composite
def jsonl_tables(draw: Any) -> list[Any]:
    lines: list[Any] = []
    for _ in range(draw(st.integers(0, 14))):
        roll = draw(st.integers(0, 19))
        if roll == 0:
            lines.append(b"")
        elif roll == 1:
            lines.append(draw(json_junk))
        else:
            obj = {"a": draw(json_input), "b": draw(json_input), "y": draw(json_label)}
            if draw(st.integers(0, 4)) == 0:
                obj["extra"] = draw(st.one_of(st.integers(-2**63, 2**63 - 1), st.text(max_size=4)))
            keys = draw(st.permutations(list(obj)))
            if roll == 2:  # a key left out
                keys = keys[1:]
            lines.append({k: obj[k] for k in keys})
    return lines


def jsonl_oracle(lines: list[Any], learn: bool, skip: bool) -> Expected:
    inputs = INPUTS
    if learn:  # the river model's inputs: the keys of the first object the reader accepts
        first = next((item for item in lines if isinstance(item, dict)), None)  # (never a type clash)
        inputs = [k for k in first if k != TARGET] if first is not None else []
    kinds: dict[str, str] = {}
    good = []
    number = 0
    for item in lines:
        if item == b"":
            continue
        number += 1
        problem = None
        if isinstance(item, bytes):
            problem = (number, "a" if b'"n"' in item else None)
        else:
            learned = dict(kinds)
            item = {k: None if missing_json(v) else v for k, v in item.items()}
            for k, v in item.items():
                if v is None:
                    continue
                kind = "text" if isinstance(v, str) else "number"
                if learned.setdefault(k, kind) != kind:
                    problem = (number, k)
                    break
            if problem is None:
                kinds = learned
                label = item.get(TARGET)
                if label is None:
                    problem = (number, TARGET)
                else:
                    if not learn:  # the tree's classes are 0 and 1; river's model knows none
                        label = {"1": 1, 1.0: 1}.get(label, label)
                    for name in inputs:
                        # a key left out is a missing value for the tree (it names its inputs, takes NaN); the
                        # river model learns from none, and takes the first object's keys by name
                        v = item.get(name)
                        if v is None and learn:
                            problem = (number, name)
                            break
        if problem is None and learn and isinstance(item, dict) and set(item) - {*inputs, TARGET}:
            # a key the first object lacked: never a bad row to skip (every later row would lose it)
            return Expected(inputs, good, (number, sorted(set(item) - {*inputs, TARGET})[0]))
        if problem is None:
            values = {c: math.nan if item.get(c) is None else item[c] for c in inputs}
            good.append((number, values, label))
        elif not skip:
            return Expected(inputs, good, problem)
    return Expected(inputs, good, None)


@fuzz(80)
@given(jsonl_tables(), st.booleans(), st.booleans(), st.sampled_from(["csv", "jsonl"]))
def test_explain_jsonl_works_or_names_the_row(models, tmp_path_factory, lines, learn, skip, fmt):
    import orjson

    data = b"".join((item if isinstance(item, bytes) else orjson.dumps(item)) + b"\n" for item in lines)
    note(f"input {data!r}")
    expected = jsonl_oracle(lines, learn, skip)
    note(f"expected {expected}")
    model = models["learn" if learn else "static"]
    path = tmp_path_factory.mktemp("jsonl") / "rows.jsonl"
    result = run_command(data, model, learn, skip, 1, fmt, input_path=path)
    check(result, expected, model, learn, 1, fmt, {n: v for n, v, _ in expected.good}, skip)
