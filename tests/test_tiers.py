"""The unit tier (the default run) starts no process: tests/conftest.py refuses every way to start one
during a test not marked ``process`` or ``slow``, and fails the test even when the code caught the refusal."""

from __future__ import annotations

import multiprocessing
import subprocess
import sys

import pytest

from tests.conftest import _NoProcesses


def test_a_command_is_refused_and_remembered():
    before = subprocess.Popen._execute_child
    with _NoProcesses() as guard:
        with pytest.raises(OSError, match=r"mark the test @pytest\.mark\.process"):
            subprocess.run([sys.executable, "-c", "pass"], check=True)
        try:
            subprocess.run(["true"])
        except OSError:  # caught by the code under test: still remembered
            pass
    assert len(guard.started) == 2 and sys.executable in guard.started[0] and "true" in guard.started[1]
    assert subprocess.Popen._execute_child is before  # put back as it was


def test_worker_processes_are_refused():
    """multiprocessing's spawn (as joblib's loky and Dask's nanny start theirs), and its fork."""
    with _NoProcesses() as guard:
        for method in ("spawn", "fork"):
            with pytest.raises(OSError, match="the unit tier starts no process"):
                multiprocessing.get_context(method).Process(target=print).start()
    assert [entry.split("(")[0] for entry in guard.started] == ["_posixsubprocess.fork_exec", "os.fork"]


def test_the_tiers_are_chosen_by_marks(request):
    from tests.conftest import _in_unit_tier

    assert _in_unit_tier(request.node)
    assert "not slow and not process" in request.config.getini("addopts")
