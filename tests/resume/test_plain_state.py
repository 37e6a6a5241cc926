"""The state file is plain data: no pickle inside, loading runs no code, an altered file is refused."""

from __future__ import annotations

import io
import json
import pickle
from pathlib import Path

import numpy as np
import pytest

from ipfi_cli.core import plain_state
from ipfi_cli.io.run_state import MAGIC, load_state
from tests.conftest import needs_adwin_state

from .test_resume import LEARN, STATIC, one_error, reference


def parts(data: bytes) -> tuple[dict, dict, dict]:
    """The header, the JSON document and the arrays of a state file, read by hand."""
    assert data.startswith(MAGIC)
    header_line, rest = data[len(MAGIC):].split(b"\n", 1)
    header = json.loads(header_line)
    document = json.loads(rest[:header["body"]])
    with np.load(io.BytesIO(rest[header["body"]:]), allow_pickle=False) as archive:
        arrays = {name: archive[name] for name in archive.files}
    return header, document, arrays


@pytest.fixture
def no_unpickling(monkeypatch):
    """Unpickling while a state is read or written fails the test (loading the model file may unpickle:
    joblib does, through pickle in some of its versions)."""
    import inspect

    def guarded(original):
        def call(*args, **kwargs):
            if any(Path(frame.filename).stem in STATE_MODULES for frame in inspect.stack()):
                raise AssertionError("something was unpickled")
            return original(*args, **kwargs)
        return call
    for name in ("loads", "load", "Unpickler"):
        monkeypatch.setattr(pickle, name, guarded(getattr(pickle, name)))


#: the modules that read and write a state: nothing under them may unpickle
STATE_MODULES = {"run_state", "plain_state", "resume", "keyed", "key_runs"}


@needs_adwin_state
def test_static_state_holds_json_and_numeric_arrays_only(ipfi, rows_csv, tree_model, tmp_path, no_unpickling):
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(rows_csv, "-m", tree_model, *STATIC, "--detect", "-o", out, "--state", state).exit_code == 0
    data = state.read_bytes()
    header, document, arrays = parts(data)
    assert header["format"] == "ipfi-explain-run-state" and header["version"] == plain_state.VERSION
    assert arrays and all(a.dtype.kind in "biuf" for a in arrays.values())
    assert document["explainer"]["settings"]["n_repeats"] == 2 and document["model"] is None
    assert document["explainer"]["rng"]["bit_generator"] == "PCG64"
    assert b"\x80\x04\x95" not in data and b"\x80\x05\x95" not in data  # no pickle frame
    payload = load_state(state)  # with pickle disabled
    assert payload["run"]["input_rows"] == 400


def test_resume_unpickles_nothing_for_a_static_model(ipfi, rows_csv, tree_model, tmp_path, monkeypatch):
    from .conftest import head

    expected = reference(ipfi, rows_csv, tree_model, STATIC, tmp_path)
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    first = tmp_path / "first.csv"
    first.write_text(head(150))
    assert ipfi(first, "-m", tree_model, *STATIC, "-o", out, "--state", state).exit_code == 0
    calls = []
    real = pickle.loads
    monkeypatch.setattr(pickle, "loads", lambda *a, **k: calls.append(1) or real(*a, **k))
    assert ipfi(rows_csv, "-m", tree_model, *STATIC, "-o", out, "--state", state).exit_code == 0
    assert out.read_bytes() == expected
    assert calls == []  # (the joblib model file itself is loaded by joblib, not through pickle.loads)


@pytest.mark.parametrize("change, message", [
    (lambda d: d[:-1] + bytes([d[-1] ^ 1]), "checksum does not match"),  # one bit in the arrays
    (lambda d: d.replace(b'"n_repeats":2', b'"n_repeats":3', 1), "checksum does not match"),
    (lambda d: d[:-10], "cut short or extended"),
    (lambda d: d + b"\0", "cut short or extended"),
])
def test_an_altered_state_is_refused(ipfi, rows_csv, tree_model, tmp_path, change, message):
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(rows_csv, "-m", tree_model, *STATIC, "-o", out, "--state", state).exit_code == 0
    state.write_bytes(change(state.read_bytes()))
    one_error(ipfi(rows_csv, "-m", tree_model, *STATIC, "-o", out, "--state", state), str(state), message)


def test_learned_model_beside_the_state_is_checked_before_loading(ipfi, rows_csv, river_model, tmp_path):
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    assert ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state).exit_code == 0
    models = list(tmp_path.glob("run.state.model-*"))
    assert len(models) == 1  # older checkpoints' models are removed
    reference_ = parts(state.read_bytes())[1]["model"]
    assert reference_["file"] == models[0].name
    models[0].write_bytes(pickle.dumps({"not": "the model"}))
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state),
              "the learned model is not the one the state wrote")


def test_values_round_trip_exactly():
    rows = np.empty((2, 1, 3), dtype=object)
    rows[0, 0] = [1, "a", float("nan")]
    rows[1, 0] = [True, None, 2.5]
    state = {"big": 2 ** 100, "nan": float("nan"), "inf": -float("inf"), "t": (1, "x"), "k": {1: "one"},
             "f32": np.arange(3, dtype=np.float32), "rows": rows, "__odd": 1}
    back = plain_state.loads(plain_state.dumps(state))
    assert back["big"] == 2 ** 100 and np.isnan(back["nan"]) and back["inf"] == -float("inf")
    assert back["t"] == (1, "x") and back["k"] == {1: "one"} and back["__odd"] == 1
    assert back["f32"].dtype == np.float32 and back["f32"].tolist() == [0, 1, 2]
    got = back["rows"].reshape(-1).tolist()
    assert got[:2] == [1, "a"] and type(got[0]) is int and np.isnan(got[2]) and got[3:] == [True, None, 2.5]
    with pytest.raises(TypeError, match="a set cannot be saved"):
        plain_state.dumps({"s": {1}})


def _same_plain(a, b):
    """Equal plain data, arrays by dtype, shape and bytes (NaN equal to NaN)."""
    if isinstance(a, np.ndarray):
        return isinstance(b, np.ndarray) and a.dtype == b.dtype and a.shape == b.shape and (
            a.tobytes() == b.tobytes() if a.dtype != object else _same_plain(a.tolist(), b.tolist()))
    if isinstance(a, dict):
        return isinstance(b, dict) and a.keys() == b.keys() and all(_same_plain(a[k], b[k]) for k in a)
    if isinstance(a, (list, tuple)):
        return type(a) is type(b) and len(a) == len(b) and all(_same_plain(x, y) for x, y in zip(a, b))
    if isinstance(a, float) and a != a:
        return isinstance(b, float) and b != b
    return type(a) is type(b) and a == b


def test_packed_state_reads_back_as_the_state_files_do():
    """An evicted key's bytes (pack/unpack, no .npz): the same plain data as the state file's
    dumps/loads, for an explainer's real state after rows of sklearn's diabetes data, and for values
    of every kind (0-d, empty, int, bool and float32 arrays, object rows)."""
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    from ipfi_cli.core import IPFIEstimator
    from ipfi_cli.models import SklearnPredictor

    X, y = load_diabetes(return_X_y=True, as_frame=True)
    model = Ridge().fit(X, y)
    explainer = IPFIEstimator(SklearnPredictor(model), list(X.columns), n_repeats=3, seed=0)
    explainer.explain_many(X.to_numpy()[:60], y.to_numpy()[:60])
    rows = np.empty((2, 1, 3), dtype=object)
    rows[0, 0], rows[1, 0] = [1, "a", float("nan")], [True, None, 2.5]
    odd = {"zero_d": np.array(3.5), "empty": np.zeros((0, 4)), "ints": np.arange(5, dtype=np.int16).reshape(5, 1),
           "flags": np.array([True, False]), "f32": np.arange(3, dtype=np.float32), "rows": rows,
           "fortran": np.asfortranarray(np.arange(6.0).reshape(2, 3)), "big": 2 ** 100}
    for state in (explainer.state_dict(), odd):
        back = plain_state.unpack(plain_state.pack(state))
        assert _same_plain(back, plain_state.loads(plain_state.dumps(state)))
    back = plain_state.unpack(plain_state.pack(odd))
    back["ints"][0, 0] = 9  # each array is its own, writable (a restored explainer writes to them)
    assert back["fortran"].tolist() == [[0.0, 1.0, 2.0], [3.0, 4.0, 5.0]]


@pytest.mark.parametrize("damage", ["cut", "extended", "bit", "header", "not packed"])
def test_packed_bytes_cut_or_changed_are_refused(damage):
    data = plain_state.pack({"mean": np.arange(4.0), "n": 4})
    changed = {"cut": data[:-1], "extended": data + b"\0", "bit": data[:-3] + bytes([data[-3] ^ 1]) + data[-2:],
               "header": data.replace(b'"raw"', b'"rav"'), "not packed": plain_state.dumps({"n": 4})}[damage]
    with pytest.raises(plain_state.StateFormatError):
        plain_state.unpack(changed)
