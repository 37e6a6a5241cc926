"""Same seed, same bytes across processes, also for a model whose internal order depends on
Python's string hashing: a river union of two ``compose.Select`` branches (``Select`` keeps
its columns in a set, so the order of the sums inside the model changes per process); so
also on Dask workers, which must hash strings as the process that sends them the work."""

from __future__ import annotations

import pickle
import subprocess
import sys
import time

import numpy as np
import pytest

from ipfi_cli.models.hashing import PINNED_SEED

from .conftest import ROOT, ipfi_command, subprocess_env

NAMES = [f"f{i}" for i in range(8)]


@pytest.fixture(scope="module")
def union_pipeline(tmp_path_factory):
    from river import compose, linear_model, preprocessing

    folder = tmp_path_factory.mktemp("hash")
    model = ((compose.Select(*NAMES[:4]) | preprocessing.StandardScaler())
             + (compose.Select(*NAMES[4:]) | preprocessing.StandardScaler())) | linear_model.LogisticRegression()
    with open(folder / "model.pkl", "wb") as f:
        pickle.dump(model, f)
    rng = np.random.default_rng(0)
    lines = [",".join([*NAMES, "y"])]
    for _ in range(300):
        x = rng.normal(size=8)
        lines.append(",".join(repr(float(v)) for v in x) + f",{int(x[0] + 0.5 * x[5] + 0.3 * rng.normal() > 0)}")
    (folder / "data.csv").write_text("\n".join(lines) + "\n")
    for split in (90, 150, 230):
        (folder / f"head{split}.csv").write_text("\n".join(lines[:split + 1]) + "\n")
    return folder


@pytest.fixture(scope="module")
def whole(union_pipeline):
    """The traces of one uninterrupted run, in its own process (each run takes a few seconds)."""
    return _explain(union_pipeline)


def _explain(folder, *extra, hash_seed=None, data="data.csv"):
    env = subprocess_env()
    env.pop("PYTHONHASHSEED", None)
    if hash_seed is not None:
        env["PYTHONHASHSEED"] = hash_seed
    command = [*ipfi_command(), "explain", str(folder / data), "-m", str(folder / "model.pkl"), "-t", "y",
               "--learn", "--loss", "log", "--seed", "1", "-M", "3", "-q", *extra]
    result = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert result.returncode == 0, result.stderr
    return result.stdout


@pytest.mark.process
def test_the_model_really_depends_on_string_hashing(union_pipeline):
    """Without a fixed hash seed the same explainer gives other last digits per process (so the
    test below can fail): the core, run in two interpreters with different hash seeds."""
    code = (
        "import pickle, sys, csv\n"
        "from ipfi_cli import models, core\n"
        f"model = pickle.load(open({str(union_pipeline / 'model.pkl')!r}, 'rb'))\n"
        f"rows = list(csv.DictReader(open({str(union_pipeline / 'data.csv')!r})))\n"
        f"names = {NAMES!r}\n"
        "explainer = core.IPFIEstimator(models.as_predictor(model), names, loss='log', n_repeats=3, seed=1)\n"
        "for r in rows:\n"
        "    x = {n: float(r[n]) for n in names}\n"
        "    explainer.explain_one(x, int(r['y']))\n"
        "    model.learn_one(x, int(r['y']))\n"
        "print(repr(explainer.importance_array().tolist()))\n")
    outputs = set()
    for seed in ("1", "2", "3"):  # until two differ (a third interpreter only if the first two agree)
        env = subprocess_env(PYTHONHASHSEED=seed)
        outputs.add(subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env,
                                   check=True, timeout=120).stdout)
        if len(outputs) > 1:
            break
    assert len(outputs) > 1


@pytest.mark.process
def test_same_bytes_in_two_processes(union_pipeline, whole):
    assert whole.count(b"\n") == 301
    assert _explain(union_pipeline) == whole
    # a hash seed the user set is kept; the run is then reproducible with it
    assert _explain(union_pipeline, hash_seed="5") == _explain(union_pipeline, hash_seed="5")


@pytest.mark.process
@pytest.mark.parametrize("split", [90, 150, 230])
def test_resume_in_another_process_gives_the_same_bytes(union_pipeline, whole, tmp_path, split):
    """The first process stops after ``split`` rows (its state holds the learned model); the second
    continues. The learned model's sets must iterate as in the uninterrupted run."""
    state, traces = tmp_path / "run.state", tmp_path / "traces.csv"
    _explain(union_pipeline, "--state", str(state), "-o", str(traces), data=f"head{split}.csv")
    _explain(union_pipeline, "--state", str(state), "-o", str(traces))
    assert traces.read_bytes() == whole


def _resume_refused_then_continued(folder, state, traces, seed):
    """The run of ``state`` continued under ipfi's pin is refused in one line naming the hash seed it started
    under; continued under that seed it ends with the uninterrupted run's bytes."""
    env = subprocess_env()
    env.pop("PYTHONHASHSEED", None)
    command = [*ipfi_command(), "explain", str(folder / "data.csv"), "-m", str(folder / "model.pkl"),
               "-t", "y", "--learn", "--loss", "log", "--seed", "1", "-M", "3", "-q", "--state", str(state),
               "-o", str(traces)]
    refused = subprocess.run(command, capture_output=True, env=env, timeout=120)
    assert refused.returncode == 1, refused.stderr
    assert (f"PYTHONHASHSEED: state '{seed}', now '{PINNED_SEED}' (continue it with PYTHONHASHSEED={seed} in the "
            "environment)").encode() in refused.stderr and len(refused.stderr.splitlines()) == 1
    env["PYTHONHASHSEED"] = seed  # under the run's own hash seed it continues, to the uninterrupted run's bytes
    assert subprocess.run(command, capture_output=True, env=env, timeout=120).returncode == 0
    assert traces.read_bytes() == _explain(folder, hash_seed=seed)


@pytest.mark.process
def test_a_resume_under_another_hash_seed_is_refused(union_pipeline, tmp_path):
    """A river run started under PYTHONHASHSEED=1 and continued under ipfi's pin wrote numbers of
    neither run with exit 0; now the resume is refused in one line naming the hash seed."""
    from ipfi_cli.io.run_state import load_state

    state, traces = tmp_path / "run.state", tmp_path / "traces.csv"
    _explain(union_pipeline, "--state", str(state), "-o", str(traces), data="head150.csv", hash_seed="1")
    assert load_state(state)["settings"]["PYTHONHASHSEED"] == "1"
    _resume_refused_then_continued(union_pipeline, state, traces, "1")


@pytest.mark.process
def test_a_state_saved_under_the_earlier_pin_continues_only_under_it(union_pipeline, tmp_path):
    """ipfi pinned 0 before it pinned Dask's 6640, and its states recorded no seed for a run under 0: such a
    state is refused under the pin in one line (it would continue with numbers of neither seed), and
    continues under 0."""
    from ipfi_cli.io.run_state import load_state, save_state

    state, traces = tmp_path / "run.state", tmp_path / "traces.csv"
    _explain(union_pipeline, "--state", str(state), "-o", str(traces), data="head150.csv", hash_seed="0")
    saved = load_state(state)
    del saved["settings"]["PYTHONHASHSEED"]  # as the earlier ipfi wrote it
    save_state(state, saved)
    _resume_refused_then_continued(union_pipeline, state, traces, "0")
    # a run under the pin records it: it continues under the pin, and only under it
    pinned = tmp_path / "pinned.state"
    _explain(union_pipeline, "--state", str(pinned), "-o", str(tmp_path / "pinned.csv"), data="head90.csv")
    assert load_state(pinned)["settings"]["PYTHONHASHSEED"] == PINNED_SEED


def test_only_models_that_may_depend_on_string_hashing_re_execute(union_pipeline, tmp_path):
    """The decision reads the pickle's globals without loading it: a river model (its sets of
    column names) re-executes, a scikit-learn one starts once; so does anything unknown."""
    import joblib
    from sklearn.linear_model import LogisticRegression

    from ipfi_cli.cli.hash_seed import hash_seed_needed, pickled_modules

    def needed(model_path, command="explain"):
        return hash_seed_needed(["ipfi", command, "data.csv", "-t", "y", "--model", str(model_path)])

    river_model = union_pipeline / "model.pkl"
    assert any(m.startswith("river.") for m in pickled_modules(str(river_model)))
    assert needed(river_model) and needed(river_model, "compare")
    sklearn_model = tmp_path / "lr.joblib"
    joblib.dump(LogisticRegression().fit(np.eye(4), [0, 1, 0, 1]), sklearn_model)
    modules = pickled_modules(str(sklearn_model))
    assert "sklearn.linear_model._logistic" in modules and any(m.startswith("numpy") for m in modules)
    assert not needed(sklearn_model) and not needed(sklearn_model, "batch")
    assert not hash_seed_needed(["ipfi", "explain", "-m" + str(sklearn_model), "-t", "y"])
    # the model the command uses is the last -m given (a wrapper may pass a default before the user's)
    assert hash_seed_needed(["ipfi", "explain", "-m", str(sklearn_model), "data.csv", "--model", str(river_model)])
    assert not hash_seed_needed(["ipfi", "explain", "-m", str(river_model), "-m" + str(sklearn_model)])
    assert not needed(sklearn_model, "plot") and not hash_seed_needed(["ipfi", "explain", "--help"])
    for compress, expected in ((3, False), (("gzip", 3), False), (("bz2", 3), True)):
        compressed = tmp_path / f"lr-{compress}.joblib"
        joblib.dump(LogisticRegression().fit(np.eye(4), [0, 1, 0, 1]), compressed, compress=compress)
        assert needed(compressed) is expected   # zlib and gzip are read; others: cannot tell, re-execute
    with open(tmp_path / "plain.pkl", "wb") as f:
        pickle.dump(NAMES, f)   # no class at all: nothing to tell a model by, so re-execute
    assert needed(tmp_path / "plain.pkl")
    assert needed(tmp_path / "missing.pkl")
    # the bundled samples are recipes (ipfi_cli.sample_models): one fits a scikit-learn model, one builds a river one
    samples = ROOT / "sample_data"
    assert not needed(samples / "agrawal_hgb.joblib") and needed(samples / "agrawal_hoeffding.pkl")


# -- Dask workers: they hash strings as this process, or the run is refused ---------------------------------
@pytest.fixture(scope="module")
def keyed_union(tmp_path_factory):
    """The union of two ``Select`` branches, learned on 300 rows that carry a key column ``k`` (for --by)."""
    from river import compose, linear_model, preprocessing

    folder = tmp_path_factory.mktemp("keyed-hash")
    model = ((compose.Select(*NAMES[:4]) | preprocessing.StandardScaler())
             + (compose.Select(*NAMES[4:]) | preprocessing.StandardScaler())) | linear_model.LogisticRegression()
    rng = np.random.default_rng(0)
    lines = [",".join(["k", *NAMES, "y"])]
    for i in range(300):
        x = rng.normal(size=8)
        y = int(x[0] + 0.5 * x[5] + 0.3 * rng.normal() > 0)
        model.learn_one(dict(zip(NAMES, map(float, x))), y)
        lines.append(",".join(["abc"[i % 3], *(repr(float(v)) for v in x)]) + f",{y}")
    with open(folder / "model.pkl", "wb") as f:
        pickle.dump(model, f)
    (folder / "data.csv").write_text("\n".join(lines) + "\n")
    return folder


def _spread_commands(folder):
    """explain --by and batch of the keyed union (the options --workers/--scheduler go after them)."""
    data, model = str(folder / "data.csv"), str(folder / "model.pkl")
    return [["explain", data, "-m", model, "-t", "y", "--by", "k", "--loss", "log", "-M", "3", "--seed", "1", "-q"],
            ["batch", data, "-m", model, "-t", "y", "--drop", "k", "--loss", "log", "-M", "3", "--seed", "1", "-q"]]


@pytest.fixture(scope="module")
def one_process(keyed_union):
    """``one_process(i)``: spread command ``i`` (:func:`_spread_commands`) run in one process, as the runs
    spread over processes or workers are compared to; each runs once per module, not once per test."""
    runs: dict[int, subprocess.CompletedProcess] = {}

    def run(index: int) -> subprocess.CompletedProcess:
        if index not in runs:
            runs[index] = _ipfi(*_spread_commands(keyed_union)[index])
            assert runs[index].returncode == 0, runs[index].stderr
        return runs[index]
    return run


def _ipfi(*args, env=None):
    """``ipfi`` as a user runs it: a new process, no PYTHONHASHSEED (ipfi pins its own)."""
    env = env if env is not None else _dask_env()
    return subprocess.run([*ipfi_command(), *args], capture_output=True, text=True, env=env, timeout=300)


def _dask_env(**extra):
    """The environment of ipfi and of the Dask processes: this ipfi importable, no PYTHONHASHSEED."""
    import os

    env = subprocess_env(PYTHONPATH=str(ROOT / "src") + os.pathsep + os.environ.get("PYTHONPATH", ""), **extra)
    if "PYTHONHASHSEED" not in extra:
        env.pop("PYTHONHASHSEED", None)
    return env


@pytest.mark.process
def test_batch_in_two_processes_gives_the_bytes_of_one(keyed_union, one_process):
    """Each pickle round trip of this model rebuilds its Select sets, which then iterate in another
    order (and a copy of the copy in the first again): batch -j 2 sent the model pickled to its
    processes and differed from one process in the last digits, exit 0. Every process, this one
    too, now predicts with a copy unpickled from one snapshot."""
    command = _spread_commands(keyed_union)[1]
    alone, spread = one_process(1), _ipfi(*command, "-j", "2")
    assert alone.returncode == 0 and spread.returncode == 0, spread.stderr
    assert spread.stdout == alone.stdout
    assert alone.stdout.count("\n") == 9


@pytest.mark.slow  # three runs, two of them start a local cluster of two workers: about 40 s
def test_batch_on_two_local_workers_gives_the_bytes_of_one_process_every_time(keyed_union, one_process):
    """Dask copies a scattered model between workers, a copy of a copy: batch --workers 2 gave other
    last digits from run to run."""
    pytest.importorskip("distributed")
    command = _spread_commands(keyed_union)[1]
    alone = one_process(1)
    spread = [_ipfi(*command, "--workers", "2") for _ in range(2)]
    assert alone.returncode == 0 and all(s.returncode == 0 for s in spread), spread[0].stderr
    assert spread[0].stdout == spread[1].stdout == alone.stdout


@pytest.mark.slow  # two runs, one of them starts a local cluster of two workers: about 20 s
def test_a_river_model_on_two_local_workers_gives_the_bytes_of_one_process(keyed_union, one_process):
    """Dask's nanny starts its workers under PYTHONHASHSEED=6640 while ipfi pinned 0 for itself: explain --by
    --workers 2 of a river model differed from one process in the last digits (295 of 300 records), exit 0."""
    pytest.importorskip("distributed")
    command = _spread_commands(keyed_union)[0]
    alone, spread = one_process(0), _ipfi(*command, "--workers", "2")
    assert alone.returncode == 0 and spread.returncode == 0, spread.stderr
    assert spread.stdout == alone.stdout
    assert alone.stdout.count("\n") == 301 and float(alone.stdout.splitlines()[-1].split(",")[2]) != 0


@pytest.mark.slow  # a scheduler and three workers started one after another, five runs: about 60 s
def test_workers_that_hash_strings_otherwise_are_refused_in_one_line(keyed_union, one_process, tmp_path):
    """A `dask worker --no-nanny` started under another PYTHONHASHSEED: its numbers differed from one
    process's in the last digits, exit 0. Now the run is refused before its first row, in one line naming
    the worker and the command that starts it right; a worker that joins later is refused by each task it
    runs; a worker started the usual way (its nanny) hashes as ipfi and gives one process's bytes."""
    import os

    pytest.importorskip("distributed")
    from distributed import Client

    from ipfi_cli.errors import UsageError
    from ipfi_cli.run.distributed import gather_tasks

    from .test_dask_batch import dask_command, start_scheduler

    info = tmp_path / "scheduler.json"
    other = "1" if os.environ.get("PYTHONHASHSEED") != "1" else "2"  # not this (test) process's seed either
    quiet = {"cwd": tmp_path, "stdout": subprocess.DEVNULL, "stderr": subprocess.DEVNULL}
    started = [start_scheduler(info, env=_dask_env(), **quiet)]
    worker = [*dask_command(), "worker", "--scheduler-file", str(info), "--nthreads", "1", "--no-dashboard",
              "--host", "127.0.0.1"]
    try:
        started.append(subprocess.Popen([*worker, "--no-nanny"], env=_dask_env(PYTHONHASHSEED=other), **quiet))
        with Client(scheduler_file=str(info), timeout=30) as client:
            client.wait_for_workers(1, timeout=90)
            address, (wrong,) = client.scheduler.address, list(client.scheduler_info()["workers"])
            for command in _spread_commands(keyed_union):
                refused = _ipfi(*command, "--scheduler", address)
                assert refused.returncode == 2 and len(refused.stderr.splitlines()) == 1, refused.stderr
                said = refused.stderr
                assert f"the Dask worker {wrong} hashes strings under PYTHONHASHSEED={other}" in said, said
                assert f"start the workers with `PYTHONHASHSEED={PINNED_SEED} dask worker {address}`" in said, said
                assert refused.stdout.count("\n") <= 1  # no record (explain's header at most)
            # a worker that joined after the check: each task checks its own worker
            with pytest.raises(UsageError, match=f"the Dask worker {wrong} hashes strings"):
                gather_tasks(client, abs, [(-1,)], hashing=True)
            assert gather_tasks(client, abs, [(-1,)]) == [1]  # a model that does not depend on hashing runs
            started.pop().kill()
            started.append(subprocess.Popen(worker, env=_dask_env(), **quiet))  # with its nanny, as usual
            deadline = time.monotonic() + 90
            while wrong in (now := list(client.scheduler_info()["workers"])) or not now:
                assert time.monotonic() < deadline, "the usual worker did not join"
                time.sleep(0.2)
            command = _spread_commands(keyed_union)[0]
            spread, alone = _ipfi(*command, "--scheduler", address), one_process(0)
            assert spread.returncode == 0, spread.stderr
            assert spread.stdout == alone.stdout
    finally:
        for process in reversed(started):
            process.kill()
            process.wait(timeout=20)
