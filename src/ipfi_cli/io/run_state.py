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

The traces file it vouches for is tracked by :mod:`ipfi_cli.io.trace_output`.
"""

from __future__ import annotations

import errno
import glob
import hashlib
import os
import re
import stat
from typing import Any

from ipfi_cli.core.plain_state import MARKER, VERSION, StateFormatError, dumps, loads
from ipfi_cli.errors import OutputError, StateError
from ipfi_cli.io.targets import atomic_write, atomic_write_bytes, write_all
from ipfi_cli.text import quoted

MAGIC = MARKER
FORMAT = "ipfi-explain-run-state"
#: the first line of the state files of ipfi before 0.2 (pickles), refused with a message
PICKLED_MAGIC = b"ipfi explain state\n"


class StateFileError(StateError):
    """A state file or its traces file cannot be used; ``str(error)`` is one line naming the file."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = os.fspath(path)
        super().__init__(f"{self.path}: {message}")


class StateLock:
    """The lock a run holds on its state ``path`` while it uses it (a second run on the same state is
    refused in one line).

    Two runs on one state (a supervisor restarting a run whose old process still lives) would both
    append to the same traces and checkpoint over each other. The locks are the kernel's (``flock``):
    they go with the process, even on ``kill -9``, so a stale lock file never blocks a later run. On a
    system without ``fcntl`` nothing is locked. "The same state" is the same file, whatever name it is
    given by, so the run holds locks on files, not on names:

    - ``STATE.lock`` beside the state (its name in the state's own directory: a relative name, or a
      name through a symbolic link to a directory above it, reaches the same lock file). It holds
      while the state does not exist yet (a first run, a merge's output) and across saves. It is
      opened without following a link (``O_NOFOLLOW``), without truncating it, and is refused, in
      one line, unless it is a regular file with one name: a symbolic or hard link placed there by
      another user is neither emptied nor written to. The run's PID is written into it once it is
      locked, for the message of a run refused.
    - the state file itself (opened read-only, without blocking, by the name given), when it exists:
      a symbolic or hard link to the state is another name of the same file, and its lock is the
      same. A state that is not a regular file (a FIFO, a directory, a device) is refused here.
    - each file a save writes (:func:`save_state` with ``lock=``), locked *before* it is renamed
      over the state: saving replaces the state's file (an atomic rename), so the file the run
      started from stops being the state and the new one must never be unlocked while it is. The run
      keeps the lock on the file it started from (links made before the run still name it) and on
      the last file it saved (links made to the state since then name that one); a link to a file
      between the two names an older checkpoint that is no longer the state, a copy.

    The state's name is not resolved (``os.path.realpath``) in ipfi: that would follow links in
    user space, around the kernel's protection of links in shared directories such as ``/tmp``,
    and put the lock file wherever a link points.
    """

    _FLAGS = os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0) | getattr(os, "O_NOFOLLOW", 0)

    def __init__(self, path: str | os.PathLike[str]) -> None:
        self.state = os.fspath(path)
        self.path = self.state + ".lock"
        self._file: int | None = None  # the lock file's descriptor, while held
        self._started: int | None = None  # the state file the run started from (locked)
        self._saved: int | None = None  # the last file a save wrote (locked)

    def acquire(self) -> None:
        try:
            import fcntl
        except ImportError:  # not POSIX
            return
        fd = self._open_lock_file()
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                holder = os.pread(fd, 20, 0).decode("ascii", "replace").strip()
                who = f" (process {int(holder)})" if holder.isdigit() else ""
                raise StateFileError(self.state, f"another ipfi run is using this state{who}; wait for it to end "
                                                 "or stop it, then run the command again") from None
            self._started = self._lock_state_file(fcntl)
            os.ftruncate(fd, 0)  # a regular file of one name, ours to write: see _open_lock_file
            os.pwrite(fd, str(os.getpid()).encode("ascii"), 0)
        except BaseException:
            os.close(fd)
            _close(self._started)
            self._started = None
            raise
        self._file = fd

    def _open_lock_file(self) -> int:
        """The lock file, opened (created if missing) without following a link nor truncating it; refused
        unless a regular file with one name."""
        try:
            fd = os.open(self.path, os.O_RDWR | os.O_CREAT | self._FLAGS, 0o666)
        except OSError as error:
            if error.errno in (errno.ENOENT, errno.ENOTDIR):  # no folder there (a lock file is made if missing)
                folder = os.path.dirname(os.path.abspath(self.state))
                raise StateFileError(self.state, f"no folder {os.path.dirname(self.state) or folder} to hold the "
                                                 "state and its lock file; make it, or give another path"
                                     ) from None
            if error.errno == errno.ELOOP:
                reason = "it is a symbolic link"
            else:
                reason = error.strerror or str(error)
            raise StateFileError(self.state, f"cannot use its lock file {self.path} ({reason}); remove it "
                                             "if no ipfi run uses this state, or give --state another path"
                                 ) from None
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode) or info.st_nlink != 1:
            os.close(fd)
            what = _file_kind(info.st_mode) if not stat.S_ISREG(info.st_mode) else \
                f"a file with {info.st_nlink} names (hard links)"
            raise StateFileError(self.state, f"cannot use its lock file {self.path} (it is {what}, not a "
                                             "lock file ipfi made); remove it if no ipfi run uses this state, or "
                                             "give --state another path")
        return fd

    def _lock_state_file(self, fcntl: Any) -> int | None:
        """Lock the state file itself (any name of it), when it exists; refuse one that is no regular file."""
        try:
            fd = os.open(self.state, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
        except FileNotFoundError:
            return None  # no state yet: the lock file alone (the first save locks the file it writes)
        except OSError as error:
            raise StateFileError(self.state, f"cannot read the state file ({error.strerror or error})") from None
        try:
            mode = os.fstat(fd).st_mode
            if not stat.S_ISREG(mode):
                raise StateFileError(self.state, f"not a state file: it is {_file_kind(mode)}; give --state the "
                                                 "path of a regular file (a new one starts a new run)")
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except OSError:
                raise StateFileError(self.state, "another ipfi run is using this state file by another name (a "
                                                 "symbolic or hard link to it); wait for it to end or stop it, "
                                                 "then run the command again") from None
        except BaseException:
            os.close(fd)
            raise
        return fd

    def lock_written(self, fileno: int) -> int | None:
        """Lock the file a save is writing (before it is renamed over the state): a descriptor to give
        :meth:`now_saved` once it is the state (or to close if the save fails); ``None`` when not held."""
        if self._file is None:
            return None
        import fcntl

        fd = os.dup(fileno)
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:  # a file just made, that no one else locks: not expected
            os.close(fd)
            return None
        return fd

    def now_saved(self, fd: int | None) -> None:
        """The file locked by :meth:`lock_written` is now the state: hold it instead of the previous save's."""
        if fd is not None:
            _close(self._saved)
            self._saved = fd

    @property
    def held(self) -> bool:
        """Whether this process holds the lock (never on a system without ``fcntl``)."""
        return self._file is not None

    def release(self) -> None:
        for fd in (self._saved, self._started, self._file):  # closing a file releases its lock
            _close(fd)
        self._file = self._started = self._saved = None



def _close(fd: int | None) -> None:
    if fd is not None:
        try:
            os.close(fd)
        except OSError:
            pass


def _file_kind(mode: int) -> str:
    """What a file that is not a regular one is, in words."""
    for test, name in ((stat.S_ISDIR, "a directory"), (stat.S_ISFIFO, "a FIFO (named pipe)"),
                       (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a character device"),
                       (stat.S_ISBLK, "a block device"), (stat.S_ISLNK, "a symbolic link")):
        if test(mode):
            return name
    return "not a regular file"


def _temporary_names(state_path: str | os.PathLike[str]) -> re.Pattern[str]:
    """The names of the temporary files that saving the state ``state_path`` and its learned model
    write beside it (:func:`~ipfi_cli.io.targets.atomic_write`: ``tempfile.mkstemp``'s eight
    characters between the target's name, with a leading dot, and ``.tmp``)."""
    base = re.escape(os.path.basename(os.fspath(state_path)))
    return re.compile(rf"\.{base}(?:\.model-[0-9a-f]{{16}})?\.[a-z0-9_]{{8}}\.tmp")


def remove_stale_temporaries(state_path: str | os.PathLike[str], lock: StateLock) -> list[str]:
    """Remove the temporary files a save of this state (or of its learned model) left when its
    process was killed in the middle of it (``kill -9``, the machine stopped): ``.STATE.XXXXXXXX.tmp``
    and ``.STATE.model-<digest>.XXXXXXXX.tmp`` beside the state, regular files of exactly those names
    and no other. Only while ``lock`` is held: every save of a state holds its lock, so no process
    that lives is writing them. Returns the names removed."""
    if not lock.held:
        return []
    directory = os.path.dirname(os.path.abspath(state_path))
    names = _temporary_names(state_path)
    removed = []
    try:
        entries = os.listdir(directory)
    except OSError:
        return []
    for name in entries:
        if not names.fullmatch(name):
            continue
        path = os.path.join(directory, name)
        try:
            if stat.S_ISREG(os.lstat(path).st_mode):
                os.remove(path)
                removed.append(name)
        except OSError:  # gone meanwhile, or not ours to remove: left as it is
            pass
    return removed


def save_state(path: str | os.PathLike[str], payload: dict[str, Any], *, lock: StateLock | None = None) -> None:
    """Write ``payload`` (plain data) as the state file at ``path``, atomically and durably; ``lock``
    (held on ``path``) locks the new file before it becomes the state (see :class:`StateLock`)."""
    try:
        data = dumps({"format": FORMAT, "version": VERSION, **payload}, format=FORMAT)
    except TypeError as error:
        raise StateFileError(path, f"the state cannot be saved as plain data ({error})") from None
    written: list[int | None] = []

    def write(f: Any) -> None:
        write_all(f, data)
        if lock is not None:
            written.append(lock.lock_written(f.fileno()))

    try:
        atomic_write(path, write)
        _sync_directory(os.path.dirname(os.path.abspath(path)))
    except BaseException as error:
        for fd in written:
            _close(fd)
        if isinstance(error, OSError):
            raise StateFileError(path, f"cannot write the state file ({error.strerror or error})") from None
        if isinstance(error, OutputError):  # raised by atomic_write, naming the path: keep its reason
            reason = str(error).rsplit("cannot write", 1)[-1].strip() or str(error)
            raise StateFileError(path, f"cannot write the state file {reason}") from None
        raise
    if lock is not None and written:
        lock.now_saved(written[-1])


def state_digest(payload: dict[str, Any]) -> str:
    """The SHA-256 of ``payload`` as :func:`save_state` would write it (a state's identity)."""
    try:
        return hashlib.sha256(dumps({"format": FORMAT, "version": VERSION, **payload}, format=FORMAT)).hexdigest()
    except TypeError as error:
        raise StateError(f"the state cannot be saved as plain data ({error})") from None


NEW_STATE_ADVICE = "give --state a new path to start a new run"


def load_state(path: str | os.PathLike[str], data: bytes | None = None, *,
               advice: str = NEW_STATE_ADVICE) -> dict[str, Any]:
    """Read a state file written by :func:`save_state` (marker, format, version and checksum checked);
    ``data``: its bytes, when already read; ``advice`` ends the message of a file that is no state."""
    if data is None:
        try:
            _, data = read_regular(path)
        except OSError as error:
            raise StateFileError(path, f"cannot read the state file ({error.strerror or error})") from None
        except NotRegularFile as error:
            raise StateFileError(path, f"not a state file: it is {error}" + (f"; {advice}" if advice else "")
                                 ) from None
    if data.startswith(PICKLED_MAGIC):
        raise StateFileError(path, "a state file of an earlier ipfi (a pickle, which this ipfi does not load); "
                               "finish the run with that version" + (f", or {advice}" if advice else ""))
    if not data.startswith(MAGIC):
        raise StateFileError(path, "not an ipfi explain state file (it does not start with the state marker)"
                               + (f"; {advice}" if advice else ""))
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
    path = os.path.join(os.path.dirname(os.fspath(state_path)), model_file_name(state_path, digest))
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


def model_file_name(state_path: str | os.PathLike[str], digest: str) -> str:
    """The name ipfi gives the learned model of the state ``state_path`` whose pickle has the SHA-256 ``digest``."""
    return f"{os.path.basename(os.fspath(state_path))}.model-{digest[:16]}"


def load_model_beside(state_path: str | os.PathLike[str], reference: Any) -> bytes:
    """The learned model's bytes the state refers to, checked against its SHA-256 before use.

    Only the file ipfi itself names is read: :func:`model_file_name`, from the state's own name and
    the digest, beside the state. The reference's ``file`` must be such a name (a plain name ending
    in ``.model-`` and the digest's first 16 digits: no path, no ``..``), else the state is refused;
    so a state, even one crafted with a valid checksum, cannot make ipfi unpickle any other file. And
    the file is unpickled only when its bytes have the SHA-256 the state vouches for.
    """
    field = "the state's model"
    if not isinstance(reference, dict) or set(reference) != {"file", "sha256"}:
        raise StateFileError(state_path, f"{field} is not a reference to a learned model file (it must hold "
                                         "exactly 'file' and 'sha256')")
    digest, name = reference["sha256"], reference["file"]
    if not isinstance(digest, str) or not re.fullmatch(r"[0-9a-f]{64}", digest):
        raise StateFileError(state_path, f"{field}.sha256 is not a SHA-256 digest (64 hexadecimal digits): "
                                         f"{quoted(digest)}")
    if not isinstance(name, str) or not re.fullmatch(rf"[^/\\\x00]+\.model-{digest[:16]}", name) \
            or name.startswith(".."):
        raise StateFileError(state_path, f"{field}.file {quoted(name)} is not the name ipfi gives a state's "
                                         f"learned model (STATE.model-{digest[:16]}, beside the state); it is not "
                                         "loaded")
    expected = model_file_name(state_path, digest)
    path = os.path.join(os.path.dirname(os.path.abspath(state_path)), expected)
    try:
        _, data = read_regular(path)
    except FileNotFoundError:
        renamed = name != expected and os.path.exists(os.path.join(os.path.dirname(path), name))
        raise StateFileError(path, "the learned model the state refers to is missing"
                             + (f" (a state renamed without its model file: rename {name} to {expected})"
                                if renamed else "")) from None
    except OSError as error:
        raise StateFileError(path, f"cannot read the learned model the state refers to "
                                   f"({error.strerror or error})") from None
    except NotRegularFile as error:
        raise StateFileError(path, f"the learned model the state refers to is {error}, not a file; it is not "
                                   "loaded") from None
    if hashlib.sha256(data).hexdigest() != digest:
        raise StateFileError(path, "the learned model is not the one the state wrote (its SHA-256 differs); "
                                   "it is not loaded")
    return data


class NotRegularFile(Exception):
    """A file to read is not a regular file; ``str(error)`` says what it is (``a FIFO (named pipe)``)."""


def read_regular(path: str | os.PathLike[str]) -> tuple[os.stat_result, bytes]:
    """A regular file's status and bytes; a FIFO, a device or a directory raises :class:`NotRegularFile` at once
    (opened without blocking, so a FIFO with no writer does not hang the run), ``OSError`` as ``open``."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0))
    with os.fdopen(fd, "rb") as f:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            raise NotRegularFile(_file_kind(info.st_mode))
        return info, f.read()


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
