"""The evicted keys' states on disk: values in one file, memory holding an index only."""

from __future__ import annotations

from pathlib import Path

import pytest

from ipfi_cli.core.keyed import KeyedExplainers
from ipfi_cli.io.spill import VALUES, SpillStore


def test_values_live_in_one_file_and_go_with_their_key(tmp_path):
    store = SpillStore(folder=str(tmp_path))
    store[("eu",)] = b"a" * 1000
    store[("us",)] = b"b" * 10
    store[("eu",)] = b"c" * 5  # written again: appended, the old bytes are garbage
    (values,) = tmp_path.rglob(VALUES)
    assert values.stat().st_size == 1015 == store.file_size
    assert store[("eu",)] == b"ccccc" and store[("us",)] == b"b" * 10 and set(store) == {("eu",), ("us",)}
    del store[("us",)]
    assert len(store) == 1 and ("us",) not in store
    store[("empty",)] = b""
    assert store[("empty",)] == b""
    store.close()
    assert not list(tmp_path.iterdir())


def test_values_written_again_and_again_keep_the_file_near_the_live_values(tmp_path, monkeypatch):
    """A key evicted every micro-batch is written every micro-batch: once the garbage outweighs the
    live values (and the floor, here 1 kB), the live values are copied to a new file, in order, and
    read back as they were."""
    import ipfi_cli.io.spill as spill

    monkeypatch.setattr(spill, "COMPACT_AT", 1000)
    store = SpillStore(folder=str(tmp_path))
    expected = {}
    for round_ in range(200):
        for k in range(5):
            value = bytes([round_ % 256, k]) * (10 + (round_ * 7 + k) % 40)
            store[(k,)] = expected[(k,)] = value
        if round_ % 3 == 0:
            del store[(round_ % 5,)]
            del expected[(round_ % 5,)]
        live = sum(len(v) for v in expected.values())
        assert store.file_size <= 2 * max(live, 1000) + 100  # one value beyond the bound at most
        assert {k: store[k] for k in store} == expected
    (values,) = tmp_path.rglob(VALUES)
    assert values.stat().st_size == store.file_size
    store.close()


def test_evicted_keys_are_on_disk_and_come_back_as_they_were(tmp_path):
    class Counter:
        def __init__(self) -> None:
            self.n = 0

        def state_dict(self) -> dict:
            return {"n": self.n}

        def load_state_dict(self, state: dict) -> None:
            self.n = int(state["n"])

    store = SpillStore(folder=str(tmp_path))
    keyed = KeyedExplainers(lambda key: Counter(), max_keys=2, saved=store)
    for i in range(30):
        keyed.get(i % 5).n += 1
    assert keyed.n_live == 2 and len(store) == 3
    (values,) = Path(tmp_path).rglob(VALUES)
    assert values.stat().st_size == store.file_size > 0
    assert [keyed.get(k).n for k in range(5)] == [6, 6, 6, 6, 6]


@pytest.mark.process  # two runs as child processes, one killed
def test_a_killed_runs_folder_is_removed_by_the_next_store_and_a_live_ones_kept(tmp_path):
    """kill -9 during --max-keys left its folder (67 kB a key) for good; the next store removes the
    folders whose lock nobody holds, and never one a live run holds (here a child process)."""
    import os
    import signal
    import subprocess
    import sys

    code = ("import sys, time; from ipfi_cli.io.spill import VALUES, SpillStore; s = SpillStore(sys.argv[1]); "
            "s[('k',)] = b'x' * 1000; print(s._folder.name, flush=True); time.sleep(60)")
    killed = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    live = subprocess.Popen([sys.executable, "-c", code, str(tmp_path)], stdout=subprocess.PIPE, text=True)
    try:
        dead_folder, live_folder = killed.stdout.readline().strip(), live.stdout.readline().strip()
        killed.send_signal(signal.SIGKILL)
        killed.wait(timeout=30)
        unlocked = tmp_path / "ipfi-keys-old"  # a folder without a lock file (not ours to judge): kept
        unlocked.mkdir()
        store = SpillStore(folder=str(tmp_path))
        assert not os.path.exists(dead_folder)
        assert os.path.exists(live_folder) and (Path(live_folder) / VALUES).stat().st_size == 1000
        assert unlocked.exists()
        store.close()
    finally:
        killed.kill()
        live.kill()
        live.wait(timeout=30)


def test_the_index_of_evicted_keys_is_compact(tmp_path):
    """`--by --max-keys` grew ~0.7 kB per distinct key: the store's index held a Path per evicted key
    (~0.4 kB) and KeyedExplainers an int per key for their order. Measured with tracemalloc over 5,000
    keys after a warm-up (one-element tuples of a 10-character string, as row_key gives them, ~100 bytes
    of their own): 624 bytes per key before, 231 now; the bound, 400, leaves room for the dicts' growth
    steps (over 50,000 keys: 787 before, 446 now, imports included)."""
    import gc
    import tracemalloc

    class Tiny:
        def state_dict(self):
            return {"n": 1}

        def load_state_dict(self, state):
            pass

    n = 5_000
    store = SpillStore(folder=str(tmp_path))
    keyed = KeyedExplainers(lambda key: Tiny(), max_keys=100, saved=store)
    numbered: dict = {}  # as the session counts each key's rows
    for i in range(200):  # the first evictions import what they use: not counted
        keyed.get(("warm", i))
    gc.collect()
    tracemalloc.start()
    try:
        start = tracemalloc.take_snapshot()
        for i in range(n):
            key = (f"key{i:07d}",)
            numbered[key] = numbered.get(key, 0) + 1
            keyed.get(key)
        gc.collect()
        held = sum(stat.size_diff for stat in tracemalloc.take_snapshot().compare_to(start, "filename"))
    finally:
        tracemalloc.stop()
    assert len(store) == n + 100 and keyed.keys()[200:202] == [("key0000000",), ("key0000001",)]
    assert held / n < 400, held / n
    store.close()
