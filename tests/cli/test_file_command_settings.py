"""``ipfi batch`` and ``ipfi compare`` as values: their settings, run by
:func:`~ipfi_cli.run.batch.run_batch` and :func:`~ipfi_cli.evaluation.command.run_compare`, write the
bytes the commands write for the same options."""

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


def test_compare_settings_and_flags_write_the_same_records_and_traces(agrawal_small, hgb, tmp_path):
    from ipfi_cli.evaluation.command import run_compare
    from ipfi_cli.run.compare import CompareEstimator, CompareOutput, CompareSettings, Comparison

    traces_flags = tmp_path / "flags-traces.csv"
    flags = _command("compare", agrawal_small, "-m", hgb, "-t", "class", "--orderings", "2", "--alpha", "0.01",
                     "--alpha", "0.05", "--repeats", "2", "--seed", "5", "--traces", traces_flags, "-q")
    out, traces = tmp_path / "records.csv", tmp_path / "traces.csv"
    settings = CompareSettings(ModelSpec(str(hgb)), InputSpec(str(agrawal_small)), Selection(target="class"),
                               estimator=CompareEstimator(alphas=(0.01, 0.05), repeats=2),
                               comparison=Comparison(orderings=2),
                               output=CompareOutput(path=str(out), traces=str(traces)), seed=5)
    outcome = run_compare(settings, PlainReporter(io.StringIO()))
    assert out.read_text() == flags
    assert traces.read_text() == traces_flags.read_text()
    assert len(outcome.results or []) == 2 and outcome.learning is None  # one static comparison per alpha
