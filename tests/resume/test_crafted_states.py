"""States crafted with a valid checksum (recomputed the way ipfi computes it, by saving the altered
content with :func:`~ipfi_cli.io.run_state.save_state`): each is refused in one line naming the field,
exit 1, never an "unexpected" error, and never by unpickling a file the state names."""

from __future__ import annotations

import hashlib
import os
import pickle
import shutil
from pathlib import Path

import numpy as np
import pytest

from ipfi_cli.io.run_state import load_state, save_state

LEARN = ("-t", "class", "--learn", "-M", "2", "--seed", "5", "-q")


def one_error(result, *parts: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stdout[-300:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipfi: error: "), lines
    assert "Traceback" not in result.stderr and "unexpected" not in result.stderr, lines
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def resave(state: Path, payload: dict) -> None:
    """Write ``payload`` as the state, its checksum recomputed (as an attacker can)."""
    save_state(state, {k: v for k, v in payload.items() if k not in ("format", "version")})


@pytest.fixture(scope="module")
def learned(tmp_path_factory, rows_csv, river_model):
    """A state of a --learn run stopped after 120 rows (its traces, its model file), to copy."""
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    folder = tmp_path_factory.mktemp("learned")
    data = folder / "rows.csv"
    data.write_text("\n".join(rows_csv.read_text().splitlines()[:121]) + "\n")
    result = CliRunner().invoke(app, ["explain", str(data), "-m", str(river_model), *LEARN, "-o",
                                      str(folder / "traces.csv"), "--state", str(folder / "run.state"),
                                      "--checkpoint-every", "60"], catch_exceptions=False)
    assert result.exit_code == 0, result.stderr
    return folder


@pytest.fixture
def run(learned, tmp_path, ipfi, river_model, rows_csv):
    """A copy of the learned state in ``tmp_path``; ``run(payload)`` saves it altered and continues it."""
    for item in learned.iterdir():
        shutil.copy(item, tmp_path / item.name)
    state = tmp_path / "run.state"

    def continue_with(payload: dict | None = None):
        if payload is not None:
            resave(state, payload)
        return ipfi(rows_csv, "-m", river_model, *LEARN, "-o", tmp_path / "traces.csv", "--state", state)
    continue_with.state = state  # type: ignore[attr-defined]
    return continue_with


# -- the learned model beside the state -----------------------------------------------------------
class Touch:
    """A pickle that, when loaded, creates a file: the proof that a file was unpickled."""

    def __init__(self, path: str) -> None:
        self.path = path

    def __reduce__(self):
        return (Path.touch, (Path(self.path),))


@pytest.mark.parametrize("name", ["evil.pkl", "../evil.pkl", "{folder}/evil.pkl", "sub/run.state.model-{d16}",
                                  "..", "", "run.state.model-{d16}/"])
def test_a_state_naming_another_model_file_is_refused_and_nothing_unpickled(run, name):
    """The model file named in the state was read (joined to the state's folder) and unpickled once its
    SHA-256 matched the state's, which a crafted state sets: any pickle in the folder ran."""
    folder = run.state.parent
    marker = folder / "unpickled"
    evil = pickle.dumps(Touch(str(marker)))
    digest = hashlib.sha256(evil).hexdigest()
    name = name.format(folder=folder, d16=digest[:16])
    for place in (folder / "evil.pkl", folder.parent / "evil.pkl"):
        place.write_bytes(evil)
    (folder / "sub").mkdir()
    (folder / "sub" / f"run.state.model-{digest[:16]}").write_bytes(evil)
    payload = load_state(run.state)
    payload["model"] = {"file": name, "sha256": digest}
    one_error(run(payload), str(run.state), "the state's model.file", "is not the name ipfi gives", "not loaded")
    assert not marker.exists()


def test_only_the_file_ipfi_names_is_loaded_and_only_with_the_state_s_digest(run):
    folder = run.state.parent
    payload = load_state(run.state)
    digest = payload["model"]["sha256"]
    assert payload["model"]["file"] == f"run.state.model-{digest[:16]}"  # the name ipfi derives
    model_file = folder / payload["model"]["file"]
    marker = folder / "unpickled"
    good = model_file.read_bytes()
    model_file.write_bytes(pickle.dumps(Touch(str(marker))))  # the right name, other bytes
    one_error(run(), "the learned model is not the one the state wrote", "not loaded")
    assert not marker.exists()
    model_file.write_bytes(good)
    for bad in ("ABC", digest.upper(), digest[:63], 12, None):
        one_error(run({**payload, "model": {"file": payload["model"]["file"], "sha256": bad}}),
                  "the state's model.sha256 is not a SHA-256 digest")
    one_error(run({**payload, "model": ["run.state.model", digest]}), "the state's model must be a mapping")
    one_error(run({**payload, "model": {"file": payload["model"]["file"]}}), "the state's model is not a reference")
    assert run(payload).exit_code == 0  # the state as ipfi wrote it continues


def test_a_state_renamed_without_its_model_file_says_to_rename_it(run, ipfi, rows_csv, river_model):
    """The file loaded is named after the state's own name: a renamed state needs its model file renamed."""
    folder = run.state.parent
    old_name = load_state(run.state)["model"]["file"]
    new_name = old_name.replace("run.state", "moved.state")
    os.rename(run.state, folder / "moved.state")
    args = (rows_csv, "-m", river_model, *LEARN, "-o", folder / "traces.csv", "--state", folder / "moved.state")
    one_error(ipfi(*args), "the learned model the state refers to is missing", f"rename {old_name} to {new_name}")
    os.rename(folder / old_name, folder / new_name)
    result = ipfi(*args)
    assert result.exit_code == 0, result.stderr


def test_a_model_file_of_another_state_s_name_is_not_loaded(run):
    """A name of the right form is still only the state's own: another state's model file stays unread."""
    folder = run.state.parent
    marker = folder / "unpickled"
    evil = pickle.dumps(Touch(str(marker)))
    digest = hashlib.sha256(evil).hexdigest()
    (folder / f"other.state.model-{digest[:16]}").write_bytes(evil)
    payload = load_state(run.state)
    payload["model"] = {"file": f"other.state.model-{digest[:16]}", "sha256": digest}
    one_error(run(payload), f"run.state.model-{digest[:16]}: the learned model the state refers to is missing")
    assert not marker.exists()


# -- every field, checked where it is read -------------------------------------------------------
DELETE = object()


def mutated(payload: dict, path: str, value) -> dict:
    """``payload`` with the field at the dotted ``path`` set to ``value`` (or deleted)."""
    import copy

    out = copy.deepcopy(payload)
    *parents, last = path.split(".")
    part = out
    for key in parents:
        part = part[int(key)] if isinstance(part, list) else part[key]
    if value is DELETE:
        del part[last]
    elif isinstance(part, list):
        part[int(last)] = value
    else:
        part[last] = value(part[last]) if callable(value) else value
    return out


NAN = float("nan")


@pytest.mark.parametrize("path, value, message", [
    # the explainer's smoothing (its counts, weights and means)
    ("explainer.tracker.count", -5, "explainer.tracker.count must be at least 0, not -5"),
    ("explainer.tracker.count", 2.5, "explainer.tracker.count must be a whole number, not 2.5"),
    ("explainer.tracker.weight", -1.0, "explainer.tracker.weight must be at least 0, not -1"),
    ("explainer.tracker.weight", "x", "explainer.tracker.weight must be a number, not the text 'x'"),
    ("explainer.tracker.sum_sq_weights", NAN, "explainer.tracker.sum_sq_weights must be a number, not NaN"),
    ("explainer.tracker.mean", lambda a: np.where(np.arange(a.size) == 0, np.nan, a),
     "explainer.tracker.mean must hold finite numbers"),
    ("explainer.tracker.mean", lambda a: a[:-1], "explainer.tracker.mean must be an array of shape (9), not (8,)"),
    ("explainer.tracker.sum_sq_dev", lambda a: a[:-1], "explainer.tracker.sum_sq_dev must be an array of shape (9)"),
    ("explainer.tracker.sum_sq_dev", lambda a: -a - 1, "explainer.tracker.sum_sq_dev must hold numbers of at least 0"),
    ("explainer.tracker", DELETE, "explainer.tracker is missing"),
    ("explainer.tracker", "x", "explainer.tracker must be a mapping of fields, not the text 'x'"),
    # the reservoirs
    ("explainer.sampler.filled", 10**6, "explainer.sampler.filled must be at most 100, not 1000000"),
    ("explainer.sampler.filled", -1, "explainer.sampler.filled must be at least 0"),
    ("explainer.sampler.n_seen", 3, "explainer.sampler.n_seen must be at least 100, not 3"),
    ("explainer.sampler.rows", lambda a: a.reshape(-1), "explainer.sampler.rows must be an array of shape (2, 100, 9)"),
    ("explainer.sampler.size", 7, "explainer.sampler.size must be one of 100, not 7"),
    ("explainer.sampler.rows", DELETE, "explainer.sampler.rows is missing"),
    # the explainer's own counters, its generator, its last row
    ("explainer.rng.uinteger", -1, "explainer.rng is not the state of NumPy's PCG64 random generator"),
    ("explainer.rng.state.inc", "x", "explainer.rng is not the state"),
    ("explainer.n_seen", -1, "explainer.n_seen must be at least 0"),
    ("explainer.loss_sum", NAN, "explainer.loss_sum must be a number, not NaN"),
    ("explainer.loss_sum", -3.0, "explainer.loss_sum must be at least 0"),
    ("explainer.last_loss", -1.0, "explainer.last_loss must be at least 0"),
    ("explainer.last_contributions", lambda a: a[:, :-1],
     "explainer.last_contributions must be an array of shape (2, 9), not (2, 8)"),
    ("explainer.model_calls", "many", "explainer.model_calls must be a whole number, not the text 'many'"),
    ("explainer.settings", "x", "explainer.settings must be a mapping of fields"),
    ("explainer", "x", "the state's explainer must be a mapping of fields"),
    # the run's counters
    ("run.input_rows", -1, "run.input_rows must be at least 0, not -1"),
    ("run.input_rows", NAN, "run.input_rows must be a whole number, not nan"),
    ("run.input_rows", "x", "run.input_rows must be a whole number, not the text 'x'"),
    ("run.input_rows", DELETE, "run.input_rows is missing"),
    ("run.rows", None, "run.rows must be a whole number, not null"),
    ("run.records", -2, "run.records must be at least 0"),
    ("run.skipped", "3", "run.skipped must be a whole number, not the text '3'"),
    ("run.seed", -1, "run.seed must be at least 0"),
    ("run.last", [1], "run.last must be a row number and its importances"),
    ("run.last.1", [0.5], "run.last must hold 9 importances (one per feature explained), not 1"),
    ("run.last_print", 2**40, "run.last_print must be at most 4294967295"),
    ("run.output", {}, "run.output.size is missing"),
    ("run.output.crc", -1, "run.output.crc must be at least 0"),
    ("run.output.size", "big", "run.output.size must be a whole number"),
    ("run.kinds", {"salary": 3}, "run.kinds must give each column the kind 'number' or 'text', not 3"),
    ("run.first_skip", 5, "run.first_skip must be a text, not 5"),
    ("run", "x", "the state's run must be a mapping of fields"),
    ("run", DELETE, "the state's run is missing"),
    ("model", DELETE, "the state's model is missing"),
    ("watch", 3, "the state's watch must be a mapping of fields, not 3"),
])
def test_a_crafted_field_is_refused_in_one_line_naming_it(run, path, value, message):
    """Crafted states stopped with "unexpected ZeroDivisionError/ValueError/IndexError/..." errors, ran on
    with negative counts (exit 0), or blamed a NaN on the model's prediction; each field is now checked
    where the state is read."""
    line = one_error(run(mutated(load_state(run.state), path, value)), str(run.state), message)
    assert "prediction" not in line


def test_the_state_as_written_continues(run):
    """The checks refuse nothing ipfi writes: the learned state, re-saved unchanged, continues."""
    result = run(load_state(run.state))
    assert result.exit_code == 0, result.stderr


def test_a_crafted_sage_state_is_refused_naming_the_field(ipfi, rows_csv, tree_model, tmp_path):
    """SAGE's own parts (its order generator, the losses' smoothing, the marginal prediction) are checked too."""
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    args = (rows_csv, "-m", tree_model, "-t", "class", "--method", "sage", "-M", "2", "--seed", "5", "-q",
            "-o", out, "--state", state)
    assert ipfi(*args).exit_code == 0
    payload = load_state(state)
    for path, value, message in [
            ("explainer.order_rng", {"state": 1}, "explainer.order_rng is not the state of NumPy's PCG64"),
            ("explainer.losses_tracker.count", -1, "explainer.losses_tracker.count must be at least 0"),
            ("explainer.losses_tracker.mean", lambda a: a * np.nan, "explainer.losses_tracker.mean must hold finite"),
            ("explainer.marginal", DELETE, "explainer.marginal is missing"),
            ("explainer.sampler.n_seen", 10**30, "explainer.sampler.n_seen must be at most 9223372036854775807")]:
        resave(state, mutated(payload, path, value))
        one_error(ipfi(*args), str(state), message)
