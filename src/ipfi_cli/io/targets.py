"""Where a command may write: targets checked before anything is opened for writing.

* :func:`target_problem`: a target that cannot be written at all (a missing folder, a directory).
* :func:`same_file`: two paths naming one file, by the file's identity (device and inode), so a
  symlink, a hard link or another spelling of an input is caught; a path that does not exist yet
  is compared by its resolved name.
* :func:`input_clash`: the first output that is one of the command's inputs (writing it would
  destroy the data before or while it is read), or the same file as another output.

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

import os
import stat
from collections.abc import Iterable, Mapping, Sequence

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
    (the file is written beside it and renamed over it, see :func:`~ipfi_cli.io.writers.atomic_write`).
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
        from ipfi_cli.errors import InputError
        from ipfi_cli.io.parquet import parquet_files

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
