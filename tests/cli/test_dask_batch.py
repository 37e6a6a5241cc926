"""``ipfi batch --scheduler`` / ``--workers`` on real Dask processes on 127.0.0.1: the same bytes as one process."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

pytest.importorskip("distributed")

from .conftest import ROOT, subprocess_env  # noqa: E402


def dask_command() -> list[str]:
    script = Path(sys.executable).with_name("dask")
    return [str(script)] if script.exists() else [shutil.which("dask") or "dask"]


def start_scheduler(info: Path, **popen) -> subprocess.Popen:
    """A `dask scheduler` on 127.0.0.1 that has written its address to ``info``."""
    process = subprocess.Popen([*dask_command(), "scheduler", "--host", "127.0.0.1", "--port", "0", "--no-dashboard",
                                "--scheduler-file", str(info)], **popen)
    deadline = time.monotonic() + 60
    while not info.exists() and time.monotonic() < deadline and process.poll() is None:
        time.sleep(0.2)
    if not info.exists():
        process.kill()
        process.wait(timeout=20)
        raise AssertionError("the scheduler did not start")
    return process


@pytest.fixture(scope="module")
def scheduler(tmp_path_factory):
    """A `dask scheduler` and a `dask worker` process with 2 single-thread workers, on 127.0.0.1."""
    from distributed import Client

    folder = tmp_path_factory.mktemp("dask")
    info = folder / "scheduler.json"
    env = subprocess_env(PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    started = [start_scheduler(info, env=env, cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)]
    try:
        started.append(subprocess.Popen([*dask_command(), "worker", "--scheduler-file", str(info), "--nworkers", "2",
                                         "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"], env=env,
                                        cwd=folder, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL))
        with Client(scheduler_file=str(info), timeout=30) as client:
            client.wait_for_workers(2, timeout=90)
            address = client.scheduler.address
        yield address
    finally:
        for process in reversed(started):
            process.terminate()
        for process in reversed(started):
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()


def test_batch_on_a_running_cluster_gives_the_bytes_of_one_process(run, agrawal_small, hgb, scheduler):
    common = ["batch", agrawal_small, "-m", hgb, "-t", "class", "--seed", "4", "-M", "3", "-q"]
    alone = run(*common)
    spread = run(*common, "--scheduler", scheduler)
    assert alone.exit_code == 0 and spread.exit_code == 0, spread.stderr
    assert spread.stdout == alone.stdout and spread.stdout.count("\n") == 10


@pytest.mark.slow  # starts and stops a local cluster of two worker processes: about 20 s
def test_batch_on_a_local_cluster_and_one_line_errors(run, agrawal_small, hgb):
    common = ["batch", agrawal_small, "-m", hgb, "-t", "class", "--seed", "4", "-M", "2", "-q"]
    alone = run(*common)
    local = run(*common, "--workers", "2")
    assert local.exit_code == 0, local.stderr
    assert local.stdout == alone.stdout
    both = run(*common, "--workers", "2", "--scheduler", "tcp://127.0.0.1:1")
    assert both.exit_code == 2 and "not both" in both.stderr
    nobody = run(*common, "--scheduler", "tcp://127.0.0.1:1")
    lines = nobody.stderr.strip().splitlines()
    assert nobody.exit_code == 1 and len(lines) == 1 and "cannot reach the Dask scheduler" in lines[0], nobody.stderr


@pytest.fixture
def two_workers(tmp_path):
    """A `dask scheduler` and two separate `dask worker` processes without nannies (a killed one stays dead)."""
    from distributed import Client

    info = tmp_path / "scheduler.json"
    env = subprocess_env(PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    quiet = {"env": env, "cwd": tmp_path, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    started = [start_scheduler(info, **quiet)]
    try:
        for _ in range(2):
            started.append(subprocess.Popen([*dask_command(), "worker", "--scheduler-file", str(info), "--no-nanny",
                                             "--nthreads", "1", "--no-dashboard", "--host", "127.0.0.1"], **quiet))
        client = Client(scheduler_file=str(info), timeout=30)
        client.wait_for_workers(2, timeout=90)
        yield client
        client.close()
    finally:
        for process in reversed(started):
            process.kill()
            process.wait(timeout=20)


@pytest.mark.slow  # a scheduler, two workers and a batch run long enough to kill one of them: about 30 s
def test_a_worker_killed_mid_run_changes_nothing(tmp_path, hgb, two_workers):
    """Dask runs the lost worker's task again on the other one: the same bytes as one process, exit 0."""
    import signal

    client = two_workers
    command = [sys.executable, "-m", "ipfi_cli", "batch", str(ROOT / "sample_data" / "agrawal_static.csv"),
               "-m", hgb, "-t", "class", "--seed", "4", "-M", "12", "-q"]
    env = subprocess_env(PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))
    alone = subprocess.run(command, capture_output=True, text=True, env=env, timeout=300)
    assert alone.returncode == 0, alone.stderr
    pids = client.run(os.getpid)
    spread = subprocess.Popen([*command, "--scheduler", client.scheduler.address], stdout=subprocess.PIPE,
                              stderr=subprocess.PIPE, text=True, env=env)
    killed = None
    deadline = time.monotonic() + 120
    while killed is None and spread.poll() is None and time.monotonic() < deadline:
        busy = [worker for worker, keys in client.processing().items() if keys]
        if busy:
            killed = pids[busy[0]]
            os.kill(killed, signal.SIGKILL)
        time.sleep(0.05)
    out, err = spread.communicate(timeout=300)
    assert killed is not None, "the run ended before a worker could be killed"
    assert spread.returncode == 0, err
    assert out == alone.stdout
    assert len(client.scheduler_info()["workers"]) == 1  # the killed worker did not come back


# -- explain --by: the keys spread over the workers ------------------------------------------------------
ELEC = ROOT / "sample_data" / "elec2_excerpt.csv"  # real data: the Elec2 electricity market, an excerpt
ELEC_MODEL = ROOT / "sample_data" / "elec2_hgb.joblib"


def keyed_explain(run, source, *options, input=None):
    return run("explain", source, "-m", ELEC_MODEL, "-t", "class", "--seed", "7", "--no-live", "--by", "day",
               *options, input=input)


def test_explain_by_on_a_running_cluster_gives_the_bytes_of_one_process(run, scheduler, tmp_path):
    """Traces, change events, the per-key summary and --meta's keys: those of one process."""
    import json

    lines = ELEC.read_text().splitlines()
    data = tmp_path / "elec.csv"
    data.write_text("\n".join(lines[:901]) + "\n")
    found = {}
    for name, extra in (("alone", ()), ("spread", ("--scheduler", scheduler))):
        events, meta = tmp_path / f"{name}.jsonl", tmp_path / f"{name}.json"
        result = keyed_explain(run, data, "--every", "40", "--bounds", "--detect", "--events", events,
                               "--meta", meta, *extra)
        assert result.exit_code == 0, result.stderr
        found[name] = (result.stdout, events.read_text(), json.loads(meta.read_text())["keys"], result.stderr)
    alone, spread = found["alone"], found["spread"]
    assert spread[0] == alone[0] and alone[0].count("\n") > 20
    assert spread[1] == alone[1]
    assert spread[2] == alone[2] and len(alone[2]) == 7
    assert spread[3] == alone[3]  # the summary table per key, on stderr


def test_explain_by_spread_counts_and_names_bad_rows_as_one_process(run, scheduler, tmp_path):
    lines = ELEC.read_text().splitlines()
    broken = lines[:301]
    broken[40] = broken[40].replace(broken[40].split(",")[1], "", 1)  # no key value: shard 0's row
    fields = broken[120].split(",")
    broken[120] = ",".join([*fields[:3], "cheap", *fields[4:]])  # a text where the model needs a number
    data = tmp_path / "broken.csv"
    data.write_text("\n".join(broken) + "\n")
    skip = [keyed_explain(run, data, "--on-bad-row", "skip", *extra) for extra in ((), ("--scheduler", scheduler))]
    assert skip[0].exit_code == 0 and skip[1].exit_code == 0, skip[1].stderr
    assert skip[1].stdout == skip[0].stdout
    assert "skipped 2 bad row(s)" in skip[0].stderr and skip[1].stderr == skip[0].stderr
    fail = [keyed_explain(run, data, *extra) for extra in ((), ("--scheduler", scheduler))]
    assert fail[0].exit_code == fail[1].exit_code == 1
    assert fail[1].stderr.strip().splitlines()[-1] == fail[0].stderr.strip().splitlines()[-1]
    assert "row 40" in fail[1].stderr
    assert set(fail[1].stdout.splitlines()) <= set(fail[0].stdout.splitlines())


def test_explain_by_spread_refusals_are_one_line(run, tmp_path):
    data = tmp_path / "elec.csv"
    data.write_text(ELEC.read_text())
    cases = [
        (("--workers", "2"), "-", "needs an input file"),
        (("--workers", "2", "--state", tmp_path / "s.state"), data, "--state"),
    ]
    for options, source, says in cases:
        result = keyed_explain(run, source, *options, input="")
        assert result.exit_code == 2 and says in result.stderr, result.stderr
    plain = run("explain", data, "-m", ELEC_MODEL, "-t", "class", "--workers", "2")
    assert plain.exit_code == 2 and "needs --by" in plain.stderr


def test_explain_by_spread_keeps_equal_keys_together(run, scheduler, hgb, tmp_path):
    """Key values that are equal but spelled apart (7 and 7.0, read as the same number) are one key in
    one process: spread over the workers they are one key too."""
    lines = (ROOT / "sample_data" / "agrawal_static.csv").read_text().splitlines()
    spellings = ["7", "7.0", "07", "+7", "8", "8.0"]
    data = tmp_path / "store.csv"
    data.write_text("store," + lines[0] + "\n" + "\n".join(f"{spellings[i % 6]},{line}"
                                                             for i, line in enumerate(lines[1:401])) + "\n")
    common = ["explain", data, "-m", hgb, "-t", "class", "--seed", "1", "-M", "2", "--no-live", "-q", "--by",
              "store", "--every", "50"]
    alone, spread = run(*common), run(*common, "--scheduler", scheduler)
    assert alone.exit_code == 0 and spread.exit_code == 0, spread.stderr
    assert spread.stdout == alone.stdout
    assert {line.split(",")[0] for line in alone.stdout.splitlines()[1:]} == {"7", "8"}


@pytest.mark.parametrize(("address", "says"), [
    ("nonsense", "missing port"), ("tcp://127.0.0.1:notaport", "notaport"),
    ("http://127.0.0.1:8787", "http://: unknown scheme"),  # the dashboard's address
    ("tcp://127.0.0.1:99999", "port 99999 is not between 1 and 65535"), ("tcp://127.0.0.1:0", "port 0"),
    ("tcp://:8786", "no host"), ("inproc://127.0.0.1/1/1", "inproc://: not usable"),
    ("tls://127.0.0.1:8786", "tls:// needs Dask's TLS settings")])
def test_a_malformed_scheduler_address_is_one_line(run, hgb, agrawal_small, address, says):
    """Refused before anything is read or connected to (Dask raised, printed a traceback at exit and
    hung 20 s on the dashboard's http://, and waited 10 s to say it could not connect to port 99999)."""
    for command in (["batch", agrawal_small, "-m", hgb, "-t", "class", "-M", "2", "-q"],
                    ["explain", agrawal_small, "-m", hgb, "-t", "class", "-q", "--by", "elevel"]):
        start = time.monotonic()
        result = run(*command, "--scheduler", address)
        said = " ".join(result.stderr.replace("│", " ").split())
        assert result.exit_code == 2 and "tcp://HOST:PORT" in said and says in said, result.stderr
        assert time.monotonic() - start < 5  # nothing waited for


def test_explain_by_spread_names_a_relative_input_as_given(run, scheduler, tmp_path, monkeypatch):
    """A row the model fails on, in an input given by a relative path: the workers read it by its absolute
    path, and the message names it as the user gave it, as one process does (skip and fail alike)."""
    lines = ELEC.read_text().splitlines()
    broken = lines[:301]
    fields = broken[120].split(",")
    broken[120] = ",".join([*fields[:3], "cheap", *fields[4:]])  # read as text (--text): the model refuses it
    (tmp_path / "broken.csv").write_text("\n".join(broken) + "\n")
    monkeypatch.chdir(tmp_path)
    for mode in ("fail", "skip"):
        alone, spread = (keyed_explain(run, "broken.csv", "--on-bad-row", mode, "--text", "nswprice", *extra)
                         for extra in ((), ("--scheduler", scheduler)))
        assert alone.exit_code == spread.exit_code == (1 if mode == "fail" else 0), spread.stderr
        message = [line for line in spread.stderr.splitlines() if "row 120" in line]
        assert message and message[0].split("broken.csv: row 120")[0] in ("ipfi: error: ", "ipfi: warning: skipped 1 "
                                                                         "bad row(s); the first: "), spread.stderr
        assert str(tmp_path) not in spread.stderr
        assert [line for line in alone.stderr.splitlines() if "row 120" in line] == message


# -- a cluster without workers; Ctrl-C and SIGTERM --------------------------------------------------------
#: ``ipfi`` with the wait for a worker cut to 1 s (30 s in a real run)
IPFI_WAITING_1_S = [sys.executable, "-c", "import sys, ipfi_cli.run.distributed as d; d.WORKER_WAIT = 1; "
                    "from ipfi_cli.cli.app import app; app(prog_name='ipfi')"]


def ipfi_env():
    return subprocess_env(PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""))


def long_keyed_input(folder: Path) -> Path:
    """The Elec2 excerpt six times over: 30,000 rows, about 15 s of work for two workers."""
    lines = ELEC.read_text().splitlines()
    data = folder / "elec_long.csv"
    data.write_text("\n".join([lines[0], *(lines[1:] * 6)]) + "\n")
    return data


def keyed_command(data: Path, *options: str) -> list[str]:
    return ["explain", str(data), "-m", str(ELEC_MODEL), "-t", "class", "--seed", "7", "--no-live", "--by", "day",
            *options]


@pytest.fixture
def lonely_scheduler(tmp_path):
    """A `dask scheduler` on 127.0.0.1 without workers: (its address, its scheduler file, the env)."""
    import json

    info = tmp_path / "scheduler.json"
    env = ipfi_env()
    process = start_scheduler(info, env=env, cwd=tmp_path, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        yield json.loads(info.read_text())["address"], info, env
    finally:
        process.kill()
        process.wait(timeout=20)


@pytest.mark.slow  # a scheduler, a worker killed mid-run and three waits of 1 s: about 30 s
def test_a_cluster_without_workers_is_one_line_after_a_bounded_wait(tmp_path, hgb, agrawal_small, lonely_scheduler):
    """No worker at the start (batch said "unexpected TimeoutError: No valid workers found"; explain --by
    waited for ever), or none left mid-run (both waited for ever): one line naming the scheduler, exit 1."""
    from distributed import Client

    address, info, env = lonely_scheduler
    for command in (["batch", str(agrawal_small), "-m", hgb, "-t", "class", "-M", "2", "-q"],
                    keyed_command(ELEC, "-q")):
        start = time.monotonic()
        result = subprocess.run([*IPFI_WAITING_1_S, *command, "--scheduler", address],
                                capture_output=True, text=True, env=env, timeout=120)
        lines = result.stderr.strip().splitlines()
        assert result.returncode == 1 and len(lines) == 1, result.stderr
        assert lines[0] == (f"ipfi: error: the scheduler at {address} has no workers (waited 1 s): start one with "
                            f"`dask worker {address}`")
        assert time.monotonic() - start < 60
    worker = subprocess.Popen([*dask_command(), "worker", "--scheduler-file", str(info), "--no-nanny", "--nthreads",
                               "1", "--no-dashboard", "--host", "127.0.0.1"], env=env, cwd=tmp_path,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        with Client(scheduler_file=str(info), timeout=30) as client:
            client.wait_for_workers(1, timeout=90)
            run = subprocess.Popen([*IPFI_WAITING_1_S, *keyed_command(long_keyed_input(tmp_path), "-q"),
                                    "--scheduler", address], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                   text=True, env=env)
            deadline = time.monotonic() + 120
            while not any(client.processing().values()) and run.poll() is None and time.monotonic() < deadline:
                time.sleep(0.05)
            assert run.poll() is None, "the run ended before its worker could be killed"
            worker.kill()
            out, err = run.communicate(timeout=120)
    finally:
        worker.kill()
        worker.wait(timeout=20)
    assert run.returncode == 1 and err.strip().splitlines() == [
        f"ipfi: error: the scheduler at {address} has no workers (waited 1 s): start one with "
        f"`dask worker {address}`"], err
    assert out.count("\n") == 1  # the traces' header: no record is written before every shard is done


def interrupted_cleanly(returncode: int, err: str) -> None:
    assert returncode == 130, err
    for raw in ("Traceback", "Task exception was never retrieved", "AllExit", "leaked semaphore"):
        assert raw not in err, err
    assert ("ipfi: interrupted before the Dask workers were done: no records written (a run spread over workers "
            "writes them once every shard is done)") in err.splitlines(), err


@pytest.mark.slow  # runs explain --by on the module's cluster until its workers are busy: about 15 s
def test_ctrl_c_during_a_run_on_a_running_cluster_stops_it_cleanly(scheduler, tmp_path):
    """Ctrl-C while the workers explain their shards: exit 130, one true line (it said "interrupted after
    0 rows; every record written is complete" after two raw AllExit tracebacks), the tasks cancelled."""
    import signal

    from distributed import Client

    env = ipfi_env()
    with Client(scheduler, timeout=30) as client:
        run = subprocess.Popen([sys.executable, "-m", "ipfi_cli", *keyed_command(long_keyed_input(tmp_path)),
                                "--scheduler", scheduler], stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                               text=True, env=env)
        deadline = time.monotonic() + 120
        while not any(client.processing().values()) and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.05)
        assert run.poll() is None, "the run ended before it could be interrupted"
        time.sleep(1)
        run.send_signal(signal.SIGINT)
        out, err = run.communicate(timeout=120)
        interrupted_cleanly(run.returncode, err)
        assert out.count("\n") == 1
        deadline = time.monotonic() + 30  # the shards were cancelled: the workers are free again
        while any(client.processing().values()) and time.monotonic() < deadline:
            time.sleep(0.2)
        assert not any(client.processing().values())


@pytest.mark.slow  # starts a local cluster of two workers and stops it: about 20 s
def test_sigterm_during_a_run_on_a_local_cluster_stops_it_and_its_workers(tmp_path):
    """SIGTERM (as Ctrl-C) with --workers 2: exit 130, one true line, no raw traceback or leaked
    semaphores, and no worker process left behind."""
    import signal

    run = subprocess.Popen([sys.executable, "-m", "ipfi_cli", *keyed_command(long_keyed_input(tmp_path), "-v"),
                            "--workers", "2"], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=ipfi_env(), start_new_session=True)
    said = []
    for line in run.stderr:  # the cluster is up and the shards submitted
        said.append(line)
        if "shard(s) on Dask workers" in line:
            break
    assert run.poll() is None, "".join(said)
    time.sleep(2)
    run.send_signal(signal.SIGTERM)
    out, err = run.communicate(timeout=120)
    interrupted_cleanly(run.returncode, "".join(said) + err)
    assert out.count("\n") == 1
    deadline = time.monotonic() + 10
    while time.monotonic() < deadline:
        left = subprocess.run(["ps", "-o", "pid=,stat=,args=", "-s", str(run.pid)], capture_output=True,
                              text=True).stdout.splitlines()
        if not left:
            break
        time.sleep(0.5)
    for line in left:
        os.kill(int(line.split()[0]), signal.SIGKILL)
    assert not left, f"processes outlived the run: {left}"
