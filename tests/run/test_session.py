"""The run layer driven from Python, as the command line drives it but with a plain reporter:
the same traces as ``ipfi explain``, messages through the reporter, errors as exceptions."""

from __future__ import annotations

import io
from pathlib import Path

import pytest
from typer.testing import CliRunner

from ipfi_cli.cli.app import app
from ipfi_cli.core.params import PFIParams
from ipfi_cli.errors import InputError, UsageError
from ipfi_cli.run.explain import ExplainSession
from ipfi_cli.run.plan import InputSpec, Selection
from ipfi_cli.run.report import PlainReporter
from ipfi_cli.run.settings import Display, ExplainSettings, ModelSpec, OutputSpec, RunStatus

SAMPLE = Path(__file__).resolve().parents[2] / "sample_data"


@pytest.fixture(scope="module")
def rows(tmp_path_factory) -> Path:
    lines = (SAMPLE / "agrawal_drift.csv").read_text().splitlines()[:121]
    path = tmp_path_factory.mktemp("session") / "rows.csv"
    path.write_text("\n".join(lines) + "\n")
    return path


def test_a_session_writes_the_traces_the_command_writes(rows, tmp_path):
    model = str(SAMPLE / "agrawal_hoeffding.pkl")
    out = tmp_path / "traces.csv"
    messages = io.StringIO()
    settings = ExplainSettings(ModelSpec(model, learn=True), Selection(target="class"),
                               inputs=InputSpec(path=str(rows)), params=PFIParams(n_repeats=2), seed=4,
                               output=OutputSpec(path=str(out), every=10))
    status = ExplainSession(settings, PlainReporter(messages)).run()
    assert status is RunStatus.OK
    command = CliRunner().invoke(app, ["explain", str(rows), "-m", model, "-t", "class", "--learn", "-M", "2",
                                       "--seed", "4", "--every", "10", "-q"], catch_exceptions=False)
    assert command.exit_code == 0
    assert out.read_text() == command.stdout
    summary = messages.getvalue()
    assert "ipfi explain · " in summary and "120 rows" in summary  # the plain reporter's final lines


def test_a_quiet_reporter_keeps_only_errors_and_errors_are_exceptions(rows, tmp_path):
    bad = tmp_path / "bad.csv"
    text = rows.read_text().splitlines()
    bad.write_text("\n".join([*text[:5], text[5].replace(",", ",x", 1), *text[6:]]) + "\n")
    messages = io.StringIO()
    settings = ExplainSettings(ModelSpec(str(SAMPLE / "agrawal_hoeffding.pkl"), learn=True), Selection(target="class"),
                               inputs=InputSpec(path=str(bad)), params=PFIParams(n_repeats=2), seed=4,
                               output=OutputSpec(path=str(tmp_path / "t.csv")), display=Display(quiet=True))
    with pytest.raises(InputError) as error:
        ExplainSession(settings, PlainReporter(messages, quiet=True)).run()
    assert error.value.row == 5 and error.value.column is not None
    assert messages.getvalue() == ""


def test_an_option_naming_a_missing_column_is_a_usage_error(rows, tmp_path):
    settings = ExplainSettings(ModelSpec(str(SAMPLE / "agrawal_hoeffding.pkl"), learn=True),
                               Selection(target="class", features=["nope"]), inputs=InputSpec(path=str(rows)),
                               output=OutputSpec(path=str(tmp_path / "t.csv")))
    with pytest.raises(UsageError) as error:
        ExplainSession(settings, PlainReporter(io.StringIO())).run()
    assert error.value.option == "--features"
