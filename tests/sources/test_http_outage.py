"""A served model that goes away for 12 s in the middle of a stream and comes back (slow tier).

The model server runs in a process of its own (:mod:`sources.wire`), killed with SIGKILL and
started again on the same port; rows are piped into ``ipfi explain`` at a steady rate. The run
waits (the old retry budget gave up after ~8 s), says so (the first notice comes after 5 s of an
outage), and writes the bytes of a run without an outage. A longer outage than ``--model-wait`` ends
the run with exit 1 and a state to continue from.
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from .conftest import free_port

pytestmark = pytest.mark.slow

WIRE = Path(__file__).with_name("wire.py")
#: seconds the model is down: past the old retry budget (~8 s) and the first notice (5 s)
OUTAGE = 12.0


def start_model(model: Path, port: int) -> subprocess.Popen:
    process = subprocess.Popen([sys.executable, str(WIRE), str(model), str(port)], stdout=subprocess.PIPE,
                               stderr=subprocess.DEVNULL, start_new_session=True)
    assert process.stdout is not None
    assert process.stdout.readline().startswith(b"http://127.0.0.1:")  # it serves
    return process


def kill(process: subprocess.Popen) -> None:
    if process.poll() is None:
        os.killpg(process.pid, signal.SIGKILL)
    process.wait(timeout=10)


def ipfi(*args: object, stdin: int | None = None) -> subprocess.Popen:
    env = dict(os.environ, PYTHONUNBUFFERED="1")
    return subprocess.Popen([sys.executable, "-m", "ipfi_cli", *map(str, args)], stdin=stdin,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, env=env)


def feed(process: subprocess.Popen, lines: list[str], every: float) -> None:
    """The rows, one every ``every`` seconds (a producer that blocks when ipfi does not read)."""
    assert process.stdin is not None
    for line in lines:
        process.stdin.write(line.encode() + b"\n")
        process.stdin.flush()
        time.sleep(every)
    process.stdin.close()
    process.stdin = None  # communicate() then only reads


def test_a_12_second_outage_is_waited_out(forest, data_csv, tmp_path):
    _, model = forest
    port = free_port()
    url = f"http://127.0.0.1:{port}/invocations"
    args = ("explain", "-", "--model-url", url, "--task", "classification", "-t", "class", "--seed", 11,
            "--no-live", "-q", "--batch-size", 10)
    lines = data_csv.read_text().splitlines()
    server = start_model(model, port)
    try:
        reference = ipfi(*args, stdin=subprocess.PIPE)
        feed(reference, lines, 0.0)
        expected, _ = reference.communicate(timeout=300)
        assert reference.returncode == 0

        run = ipfi(*args, stdin=subprocess.PIPE)
        producer = threading.Thread(target=feed, args=(run, lines, 0.02))  # ~3 s of rows
        producer.start()
        time.sleep(1.0)
        kill(server)  # mid-stream
        time.sleep(OUTAGE)
        server = start_model(model, port)
        producer.join(timeout=120)
        out, err = run.communicate(timeout=300)
    finally:
        kill(server)
    assert run.returncode == 0, err.decode()
    assert out == expected
    text = err.decode()
    assert "model unreachable for" in text and "connection refused" in text, text
    back = re.search(r"the model answers again, after (\d+) s", text)
    assert back is not None and int(back[1]) > 8, text  # longer than the old retry budget


def test_an_outage_longer_than_model_wait_leaves_a_state_to_continue(forest, data_csv, tmp_path):
    _, model = forest
    port = free_port()
    url = f"http://127.0.0.1:{port}/invocations"
    state = tmp_path / "run.state"
    args = ("explain", data_csv, "--model-url", url, "--task", "classification", "-t", "class", "--seed", 11,
            "--no-live", "-q", "--batch-size", 10, "--state", state, "--checkpoint-every", 10,
            "-o", tmp_path / "traces.csv")
    server = start_model(model, port)
    run = ipfi(*args, "--model-wait", "3s")
    try:
        deadline = time.monotonic() + 60
        while not state.exists() and time.monotonic() < deadline:  # a first checkpoint is saved
            time.sleep(0.01)
        kill(server)
        _, err = run.communicate(timeout=120)
        assert run.returncode == 1, err.decode()
        text = err.decode()
        assert "did not answer for" in text and "(--model-wait 3 s)" in text
        assert "run the same command again to continue from there" in text, text
        server = start_model(model, port)
        again = ipfi(*args)
        _, err = again.communicate(timeout=300)
        assert again.returncode == 0, err.decode()
    finally:
        kill(server)
    server = start_model(model, port)
    try:
        whole = ipfi("explain", data_csv, "--model-url", url, "--task", "classification", "-t", "class", "--seed", 11,
                     "--no-live", "-q", "--batch-size", 10)
        expected, err = whole.communicate(timeout=300)
    finally:
        kill(server)
    assert whole.returncode == 0, err.decode()
    assert (tmp_path / "traces.csv").read_bytes() == expected
