"""``ipfi`` as a separate process on real pipes: cat |, | head, a slow writer, Ctrl-C, a terminal.

Exit codes, stdout and stderr are checked separately. These start Python processes that
import scikit-learn, so they take a second or two each.
"""

from __future__ import annotations

import os
import select
import signal
import subprocess
import sys
import time

import pytest

from .conftest import ROOT, SAMPLE, head_lines, ipfi_command, run_shell, subprocess_env

pytestmark = pytest.mark.slow

HGB = str(SAMPLE / "agrawal_hgb.joblib")
HOEFFDING = str(SAMPLE / "agrawal_hoeffding.pkl")


def quoted(args):
    return " ".join(f"'{a}'" for a in args)


def test_help_does_not_import_heavy_libraries():
    code = ("import sys; sys.argv = ['ipfi', '--help']\n"
            "from ipfi_cli.cli.app import main\n"
            "try:\n    main()\nexcept SystemExit:\n    pass\n"
            "print([m for m in ('sklearn', 'river', 'pandas', 'numpy') if m in sys.modules], file=sys.stderr)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and "Usage" in result.stdout
    assert result.stderr.strip() == "[]"


def test_python_dash_m_and_console_script():
    result = subprocess.run([*ipfi_command(), "--version"], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0 and result.stdout.startswith("ipfi ")


def test_cat_pipe_equals_file_input(static_csv):
    args = ["-m", HGB, "-t", "class", "-M", "2", "--seed", "5"]
    piped = run_shell(f"cat '{static_csv}' | {quoted(ipfi_command())} explain {quoted(args)}")
    direct = run_shell(f"{quoted(ipfi_command())} explain '{static_csv}' {quoted(args)} -q")
    assert piped.returncode == 0, piped.stderr
    assert piped.stdout == direct.stdout and piped.stdout.count(b"\n") == 41
    assert b"importance" in piped.stderr  # the summary table, on stderr only
    assert direct.stderr == b""


def test_head_exits_quietly(tmp_path):
    data = tmp_path / "big.csv"
    data.write_text(head_lines(SAMPLE / "agrawal_static.csv", 3000))
    result = run_shell(f"{quoted(ipfi_command())} explain '{data}' -m '{HGB}' -t class -M 1 --seed 1 "
                       f"--batch-size 200 | head -1; echo \"status=${{PIPESTATUS[0]}}\" >&2")
    assert result.stdout.decode().startswith("row,salary")
    assert result.stdout.count(b"\n") == 1
    stderr = result.stderr.decode()
    assert "Traceback" not in stderr and "Exception ignored" not in stderr and "Broken pipe" not in stderr
    assert stderr.strip() == "status=1"  # quiet, and no summary table


def wait_until_full(pipe, timeout: float = 120) -> None:
    """Wait until the writer has filled ``pipe`` (the bytes waiting are within two pages of its
    capacity, which writes that do not end on a page boundary leave, and stay so): the writer is then
    blocked on it, however slowly it got there."""
    import array
    import fcntl
    import termios

    fd = pipe.fileno()
    capacity = fcntl.fcntl(fd, 1032)  # F_GETPIPE_SZ (Linux)
    deadline = time.monotonic() + timeout
    waiting, before = array.array("i", [0]), -1
    while time.monotonic() < deadline:
        fcntl.ioctl(fd, termios.FIONREAD, waiting)
        if waiting[0] > capacity - 2 * 4096 and waiting[0] == before:
            return
        before = waiting[0]
        time.sleep(0.2)
    raise AssertionError(f"the writer did not fill the pipe in {timeout} s ({waiting[0]} of {capacity} bytes)")


def test_unbuffered_python_writes_every_byte_to_a_slow_reader_and_sees_it_close(tmp_path):
    """Under ``PYTHONUNBUFFERED`` stdout is a raw stream whose write may take part of the bytes
    (a full pipe whose reader closes, a signal): the rest is written, or the run says the pipe
    closed (exit 1). Before, the rest was dropped and the run exited 0."""
    data = tmp_path / "big.csv"
    data.write_text(head_lines(SAMPLE / "agrawal_static.csv", 3000))  # ~0.5 MB of traces: beyond a pipe's 64 kB
    def command_for(path, *extra):
        return [*ipfi_command(), "explain", str(path), "-m", HGB, "-t", "class", "-M", "1", "--seed", "1", "-q",
                *extra]

    command = command_for(data)
    env = subprocess_env(PYTHONUNBUFFERED="1")
    whole = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert whole.returncode == 0 and whole.stdout.count(b"\n") > 2900
    slow = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)
    assert slow.stdout is not None
    wait_until_full(slow.stdout)  # the explainer is blocked on the full pipe
    chunks = []
    while chunk := slow.stdout.read(4096):
        chunks.append(chunk)
        time.sleep(0.001)
    assert slow.wait(timeout=120) == 0
    assert b"".join(chunks) == whole.stdout
    # 600 rows in one micro-batch: ~100 kB of traces in one write, the run's last, which the pipe
    # takes in part when its reader closes (before, that part passed for the whole: exit 0)
    small = tmp_path / "small.csv"
    small.write_text(head_lines(SAMPLE / "agrawal_static.csv", 600))
    closing = subprocess.Popen(command_for(small, "--batch-size", "1000"), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, env=env)
    assert closing.stdout is not None
    wait_until_full(closing.stdout)  # the last write is under way, the pipe took part of it
    closing.stdout.read(1000)
    closing.stdout.close()  # a reader that stops early, as head does
    assert closing.wait(timeout=120) == 1
    assert b"Traceback" not in closing.stderr.read()


def test_slow_writer_row_appears_within_a_second(static_csv):
    lines = static_csv.read_text().splitlines(keepends=True)
    process = subprocess.Popen([*ipfi_command(), "explain", "-m", HGB, "-t", "class", "-M", "2", "--seed", "1", "-q"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=subprocess_env(), cwd=ROOT)
    fd = process.stdout.fileno()
    pending = bytearray()

    def next_line(timeout):
        """The next line of stdout, read from the raw pipe (a buffered reader would hide lines from select)."""
        deadline = time.monotonic() + timeout
        while b"\n" not in pending:
            ready, _, _ = select.select([fd], [], [], max(0.0, deadline - time.monotonic()))
            assert ready, "no output in time"
            chunk = os.read(fd, 1 << 16)
            assert chunk, "stdout closed"
            pending.extend(chunk)
        end = pending.index(b"\n") + 1
        line = bytes(pending[:end])
        del pending[:end]
        return line

    try:
        process.stdin.write("".join(lines[:3]).encode())  # header and two rows
        process.stdin.flush()
        assert next_line(60).startswith(b"row,")  # start-up (imports, model) may take a while
        assert next_line(10).startswith(b"1,")
        assert next_line(10).startswith(b"2,")
        for n in (3, 4):  # the process now waits for input: each new row must come out at once
            time.sleep(0.5)
            sent = time.monotonic()
            process.stdin.write(lines[n].encode())
            process.stdin.flush()
            line = next_line(5)
            assert line.startswith(f"{n},".encode())
            assert time.monotonic() - sent < 1.0
        process.stdin.close()
        assert process.wait(30) == 0
    finally:
        process.kill()
        process.wait()


def test_sigint_exits_130_with_complete_records_only(tmp_path):
    meta = tmp_path / "meta.json"
    cat = subprocess.Popen(["cat", str(SAMPLE / "agrawal_drift.csv")], stdout=subprocess.PIPE)
    process = subprocess.Popen([*ipfi_command(), "explain", "-m", HOEFFDING, "-t", "class", "--learn", "-M", "1",
                                "--seed", "1", "--meta", str(meta)],
                               stdin=cat.stdout, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=subprocess_env(), cwd=ROOT)
    cat.stdout.close()
    try:
        first = process.stdout.readline()  # the header: the run has started
        assert first.startswith(b"row,salary")
        first += process.stdout.readline()
        time.sleep(0.5)
        process.send_signal(signal.SIGINT)
        # read through the same buffered file as readline() (communicate() would skip its buffer)
        rest = process.stdout.read()
        err = process.stderr.read()
        process.wait(timeout=30)
    finally:
        process.kill()
        cat.kill()
    assert process.returncode == 130
    out = first + rest
    assert out.endswith(b"\n")
    lines = out.decode().splitlines()
    assert 2 < len(lines) < 20001
    assert all(line.count(",") == 9 for line in lines)
    assert [int(line.split(",")[0]) for line in lines[1:]] == list(range(1, len(lines)))
    stderr = err.decode()
    assert "interrupted after" in stderr and "Traceback" not in stderr
    assert "importance" in stderr  # the last importances
    import json

    assert json.loads(meta.read_text())["status"] == "interrupted"


def _run_with_terminal_stderr(args, env):
    """Run with stderr on a pseudo-terminal and stdout on a pipe; returns (code, stdout, stderr)."""
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen([*ipfi_command(), *args], stdout=subprocess.PIPE, stderr=slave,
                               stdin=subprocess.DEVNULL, env=env, cwd=ROOT)
    os.close(slave)
    out, err = b"", b""
    streams = [master, process.stdout.fileno()]
    deadline = time.monotonic() + 120
    while streams and time.monotonic() < deadline:
        ready, _, _ = select.select(streams, [], [], 1.0)
        for fd in ready:
            try:
                chunk = os.read(fd, 1 << 16)
            except OSError:  # the pty reports EIO once the child has closed it
                chunk = b""
            if not chunk:
                streams.remove(fd)
            elif fd == master:
                err += chunk
            else:
                out += chunk
    os.close(master)
    return process.wait(30), out, err


def test_live_table_on_a_terminal_never_swallows_stdout(drift_csv):
    args = ["explain", str(drift_csv), "-m", HOEFFDING, "-t", "class", "--learn", "-M", "1", "--seed", "2"]
    code, out, err = _run_with_terminal_stderr(args, subprocess_env(TERM="xterm"))
    assert code == 0
    assert out.count(b"\n") == 61 and out.startswith(b"row,")  # every record reached stdout
    assert b"\x1b[" in err and b"importance" in err  # Rich drew the table on the terminal
    assert b"row," not in err


def test_no_live_table_for_a_dumb_terminal(drift_csv):
    args = ["explain", str(drift_csv), "-m", HOEFFDING, "-t", "class", "--learn", "-M", "1", "--seed", "2"]
    code, out, err = _run_with_terminal_stderr(args, subprocess_env(TERM="dumb"))
    assert code == 0 and out.count(b"\n") == 61
    assert err.count(b"importance") == 1  # one summary table, no refreshing frames


def test_terminal_stdin_gets_the_hint_and_ctrl_c_exits_130():
    import pty

    master, slave = pty.openpty()
    process = subprocess.Popen([*ipfi_command(), "explain", "-m", HGB, "-t", "class"], stdin=slave,
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=subprocess_env(), cwd=ROOT)
    os.close(slave)
    try:
        err = b""
        deadline = time.monotonic() + 60
        while b"Waiting for standard input" not in err and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stderr], [], [], 1.0)
            if ready:
                err += os.read(process.stderr.fileno(), 4096)
        assert b"No input file or piped data provided. Waiting for standard input:" in err
        time.sleep(0.3)
        process.send_signal(signal.SIGINT)  # while it waits for input
        out, rest = process.communicate(timeout=30)
    finally:
        process.kill()
        os.close(master)
    assert process.returncode == 130
    assert out == b"" and b"Traceback" not in err + rest


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM])
def test_an_interrupt_ends_the_output_with_the_last_explained_row(tmp_path, signum):
    """With --every 50 the rows after the last multiple of 50 used to be lost on Ctrl-C; SIGTERM (kill,
    docker stop) killed the run with no summary and no --meta. Both now end as the input's end does:
    the last explained row's record, the summary, --meta, exit 130."""
    import json

    import joblib
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    data = load_diabetes(as_frame=True)
    frame = data.data.assign(target=data.target)
    joblib.dump(Ridge().fit(data.data, data.target), tmp_path / "ridge.joblib")
    text = frame.head(275).to_csv(index=False)
    meta = tmp_path / "meta.json"
    process = subprocess.Popen([*ipfi_command(), "explain", "-m", str(tmp_path / "ridge.joblib"), "-t", "target",
                                "--seed", "0", "--every", "50", "--no-live", "--meta", str(meta)],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=subprocess_env(), cwd=ROOT)
    try:
        process.stdin.write(text.encode())
        process.stdin.flush()  # and kept open: the run waits for more rows
        lines = [process.stdout.readline()]
        while not lines[-1].startswith(b"250,"):
            assert lines[-1], "stdout closed early"
            lines.append(process.stdout.readline())
        time.sleep(1.0)  # rows 251-275 came in the same read: explained by now
        process.send_signal(signum)
        rest = process.stdout.read()
        err = process.stderr.read().decode()
        process.wait(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130
    records = b"".join(lines).decode().splitlines() + rest.decode().splitlines()
    assert [r.split(",")[0] for r in records] == ["row", "50", "100", "150", "200", "250", "275"]
    assert "interrupted after 275 rows" in err and "Traceback" not in err
    assert json.loads(meta.read_text())["status"] == "interrupted"


def test_an_interrupted_learning_run_saves_the_model_it_has_learned(tmp_path):
    """--learn --save-model: Ctrl-C used to discard hours of learning ("the model was not saved"); the
    model saved at the interruption is the one an uninterrupted run over the same rows saves."""
    import joblib

    rows = (SAMPLE / "agrawal_drift.csv").read_text().splitlines(keepends=True)[:1001]
    common = ["-m", HOEFFDING, "-t", "class", "--learn", "-M", "1", "--seed", "1", "--every", "500", "--no-live"]
    process = subprocess.Popen([*ipfi_command(), "explain", *common, "--save-model", str(tmp_path / "cut.pkl")],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=subprocess_env(), cwd=ROOT)
    try:
        process.stdin.write("".join(rows).encode())
        process.stdin.flush()
        line = process.stdout.readline()
        while not line.startswith(b"1000,"):
            assert line, "stdout closed early"
            line = process.stdout.readline()
        process.send_signal(signal.SIGINT)
        process.stdout.read()
        err = process.stderr.read().decode()
        process.wait(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130
    assert "interrupted after 1,000 rows" in err and "the model as learned so far is saved to" in err
    whole = tmp_path / "rows.csv"
    whole.write_text("".join(rows))
    done = subprocess.run([*ipfi_command(), "explain", str(whole), *common, "-q", "--save-model",
                           str(tmp_path / "whole.pkl")], capture_output=True, env=subprocess_env(), cwd=ROOT)
    assert done.returncode == 0, done.stderr.decode()
    cut, reference = joblib.load(tmp_path / "cut.pkl"), joblib.load(tmp_path / "whole.pkl")
    later = [dict(zip(rows[0].strip().split(","), map(float, line.strip().split(","))))
             for line in (SAMPLE / "agrawal_drift.csv").read_text().splitlines()[2000:2200]]
    for x in later:
        x.pop("class")
        assert cut.predict_proba_one(x) == reference.predict_proba_one(x)


def test_an_interrupted_pdp_writes_the_curves_of_the_last_rows_and_says_so(tmp_path):
    """ipfi pdp on Ctrl-C left its curves at the last multiple of --every and said nothing."""
    import joblib
    from sklearn.datasets import load_diabetes
    from sklearn.linear_model import Ridge

    data = load_diabetes(as_frame=True)
    joblib.dump(Ridge().fit(data.data, data.target), tmp_path / "ridge.joblib")
    text = data.data.assign(target=data.target).head(250).to_csv(index=False)
    process = subprocess.Popen([*ipfi_command(), "pdp", "-m", str(tmp_path / "ridge.joblib"), "-t", "target",
                                "--feature", "bmi", "--every", "100"],
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               env=subprocess_env(), cwd=ROOT)
    try:
        process.stdin.write(text.encode())
        process.stdin.flush()
        lines = [process.stdout.readline()]
        while not lines[-1].startswith(b"200,"):
            assert lines[-1], "stdout closed early"
            lines.append(process.stdout.readline())
        time.sleep(1.0)  # rows 201-250 came in the same read
        process.send_signal(signal.SIGINT)
        rest = process.stdout.read()
        err = process.stderr.read().decode()
        process.wait(timeout=30)
    finally:
        process.kill()
    assert process.returncode == 130
    rows = {line.split(",")[0] for line in (b"".join(lines) + rest).decode().splitlines()[1:]}
    assert rows == {"100", "200", "250"}
    assert "interrupted after 250 rows; every record written is complete" in err and "Traceback" not in err
