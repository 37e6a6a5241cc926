"""Fixtures for the checkpoint/resume tests: small slices of the sample data, an untrained river
model (learns) and a small scikit-learn tree (static)."""

from __future__ import annotations

import pickle
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app

ROOT = Path(__file__).resolve().parents[2]
SAMPLE = ROOT / "sample_data"


def head(n_rows: int, start: int = 0, source: Path = SAMPLE / "agrawal_drift.csv") -> str:
    """The header and ``n_rows`` data rows from ``start`` (0-based) of a sample CSV."""
    lines = source.read_text().splitlines()
    return "\n".join([lines[0], *lines[1 + start:1 + start + n_rows]]) + "\n"


@pytest.fixture(scope="session")
def rows_csv(tmp_path_factory) -> Path:
    """400 rows of agrawal_drift.csv."""
    path = tmp_path_factory.mktemp("resume-data") / "rows.csv"
    path.write_text(head(400))
    return path


@pytest.fixture(scope="session")
def river_model(tmp_path_factory) -> Path:
    """An untrained river Hoeffding tree (cheap to learn and to pickle)."""
    from river import tree

    path = tmp_path_factory.mktemp("resume-models") / "hoeffding.pkl"
    path.write_bytes(pickle.dumps(tree.HoeffdingTreeClassifier(grace_period=50)))
    return path


@pytest.fixture(scope="session")
def tree_model(tmp_path_factory) -> Path:
    """A small decision tree fitted on a DataFrame of the Agrawal features."""
    import joblib
    import pandas as pd
    from sklearn.tree import DecisionTreeClassifier

    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=1000)
    model = DecisionTreeClassifier(max_depth=6, random_state=0).fit(frame.drop(columns="class"), frame["class"])
    path = tmp_path_factory.mktemp("resume-models") / "tree.joblib"
    joblib.dump(model, path)
    return path


@pytest.fixture
def ipfi():
    """Invoke ``ipfi explain`` in-process; returns the Result (exit_code, stdout, stderr)."""
    runner = CliRunner()

    def invoke(*args, input: str | bytes | None = None):
        return runner.invoke(app, ["explain", *[str(a) for a in args]], input=input, catch_exceptions=False)
    return invoke
