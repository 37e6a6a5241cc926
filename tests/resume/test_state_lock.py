"""The lock of a state: on the state file itself, whatever name it is given by (a symbolic or hard link,
across the saves that replace its file), and never written through a link someone placed as its lock file."""

from __future__ import annotations

import os

import pytest

from ipfi_cli.errors import StateError
from ipfi_cli.io.run_state import StateLock, save_state

pytestmark = pytest.mark.skipif(os.name != "posix", reason="flock and links are POSIX")

PAYLOAD = {"ipfi": "x", "n": 1}


def refused(path, *parts: str) -> str:
    """A second lock on ``path`` is refused, with one line holding ``parts``."""
    lock = StateLock(path)
    with pytest.raises(StateError) as raised:
        lock.acquire()
    assert not lock.held
    message = str(raised.value)
    assert "\n" not in message
    for part in parts:
        assert part in message, (part, message)
    return message


def free(path) -> None:
    lock = StateLock(path)
    lock.acquire()
    assert lock.held
    lock.release()


@pytest.fixture
def held(tmp_path):
    """A state saved once, held by a lock (as a run holds it)."""
    state = tmp_path / "run.state"
    save_state(state, PAYLOAD)
    lock = StateLock(state)
    lock.acquire()
    yield state, lock
    lock.release()


# -- the lock file: never followed, never emptied unless ipfi's own -------------------------------
def test_a_symbolic_link_as_lock_file_is_refused_and_its_target_kept(tmp_path):
    """Another user places `run.state.lock` -> a file of the user's in /tmp: the lock emptied it and wrote
    the PID into it."""
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    os.symlink(precious, tmp_path / "run.state.lock")
    refused(tmp_path / "run.state", "lock file", "symbolic link", "remove it")
    assert precious.read_text() == "keep me\n"
    os.symlink(tmp_path / "nothing-here", tmp_path / "new.state.lock")  # a dangling link: not created through
    refused(tmp_path / "new.state", "symbolic link")
    assert not (tmp_path / "nothing-here").exists()


def test_a_state_in_a_folder_that_does_not_exist_says_so(tmp_path):
    """`--state runs/a.state` (or `ipfi merge ... -o runs/a.state`) with no folder `runs`: the line says
    the folder is missing; before, it said to remove a lock file that does not exist."""
    for state in (tmp_path / "runs" / "a.state", tmp_path / "file.txt" / "a.state"):
        (tmp_path / "file.txt").write_text("a file, not a folder\n")
        message = refused(state, f"{state}: no folder {state.parent} to hold the state and its lock file")
        assert "remove it" not in message
        assert not (tmp_path / "runs").exists()


def test_a_hard_link_or_a_fifo_as_lock_file_is_refused(tmp_path):
    precious = tmp_path / "precious.txt"
    precious.write_text("keep me\n")
    os.link(precious, tmp_path / "run.state.lock")
    refused(tmp_path / "run.state", "lock file", "2 names (hard links)")
    assert precious.read_text() == "keep me\n"
    os.mkfifo(tmp_path / "other.state.lock")
    refused(tmp_path / "other.state", "lock file", "FIFO")


def test_the_lock_file_of_an_earlier_run_is_reused_and_says_this_process(tmp_path):
    lock_file = tmp_path / "run.state.lock"
    lock_file.write_text("99999999\n")  # a run killed long ago
    lock = StateLock(tmp_path / "run.state")
    lock.acquire()
    try:
        assert lock_file.read_text() == str(os.getpid())
        refused(tmp_path / "run.state", f"another ipfi run is using this state (process {os.getpid()})")
    finally:
        lock.release()


# -- one state, any name ------------------------------------------------------------------------
def test_a_symbolic_or_hard_link_to_a_state_in_use_is_refused(held, tmp_path):
    state, _ = held
    os.symlink(state, tmp_path / "symbolic.state")
    os.link(state, tmp_path / "hard.state")
    (tmp_path / "sub").mkdir()
    for name in ("symbolic.state", "hard.state"):
        refused(tmp_path / name, "another ipfi run is using this state file by another name")
    refused(tmp_path / "sub" / ".." / "run.state", "another ipfi run is using this state")
    os.symlink(tmp_path, tmp_path / "folder")  # a link to the state's directory: the same lock file
    refused(tmp_path / "folder" / "run.state", "another ipfi run is using this state")


def test_links_stay_refused_across_the_saves_that_replace_the_state_file(tmp_path):
    """A save renames a new file over the state: links made before the run name the file it started
    from, links made since name the last file it saved; both stay locked until the run ends."""
    state = tmp_path / "run.state"
    save_state(state, PAYLOAD)
    os.link(state, tmp_path / "before.state")
    lock = StateLock(state)
    lock.acquire()
    try:
        save_state(state, {**PAYLOAD, "n": 2}, lock=lock)
        os.link(state, tmp_path / "between.state")
        save_state(state, {**PAYLOAD, "n": 3}, lock=lock)
        os.link(state, tmp_path / "after.state")
        assert os.stat(state).st_ino != os.stat(tmp_path / "before.state").st_ino  # the saves replaced the file
        for name in ("run.state", "before.state", "after.state"):
            refused(tmp_path / name, "another ipfi run is using this state")
        free(tmp_path / "between.state")  # an older checkpoint, no longer the state: a copy of it
    finally:
        lock.release()
    for name in ("run.state", "before.state", "after.state"):
        free(tmp_path / name)


def test_a_new_state_is_locked_from_its_first_save(tmp_path):
    state = tmp_path / "new.state"
    lock = StateLock(state)
    lock.acquire()  # no state yet: the lock file alone
    try:
        save_state(state, PAYLOAD, lock=lock)
        os.link(state, tmp_path / "hard.state")
        refused(tmp_path / "hard.state", "by another name")
    finally:
        lock.release()
    free(tmp_path / "hard.state")


def test_a_failed_save_keeps_the_locks_it_had(tmp_path, monkeypatch):
    state = tmp_path / "run.state"
    save_state(state, PAYLOAD)
    lock = StateLock(state)
    lock.acquire()
    try:
        def fail(*args):
            raise OSError(28, "No space left on device")
        with monkeypatch.context() as patch:
            patch.setattr(os, "replace", fail)
            with pytest.raises(StateError, match="cannot write the state file"):
                save_state(state, {**PAYLOAD, "n": 2}, lock=lock)
        os.link(state, tmp_path / "hard.state")
        refused(tmp_path / "hard.state", "by another name")
    finally:
        lock.release()


def test_a_run_on_a_link_to_a_state_in_use_is_refused(ipfi, rows_csv, river_model, tmp_path):
    """The command itself: a second run on the state by another name is refused in one line, exit 1."""
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    args = [rows_csv, "-m", river_model, "-t", "class", "--learn", "--seed", "1", "-q", "--checkpoint-every", "100"]
    assert ipfi(*args, "-o", out, "--state", state).exit_code == 0
    os.symlink(state, tmp_path / "link.state")
    lock = StateLock(state)
    lock.acquire()
    try:
        result = ipfi(*args, "-o", tmp_path / "other.csv", "--state", tmp_path / "link.state")
        lines = result.stderr.strip().splitlines()
        assert result.exit_code == 1 and len(lines) == 1, result.stderr
        assert "another ipfi run is using this state file by another name" in lines[0]
        assert not (tmp_path / "other.csv").exists()
    finally:
        lock.release()


@pytest.mark.timeout(60)
def test_a_fifo_as_state_is_refused_at_once(ipfi, rows_csv, river_model, tmp_path):
    """`--state` naming a FIFO blocked forever on reading it."""
    fifo = tmp_path / "pipe.state"
    os.mkfifo(fifo)
    result = ipfi(rows_csv, "-m", river_model, "-t", "class", "--learn", "-q", "-o", tmp_path / "t.csv",
                  "--state", fifo)
    lines = result.stderr.strip().splitlines()
    assert result.exit_code == 1 and len(lines) == 1, result.stderr
    assert "not a state file: it is a FIFO (named pipe)" in lines[0]
