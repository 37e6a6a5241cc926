"""A usage error is one line on stderr and exit 2, so a script can log and grep it.

Typer draws a usage line, a hint and a boxed message; ipfi prints ``ipfi: usage error:``,
the message and the command whose help lists the options, on one line.
"""

from __future__ import annotations

import subprocess

import joblib
import pandas as pd
import pytest
from sklearn.linear_model import LinearRegression

from tests.cli.conftest import SAMPLE, ipfi_command, subprocess_env

DATA = str(SAMPLE / "agrawal_static.csv")
MODEL = str(SAMPLE / "agrawal_hgb.joblib")


@pytest.mark.parametrize(("args", "expected"), [
    (["explain", "--bogus"], "No such option: --bogus"),
    (["explain", DATA, "-m", MODEL, "-t", "class", "--sampling", "nope"],
     "Invalid value for '--sampling' / '-s': 'nope' is not one of 'geometric', 'uniform'"),
    (["explain", DATA, "-m", MODEL], "Missing option '--target'"),
    (["batch", DATA, "-m", MODEL, "-t", "class", "--repeats", "many"], "Invalid value for '--repeats'"),
    (["explain", DATA, "-m", MODEL, "-t", "class", "--alpha", "2"], "'--alpha': must be in (0, 1], got 2.0"),
    (["nocommand"], "No such command 'nocommand'"),
    (["plot"], "Missing argument 'TRACES'"),
    # a negative seed was "unexpected ValueError: expected non-negative integer" after the model loaded, exit 1
    # (the model file here does not exist: the seed is refused before it is looked for)
    # (the words after the name are Typer's and differ by version: 'Input should be greater than or equal to 0'
    # from 0.29's pydantic check, '-1 is not in the range x>=0' from Click before)
    (["explain", DATA, "-m", "no-such-model.joblib", "-t", "class", "--seed", "-1"], "Invalid value for '--seed': "),
    (["batch", DATA, "-m", "no-such-model.joblib", "-t", "class", "--seed", "-1"], "'--seed'"),
    (["compare", DATA, "-m", "no-such-model.joblib", "-t", "class", "--seed", "-1"], "'--seed'"),
    (["merge", "a.state", "b.state", "-o", "c.state", "--seed", "-1"], "'--seed'"),
])
def test_a_usage_error_is_one_line_naming_the_option_and_the_help(run, args, expected):
    result = run(*args)
    assert result.exit_code == 2
    assert result.stdout == ""
    lines = result.stderr.splitlines()
    assert len(lines) == 1, result.stderr
    command = "ipfi" if args[0] == "nocommand" else f"ipfi {args[0]}"
    assert lines[0].startswith("ipfi: usage error: ")
    assert expected in lines[0]
    assert lines[0].endswith(f"; see '{command} -h'")
    assert "Value error" not in lines[0]  # newer Typer's pydantic prefix is dropped


@pytest.mark.process
def test_a_usage_error_from_the_installed_command_is_one_line_too():
    done = subprocess.run([*ipfi_command(), "explain", DATA, "-m", MODEL, "-t", "class", "--loss", "cubic"],
                          capture_output=True, text=True, timeout=120, env=subprocess_env())
    assert done.returncode == 2
    assert done.stdout == ""
    assert done.stderr.splitlines() == [done.stderr.strip()]
    assert done.stderr.startswith("ipfi: usage error: Invalid value for '--loss'")


def test_a_column_name_quoted_in_a_usage_error_is_shown_escaped(run, tmp_path):
    data = tmp_path / "odd.csv"
    data.write_text("a,b,y\n1,2,3\n4,5,7\n2,1,1\n")
    frame = pd.read_csv(data)
    model = tmp_path / "linear.joblib"
    joblib.dump(LinearRegression().fit(frame[["a", "b"]], frame["y"]), model)
    result = run("explain", data, "-m", model, "-t", "y", "--features", "a,[red]\x1b[2Jz")
    assert result.exit_code == 2
    assert "\x1b" not in result.stderr
    assert "[red]\\x1b[2Jz" in result.stderr  # shown as text: no Rich markup, no escape sequence
    assert len(result.stderr.splitlines()) == 1


def test_no_arguments_shows_the_help_and_exits_2(run):
    result = run()
    assert result.exit_code == 2
    assert "explain" in result.stdout + result.stderr
    assert "usage error" not in result.stderr
