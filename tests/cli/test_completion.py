"""Typer's shell completion, as the README documents it: the installed ``ipfi`` completes commands and options."""

from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

IPFI = shutil.which("ipfi", path=str(Path(sys.executable).parent))
pytestmark = [pytest.mark.process,  # the installed console script
              pytest.mark.skipif(IPFI is None, reason="needs the installed ipfi console script")]


def complete(words: str) -> list[str]:
    """What bash completion gets for the command line ``words`` (the cursor after the last word)."""
    env = {**os.environ, "_IPFI_COMPLETE": "complete_bash", "COMP_WORDS": words,
           "COMP_CWORD": str(len(words.split()) - 1)}
    done = subprocess.run([IPFI], env=env, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


def test_commands_and_options_complete():
    assert complete("ipfi ex") == ["explain"]
    assert set(complete("ipfi c")) == {"compare"}
    assert "--repeats" in complete("ipfi explain --rep")
    assert {"--install-completion", "--show-completion"} <= set(complete("ipfi --"))


def test_show_completion_prints_a_script_for_bash():
    # run from bash, as a user does: Typer finds the shell among the parent processes (a test
    # runner started from a script or a service may have none)
    done = subprocess.run(["bash", "-c", f"{shlex.quote(str(IPFI))} --show-completion"],
                          env={**os.environ, "SHELL": "/bin/bash"}, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0 and "_IPFI_COMPLETE" in done.stdout
