"""The evicted keys' states on disk: values in files, memory holding an index only."""

from __future__ import annotations

from pathlib import Path

from ipfi_cli.core.keyed import KeyedExplainers
from ipfi_cli.io.spill import SpillStore


def test_values_live_in_files_and_go_with_their_key(tmp_path):
    store = SpillStore(folder=str(tmp_path))
    store[("eu",)] = b"a" * 1000
    store[("us",)] = b"b" * 10
    store[("eu",)] = b"c" * 5  # written again: the same file
    files = sorted(p for p in tmp_path.rglob("*.key"))
    assert len(files) == 2 and sorted(p.stat().st_size for p in files) == [5, 10]
    assert store[("eu",)] == b"ccccc" and set(store) == {("eu",), ("us",)}
    del store[("us",)]
    assert len(list(tmp_path.rglob("*.key"))) == 1
    store.close()
    assert not list(tmp_path.iterdir())


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
    assert len(list(Path(tmp_path).rglob("*.key"))) == 3
    assert [keyed.get(k).n for k in range(5)] == [6, 6, 6, 6, 6]
