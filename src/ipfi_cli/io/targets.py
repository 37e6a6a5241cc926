"""Where a command may write, checked before anything is opened for writing, and atomic writes.

* :func:`target_problem`: a target that cannot be written at all (a missing folder, a directory).
* :func:`same_file`: two paths naming one file, by the file's identity (device and inode), so a
  symlink, a hard link or another spelling of an input is caught; a path that does not exist yet
  is compared by its resolved name.
* :func:`input_clash`: the first output that is one of the command's inputs (writing it would
  destroy the data before or while it is read), or the same file as another output.

* :func:`atomic_write`: readers see either the old file or the complete new one; write errors
  (a full disk) name the file (:class:`NamedOutput`, :func:`cannot_write`).

Standard streams (``-``) and devices, FIFOs and terminals (``/dev/null``, ``/dev/stdout``) are
never a clash: they are written in place and hold no data to lose.

>>> import os, tempfile
>>> folder = tempfile.mkdtemp()
>>> data = os.path.join(folder, "data.csv")
>>> open(data, "w").close()
>>> os.symlink(data, os.path.join(folder, "link.csv"))
>>> input_clash({"--output": os.path.join(folder, "link.csv")}, {"INPUT": [data]})
('--output', '...link.csv', 'INPUT')
>>> input_clash({"--output": os.devnull, "--meta": "-"}, {"INPUT": [data, os.devnull]}) is None
True
"""

from __future__ import annotations

import errno
import os
import stat
import tempfile
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import IO, Any

from ipfi_cli.errors import InputError, OutputError

#: the characters that make an input path a glob (Parquet input)
_GLOB_CHARS = set("*?[")


def is_special(path: str | os.PathLike[str]) -> bool:
    """``path`` exists and is not a regular file (``/dev/null``, ``/dev/stdout``, a FIFO, a terminal).

    Such a target is written in place: renaming a file over it would replace the device
    (``/dev/null`` turned into a regular file when run as root) or the pipe.

    >>> is_special(os.devnull), is_special(__file__), is_special("/no/such/file")
    (True, False, False)
    """
    try:
        mode = os.stat(path).st_mode
    except OSError:
        return False
    return not stat.S_ISREG(mode) and not stat.S_ISDIR(mode)


def target_problem(path: str | os.PathLike[str]) -> str | None:
    """Why a file cannot be written at ``path``, checked before any work; ``None`` if it can.

    A device or FIFO must be writable in place; any other target needs a writable directory
    (the file is written beside it and renamed over it, see :func:`atomic_write`).
    A full disk cannot be foreseen: the write itself names it.

    >>> target_problem(os.devnull), target_problem("/no/such/dir/model.joblib")
    (None, 'no such directory: /no/such/dir')
    """
    path = os.fspath(path)
    if os.path.isdir(path):
        return "is a directory"
    if is_special(path):
        return None if os.access(path, os.W_OK) else "permission denied"
    directory = os.path.dirname(os.path.abspath(path))
    if not os.path.exists(directory):
        return f"no such directory: {directory}"
    if not os.path.isdir(directory):
        return f"not a directory: {directory}"
    if not os.access(directory, os.W_OK | os.X_OK):
        return f"permission denied: cannot create a file in {directory}"
    return None


def _stat(path: str) -> os.stat_result | None:
    try:
        return os.stat(path)
    except (OSError, ValueError):
        return None


def same_file(a: str | os.PathLike[str] | None, b: str | os.PathLike[str] | None) -> bool:
    """``a`` and ``b`` name one regular file: by device and inode when both exist (through
    symlinks, hard links, ``..``), by resolved name when neither exists yet. ``-``, empty paths
    and devices are never the same file as anything.

    >>> same_file(__file__, os.path.join(os.path.dirname(__file__), ".", os.path.basename(__file__)))
    True
    >>> same_file("-", "-"), same_file(os.devnull, os.devnull), same_file("/no/a.csv", "/no/./a.csv")
    (False, False, True)
    """
    if a is None or b is None:
        return False
    a, b = os.fspath(a), os.fspath(b)
    if a in ("", "-") or b in ("", "-"):
        return False
    first, second = _stat(a), _stat(b)
    if first is None and second is None:
        return os.path.realpath(a) == os.path.realpath(b)
    if first is None or second is None or not stat.S_ISREG(first.st_mode):
        return False
    return (first.st_dev, first.st_ino) == (second.st_dev, second.st_ino)


def data_files(path: str | None) -> list[str]:
    """The files a data input reads: the file itself, or the Parquet files of a folder or glob
    (none for standard input, or when there is nothing to read: the reader says so later)."""
    if not path or path == "-":
        return []
    if os.path.isdir(path) or (not os.path.exists(path) and _GLOB_CHARS & set(path)):
        from ipfi_cli.io.parquet_files import parquet_files

        try:
            return [name for name, _ in parquet_files(path)]
        except InputError:
            return []
    return [path]


def input_clash(outputs: Mapping[str, str | None],
                inputs: Mapping[str, str | Sequence[str] | None]) -> tuple[str, str, str] | None:
    """The first output that is the same file (:func:`same_file`) as an input or as an earlier
    output: ``(output option, its path, the other option)``; ``None`` when all are apart.

    ``outputs`` and ``inputs`` map an option (``--output``, ``INPUT``) to its path (``None``: not
    given; an input may list several files). An option found in both (``--state``, read and then
    written back on purpose) is not compared with itself.
    """
    given = [(option, path) for option, path in outputs.items() if path]
    read = [(option, path) for option, paths in inputs.items()
            for path in ([paths] if isinstance(paths, str) else paths or ())]
    for index, (option, path) in enumerate(given):
        others: Iterable[tuple[str, str]] = [*read, *given[:index]]
        for other, other_path in others:
            if other != option and same_file(path, other_path):
                return option, path, other
    return None


# -- atomic writes ------------------------------------------------------------------------------
def output_name(path: str | os.PathLike[str] | None) -> str:
    """How messages name an output: the path, or ``<stdout>``."""
    return "<stdout>" if path is None or os.fspath(path) in ("", "-") else os.fspath(path)


def cannot_write(path: str | os.PathLike[str] | None, error: OSError) -> Exception:
    """The :class:`~ipfi_cli.errors.OutputError` for a failed write (a full disk: ``No space left on device``)."""
    return OutputError(f"{output_name(path)}: cannot write ({error.strerror or type(error).__name__})")


def write_all(stream: Any, data: bytes) -> int:
    """Write every byte of ``data`` to ``stream``, also when it is a raw stream that may take
    fewer: ``sys.stdout.buffer`` is one under ``python -u`` or ``PYTHONUNBUFFERED`` (a write to a
    pipe that a signal or a closing reader interrupts returns a part; the rest would be lost).

    >>> import io
    >>> class Halves(io.RawIOBase):
    ...     def __init__(self): self.got = b""
    ...     def writable(self): return True
    ...     def write(self, b): part = bytes(b[:max(1, len(b) // 2)]); self.got += part; return len(part)
    >>> raw = Halves()
    >>> write_all(raw, b"0123456789"), raw.got
    (10, b'0123456789')
    """
    view = memoryview(data).cast("B")
    written = stream.write(view)
    if written is None or written >= len(view):  # a buffered stream writes it all (or raises)
        if written is None:
            raise BlockingIOError(errno.EAGAIN, "the output would block (a non-blocking descriptor)")
        return len(view)
    while written < len(view):
        more = stream.write(view[written:])
        if more is None:
            raise BlockingIOError(errno.EAGAIN, "the output would block (a non-blocking descriptor)")
        if more == 0:
            raise OSError(errno.EIO, "the output accepts no more bytes")
        written += more
    return len(view)


class NamedOutput:
    """A binary stream whose write errors (a full disk, a quota, an I/O error) name the output.

    A closed pipe stays a :class:`BrokenPipeError` (the command ends quietly, as with ``| head``).
    """

    def __init__(self, stream: Any, path: str | None) -> None:
        self._stream = stream
        self.path = path

    def _guard(self, call: Callable[..., Any], *args: Any) -> Any:
        try:
            return call(*args)
        except BrokenPipeError:
            raise
        except OSError as error:
            raise cannot_write(self.path, error) from None

    def write(self, data: bytes) -> int:
        return int(self._guard(write_all, self._stream, data))

    def flush(self) -> None:
        self._guard(self._stream.flush)

    def close(self) -> None:
        self._guard(self._stream.close)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def atomic_write(path: str | os.PathLike[str], write: Callable[[IO[bytes]], Any]) -> None:
    """Write a file so that readers see either the old or the complete new content.

    ``write(f)`` writes to a temporary file in the same directory; it is flushed, synced
    and then renamed over ``path`` with ``os.replace`` (atomic on POSIX and Windows). On
    any error the temporary file is removed and ``path`` is left untouched. A target that
    exists and is not a regular file (a device, a FIFO) is written in place instead
    (:func:`is_special`). A write that fails (a full disk) raises
    :class:`~ipfi_cli.errors.OutputError` naming ``path``.
    """
    path = os.fspath(path)
    if is_special(path):
        try:
            with open(path, "wb") as f:
                write(f)
                f.flush()
        except BrokenPipeError:
            raise
        except OSError as error:
            raise cannot_write(path, error) from None
        return
    try:
        _replace(path, write)
    except BrokenPipeError:
        raise
    except OSError as error:
        raise cannot_write(path, error) from None


def new_file_mode(path: str) -> int:
    """The mode a file written at ``path`` gets: the file's own when it exists (overwriting keeps
    it), else what ``open`` would give, ``0o666`` less the process's umask (a temporary file from
    :func:`tempfile.mkstemp` is ``0o600`` whatever the umask)."""
    try:
        return os.stat(path).st_mode & 0o7777
    except OSError:
        return 0o666 & ~_umask()


def _umask() -> int:
    try:  # Linux says it without changing it (os.umask would, for a moment, for every thread)
        with open("/proc/self/status", encoding="ascii") as status:
            for line in status:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError):
        pass
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


def _replace(path: str, write: Callable[[IO[bytes]], Any]) -> None:
    directory = os.path.dirname(os.path.abspath(path))
    mode = new_file_mode(path)
    handle, temp = tempfile.mkstemp(prefix=f".{os.path.basename(path)}.", suffix=".tmp", dir=directory)
    try:
        os.chmod(temp, mode)
        with os.fdopen(handle, "wb") as f:
            write(f)
            f.flush()
            os.fsync(f.fileno())
        os.replace(temp, path)
    except BaseException:
        try:
            os.unlink(temp)
        except OSError:
            pass
        raise


def atomic_write_bytes(path: str | os.PathLike[str], data: bytes) -> None:
    """:func:`atomic_write` of ``data``."""
    atomic_write(path, lambda f: f.write(data))


def write_json(path: str | os.PathLike[str], obj: Any) -> None:
    """Write ``obj`` as indented strict JSON (NaN -> null), atomically."""
    import orjson

    atomic_write_bytes(path, orjson.dumps(obj, option=orjson.OPT_INDENT_2 | orjson.OPT_SERIALIZE_NUMPY) + b"\n")
