"""Shared fixtures: the Agrawal classification-function-1 oracle and cached river streams.

The oracle is the generator's own labelling rule written as a vectorised function of a
block (columns in river's order: salary is column 0, age column 2), so the model is
exactly right and the true permutation importances are known in closed form.
"""

from __future__ import annotations

import functools
import itertools
import os
import tempfile

import numpy as np
import pytest

# the generator's own labelling rule (checked against river's labels in tests/core/test_agrawal_oracle.py)
from ipfi_cli.evaluation.changes import AGRAWAL_COLUMNS, agrawal_rule_1


def pytest_configure(config: pytest.Config) -> None:
    """Fitted sample models are cached in a folder of the test run, not in the user's cache.

    The variable is inherited by the ``ipfi`` subprocesses the tests start. A folder the
    user named with ``IPFI_CACHE_DIR`` is kept.
    """
    if not os.environ.get("IPFI_CACHE_DIR"):
        folder = tempfile.TemporaryDirectory(prefix="ipfi-test-cache-")
        config.add_cleanup(folder.cleanup)
        os.environ["IPFI_CACHE_DIR"] = folder.name
    # joblib counts the physical cores by running lscpu, once per process (HistGradientBoosting's predict
    # asks it): counted here, before the tests, so that the unit tier's tests start none
    import joblib

    joblib.cpu_count(only_physical_cores=True)


def _adwin_exports_its_window() -> bool:
    """Whether this river's ADWIN gives its window as bytes (0.26 on), so --detect's state is data."""
    from river.drift import ADWIN

    helper = ADWIN()._helper
    state = getattr(helper, "__getstate__", None)
    return hasattr(helper, "__getnewargs__") and state is not None and isinstance(state(), bytes)


#: tests that save change detection in a state (--detect with --state or --max-keys) need it
needs_adwin_state = pytest.mark.skipif(not _adwin_exports_its_window(),
                                       reason="river's ADWIN exports its window as data from 0.26 on")


# -- the tiers -------------------------------------------------------------------------------------------------
# The default run (`pytest`, addopts) is the unit tier: everything in this process. `-m process` runs the
# tests that start another process (the ipfi command as a user runs it, python -c, -j's joblib workers, a
# shell pipeline); `-m slow` those that start servers or clusters, or take long; `-m ''` all three (.ci/run).

#: fixtures that start a real server or cluster (5-10 s each): their tests are slow
SERVER_FIXTURES = {"mlflow_server", "bool_mlflow_server", "proba_mlflow_server", "dict_proba_mlflow_server",
                   "mlserver_server", "pushgateway", "scheduler", "two_workers", "lonely_scheduler"}
#: fixtures that run the command, or a library that starts processes (MLflow saving a model)
PROCESS_FIXTURES = {"mlflow_model_dir", "registry", "plain_run", "streams", "small_streams", "learning"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark the tests that use a server or cluster fixture as slow, those that use a process fixture as process."""
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if SERVER_FIXTURES & fixtures:
            item.add_marker(pytest.mark.slow)
        elif PROCESS_FIXTURES & fixtures:
            item.add_marker(pytest.mark.process)


def _in_unit_tier(item: pytest.Item) -> bool:
    return item.get_closest_marker("process") is None and item.get_closest_marker("slow") is None


class _NoProcesses:
    """While active, every way this process starts another one is refused and remembered."""

    def __init__(self) -> None:
        self.started: list[str] = []
        self._saved: list[tuple[object, str, object]] = []

    def _refuse(self, owner: object, name: str) -> None:
        original = getattr(owner, name)
        self._saved.append((owner, name, original))
        started = self.started

        def refused(*args: object, **kwargs: object) -> None:
            what = f"{getattr(owner, '__name__', owner)}.{name}"
            shown = next((a for a in args if isinstance(a, (list, tuple, str, bytes))), "")
            started.append(f"{what}({str(shown)[:120]})")
            raise OSError(f"the unit tier starts no process ({what}): mark the test @pytest.mark.process")
        setattr(owner, name, refused)

    def __enter__(self) -> _NoProcesses:
        import _posixsubprocess
        import subprocess

        self._refuse(subprocess.Popen, "_execute_child")
        self._refuse(_posixsubprocess, "fork_exec")     # multiprocessing's spawn and forkserver, joblib's loky
        for name in ("fork", "forkpty", "posix_spawn", "posix_spawnp", "system"):
            if hasattr(os, name):
                self._refuse(os, name)
        return self

    def __exit__(self, *exc: object) -> None:
        for owner, name, original in reversed(self._saved):
            setattr(owner, name, original)


@pytest.hookimpl(wrapper=True)
def pytest_runtest_setup(item: pytest.Item):
    return (yield from _checked(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item: pytest.Item):
    return (yield from _checked(item))


@pytest.hookimpl(wrapper=True)
def pytest_runtest_teardown(item: pytest.Item, nextitem: pytest.Item | None):
    return (yield from _checked(item))


def _checked(item: pytest.Item):
    """Run one phase of a unit-tier test with processes refused; fail it if it tried to start one (also when
    the code under test caught the refusal)."""
    if not _in_unit_tier(item):
        return (yield)
    guard = _NoProcesses()
    try:
        with guard:
            return (yield)
    finally:
        if guard.started:
            pytest.fail(f"{item.nodeid} started a process ({'; '.join(guard.started[:3])}): the default tier "
                        "starts none; mark it @pytest.mark.process (or slow for a server or cluster)", pytrace=False)


@pytest.fixture(autouse=True, scope="session")
def one_compute_thread():
    """HistGradientBoosting's OpenMP threads spin on a busy 2-core machine; one OpenMP/BLAS thread
    gives the same numbers several times faster for the tiny blocks the tests use (for every test: a
    test of tests/api/ that ran before any of tests/cli/ took 104 s instead of 2 under -n 2)."""
    import sklearn.ensemble  # noqa: F401 - load OpenMP first: threadpool_limits only limits loaded libraries
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield


@functools.cache
def _agrawal_stream(n_rows: int, seed: int) -> tuple[np.ndarray, np.ndarray]:
    from river.datasets import synth

    X = np.empty((n_rows, len(AGRAWAL_COLUMNS)))
    y = np.empty(n_rows, dtype=np.int64)
    stream = synth.Agrawal(classification_function=1, seed=seed)
    for t, (x, label) in enumerate(itertools.islice(stream, n_rows)):
        X[t] = [x[c] for c in AGRAWAL_COLUMNS]
        y[t] = label
    X.flags.writeable = False  # shared between tests through the cache
    y.flags.writeable = False
    return X, y


@pytest.fixture(scope="session")
def agrawal_stream():
    """``agrawal_stream(n_rows, seed) -> (X, y)``: river Agrawal fn 1 rows as a float block (cached)."""
    return _agrawal_stream


@pytest.fixture(scope="session")
def agrawal_rule():
    return agrawal_rule_1


@pytest.fixture(scope="session")
def agrawal_columns():
    return list(AGRAWAL_COLUMNS)
