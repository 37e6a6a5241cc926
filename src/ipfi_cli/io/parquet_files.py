"""Which files a Parquet input is: one file, a folder of partitions or a glob, and the Hive
partition values their folders name (read by :class:`~ipfi_cli.io.parquet.ParquetRowReader`).

A folder is searched recursively for ``*.parquet`` files (``_``/``.`` names, such as ``_SUCCESS``,
left out), a glob (``logs/2024-*.parquet``) is expanded; the files come in the order of their
sorted paths. Hive partition folders (``region=eu/``, below the folder or below a glob's fixed
part) are decoded as pyarrow decodes them.
"""

from __future__ import annotations

import glob
import os
from typing import Any

from ipfi_cli.errors import InputError, UsageError

#: the first bytes (and last) of every Parquet file
MAGIC = b"PAR1"
#: the value Hive-style writers (Spark, pyarrow) give a partition key that is null
HIVE_NULL = "__HIVE_DEFAULT_PARTITION__"
_GLOB_CHARS = frozenset("*?[")
_INSTALL_HINT = "reading Parquet needs pyarrow: pip install 'ipfi-cli[parquet]'"


def pyarrow_for_parquet() -> Any:
    """The pyarrow package with its Parquet reader; a usage error saying how to install it."""
    try:
        import pyarrow
        import pyarrow.parquet  # noqa: F401 - the submodule is used through the package
    except ImportError:
        raise UsageError(_INSTALL_HINT, "--format") from None
    return pyarrow


def is_parquet_input(path: str | None, format: str | None = None) -> bool:
    """True when ``path`` is to be read as Parquet: ``format="parquet"``, a ``.parquet``/``.parq``/``.pq``
    name, a folder, a glob, or a file that starts with Parquet's magic bytes.

    >>> is_parquet_input("logs/part-0.parquet"), is_parquet_input("data.csv"), is_parquet_input(None)
    (True, False, False)
    """
    if format is not None:
        return format.lower() == "parquet"
    if not path or path == "-":
        return False
    if path.lower().endswith((".parquet", ".parq", ".pq")) or os.path.isdir(path):
        return True
    if not os.path.exists(path) and _GLOB_CHARS & set(path):
        return True
    if not os.path.isfile(path):  # a named pipe or `<(command)`: reading its first bytes would take them
        return False
    return _has_magic(path, unreadable=False)


def parquet_files(path: str) -> list[tuple[str, dict[str, str]]]:
    """The Parquet files of ``path`` (a file, a folder searched recursively, or a glob), in sorted
    order, each with its Hive partition values (from the folders below the folder or the glob's
    fixed part) as the folder names spell them (``{"region": "eu"}``
    for ``.../region=eu/part.parquet``; ``{"region": "s%C3%BCd"}`` for ``region=s%C3%BCd/``: the
    reader decodes them, see :func:`decode_partitions`).

    Raises :class:`~ipfi_cli.errors.InputError` when there is none.
    """
    if os.path.isfile(path):
        return [(path, {})]
    if os.path.isdir(path):
        found = []
        for folder, subfolders, names in os.walk(path):
            subfolders[:] = [s for s in subfolders if not s.startswith(("_", "."))]
            found += [os.path.join(folder, n) for n in names
                      if not n.startswith(("_", ".")) and n.lower().endswith((".parquet", ".parq", ".pq"))]
        if not found:
            raise InputError("is a directory with no .parquet file in it (a folder is read as Parquet partitions)",
                             source=path)
        return [(f, _partition_values(os.path.relpath(os.path.dirname(f), path))) for f in sorted(found)]
    if _GLOB_CHARS & set(path):
        matches = sorted(f for f in glob.glob(path, recursive=True) if os.path.isfile(f))
        if not matches:
            raise InputError("no file matches the pattern", source=path)
        other = next((f for f in matches if not _parquet_file(f)), None)
        if other is not None:  # 'logs/*.csv': say so, not pyarrow's "magic bytes not found in footer"
            raise InputError(f"matches {other}, which is not a Parquet file: a pattern is read as Parquet files; "
                             "give CSV and JSONL files one at a time (or their rows through standard input)",
                             source=path)
        base = _fixed_folder(path)
        return [(f, _partition_values(os.path.relpath(os.path.dirname(f), base))) for f in matches]
    raise InputError("no such file", source=path)


def _parquet_file(path: str) -> bool:
    """A file named as Parquet, or one that starts with Parquet's magic bytes (an unreadable one
    counts: the reader names its problem)."""
    return path.lower().endswith((".parquet", ".parq", ".pq")) or _has_magic(path, unreadable=True)


def _has_magic(path: str, *, unreadable: bool) -> bool:
    """Whether the file starts with Parquet's magic bytes; ``unreadable`` when it cannot be read."""
    try:
        with open(path, "rb") as f:
            return f.read(4) == MAGIC
    except OSError:
        return unreadable


def _fixed_folder(pattern: str) -> str:
    """The folder a glob's matches all lie in: its leading components without a wildcard. Hive
    folders below it name partitions (``logs/*/*.parquet`` with ``logs/region=eu/a.parquet``).

    >>> _fixed_folder("logs/region=*/day=*/*.parquet"), _fixed_folder("*.parquet")
    ('logs', '.')
    """
    fixed: list[str] = []
    for part in pattern.split(os.sep)[:-1]:
        if _GLOB_CHARS & set(part):
            break
        fixed.append(part)
    return os.sep.join(fixed) or (os.sep if pattern.startswith(os.sep) else ".")


def _partition_values(relative: str) -> dict[str, str]:
    values = {}
    for part in relative.split(os.sep):
        key, sep, value = part.partition("=")
        if sep and key:
            values[key] = value
    return values


def decode_partitions(files: list[tuple[str, dict[str, str]]]) -> list[tuple[str, dict[str, str | None]]]:
    """The Hive partition keys and values of ``files`` (from :func:`parquet_files`) decoded by
    pyarrow's own Hive partitioning, as ``pyarrow.parquet.read_table`` and ``pandas.read_parquet``
    read them: percent-escapes undone in the key and the value (``region=s%C3%BCd`` is ``süd``,
    ``a%20b`` is ``a b``; a ``+`` stays), and :data:`HIVE_NULL` a missing value (``None``).

    Raises :class:`~ipfi_cli.errors.InputError` for a folder name that is not UTF-8 once decoded
    (pyarrow refuses it too).

    >>> decode_partitions([("d/region=s%C3%BCd/x%20y=a+b/p.parquet", {"region": "s%C3%BCd", "x%20y": "a+b"})])
    [('d/region=s%C3%BCd/x%20y=a+b/p.parquet', {'region': 'süd', 'x y': 'a+b'})]
    """
    if not any(parts for _, parts in files):
        return [(file, dict(parts)) for file, parts in files]
    pa = pyarrow_for_parquet()
    import pyarrow.dataset as ds

    # one string field: each name and value is decoded as the value of a segment "k=<text>"
    partitioning = ds.HivePartitioning(pa.schema([pa.field("k", pa.string())]), null_fallback=HIVE_NULL,
                                       segment_encoding="uri")

    def decoded(text: str, file: str) -> str | None:
        try:
            value: str | None = ds.get_partition_keys(partitioning.parse(f"k={text}/")).get("k")
        except (pa.ArrowInvalid, ValueError) as error:
            raise InputError(f"the partition folder name {text!r} cannot be decoded as pyarrow decodes it ({error})",
                             source=file) from None
        return value

    out: list[tuple[str, dict[str, str | None]]] = []
    for file, parts in files:
        values: dict[str, str | None] = {}
        for key, value in parts.items():
            name = decoded(key, file)
            values[key if name is None else name] = decoded(value, file)
        out.append((file, values))
    return out
