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


def _adwin_exports_its_window() -> bool:
    """Whether this river's ADWIN gives its window as bytes (0.26 on), so --detect's state is data."""
    from river.drift import ADWIN

    helper = ADWIN()._helper
    state = getattr(helper, "__getstate__", None)
    return hasattr(helper, "__getnewargs__") and state is not None and isinstance(state(), bytes)


#: tests that save change detection in a state (--detect with --state or --max-keys) need it
needs_adwin_state = pytest.mark.skipif(not _adwin_exports_its_window(),
                                       reason="river's ADWIN exports its window as data from 0.26 on")


# real model servers take 5-10 s each to start and answer over HTTP: their tests run with `-m slow`
MODEL_SERVERS = {"mlflow_server", "bool_mlflow_server", "proba_mlflow_server", "mlserver_server"}


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark every test that starts a real model server as slow."""
    for item in items:
        if MODEL_SERVERS & set(getattr(item, "fixturenames", ())):
            item.add_marker(pytest.mark.slow)



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
