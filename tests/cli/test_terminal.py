"""Text from data, files and servers never reaches the terminal raw, under a real pty.

A CSV whose header holds an OSC 52 sequence (it writes the clipboard), a screen clear and Rich
markup (``[link=...]`` becomes a live OSC 8 hyperlink) is run through ``explain`` (live table and
summary), ``batch``, ``--verbose`` and a usage error; a served model's 400 answer carries the same.
The terminal's bytes must hold none of those sequences, and the escaped text instead; the traces
keep the exact names (they are data).
"""

from __future__ import annotations

import os
import pty
import select
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
OSC52 = "\x1b]52;c;aGFja2Vk\x07"
CLEAR = "\x1b[2J"
LINK = "[link=https://evil.example]"
NAME = f"age{OSC52}{CLEAR}{LINK}x[/link]"
#: what must never reach the terminal: the clipboard write, the clear, a hyperlink
FORBIDDEN = [b"\x1b]52", b"\x1b[2J", b"\x1b]8;"]


def _read_pty(main: int, process: subprocess.Popen, timeout: float) -> tuple[int, bytes]:
    """Every byte the pty ``main`` gets until the process ends; its exit code."""
    seen = b""
    while True:
        ready, _, _ = select.select([main], [], [], timeout)
        if not ready:
            process.kill()
            raise AssertionError("no output: " + seen.decode(errors="replace"))
        try:
            chunk = os.read(main, 65536)
        except OSError:  # the pty closed: the process ended
            break
        if not chunk:
            break
        seen += chunk
    os.close(main)
    return process.wait(timeout=timeout), seen


def run_in_pty(args: list[str], stdout: Path, timeout: float = 120) -> tuple[int, bytes]:
    """Run ``python -m ipfi_cli ARGS`` with stderr (and stdin) on a pty, stdout to a file; return
    the exit code and every byte the terminal got."""
    main, secondary = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", PYTHONPATH=str(ROOT / "src"))
    env.pop("NO_COLOR", None)
    with open(stdout, "wb") as out:
        process = subprocess.Popen([sys.executable, "-m", "ipfi_cli", *args], stdin=secondary, stdout=out,
                                   stderr=secondary, cwd=ROOT, env=env, close_fds=True)
    os.close(secondary)
    return _read_pty(main, process, timeout)


def assert_clean(terminal: bytes) -> None:
    for sequence in FORBIDDEN:
        assert sequence not in terminal, (sequence, terminal[-2000:])


@pytest.fixture(scope="module")
def hostile(tmp_path_factory) -> tuple[Path, Path]:
    """A CSV with the hostile column name and a forest fitted on those names."""
    import joblib
    import numpy as np
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    rng = np.random.default_rng(0)
    frame = pd.DataFrame({NAME: rng.normal(size=300), "b": rng.normal(size=300)})
    frame["y"] = (frame[NAME] > 0).astype(int)
    folder = tmp_path_factory.mktemp("hostile")
    data = folder / "data.csv"
    frame.to_csv(data, index=False)
    model = folder / "model.joblib"
    joblib.dump(DecisionTreeClassifier(max_depth=3, random_state=0).fit(frame[[NAME, "b"]], frame["y"]), model)
    return data, model


@pytest.mark.process  # the command on a pseudo-terminal
def test_live_table_summary_and_verbose_escape_the_data(hostile, tmp_path):
    data, model = hostile
    code, terminal = run_in_pty(["explain", str(data), "-m", str(model), "-t", "y", "--seed", "1", "--verbose"],
                                tmp_path / "traces.csv")
    assert code == 0, terminal.decode(errors="replace")
    assert_clean(terminal)
    assert b"\\x1b]52;c;aGFja2Vk\\x07" in terminal and LINK.encode() in terminal  # shown, escaped
    assert NAME.encode() in (tmp_path / "traces.csv").read_bytes().split(b"\n")[0]  # the traces keep the data


@pytest.mark.process  # the command on a pseudo-terminal
def test_batch_table_escapes_the_data(hostile, tmp_path):
    data, model = hostile
    code, terminal = run_in_pty(["batch", str(data), "-m", str(model), "-t", "y", "--seed", "1"],
                                tmp_path / "batch.csv")
    assert code == 0, terminal.decode(errors="replace")
    assert_clean(terminal)
    assert NAME.encode() in (tmp_path / "batch.csv").read_bytes()


@pytest.mark.process  # the command on a pseudo-terminal
def test_usage_and_data_errors_escape_the_data(hostile, tmp_path):
    data, model = hostile
    # a usage error quoting the header (--target names no column; the columns are listed)
    code, terminal = run_in_pty(["explain", str(data), "-m", str(model), "-t", "nope", "--no-live"],
                                tmp_path / "out.csv")
    assert code == 1 and b"nope" in terminal
    assert_clean(terminal)
    code, terminal = run_in_pty(["explain", str(data), "-m", str(model), "-t", "y", "--features", f"b,{LINK}z",
                                 "--no-live"], tmp_path / "out.csv")
    assert code == 2, terminal.decode(errors="replace")
    assert_clean(terminal)
    # a file name with a control sequence
    weird = tmp_path / f"d{CLEAR}.csv"
    weird.write_bytes(data.read_bytes())
    code, terminal = run_in_pty(["explain", str(weird), "-m", str(tmp_path / "missing.joblib"), "-t", "y"],
                                tmp_path / "out.csv")
    assert code == 1
    assert_clean(terminal)


@pytest.mark.process  # the command on a pseudo-terminal
def test_a_servers_error_message_is_escaped(tmp_path, hostile):
    from tests.sources.answers import Answers, Reply

    data, _ = hostile
    server = Answers(lambda path, payload: Reply({"message": f"bad input {OSC52}{CLEAR}{LINK}click[/link]"},
                                                 status=400))
    try:
        code, terminal = run_in_pty(["batch", str(data), "--model-url", server.url, "--task", "classification",
                                     "-t", "y"], tmp_path / "out.csv")
    finally:
        server.close()
    assert code == 1
    assert_clean(terminal)
    assert b"HTTP 400" in terminal and b"\\x1b]52" in terminal


def test_flags_show_no_bool_type_in_help():
    from typer.testing import CliRunner

    from ipfi_cli.cli.app import app

    for command in ("explain", "batch", "compare"):
        result = CliRunner().invoke(app, [command, "--help"], env={"COLUMNS": "200"})
        assert result.exit_code == 0 and "--learn" in result.stdout or command == "batch"
        assert "<bool>" not in result.stdout and "BOOLEAN" not in result.stdout
        assert "<int" in result.stdout or "INTEGER" in result.stdout  # other types stay (spelled by Typer's version)


@pytest.mark.process  # the command on a pseudo-terminal
def test_keys_from_the_data_are_escaped_in_the_live_table_and_the_summary(hostile, tmp_path):
    """explain --by: a key value and a key column's name with control sequences, shown escaped."""
    import pandas as pd

    data, model = hostile
    frame = pd.read_csv(data)
    key = f"k{OSC52}{CLEAR}"
    frame.insert(0, f"shop{CLEAR}", [key if i % 2 else "plain" for i in range(len(frame))])
    keyed = tmp_path / "keyed.csv"
    frame.to_csv(keyed, index=False)
    code, terminal = run_in_pty(["explain", str(keyed), "-m", str(model), "-t", "y", "--seed", "1",
                                 "--by", f"shop{CLEAR}", "--batch-size", "10"], tmp_path / "traces.csv")
    assert code == 0, terminal.decode(errors="replace")
    assert_clean(terminal)
    assert b"\\x1b[2J" in terminal  # shown, escaped
    assert key.encode() in (tmp_path / "traces.csv").read_bytes()  # the traces keep the data


# -- stdout on a terminal: the data stream ------------------------------------------------------
def run_stdout_in_pty(args: list[str], timeout: float = 120) -> tuple[int, bytes]:
    """Run ``python -m ipfi_cli ARGS`` with stdout on a pty (stderr and stdin elsewhere); return
    the exit code and every byte the terminal got."""
    main, secondary = pty.openpty()
    env = dict(os.environ, TERM="xterm-256color", COLUMNS="120", PYTHONPATH=str(ROOT / "src"))
    process = subprocess.Popen([sys.executable, "-m", "ipfi_cli", *args], stdin=subprocess.DEVNULL,
                               stdout=secondary, stderr=subprocess.DEVNULL, cwd=ROOT, env=env, close_fds=True)
    os.close(secondary)
    return _read_pty(main, process, timeout)


@pytest.fixture(scope="module")
def keyed(hostile, tmp_path_factory) -> Path:
    """The hostile data with a key column whose name and one value hold control sequences."""
    import pandas as pd

    data, _ = hostile
    frame = pd.read_csv(data)
    frame.insert(0, f"shop{CLEAR}", [f"k{OSC52}" if i % 2 else "plain" for i in range(len(frame))])
    path = tmp_path_factory.mktemp("keyed") / "keyed.csv"
    frame.to_csv(path, index=False)
    return path


@pytest.mark.process  # the command on a pseudo-terminal
@pytest.mark.parametrize("fmt", ["csv", "jsonl"])
def test_traces_keys_and_batch_records_on_a_terminal_are_escaped(hostile, keyed, fmt):
    data, model = hostile
    runs = [["explain", str(data), "-m", str(model), "-t", "y", "--seed", "1", "-e", "1000", "-q", "-F", fmt],
            ["explain", str(keyed), "-m", str(model), "-t", "y", "--seed", "1", "-e", "1000", "-q", "-F", fmt,
             "--by", f"shop{CLEAR}"],
            ["batch", str(data), "-m", str(model), "-t", "y", "--seed", "1", "-M", "2", "-q", "-F", fmt]]
    for args in runs:
        code, terminal = run_stdout_in_pty(args)
        assert code == 0, terminal.decode(errors="replace")
        assert_clean(terminal)
        assert b"\x07" not in terminal and b"\x1b" not in terminal
        assert b"x1b]52;c;aGFja2Vk" in terminal  # shown escaped (once more in JSON: \\x1b)
        if "--by" in args:
            assert b"x1b[2J" in terminal and b"plain" in terminal


@pytest.mark.process  # the command into a pipe
def test_traces_keys_and_batch_records_into_a_pipe_keep_the_bytes(hostile, keyed):
    data, model = hostile
    env = dict(os.environ, PYTHONPATH=str(ROOT / "src"))

    def stdout(*args: str) -> bytes:
        result = subprocess.run([sys.executable, "-m", "ipfi_cli", *args], capture_output=True, cwd=ROOT, env=env,
                                timeout=120)
        assert result.returncode == 0, result.stderr.decode(errors="replace")
        return result.stdout

    traces = stdout("explain", str(data), "-m", str(model), "-t", "y", "--seed", "1", "-e", "1000", "-q")
    assert traces.split(b"\n")[0] == f"row,{NAME},b".encode()
    by = stdout("explain", str(keyed), "-m", str(model), "-t", "y", "--seed", "1", "-e", "1000", "-q",
                "--by", f"shop{CLEAR}")
    lines = by.split(b"\n")
    assert lines[0] == f"shop{CLEAR},row,{NAME},b".encode()
    assert {line.split(b",")[0] for line in lines[1:] if line} == {b"plain", f"k{OSC52}".encode()}
    records = stdout("batch", str(data), "-m", str(model), "-t", "y", "--seed", "1", "-M", "2", "-q")
    assert f"\n{NAME},".encode() in records
