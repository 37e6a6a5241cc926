"""``ipfi_cli.cli.errors``: how errors become lines on stderr and exit codes."""

from __future__ import annotations

import pytest
import typer

from ipfi_cli.cli.errors import EXIT_ERROR, reporting
from ipfi_cli.errors import InputError

#: a column name as a hostile file may hold it: a screen clear, a clipboard write (OSC 52), a carriage return
HOSTILE = "age\x1b[2J\x1b]52;c;aGk=\x07x\r"
#: the same, as the messages show it
SHOWN = "age\\x1b[2J\\x1b]52;c;aGk=\\x07x\\r"


@pytest.mark.parametrize("error", [InputError(f"no column {HOSTILE}"), RuntimeError(f"no column {HOSTILE}")],
                         ids=["ipfi-error", "unexpected"])
def test_the_debug_traceback_shows_datas_control_characters_escaped(capsys, error):
    """--debug prints the traceback, whose last line is the exception's message, which may quote a
    file's column names or values: its control characters are shown escaped, as in the one-line
    message, never sent to the terminal (before, ``traceback.print_exc`` wrote them raw)."""
    with pytest.raises(typer.Exit) as stopped, reporting(debug=True):
        raise error
    assert stopped.value.exit_code == EXIT_ERROR
    err = capsys.readouterr().err
    assert "\x1b" not in err and "\x07" not in err and "\r" not in err, repr(err)
    assert err.startswith("Traceback (most recent call last):\n")
    assert "raise error" in err  # the source lines are still there, a line each
    *_, last, said = err.splitlines()
    assert last.endswith(f": no column {SHOWN}")  # the traceback's last line: the whole message, escaped
    assert said.startswith("ipfi: error: ") and "no column age\\x1b[2J\\x1b]52;c;aGk=\\x07x" in said


def test_without_debug_there_is_one_line(capsys):
    with pytest.raises(typer.Exit), reporting(debug=False):
        raise InputError(f"no column {HOSTILE}")
    err = capsys.readouterr().err
    assert err == f"ipfi: error: no column {SHOWN}\n"
