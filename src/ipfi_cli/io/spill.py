"""Bytes kept on disk by key: where ``ipfi explain --by --max-keys`` puts the keys it evicts.

:class:`SpillStore` is a mapping ``key -> bytes`` whose values live in files of a private
temporary folder (removed when the store is closed, or at exit), so the memory a run holds for
its evicted keys is one small index entry each, not their states. Keys stay in memory (the index);
values are written whole and read back whole.

A run killed with ``kill -9`` cannot remove its folder. Each store holds a lock (``flock``) on a
file in its folder while it lives, and a new store removes the folders beside its own whose lock
is free: their run has ended. A folder whose lock is held, or that has no lock file, is left alone.

>>> store = SpillStore()
>>> store[("eu",)] = b"state of eu"
>>> store[("eu",)], len(store), ("us",) in store
(b'state of eu', 1, False)
>>> store.pop(("eu",)), len(store)
(b'state of eu', 0)
>>> store.close()
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Hashable, Iterator, MutableMapping
from pathlib import Path
from typing import Any

PREFIX = "ipfi-keys-"
LOCK = ".lock"


class SpillStore(MutableMapping[Hashable, bytes]):
    """A mapping of keys to bytes kept in files (see the module docstring)."""

    def __init__(self, folder: str | None = None) -> None:
        remove_stale_folders(folder)
        self._folder = tempfile.TemporaryDirectory(prefix=PREFIX, dir=folder)
        self._lock = _locked(Path(self._folder.name) / LOCK)
        # key -> the number of its file (a small int, not a Path: a Path object is ~0.4 kB, and a run with
        # --max-keys holds one entry per evicted key)
        self._files: dict[Hashable, int] = {}
        self._count = 0
        self.bytes_written = 0

    def _path(self, number: int) -> str:
        return os.path.join(self._folder.name, f"{number}.key")

    def __setitem__(self, key: Hashable, value: bytes) -> None:
        number = self._files.get(key)
        if number is None:
            self._count += 1
            number = self._count
        with open(self._path(number), "wb") as file:  # a full disk raises OSError, which names the file
            file.write(value)
        self._files[key] = number
        self.bytes_written += len(value)

    def __getitem__(self, key: Hashable) -> bytes:
        with open(self._path(self._files[key]), "rb") as file:
            return file.read()

    def __delitem__(self, key: Hashable) -> None:
        os.unlink(self._path(self._files.pop(key)))

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._files)

    def __len__(self) -> int:
        return len(self._files)

    def __deepcopy__(self, memo: dict[int, object]) -> SpillStore:
        """A store of its own with the same values (a copy must not lean on this one's folder, which goes
        when this store does)."""
        copy = SpillStore(str(Path(self._folder.name).parent))
        for key in self._files:
            copy[key] = self[key]
        copy.bytes_written = self.bytes_written
        memo[id(self)] = copy
        return copy

    def close(self) -> None:
        """Remove the folder and every value in it."""
        self._files.clear()
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        self._folder.cleanup()


def _locked(path: Path) -> Any:
    """``path`` opened and locked (``flock``) for as long as the file stays open; ``None`` without
    ``fcntl`` or when it cannot be locked (the folder is then never taken for a stale one)."""
    try:
        import fcntl
    except ImportError:
        return None
    handle = open(path, "w")  # noqa: SIM115 - held open: the lock lasts as long as the file is open
    try:
        fcntl.flock(handle.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except OSError:
        handle.close()
        return None
    return handle


def remove_stale_folders(folder: str | None = None) -> list[str]:
    """Remove the spill folders in ``folder`` (default: the temporary folder) left by runs that
    ended without removing them (``kill -9``): this user's, with a lock file nobody holds. Returns
    the folders removed."""
    base = Path(folder or tempfile.gettempdir())
    removed: list[str] = []
    try:
        candidates = [p for p in base.iterdir() if p.name.startswith(PREFIX)]
    except OSError:
        return removed
    for path in candidates:
        try:
            if not path.is_dir() or path.is_symlink() or path.stat().st_uid != os.getuid():
                continue
            lock_file = path / LOCK
            if not lock_file.is_file():
                continue
            lock = _locked(lock_file)
        except OSError:
            continue
        if lock is None:  # held: the run lives
            continue
        try:
            shutil.rmtree(path, ignore_errors=True)
            removed.append(str(path))
        finally:
            lock.close()
    return removed
