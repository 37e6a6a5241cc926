"""An error of ipfi's own is never taken for the model failing on a row.

The model's exceptions are located to a row and skipped with ``--on-bad-row skip``
(``test_located_failures.py``). An exception raised by ipfi's own code while a row is explained
must not be: skipping it would drop every later row and exit 0. These tests make ipfi's loss step
raise (a stand-in for a bug of ipfi's) partway through a real run, and check that the run stops
as unexpected, after writing the records it had, and that those records are the ones the run
gives without the fault.
"""

from __future__ import annotations

import pickle
from pathlib import Path

import pandas as pd
import pytest

from tests.cli.conftest import SAMPLE, parse_csv

ROWS = 400


@pytest.fixture
def faulty_losses(monkeypatch):
    """ipfi's loss step raises ZeroDivisionError from its ``after``-th call on."""
    from ipfi_cli.core.incremental import IPFIEstimator

    original = IPFIEstimator._losses
    calls = {"n": 0, "after": 0}

    def losses(self, predicted, targets):
        calls["n"] += 1
        if calls["n"] >= calls["after"]:
            raise ZeroDivisionError("a fault of ipfi's own")
        return original(self, predicted, targets)

    def arm(after: int) -> None:
        calls["n"], calls["after"] = 0, after
        monkeypatch.setattr(IPFIEstimator, "_losses", losses)

    return arm


def _head(tmp_path: Path, name: str) -> Path:
    path = tmp_path / f"{name}.csv"
    pd.read_csv(SAMPLE / name, nrows=ROWS).to_csv(path, index=False)
    return path


@pytest.mark.parametrize(("data", "model", "extra", "after"), [
    # a static model, explained in micro-batches (the bulk block path)
    ("agrawal_static.csv", "agrawal_hgb.joblib", ("--batch-size", "50"), 3),
    # a learning model, explained row by row
    ("agrawal_drift.csv", "agrawal_hoeffding.pkl", ("--learn",), 120),
])
def test_an_error_of_ipfis_own_stops_the_run_and_is_not_skipped(run, tmp_path, faulty_losses, data, model,
                                                                  extra, after):
    path = _head(tmp_path, data)
    common = ("-m", SAMPLE / model, "-t", "class", "--seed", "3", "--every", "1", "-M", "2", "--no-live",
              "--on-bad-row", "skip", *extra)
    clean = run("explain", path, *common, "-o", tmp_path / "clean.csv")
    assert clean.exit_code == 0, clean.stderr
    expected = parse_csv((tmp_path / "clean.csv").read_text())
    assert len(expected) == ROWS  # the first row only fills the reservoir: its record is empty

    faulty_losses(after)
    result = run("explain", path, *common, "-o", tmp_path / "faulty.csv")
    assert result.exit_code == 1
    errors = [line for line in result.stderr.splitlines() if line.startswith("ipfi: error:")]
    assert errors == ["ipfi: error: unexpected ZeroDivisionError: a fault of ipfi's own "
                      "(run with --debug for the traceback)"], result.stderr
    assert "skipped" not in result.stderr and "the model failed" not in result.stderr
    written = parse_csv((tmp_path / "faulty.csv").read_text())
    # what was explained before the fault is kept, and is what the run without it gives
    assert 0 < len(written) < len(expected)
    assert written == expected[:len(written)]


def test_the_models_own_error_is_still_located_and_named_by_its_type(run, tmp_path):
    """A label the model never saw is no fault of ipfi's: the row is named with the model's
    exception type (not ipfi's wrapper), and skipped."""
    frame = pd.read_csv(SAMPLE / "agrawal_static.csv", nrows=200)
    frame["car"] = frame["car"].astype(object)
    frame.loc[57, "car"] = "lorry"  # text where the model needs a number
    path = tmp_path / "one_bad.csv"
    frame.to_csv(path, index=False)
    result = run("explain", path, "-m", SAMPLE / "agrawal_hgb.joblib", "-t", "class", "--seed", "0", "--no-live",
                 "--on-bad-row", "skip", "--text", "car", "-o", tmp_path / "out.csv")
    assert result.exit_code == 0, result.stderr
    assert "row 58 (line 59), column 'car'" in result.stderr
    assert "ModelCallError" not in result.stderr
    assert len(parse_csv((tmp_path / "out.csv").read_text())) == 199  # 200 rows, one skipped


def test_a_model_call_error_keeps_its_cause_through_pickling():
    """A Dask worker's error comes back pickled: the model's own exception must come with it."""
    from ipfi_cli.errors import ModelCallError

    error = pickle.loads(pickle.dumps(ModelCallError(KeyError("lorry"))))
    assert isinstance(error.cause, KeyError) and error.cause.args == ("lorry",)
    assert str(error) == "KeyError: 'lorry'"


def test_a_guarded_predictor_pickles_and_passes_ipfis_own_errors_through():
    from ipfi_cli.core.losses import Output
    from ipfi_cli.errors import ModelCallError, ServiceError
    from ipfi_cli.models.adapters import as_predictor
    from ipfi_cli.models.loading import GuardedPredictor

    def unreachable(block):
        raise ServiceError("http://127.0.0.1:1/: connection refused")

    guarded = pickle.loads(pickle.dumps(GuardedPredictor(as_predictor(abs))))
    assert guarded.supports_batch is True  # the wrapped predictor's, read through
    with pytest.raises(ModelCallError) as caught:
        guarded.predict_records([{"a": "x"}], Output.VALUE, None)
    assert isinstance(caught.value.cause, TypeError)
    with pytest.raises(ServiceError):  # not wrapped: about no row
        GuardedPredictor(as_predictor(unreachable)).predict_records([{"a": 1.0}], Output.VALUE, None)
