"""``ipfi batch`` as a value: :class:`~ipfi_cli.run.batch.BatchSettings` run by
:func:`~ipfi_cli.run.batch.run_batch` writes the bytes the command writes for the same options."""

from __future__ import annotations

import io

from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.run.batch import BatchMethod, BatchSettings, run_batch
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.report import PlainReporter
from ipfi_cli.run.settings import ModelSpec


def _command(*args: object) -> str:
    result = CliRunner().invoke(app, [str(a) for a in args])
    assert result.exit_code == 0, result.output
    return result.stdout


def test_settings_and_flags_write_the_same_records(agrawal_small, hgb, tmp_path):
    flags = _command("batch", agrawal_small, "-m", hgb, "-t", "class", "--repeats", "3", "--seed", "7",
                     "--features", "salary,age", "-q")
    out = tmp_path / "records.csv"
    messages = io.StringIO()
    settings = BatchSettings(ModelSpec(str(hgb)), InputSpec(str(agrawal_small)),
                             Selection(target="class", features=["salary", "age"]),
                             method=BatchMethod(repeats=3), output=str(out), seed=7)
    outcome = run_batch(settings, PlainReporter(messages))
    assert out.read_text() == flags
    assert outcome.method == "pfi" and outcome.n_rows == 300 and list(outcome.result.names) == ["salary", "age"]
    assert outcome.requests_note is None  # a model file: no requests to report


def test_sage_settings_and_flags_write_the_same_records(agrawal_small, hgb, tmp_path):
    flags = _command("batch", agrawal_small, "-m", hgb, "-t", "class", "--method", "sage", "--permutations", "20",
                     "--background", "8", "--seed", "3", "-q")
    out = tmp_path / "sage.csv"
    settings = BatchSettings(ModelSpec(str(hgb)), InputSpec(str(agrawal_small)), Selection(target="class"),
                             method=BatchMethod(name="sage", permutations=20, background=8), output=str(out), seed=3)
    outcome = run_batch(settings, PlainReporter(io.StringIO()))
    assert out.read_text() == flags
    assert outcome.game is not None and "of 8 drawn per coalition" in outcome.game
