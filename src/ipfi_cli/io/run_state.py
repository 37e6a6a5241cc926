"""The state file of a long ``ipfi explain`` run (``--state``) and the traces file it vouches for.

A state file holds everything a stopped run needs to continue exactly: the explainer's
explainer (without its model), the learned model with ``--learn``, and the
command's own counters (rows read, skipped, written; where the traces file ends). It is
written atomically: a temporary file in the same directory, flushed and ``fsync``-ed,
then renamed over the old state with ``os.replace`` and the directory synced, so a crash
at any moment leaves either the previous state or the new one, never a torn one.

The state file is **plain data** (:mod:`ipfi_cli.core.plain_state`: a JSON document and NumPy
arrays, versioned and checksummed): loading it runs no code, and a file altered after it was
written is refused. A learning model (``--learn``) is the one part that is not plain data: it is
saved beside the state (``STATE.model-<digest>``, a pickle like the model file the run started
from), and the state holds its SHA-256, so a resumed run refuses a model file that is not the one
the state wrote before unpickling it (:func:`save_model_beside`, :func:`load_model_beside`).

The traces file is tracked by :class:`TrackedOutput`, which counts the bytes written and
keeps their CRC-32. A checkpoint records both after flushing (and syncing) the traces, so
it never claims a record that is not in the file. On resume :func:`reopen_traces` checks
that the file still starts with exactly those bytes, cuts off anything written after the
checkpoint (records the resumed run writes again, identically), and appends from there.

>>> import io
>>> out = TrackedOutput(io.BytesIO())
>>> out.write(b"row,a\\n")
6
>>> out.size, out.crc == zlib.crc32(b"row,a\\n")
(6, True)
"""

from __future__ import annotations

import glob
import hashlib
import os
import zlib
from typing import Any, BinaryIO

from ipfi_cli.core.plain_state import MARKER, VERSION, StateFormatError, dumps, loads
from ipfi_cli.errors import StateError
from ipfi_cli.io.writers import atomic_write_bytes

MAGIC = MARKER
FORMAT = "ipfi-explain-run-state"
#: the first line of the state files of ipfi before 0.2 (pickles), refused with a message
PICKLED_MAGIC = b"ipfi explain state\n"


class StateFileError(StateError):
    """A state file or its traces file cannot be used; ``str(error)`` is one line naming the file."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = os.fspath(path)
        super().__init__(f"{self.path}: {message}")


def save_state(path: str | os.PathLike[str], payload: dict[str, Any]) -> None:
    """Write ``payload`` (plain data) as the state file at ``path``, atomically and durably."""
    try:
        data = dumps({"format": FORMAT, "version": VERSION, **payload}, format=FORMAT)
    except TypeError as error:
        raise StateFileError(path, f"the state cannot be saved as plain data ({error})") from None
    try:
        atomic_write_bytes(path, data)
        _sync_directory(os.path.dirname(os.path.abspath(path)))
    except OSError as error:
        raise StateFileError(path, f"cannot write the state file ({error.strerror or error})") from None


def load_state(path: str | os.PathLike[str]) -> dict[str, Any]:
    """Read a state file written by :func:`save_state` (marker, format, version and checksum checked)."""
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise StateFileError(path, f"cannot read the state file ({error.strerror or error})") from None
    if data.startswith(PICKLED_MAGIC):
        raise StateFileError(path, "a state file of an earlier ipfi (a pickle, which this ipfi does not load); "
                               "finish the run with that version, or give --state a new path to start a new run")
    if not data.startswith(MAGIC):
        raise StateFileError(path, "not an ipfi explain state file (it does not start with the state marker); "
                               "give --state a new path to start a new run")
    try:
        payload = loads(data, format=FORMAT)
    except StateFormatError as error:
        raise StateFileError(path, str(error)) from None
    if not isinstance(payload, dict):
        raise StateFileError(path, "not an ipfi explain state file")
    return payload


def save_model_beside(state_path: str | os.PathLike[str], model_bytes: bytes) -> dict[str, str]:
    """Save a learned model's pickle beside the state file, named by its digest (written before the
    state that refers to it; older ones are removed by :func:`remove_other_models`). Returns the
    reference the state keeps: ``{"file": name, "sha256": digest}``."""
    digest = hashlib.sha256(model_bytes).hexdigest()
    path = f"{os.fspath(state_path)}.model-{digest[:16]}"
    try:
        if not os.path.exists(path):
            atomic_write_bytes(path, model_bytes)
    except OSError as error:
        raise StateFileError(path, f"cannot write the learned model ({error.strerror or error})") from None
    return {"file": os.path.basename(path), "sha256": digest}


def remove_other_models(state_path: str | os.PathLike[str], keep: dict[str, str] | None) -> None:
    """Remove the model files beside the state that the state no longer refers to."""
    pattern = glob.escape(os.fspath(state_path)) + ".model-*"
    for path in glob.glob(pattern):
        if keep is None or os.path.basename(path) != keep["file"]:
            try:
                os.remove(path)
            except OSError:
                pass


def load_model_beside(state_path: str | os.PathLike[str], reference: dict[str, str]) -> bytes:
    """The learned model's bytes the state refers to, checked against its SHA-256 before use."""
    path = os.path.join(os.path.dirname(os.path.abspath(state_path)), os.path.basename(reference["file"]))
    try:
        with open(path, "rb") as f:
            data = f.read()
    except OSError as error:
        raise StateFileError(path, f"cannot read the learned model the state refers to "
                                   f"({error.strerror or error})") from None
    if hashlib.sha256(data).hexdigest() != reference["sha256"]:
        raise StateFileError(path, "the learned model is not the one the state wrote (its SHA-256 differs); "
                                   "it is not loaded")
    return data


def _sync_directory(directory: str) -> None:
    """Make a rename in ``directory`` durable (where the platform allows opening directories)."""
    try:
        fd = os.open(directory, os.O_RDONLY)
    except OSError:
        return
    try:
        os.fsync(fd)
    except OSError:
        pass
    finally:
        os.close(fd)


class TrackedOutput:
    """A binary output stream that counts the bytes written through it and their CRC-32.

    ``muted`` drops writes (used to skip the header when traces continue a file).
    """

    def __init__(self, stream: BinaryIO, *, size: int = 0, crc: int = 0, close: bool = False) -> None:
        self.stream = stream
        self.size = size
        self.crc = crc
        self.muted = False
        self._close = close

    def write(self, data: bytes) -> int:
        if self.muted:
            return len(data)
        self.stream.write(data)
        self.size += len(data)
        self.crc = zlib.crc32(data, self.crc)
        return len(data)

    def flush(self) -> None:
        self.stream.flush()

    def sync(self) -> None:
        """Flush, and ``fsync`` when the stream is a regular file (not a pipe or terminal)."""
        self.stream.flush()
        try:
            fd = self.stream.fileno()
            if _is_regular(fd):
                os.fsync(fd)
        except (AttributeError, OSError, ValueError):
            pass

    def close(self) -> None:
        try:
            self.stream.flush()
        finally:
            if self._close:
                self.stream.close()


def _is_regular(fd: int) -> bool:
    import stat

    return stat.S_ISREG(os.fstat(fd).st_mode)


def file_crc(path: str | os.PathLike[str], length: int, chunk: int = 1 << 20) -> tuple[int, int]:
    """CRC-32 of the first ``length`` bytes of a file, and how many bytes there were (<= length)."""
    crc, seen = 0, 0
    with open(path, "rb") as f:
        while seen < length:
            data = f.read(min(chunk, length - seen))
            if not data:
                break
            crc = zlib.crc32(data, crc)
            seen += len(data)
    return crc, seen


def reopen_traces(path: str, size: int, crc: int) -> TrackedOutput:
    """Open the traces file of a resumed run: check it starts with the ``size`` bytes (CRC ``crc``)
    the state vouches for, cut off what follows them, and return it ready to append."""
    if size == 0 and not os.path.exists(path):  # nothing written yet (a merged state): a new file
        try:
            return TrackedOutput(open(path, "wb"), close=True)
        except OSError as error:
            raise StateFileError(path, f"cannot write the traces file ({error.strerror or error})") from None
    if not os.path.exists(path):
        raise StateFileError(path, f"the traces file is missing; the state continues a file of {size:,} bytes. "
                               "Restore it, or start a new run with a new --state")
    try:
        found_crc, found = file_crc(path, size)
    except OSError as error:
        raise StateFileError(path, f"cannot read the traces file ({error.strerror or error})") from None
    if found < size:
        raise StateFileError(path, f"the traces file has {found:,} bytes, but the state continues a file of {size:,} "
                               "bytes: it is not the file this state wrote")
    if found_crc != crc:
        raise StateFileError(path, f"the traces file's first {size:,} bytes are not the ones this state wrote "
                               "(another file, or changed since)")
    try:
        stream = open(path, "r+b")
        stream.truncate(size)  # records written after the checkpoint come again, identically
        stream.seek(size)
    except OSError as error:
        raise StateFileError(path, f"cannot reopen the traces file ({error.strerror or error})") from None
    return TrackedOutput(stream, size=size, crc=crc, close=True)
