"""Small inputs for the command tests: slices of the sample data and a tiny fitted model."""

from __future__ import annotations

from pathlib import Path

import pytest

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="session")
def agrawal_small(tmp_path_factory) -> Path:
    """The first 300 rows of agrawal_static.csv (static sklearn model's data)."""
    path = tmp_path_factory.mktemp("data") / "agrawal_small.csv"
    lines = (SAMPLE / "agrawal_static.csv").read_text().splitlines()[:301]
    path.write_text("\n".join(lines) + "\n")
    return path


@pytest.fixture(scope="session")
def drift_small(tmp_path_factory) -> Path:
    """400 rows around the function drift of agrawal_drift.csv (drift at row 201 of this slice)."""
    path = tmp_path_factory.mktemp("data") / "drift_small.csv"
    lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()
    path.write_text("\n".join([lines[0], *lines[1 + 9800:1 + 10200]]) + "\n")
    return path


@pytest.fixture(scope="session")
def hgb_model() -> Path:
    return SAMPLE / "agrawal_hgb.joblib"


@pytest.fixture(scope="session")
def river_model() -> Path:
    return SAMPLE / "agrawal_hoeffding.pkl"


@pytest.fixture(autouse=True, scope="session")
def _one_blas_thread():
    """One OpenMP/BLAS thread: scikit-learn's HistGradientBoosting spins its OpenMP threads, which
    makes these small predictions many times slower when the machine's cores are busy."""
    from threadpoolctl import threadpool_limits

    with threadpool_limits(limits=1):
        yield
