"""Bytes kept on disk by key: where ``ipfi explain --by --max-keys`` puts the keys it evicts.

:class:`SpillStore` is a mapping ``key -> bytes`` whose values live in files of a private
temporary folder (removed when the store is closed, or at exit), so the memory a run holds for
its evicted keys is one small index entry each, not their states. Keys stay in memory (the index);
values are written whole and read back whole.

>>> store = SpillStore()
>>> store[("eu",)] = b"state of eu"
>>> store[("eu",)], len(store), ("us",) in store
(b'state of eu', 1, False)
>>> store.pop(("eu",)), len(store)
(b'state of eu', 0)
>>> store.close()
"""

from __future__ import annotations

import tempfile
from collections.abc import Hashable, Iterator, MutableMapping
from pathlib import Path


class SpillStore(MutableMapping[Hashable, bytes]):
    """A mapping of keys to bytes kept in files (see the module docstring)."""

    def __init__(self, folder: str | None = None) -> None:
        self._folder = tempfile.TemporaryDirectory(prefix="ipfi-keys-", dir=folder)
        self._files: dict[Hashable, Path] = {}
        self._count = 0
        self.bytes_written = 0

    def __setitem__(self, key: Hashable, value: bytes) -> None:
        path = self._files.get(key)
        if path is None:
            self._count += 1
            path = Path(self._folder.name) / f"{self._count}.key"
        path.write_bytes(value)  # a full disk raises OSError, which names the file
        self._files[key] = path
        self.bytes_written += len(value)

    def __getitem__(self, key: Hashable) -> bytes:
        return self._files[key].read_bytes()

    def __delitem__(self, key: Hashable) -> None:
        self._files.pop(key).unlink()

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __deepcopy__(self, memo: dict[int, object]) -> SpillStore:
        """A store of its own with the same values (a copy must not lean on this one's folder, which goes
        when this store does)."""
        copy = SpillStore(str(Path(self._folder.name).parent))
        for key, path in self._files.items():
            copy[key] = path.read_bytes()
        copy.bytes_written = self.bytes_written
        memo[id(self)] = copy
        return copy

    def close(self) -> None:
        """Remove the folder and every value in it."""
        self._files.clear()
        self._folder.cleanup()
