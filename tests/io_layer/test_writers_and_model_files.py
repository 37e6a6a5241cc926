"""Trace writers, atomic writes and model files."""

from __future__ import annotations

import io
import json
import os
import pickle

import joblib
import pytest

from ipfi_cli.io.targets import atomic_write, write_json
from ipfi_cli.io.writers import (
    CsvTraceWriter,
    JsonlTraceWriter,
    output_format_for,
    trace_columns,
)
from ipfi_cli.models.files import ModelFileError, load_model, save_model

NAN = float("nan")


def strict_json(line: bytes):
    def refuse(name):
        raise ValueError(f"not strict JSON: {name}")
    return json.loads(line, parse_constant=refuse)


def test_trace_columns():
    assert trace_columns(["a", "b"]) == ["row", "a", "b"]
    assert trace_columns(["a", "b"], bounds=True) == ["row", "a", "b", "a_bound", "b_bound"]


def test_csv_writer_header_nan_repr_and_quoting():
    out = io.BytesIO()
    writer = CsvTraceWriter(out, ["a", 'we,ird "name"'], bounds=True)
    writer.write(1, [NAN, NAN], [NAN, NAN])
    writer.write(2, [0.1 + 0.2, 1e-20], [1 / 3, float("inf")])
    lines = out.getvalue().decode().split("\n")
    assert lines[0] == 'row,a,"we,ird ""name""",a_bound,"we,ird ""name""_bound"'
    assert lines[1] == "1,,,,"
    assert lines[2] == "2,0.30000000000000004,1e-20,0.3333333333333333,inf"
    assert lines[3] == "" and b"\r" not in out.getvalue()
    assert float(lines[2].split(",")[1]) == 0.1 + 0.2  # round-trips exactly
    assert writer.records == 2


def test_jsonl_writer_is_strict_json():
    out = io.BytesIO()
    writer = JsonlTraceWriter(out, ["a", "b"], bounds=True)
    writer.write(3, [NAN, 0.25], [float("inf"), 0.5])
    record = strict_json(out.getvalue().splitlines()[0])
    assert record == {"row": 3, "a": None, "b": 0.25, "a_bound": None, "b_bound": 0.5}
    assert list(record) == trace_columns(["a", "b"], True)


def test_output_format_for():
    assert output_format_for(None) == "csv"
    assert output_format_for("t.jsonl") == "jsonl"
    assert output_format_for("t.ndjson") == "jsonl"
    assert output_format_for("t.csv") == "csv"
    assert output_format_for("t.jsonl", "csv") == "csv"


def test_atomic_write_keeps_old_file_on_error(tmp_path):
    path = tmp_path / "f.bin"
    path.write_bytes(b"old")

    def failing(f):
        f.write(b"partial")
        raise RuntimeError("boom")

    with pytest.raises(RuntimeError):
        atomic_write(path, failing)
    assert path.read_bytes() == b"old"
    assert os.listdir(tmp_path) == ["f.bin"]
    atomic_write(path, lambda f: f.write(b"new"))
    assert path.read_bytes() == b"new" and os.listdir(tmp_path) == ["f.bin"]


@pytest.mark.parametrize("umask, expected", [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_atomic_write_gives_a_new_file_the_umasks_mode_and_keeps_an_old_ones(tmp_path, umask, expected):
    """Written through a temporary file (mode 0600 whatever the umask), a result used to end up
    unreadable by other users and tools, and an overwritten file lost its mode."""
    previous = os.umask(umask)
    try:
        atomic_write(tmp_path / "new.csv", lambda f: f.write(b"a\n"))
        old = tmp_path / "old.csv"
        old.write_bytes(b"old\n")
        os.chmod(old, 0o640)
        atomic_write(old, lambda f: f.write(b"new\n"))
    finally:
        os.umask(previous)
    assert (tmp_path / "new.csv").stat().st_mode & 0o777 == expected
    assert old.stat().st_mode & 0o777 == 0o640 and old.read_bytes() == b"new\n"


def test_write_json_is_strict(tmp_path):
    write_json(tmp_path / "m.json", {"x": NAN, "y": [1.5]})
    assert strict_json((tmp_path / "m.json").read_bytes()) == {"x": None, "y": [1.5]}


# -- model files --------------------------------------------------------------------------------
def test_load_model_errors_name_the_file(tmp_path):
    with pytest.raises(ModelFileError, match="no such model file") as error:
        load_model(tmp_path / "missing.pkl")
    assert "missing.pkl" in str(error.value)
    with pytest.raises(ModelFileError, match="directory"):
        load_model(tmp_path)
    junk = tmp_path / "junk.pkl"
    junk.write_bytes(b"this is not a pickle at all")
    with pytest.raises(ModelFileError, match="not a joblib/pickle model file") as error:
        load_model(junk)
    assert str(error.value).startswith(str(junk))


def test_load_model_missing_module(tmp_path):
    path = tmp_path / "m.pkl"
    path.write_bytes(b"cno_such_module_xyz\nThing\n.")
    with pytest.raises(ModelFileError, match="no_such_module_xyz"):
        load_model(path)


def test_sklearn_version_mismatch_becomes_one_line(tmp_path):
    from sklearn import __version__
    from sklearn.linear_model import LogisticRegression
    from sklearn.pipeline import make_pipeline
    from sklearn.preprocessing import StandardScaler

    model = make_pipeline(StandardScaler(), LogisticRegression()).fit([[0.0], [1.0], [2.0], [3.0]], [0, 0, 1, 1])
    data = pickle.dumps(model)
    fake = "0.0." + "9" * (len(__version__) - 4)  # same length: the pickle's string sizes stay right
    assert len(fake) == len(__version__)
    path = tmp_path / "old.pkl"
    path.write_bytes(data.replace(__version__.encode(), fake.encode()))
    loaded, warnings = load_model(path)
    assert len(warnings) == 1  # three estimators warn; one line
    assert f"saved with scikit-learn {fake}" in warnings[0] and f"loaded with scikit-learn {__version__}" in warnings[0]
    assert str(path) in warnings[0] and "\n" not in warnings[0]
    assert loaded.predict([[3.0]]).tolist() == [1]


def test_save_model_round_trip(tmp_path):
    path = tmp_path / "m.joblib"
    save_model(path, {"weights": [1, 2, 3]})
    model, warnings = load_model(path)
    assert model == {"weights": [1, 2, 3]} and warnings == []
    assert os.listdir(tmp_path) == ["m.joblib"]
    assert joblib.load(path) == model




# -- text from data on a terminal -------------------------------------------------------------
class _Terminal(io.BytesIO):
    """A byte stream that says it is a terminal."""

    def isatty(self) -> bool:
        return True


_HOSTILE = "a\x1b]52;c;eA==\x07\u202e"
_SHOWN = "a\\x1b]52;c;eA==\\x07\\u202e"  # as terminal_safe shows it


def _fields(data: bytes, fmt: str) -> list[str]:
    """The text fields of a CSV (header and records) or the keys and text values of JSON lines."""
    if fmt == "csv":
        import csv

        return [field for row in csv.reader(io.StringIO(data.decode())) for field in row]
    records = [json.loads(line) for line in data.splitlines()]
    return [text for record in records for item in record.items() for text in item if isinstance(text, str)]


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_trace_writers_escape_names_and_keys_on_a_terminal_only(fmt):
    from ipfi_cli.io.writers import WRITERS

    for stream, name in ((_Terminal(), _SHOWN), (io.BytesIO(), _HOSTILE)):
        writer = WRITERS[fmt](stream, [_HOSTILE, "b"], bounds=True, key_columns=[f"k{_HOSTILE}"])
        writer.write(1, [0.5, 0.25], [0.1, 0.2], key=[_HOSTILE])
        fields = _fields(stream.getvalue(), fmt)
        assert {name, f"k{name}", f"{name}_bound", "b", "b_bound"} <= set(fields)
        if name == _SHOWN:
            assert not any(c in stream.getvalue().decode() for c in "\x1b\x07\u202e")


def test_terminal_trace_csv_is_the_escaped_names_exactly():
    from ipfi_cli.io.writers import CsvTraceWriter

    out = _Terminal()
    CsvTraceWriter(out, ["x\x1b[2J", "y,z"], key_columns=["k\n"]).write(3, [1.0, 2.0], key=["v\x07"])
    assert out.getvalue() == b'k\\n,row,x\\x1b[2J,"y,z"\nv\\x07,3,1.0,2.0\n'


@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_record_writer_escapes_text_on_a_terminal_only(fmt):
    from ipfi_cli.io.writers import RecordWriter

    for stream, name in ((_Terminal(), _SHOWN), (io.BytesIO(), _HOSTILE)):
        RecordWriter(stream, ["feature", "importance"], fmt).write({"feature": _HOSTILE, "importance": 0.5})
        assert name in _fields(stream.getvalue(), fmt)
        assert b"0.5" in stream.getvalue()


def test_a_stop_while_the_models_libraries_load_is_the_stop(tmp_path, monkeypatch):
    """A Ctrl-C during a compiled module's initialisation reaches the loader as ImportError('initialization
    failed'): it was said to be a version mismatch (a signal 0.8 s into a resume), it is the stop."""
    import joblib
    import pytest

    from ipfi_cli.models import files

    def interrupted(path):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise ImportError("initialization failed")  # noqa: B904 - as the interpreter chains it
    monkeypatch.setattr(joblib, "load", interrupted)
    with pytest.raises(KeyboardInterrupt):
        files._load_pickle(str(tmp_path / "model.joblib"))
    monkeypatch.setattr(joblib, "load", lambda path: (_ for _ in ()).throw(ImportError("No module named 'x'")))
    with pytest.raises(files.ModelFileError, match="cannot be loaded with these"):  # not a stop
        files._load_pickle(str(tmp_path / "model.joblib"))
