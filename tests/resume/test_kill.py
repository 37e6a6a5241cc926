"""Real processes: ``ipfi explain --state`` killed mid-stream (SIGKILL, SIGTERM), then continued.

After every kill the traces file must be a prefix of the uninterrupted run's traces made of
whole records; continuing (the same command) must end with byte-identical traces.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from .conftest import ROOT, head

pytestmark = pytest.mark.slow

OPTIONS = ["-t", "class", "--learn", "-M", "2", "--seed", "9", "-q", "--checkpoint-every", "100",
           "--batch-size", "50"]


def start(data: Path, model: Path, out: Path, state: Path, via_stdin: bool) -> subprocess.Popen:
    command = [sys.executable, "-m", "ipfi_cli", "explain", "-m", str(model), *OPTIONS, "-o", str(out),
               "--state", str(state)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    if via_stdin:
        with open(data, "rb") as f:
            return subprocess.Popen(command, stdin=f, stderr=subprocess.PIPE, cwd=ROOT, env=env)
    return subprocess.Popen([*command, str(data)], stdin=subprocess.DEVNULL, stderr=subprocess.PIPE, cwd=ROOT,
                            env=env)


def wait_for_records(process: subprocess.Popen, out: Path, state: Path, at_least: int, timeout: float = 60) -> None:
    """Wait until the traces hold ``at_least`` lines and a checkpoint exists; the process must still run."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if out.exists() and state.exists() and out.read_bytes().count(b"\n") >= at_least:
            assert process.poll() is None, "the run ended before it could be killed: give it more rows"
            return
        assert process.poll() is None, process.stderr.read().decode()
        time.sleep(0.01)
    raise AssertionError("no progress")


def assert_whole_record_prefix(out: Path, expected: bytes) -> int:
    written = out.read_bytes()
    assert expected.startswith(written), "the traces are not a prefix of the uninterrupted run's"
    assert written.endswith(b"\n"), "a torn record at the end"
    return written.count(b"\n")


@pytest.fixture(scope="module")
def stream(tmp_path_factory, river_model) -> tuple[Path, bytes]:
    """3,000 rows and the traces of one uninterrupted run over them (in-process: same code)."""
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    folder = tmp_path_factory.mktemp("kill")
    data = folder / "stream.csv"
    data.write_text(head(3000))
    out = folder / "reference.csv"
    result = CliRunner().invoke(app, ["explain", str(data), "-m", str(river_model), *OPTIONS[:-4], "-o", str(out)])
    assert result.exit_code == 0, result.stderr
    return data, out.read_bytes()


@pytest.mark.parametrize("via_stdin", [False, True], ids=["file", "stdin"])
def test_sigkill_twice_then_continue(stream, river_model, tmp_path, via_stdin):
    data, expected = stream
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    lines = 0
    for kill_at in (400, 1400):
        process = start(data, river_model, out, state, via_stdin)
        wait_for_records(process, out, state, max(kill_at, lines + 200))
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
        lines = assert_whole_record_prefix(out, expected)
        assert lines < expected.count(b"\n")
    process = start(data, river_model, out, state, via_stdin)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert out.read_bytes() == expected


def test_sigterm_saves_the_state_and_exits_130(stream, river_model, tmp_path):
    data, expected = stream
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    process = start(data, river_model, out, state, via_stdin=False)
    wait_for_records(process, out, state, 600)
    process.send_signal(signal.SIGTERM)
    _, stderr = process.communicate(timeout=30)
    assert process.returncode == 130, stderr.decode()
    assert b"the state is saved" in stderr and b"Traceback" not in stderr
    assert_whole_record_prefix(out, expected)
    from ipfi_cli.io.run_state import load_state

    saved = load_state(state)["run"]
    assert saved["output"]["size"] == out.stat().st_size  # saved at exit, after the last record
    process = start(data, river_model, out, state, via_stdin=False)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert out.read_bytes() == expected


def start_appending(data: Path, model: Path, out: Path, state: Path) -> subprocess.Popen:
    """The README's advice: traces on stdout appended to a file (``>> traces.csv``)."""
    command = [sys.executable, "-m", "ipfi_cli", "explain", "-m", str(model), *OPTIONS, "--state", str(state),
               str(data)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    with open(out, "ab") as appended:
        return subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=appended, stderr=subprocess.PIPE,
                                cwd=ROOT, env=env)


def test_sigkill_with_traces_appended_from_stdout_neither_duplicates_nor_loses(stream, river_model, tmp_path):
    """``ipfi ... >> traces.csv``, killed twice, then continued: the file is the uninterrupted run's
    traces, after what it held before (the records written after a checkpoint are cut back)."""
    data, expected = stream
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    before = b"an earlier line the user keeps\n"
    out.write_bytes(before)
    for kill_at in (400, 1400):
        process = start_appending(data, river_model, out, state)
        deadline = time.monotonic() + 60
        while out.read_bytes().count(b"\n") < kill_at and time.monotonic() < deadline:
            assert process.poll() is None, process.stderr.read().decode()
            time.sleep(0.01)
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
    process = start_appending(data, river_model, out, state)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert out.read_bytes() == before + expected


def test_resuming_into_a_pipe_says_which_records_repeat(stream, river_model, tmp_path):
    data, _ = stream
    state = tmp_path / "run.state"
    command = [sys.executable, "-m", "ipfi_cli", "explain", "-m", str(river_model), *OPTIONS, "--state", str(state),
               str(data)]
    env = dict(os.environ, OMP_NUM_THREADS="1")
    process = subprocess.Popen(command, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               cwd=ROOT, env=env)
    seen = b""
    while seen.count(b"\n") < 600 or not state.exists():
        chunk = process.stdout.read1(65536)
        assert chunk, process.stderr.read().decode()
        seen += chunk
    process.send_signal(signal.SIGKILL)
    process.wait(timeout=30)
    again = subprocess.run(command, stdin=subprocess.DEVNULL, capture_output=True, cwd=ROOT, env=env, timeout=120)
    assert again.returncode == 0, again.stderr.decode()
    first = int(again.stdout.split(b"\n", 1)[0].split(b",", 1)[0])
    assert b"keep the earlier output only up to the last row before the first row written now" in again.stderr
    # what the note promises: the earlier output up to row first-1, then the continuation, is the whole run
    kept = [line for line in seen.split(b"\n")[:-1] if line.startswith(b"row") or int(line.split(b",")[0]) < first]
    combined = b"\n".join(kept) + b"\n" + again.stdout
    reference = stream[1]
    assert combined == reference


def test_a_second_run_on_a_state_in_use_is_refused_and_a_killed_runs_lock_is_gone(stream, river_model, tmp_path):
    """Two runs on one --state (a supervisor restarting a run whose old process lives on) appended
    the same records twice to the traces, both exiting 0; the second is now refused in one line, and
    the first run's lock goes with it, even on kill -9."""
    data, expected = stream
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    first = start(data, river_model, out, state, via_stdin=False)
    wait_for_records(first, out, state, 300)
    second = start(data, river_model, tmp_path / "other.csv", state, via_stdin=False)
    _, stderr = second.communicate(timeout=120)
    assert second.returncode == 1
    assert f"another ipfi run is using this state (process {first.pid})" in stderr.decode()
    assert first.poll() is None  # the first run goes on
    first.send_signal(signal.SIGKILL)
    assert first.wait(timeout=30) == -signal.SIGKILL
    again = start(data, river_model, out, state, via_stdin=False)  # the same command continues
    _, stderr = again.communicate(timeout=120)
    assert again.returncode == 0, stderr.decode()
    assert out.read_bytes() == expected


def test_kill_9_in_the_middle_of_saves_leaves_no_temporary_file_after_the_next_run(stream, river_model, tmp_path):
    """kill -9 the moment a checkpoint's temporary file appears (`.run.state.XXXXXXXX.tmp`, megabytes for
    a large model): no later run removed it; the next run on the state removes it and continues to the
    uninterrupted run's bytes."""
    data, expected = stream
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"

    def temporaries() -> list[str]:
        return [name for name in os.listdir(tmp_path) if name.endswith(".tmp")]

    for _ in range(5):  # until a kill lands in the middle of a save (its file is there for milliseconds)
        process = start(data, river_model, out, state, via_stdin=False)
        deadline = time.monotonic() + 60
        while not temporaries():
            assert process.poll() is None and time.monotonic() < deadline, process.stderr.read().decode()
        process.send_signal(signal.SIGKILL)
        assert process.wait(timeout=30) == -signal.SIGKILL
        if temporaries():
            break
    assert temporaries()
    process = start(data, river_model, out, state, via_stdin=False)
    _, stderr = process.communicate(timeout=120)
    assert process.returncode == 0, stderr.decode()
    assert out.read_bytes() == expected
    assert not temporaries()
