"""Fixtures for the command tests (explain, batch, compare, plot): slices of the sample data and tiny models."""

from __future__ import annotations

import csv
import io
import os
import subprocess
import sys
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"
#: the sample data's feature columns, read from its header (the last column is the label)
FEATURES = (SAMPLE / "agrawal_static.csv").read_text().split("\n", 1)[0].split(",")[:-1]


def head_lines(source: Path, n_rows: int, start: int = 0) -> str:
    lines = source.read_text().splitlines()
    return "\n".join([lines[0], *lines[1 + start:1 + start + n_rows]]) + "\n"


@pytest.fixture(scope="session")
def static_csv(tmp_path_factory) -> Path:
    """40 rows of agrawal_static.csv."""
    path = tmp_path_factory.mktemp("cli") / "static.csv"
    path.write_text(head_lines(SAMPLE / "agrawal_static.csv", 40))
    return path


@pytest.fixture(scope="session")
def drift_csv(tmp_path_factory) -> Path:
    """60 rows of agrawal_drift.csv."""
    path = tmp_path_factory.mktemp("cli") / "drift.csv"
    path.write_text(head_lines(SAMPLE / "agrawal_drift.csv", 60))
    return path


@pytest.fixture(scope="session")
def agrawal_small(tmp_path_factory) -> Path:
    """The first 300 rows of agrawal_static.csv (static sklearn model's data)."""
    path = tmp_path_factory.mktemp("data") / "agrawal_small.csv"
    path.write_text(head_lines(SAMPLE / "agrawal_static.csv", 300))
    return path


@pytest.fixture(scope="session")
def drift_small(tmp_path_factory) -> Path:
    """400 rows around the function drift of agrawal_drift.csv (drift at row 201 of this slice)."""
    path = tmp_path_factory.mktemp("data") / "drift_small.csv"
    path.write_text(head_lines(SAMPLE / "agrawal_drift.csv", 400, start=9800))
    return path


@pytest.fixture(scope="session")
def hgb() -> str:
    return str(SAMPLE / "agrawal_hgb.joblib")


@pytest.fixture(scope="session")
def hoeffding() -> str:
    return str(SAMPLE / "agrawal_hoeffding.pkl")


@pytest.fixture(scope="session")
def regressor(tmp_path_factory, static_csv) -> str:
    """A linear regression of `loan` on the other features (fitted on a DataFrame)."""
    import joblib
    import pandas as pd
    from sklearn.linear_model import LinearRegression

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=300).drop(columns="class")
    model = LinearRegression().fit(frame.drop(columns="loan"), frame["loan"])
    path = tmp_path_factory.mktemp("models") / "regressor.joblib"
    joblib.dump(model, path)
    return str(path)


@pytest.fixture(scope="session")
def unnamed_model(tmp_path_factory) -> str:
    """A classifier fitted on a bare array: it knows only its number of features (9)."""
    import joblib
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=300)
    model = DecisionTreeClassifier(random_state=0).fit(frame[FEATURES].to_numpy(), frame["class"].to_numpy())
    path = tmp_path_factory.mktemp("models") / "unnamed.joblib"
    joblib.dump(model, path)
    return str(path)


@pytest.fixture
def run():
    """Invoke ``ipfi`` in-process; returns the Result (exit_code, stdout, stderr separately)."""
    runner = CliRunner()

    def invoke(*args: str, input: str | bytes | None = None):
        return runner.invoke(app, [str(a) for a in args], input=input, catch_exceptions=False)
    return invoke


def parse_csv(text: str) -> list[dict[str, str]]:
    return list(csv.DictReader(io.StringIO(text)))


def ipfi_command() -> list[str]:
    return [sys.executable, "-m", "ipfi_cli"]


def subprocess_env(**extra: str) -> dict[str, str]:
    env = dict(os.environ)
    env.pop("COLUMNS", None)
    env.setdefault("OMP_NUM_THREADS", "1")
    env.update(extra)
    return env


def run_shell(command: str, timeout: float = 120, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "-o", "pipefail", "-c", command], capture_output=True, timeout=timeout,
                          cwd=ROOT, env=subprocess_env(), **kw)

