"""``ipfi explain --state``: checkpoints, resuming, and the checks that refuse a wrong continuation.

The reference is always one uninterrupted run with the same seed; a run that stops and
continues must end with byte-identical traces.
"""

from __future__ import annotations

import os
import pickle
import zlib

import pytest

from ipfi_cli.errors import StateError
from ipfi_cli.io import run_state
from ipfi_cli.io.run_state import MAGIC, load_state, save_state
from ipfi_cli.io.trace_output import TrackedOutput, reopen_traces

from .conftest import head

LEARN = ("-t", "class", "--learn", "-M", "2", "--seed", "5", "-q")
STATIC = ("-t", "class", "-M", "2", "--seed", "5", "-q")


def one_error(result, *parts: str) -> str:
    assert result.exit_code == 1, (result.exit_code, result.stdout[-300:], result.stderr)
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ipfi: error: ") and "Traceback" not in result.stderr, lines
    for part in parts:
        assert part in lines[0], (part, lines[0])
    return lines[0]


def reference(ipfi, data, model, options, tmp_path, name="reference.csv") -> bytes:
    out = tmp_path / name
    result = ipfi(data, "-m", model, *options, "-o", out)
    assert result.exit_code == 0, result.stderr
    return out.read_bytes()


# -- continuing ---------------------------------------------------------------------------------
@pytest.mark.parametrize("every", [1, 7])
def test_learn_stop_then_continue_on_the_whole_file(ipfi, rows_csv, river_model, tmp_path, every):
    options = (*LEARN, "--every", str(every))
    expected = reference(ipfi, rows_csv, river_model, options, tmp_path)
    first = tmp_path / "first.csv"
    first.write_text(head(150))
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    result = ipfi(first, "-m", river_model, *options, "-o", out, "--state", state, "--checkpoint-every", "40")
    assert result.exit_code == 0 and state.exists()
    # (with --every 7 the first run ends with row 150's record, which the whole run does not have)
    result = ipfi(rows_csv, "-m", river_model, *options, "-o", out, "--state", state)
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == expected


def test_static_jsonl_bounds_continue_with_the_rest_only(ipfi, rows_csv, tree_model, tmp_path):
    options = (*STATIC, "--bounds", "--every", "3", "-F", "jsonl", "--batch-size", "16")
    expected = reference(ipfi, rows_csv, tree_model, options, tmp_path, "reference.jsonl")
    out, state = tmp_path / "traces.jsonl", tmp_path / "run.state"
    first, rest = tmp_path / "first.csv", tmp_path / "rest.csv"
    first.write_text(head(101))
    rest.write_text(head(299, start=101))
    assert ipfi(first, "-m", tree_model, *options, "-o", out, "--state", state).exit_code == 0
    result = ipfi(rest, "-m", tree_model, *options, "-o", out, "--state", state, "--no-skip-seen")
    assert result.exit_code == 0, result.stderr
    assert out.read_bytes() == expected


def test_stdout_continuation_appends_without_a_header(ipfi, rows_csv, river_model, tmp_path):
    expected = reference(ipfi, rows_csv, river_model, LEARN, tmp_path)
    state = tmp_path / "run.state"
    lines = rows_csv.read_text().splitlines(keepends=True)
    first = ipfi("-m", river_model, *LEARN, "--state", state, input="".join(lines[:201]))
    rest = ipfi("-m", river_model, *LEARN, "--state", state, "--no-skip-seen",
                input="".join([lines[0], *lines[201:]]))
    assert first.exit_code == 0 and rest.exit_code == 0, rest.stderr
    assert not rest.stdout.startswith("row,")
    assert (first.stdout + rest.stdout).encode() == expected


def test_resume_from_any_checkpoint_after_a_crash(ipfi, rows_csv, river_model, tmp_path, monkeypatch):
    """Snapshot the state and the traces file at every checkpoint (as a kill -9 right after it
    would leave them, plus a torn half record); continuing from each gives the same traces."""
    expected = reference(ipfi, rows_csv, river_model, LEARN, tmp_path)
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    snapshots = []
    save = run_state.save_state

    def saving(path, payload, **options):
        save(path, payload, **options)
        traces = out.read_bytes()
        # the state never claims bytes that are not in the file yet
        assert payload["run"]["output"]["size"] == len(traces)
        assert payload["run"]["output"]["crc"] == zlib.crc32(traces)
        # with --learn the learned model is saved beside the state: a crash right after the
        # checkpoint leaves both
        models = {p: p.read_bytes() for p in tmp_path.glob("run.state.model-*")}
        snapshots.append((open(path, "rb").read(), traces, models))
    monkeypatch.setattr(run_state, "save_state", saving)
    assert ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state, "--checkpoint-every", "60",
                "--batch-size", "25").exit_code == 0
    monkeypatch.setattr(run_state, "save_state", save)
    assert out.read_bytes() == expected
    assert len(snapshots) >= 5
    for saved_state, traces, models in snapshots[:-1]:
        state.write_bytes(saved_state)
        for model_path, model in models.items():
            model_path.write_bytes(model)
        out.write_bytes(traces + expected[len(traces):len(traces) + 150] + b"0.12")  # later records, torn tail
        result = ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state)
        assert result.exit_code == 0, result.stderr
        assert out.read_bytes() == expected


def test_a_bad_row_keeps_the_last_checkpoint_and_fixing_it_continues(ipfi, rows_csv, river_model, tmp_path):
    expected = reference(ipfi, rows_csv, river_model, LEARN, tmp_path)
    lines = rows_csv.read_text().splitlines(keepends=True)
    broken = tmp_path / "broken.csv"
    broken.write_text("".join(lines[:251] + ["oops\n"] + lines[252:]))
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    result = ipfi(broken, "-m", river_model, *LEARN, "-o", out, "--state", state, "--checkpoint-every", "100",
                  "--batch-size", "50")
    one_error(result, "row 251")
    assert load_state(state)["run"]["input_rows"] == 200  # the last checkpoint before the bad row
    broken.write_text(rows_csv.read_text())  # fixed
    assert ipfi(broken, "-m", river_model, *LEARN, "-o", out, "--state", state).exit_code == 0
    assert out.read_bytes() == expected


def test_column_kinds_carry_over_to_the_rest_of_the_stream(ipfi, rows_csv, river_model, tmp_path):
    state = tmp_path / "run.state"
    lines = rows_csv.read_text().splitlines(keepends=True)
    assert ipfi("-m", river_model, *LEARN, "--state", state, input="".join(lines[:51])).exit_code == 0
    rest = lines[0] + "text" + lines[51][lines[51].index(","):]  # salary held numbers before
    one_error(ipfi("-m", river_model, *LEARN, "--state", state, "--no-skip-seen", input=rest),
              "row 51 (line 2), column 'salary'", "expected a number")


# -- refusing a wrong continuation ----------------------------------------------------------------
def first_run(ipfi, rows_csv, model, tmp_path, options=LEARN):
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    short = tmp_path / "short.csv"
    short.write_text(head(120))
    assert ipfi(short, "-m", model, *options, "-o", out, "--state", state).exit_code == 0
    return out, state


def test_other_settings_are_refused_naming_them(ipfi, rows_csv, river_model, tmp_path):
    out, state = first_run(ipfi, rows_csv, river_model, tmp_path)
    before = (out.read_bytes(), state.read_bytes())
    result = ipfi(rows_csv, "-m", river_model, "-t", "class", "--learn", "-M", "3", "--seed", "5", "-q",
                  "--alpha", "0.01", "-o", out, "--state", state)
    one_error(result, str(state), "--repeats: state 2, now 3", "--alpha: state 0.001, now 0.01", "new --state")
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--drop", "age", "-o", out, "--state", state)
    one_error(result, "--features/--drop/--group")
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--seed", "6", "-o", out, "--state", state)
    one_error(result, "--seed: state 5, now 6")
    # how the input is read is a setting too (before: --na-values went through, --text was "not the same input")
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--na-values", "-1", "-o", out, "--state", state)
    one_error(result, "--na-values: state none, now ['-1']")
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--text", "zipcode", "-o", out, "--state", state)
    one_error(result, "--text: state none, now ['zipcode']")
    # the default removal, which a state leaves out, is named (it was "state none")
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--removal", "conditional", "-o", out, "--state", state)
    one_error(result, "--removal: state 'marginal', now 'conditional'")
    assert (out.read_bytes(), state.read_bytes()) == before  # nothing touched


def test_another_model_file_is_refused(ipfi, rows_csv, river_model, tmp_path):
    from river import tree

    out, state = first_run(ipfi, rows_csv, river_model, tmp_path)
    other = tmp_path / "other.pkl"
    other.write_bytes(pickle.dumps(tree.HoeffdingTreeClassifier(grace_period=51)))
    one_error(ipfi(rows_csv, "-m", other, *LEARN, "-o", out, "--state", state),
              "--model: the model file differs")


def test_seed_comes_from_the_state_when_not_given(ipfi, rows_csv, river_model, tmp_path):
    expected = reference(ipfi, rows_csv, river_model, LEARN, tmp_path)
    out, state = first_run(ipfi, rows_csv, river_model, tmp_path)
    no_seed = [a for a in LEARN if a not in ("--seed", "5")]
    assert ipfi(rows_csv, "-m", river_model, *no_seed, "-o", out, "--state", state).exit_code == 0
    assert out.read_bytes() == expected


def test_state_from_another_version_is_refused(ipfi, rows_csv, river_model, tmp_path):
    out, state = first_run(ipfi, rows_csv, river_model, tmp_path)
    payload = load_state(state)
    payload["ipfi"] = "0.0.1"
    save_state(state, {k: v for k, v in payload.items() if k not in ("format", "version")})
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state),
              "written by ipfi 0.0.1", "continues only with the version that started it")
    save_state(state, {k: v for k, v in payload.items() if k not in ("format", "version")})
    state.write_bytes(state.read_bytes().replace(b'"version":2,', b'"version":99,', 1))  # in the header line
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state), "version 99")


@pytest.mark.parametrize("content, message", [
    (b"row,salary\n1,2\n", "not an ipfi explain state file"),
    (MAGIC + b"\x80\x05garbage", "damaged"),
    (MAGIC, "damaged"),
    (b"ipfi explain state\n\x80\x05garbage", "a pickle, which this ipfi does not load"),
])
def test_foreign_or_damaged_state_is_refused(ipfi, rows_csv, river_model, tmp_path, content, message):
    state = tmp_path / "run.state"
    state.write_bytes(content)
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "--state", state), str(state), message)


def test_traces_file_that_does_not_match_is_refused(ipfi, rows_csv, river_model, tmp_path):
    out, state = first_run(ipfi, rows_csv, river_model, tmp_path)
    good = out.read_bytes()
    out.write_bytes(good[:-500])
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state), "not the file this state wrote")
    out.write_bytes(good.replace(b"\n5,", b"\n6,", 1))
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state), "not the ones this state wrote")
    out.unlink()
    one_error(ipfi(rows_csv, "-m", river_model, *LEARN, "-o", out, "--state", state), "traces file is missing")


def test_another_input_is_refused_when_skipping(ipfi, rows_csv, river_model, tmp_path):
    out, state = first_run(ipfi, rows_csv, river_model, tmp_path)
    other = tmp_path / "other.csv"
    other.write_text(head(300, start=1000))
    one_error(ipfi(other, "-m", river_model, *LEARN, "-o", out, "--state", state),
              "row 120 is not the row the state", "--no-skip-seen")
    shorter = tmp_path / "shorter.csv"
    shorter.write_text(head(80))
    one_error(ipfi(shorter, "-m", river_model, *LEARN, "-o", out, "--state", state),
              "the input ends after 80 row(s)", "has read 120")


def test_option_checks(ipfi, rows_csv, river_model, tmp_path):
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--checkpoint-every", "5")
    assert result.exit_code == 2 and "needs --state" in result.stderr
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--no-skip-seen")
    assert result.exit_code == 2 and "needs --state" in result.stderr
    result = ipfi(rows_csv, "-m", river_model, *LEARN, "--state", tmp_path / "t.csv", "-o", tmp_path / "t.csv")
    assert result.exit_code == 2 and "same file as --output" in result.stderr


def test_help_explains_state(ipfi):
    text = " ".join(ipfi("--help").stdout.split())
    for part in ("--state", "--checkpoint-every", "--skip-seen", "run the same command again", "pickle"):
        assert part in text, part


# -- the state file and the traces file ----------------------------------------------------------
def test_save_state_is_atomic(tmp_path, monkeypatch):
    path = tmp_path / "run.state"
    save_state(path, {"ipfi": "x", "n": 1})
    assert load_state(path)["n"] == 1

    def fail(*args):
        raise OSError(28, "No space left on device")
    monkeypatch.setattr(os, "replace", fail)
    with pytest.raises(StateError, match="cannot write the state file"):
        save_state(path, {"ipfi": "x", "n": 2})
    assert load_state(path)["n"] == 1  # the previous state, whole
    assert sorted(p.name for p in tmp_path.iterdir()) == ["run.state"]  # no temporary file left


def test_reopen_traces_cuts_after_the_checkpoint(tmp_path):
    path = tmp_path / "t.csv"
    path.write_bytes(b"row,a\n1,0.5\n2,0.25\n3,0.1")
    kept = b"row,a\n1,0.5\n"
    tracked = reopen_traces(str(path), len(kept), zlib.crc32(kept))
    tracked.write(b"2,0.3\n")
    tracked.close()
    assert path.read_bytes() == b"row,a\n1,0.5\n2,0.3\n"
    assert tracked.size == path.stat().st_size and tracked.crc == zlib.crc32(path.read_bytes())


def test_tracked_output_mutes_and_syncs(tmp_path):
    with open(tmp_path / "x", "wb") as f:
        tracked = TrackedOutput(f)
        tracked.muted = True
        tracked.write(b"header\n")
        tracked.muted = False
        tracked.write(b"1\n")
        tracked.sync()
        assert (tracked.size, tracked.crc) == (2, zlib.crc32(b"1\n"))
    assert (tmp_path / "x").read_bytes() == b"1\n"
