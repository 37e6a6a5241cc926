"""The temporary files of a state's save that a process killed in the middle of it (kill -9) left:
the next run on the state removes them, and only them, and never those of a run that holds the state."""

from __future__ import annotations

import os


def test_a_later_run_removes_the_temporary_files_of_a_save_killed_halfway(ipfi, rows_csv, river_model, tmp_path):
    """kill -9 during a checkpoint leaves `.STATE.XXXXXXXX.tmp` (and the learned model's) beside the state,
    megabytes each, which no run removed; a run on the state removes those, and nothing else."""
    out, state = tmp_path / "traces.csv", tmp_path / "run.state"
    args = [rows_csv, "-m", river_model, "-t", "class", "--learn", "--seed", "1", "-q", "-o", out, "--state", state,
            "--checkpoint-every", "100"]
    assert ipfi(*args).exit_code == 0
    stale = [".run.state.k3j_9x0q.tmp", ".run.state.model-0123456789abcdef.a1b2c3d4.tmp"]
    kept = [".run.state.tmp", ".run.state.abc.tmp", ".run.state.abcdefgh.tmp.bak", ".other.state.k3j_9x0q.tmp",
            "run.state.k3j_9x0q.tmp", ".run.state.model-0123.a1b2c3d4.tmp", ".run.state.ABCDEFGH.tmp", "notes.txt"]
    for name in stale + kept:
        (tmp_path / name).write_bytes(b"x" * 1000)
    os.symlink(tmp_path / "notes.txt", tmp_path / ".run.state.zzzzzzzz.tmp")  # not a regular file: left alone
    result = ipfi(*args)  # the same command: continues (from the end: nothing more to do)
    assert result.exit_code == 0, result.stderr
    left = set(os.listdir(tmp_path))
    assert not left & set(stale)
    assert set(kept) | {".run.state.zzzzzzzz.tmp"} <= left


def test_a_run_refused_for_a_state_in_use_removes_nothing(ipfi, rows_csv, river_model, tmp_path):
    """Another run holds the state (its lock): its save may be under way, its temporary file is not stale."""
    from ipfi_cli.io.run_state import StateLock, remove_stale_temporaries

    state = tmp_path / "run.state"
    saving = tmp_path / ".run.state.k3j_9x0q.tmp"
    saving.write_bytes(b"x")
    lock = StateLock(state)
    lock.acquire()
    try:
        result = ipfi(rows_csv, "-m", river_model, "-t", "class", "--learn", "-q", "-o", tmp_path / "traces.csv",
                      "--state", state)
        assert result.exit_code == 1 and "another ipfi run is using this state" in result.stderr
        assert saving.exists()
        assert remove_stale_temporaries(state, StateLock(state)) == []  # a lock not held removes nothing
        assert saving.exists()
    finally:
        lock.release()

