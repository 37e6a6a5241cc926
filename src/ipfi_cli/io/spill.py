"""Bytes kept on disk by key: where ``ipfi explain --by --max-keys`` puts the keys it evicts.

:class:`SpillStore` is a mapping ``key -> bytes`` whose values live in one file of a private
temporary folder (removed when the store is closed, or at exit), so the memory a run holds for
its evicted keys is one small index entry each (an int: where the value is and how long), not
their states. Values are appended and read back whole; a value written again goes to the end
and its old bytes become garbage, which the store drops by copying the live values to a new
file once the garbage outweighs them (and 16 MiB): the file stays under about twice the live
values. Appending costs ~0.02 ms where rewriting a file of its own per key cost ~0.1-0.7 ms (a
key evicted every micro-batch is written every micro-batch).

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
VALUES = "values"
#: garbage (bytes of values written again or deleted) kept before the file is compacted, at least
COMPACT_AT = 16 * 1024 * 1024
_LENGTH_BITS = 40  # an index entry: offset << 40 | length (a value under 1 TiB)


class SpillStore(MutableMapping[Hashable, bytes]):
    """A mapping of keys to bytes kept in a file (see the module docstring)."""

    def __init__(self, folder: str | None = None) -> None:
        remove_stale_folders(folder)
        self._folder = tempfile.TemporaryDirectory(prefix=PREFIX, dir=folder)
        self._lock = _locked(Path(self._folder.name) / LOCK)
        # key -> where its value is, as one int (offset << 40 | length): a Path or a tuple per key would
        # cost several times more, and a run with --max-keys holds one entry per evicted key
        self._index: dict[Hashable, int] = {}
        self._path = os.path.join(self._folder.name, VALUES)
        self._file = open(self._path, "w+b")  # noqa: SIM115 - the store's own, closed by close()
        self._end = 0  # the file's size: where the next value goes
        self._live = 0  # bytes of the values the index points to
        self.bytes_written = 0

    def __setitem__(self, key: Hashable, value: bytes) -> None:
        old = self._index.get(key)
        offset = self._end
        try:
            written = os.pwrite(self._file.fileno(), value, offset) if value else 0
        except OSError as error:  # a full disk: the error names the file
            raise OSError(error.errno, error.strerror, self._path) from None
        if written != len(value):
            raise OSError(f"{self._path}: only {written} of {len(value)} bytes written")
        self._end += len(value)
        self._index[key] = offset << _LENGTH_BITS | len(value)
        self._live += len(value) - (0 if old is None else old & _LENGTH_MASK)
        self.bytes_written += len(value)
        if self._end - self._live > max(COMPACT_AT, self._live):
            self._compact()

    def __getitem__(self, key: Hashable) -> bytes:
        entry = self._index[key]
        length = entry & _LENGTH_MASK
        data = os.pread(self._file.fileno(), length, entry >> _LENGTH_BITS)
        if len(data) != length:
            raise OSError(f"{self._path}: a kept value was cut short ({len(data)} of {length} bytes)")
        return data

    def __delitem__(self, key: Hashable) -> None:
        self._live -= self._index.pop(key) & _LENGTH_MASK

    def __iter__(self) -> Iterator[Hashable]:
        return iter(self._index)

    def __len__(self) -> int:
        return len(self._index)

    @property
    def file_size(self) -> int:
        """The bytes of the values' file now (the live values and the garbage not dropped yet)."""
        return self._end

    def _compact(self) -> None:
        """Copy the live values to a new file, in their order, and drop the old one."""
        path = self._path
        fresh = open(path + ".new", "w+b")  # noqa: SIM115 - it becomes the store's file
        end = 0
        for key in list(self._index):
            value = self[key]
            os.pwrite(fresh.fileno(), value, end)
            self._index[key] = end << _LENGTH_BITS | len(value)
            end += len(value)
        os.replace(path + ".new", path)
        self._file.close()
        self._file, self._end = fresh, end

    def __deepcopy__(self, memo: dict[int, object]) -> SpillStore:
        """A store of its own with the same values (a copy must not lean on this one's folder, which goes
        when this store does)."""
        copy = SpillStore(str(Path(self._folder.name).parent))
        for key in self._index:
            copy[key] = self[key]
        copy.bytes_written = self.bytes_written
        memo[id(self)] = copy
        return copy

    def close(self) -> None:
        """Remove the folder and every value in it."""
        self._index.clear()
        self._file.close()
        if self._lock is not None:
            self._lock.close()
            self._lock = None
        self._folder.cleanup()


_LENGTH_MASK = (1 << _LENGTH_BITS) - 1


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
