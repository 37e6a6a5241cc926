"""State as plain data, in bytes: a JSON document and NumPy arrays, versioned and checksummed (no file I/O here).

Loading a state runs no code: the file holds only JSON (dicts, lists, strings, numbers, booleans,
null) and ``.npy`` arrays of numbers or booleans read with ``allow_pickle=False``, so a state can
cross machines and users (and be merged, :mod:`ipfi_cli.run.merge`). The layout::

    ipfi state\\n                                   the marker line
    {"format": ..., "version": 2, "body": N, "arrays": M, "sha256": ...}\\n
    N bytes: the JSON document (UTF-8)
    M bytes: a .npz archive of the numeric arrays the document refers to

``sha256`` is the digest of the document and the archive: a file changed by one bit, cut short or
extended is refused before anything in it is used.

What the document may hold (:func:`to_plain` converts, :func:`from_plain` converts back):
``None``, ``bool``, ``int`` (any size), ``float`` (NaN and infinities too), ``str``, lists, tuples,
dicts (any plain keys), NumPy scalars (as Python numbers) and arrays. A numeric or boolean array
goes to the archive as it is; an ``object`` array (rows of mixed text and numbers) is stored in the
document as its shape and its plain values. Anything else is refused with a ``TypeError``.

>>> import numpy as np, io
>>> state = {"n": 3, "mean": np.array([0.5, np.nan]), "rows": np.array([[1, "a"]], dtype=object), "k": (1, 2)}
>>> data = dumps(state)
>>> back = loads(data)
>>> back["n"], back["mean"].tolist(), back["rows"].tolist(), back["k"]
(3, [0.5, nan], [[1, 'a']], (1, 2))
"""

from __future__ import annotations

import hashlib
import io
import json
import math
from typing import Any

import numpy as np

MARKER = b"ipfi state\n"
VERSION = 2
_MAX_HEADER = 4096


class StateFormatError(ValueError):
    """The bytes are not a readable plain-data state (one line: what is wrong)."""


# -- plain values -------------------------------------------------------------------------------
def to_plain(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """``value`` as JSON-able data; numeric arrays are put in ``arrays`` and referred to by name."""
    if value is None or type(value) in (bool, str):
        return value
    if type(value) is int:
        return value
    if type(value) is float:
        return value if math.isfinite(value) else {"__float__": repr(value)}
    if isinstance(value, np.generic):
        return to_plain(value.item(), arrays)
    if isinstance(value, np.ndarray):
        if value.dtype.kind in "biuf":
            name = f"a{len(arrays)}"
            arrays[name] = value
            return {"__array__": name}
        if value.dtype == object:
            return {"__objects__": list(value.shape), "values": [to_plain(v, arrays) for v in value.reshape(-1)]}
        raise TypeError(f"an array of dtype {value.dtype} cannot be saved as plain data")
    if isinstance(value, (list, tuple)):
        items = [to_plain(v, arrays) for v in value]
        return items if isinstance(value, list) else {"__tuple__": items}
    if isinstance(value, dict):
        if all(type(k) is str and not k.startswith("__") for k in value):
            return {k: to_plain(v, arrays) for k, v in value.items()}
        return {"__items__": [[to_plain(k, arrays), to_plain(v, arrays)] for k, v in value.items()]}
    if isinstance(value, (int, float)):  # bool/int/float subclasses (numpy's are handled above)
        return to_plain(float(value) if isinstance(value, float) else int(value), arrays)
    raise TypeError(f"a {type(value).__name__} cannot be saved as plain data")


def from_plain(value: Any, arrays: dict[str, np.ndarray]) -> Any:
    """The inverse of :func:`to_plain`."""
    if isinstance(value, list):
        return [from_plain(v, arrays) for v in value]
    if not isinstance(value, dict):
        return value
    if "__array__" in value:
        return arrays[value["__array__"]]
    if "__float__" in value:
        return float(value["__float__"])
    if "__tuple__" in value:
        return tuple(from_plain(v, arrays) for v in value["__tuple__"])
    if "__items__" in value:
        return {_key(from_plain(k, arrays)): from_plain(v, arrays) for k, v in value["__items__"]}
    if "__objects__" in value:
        flat = [from_plain(v, arrays) for v in value["values"]]
        out = np.empty(len(flat), dtype=object)
        out[:] = flat
        return out.reshape(value["__objects__"])
    return {k: from_plain(v, arrays) for k, v in value.items()}


def _key(key: Any) -> Any:
    return tuple(key) if isinstance(key, list) else key


# -- bytes --------------------------------------------------------------------------------------
def _document(state: Any, arrays: dict[str, np.ndarray]) -> bytes:
    """``state``'s JSON document (UTF-8); its numeric arrays go to ``arrays``."""
    return json.dumps(to_plain(state, arrays), allow_nan=False, separators=(",", ":"),
                      ensure_ascii=False).encode("utf-8")


def dumps(state: Any, *, format: str = "ipfi-state") -> bytes:
    """The bytes of a state file holding ``state`` (see the module docstring)."""
    arrays: dict[str, np.ndarray] = {}
    document = _document(state, arrays)
    archive = io.BytesIO()
    np.savez(archive, **arrays)  # type: ignore[arg-type]
    packed = archive.getvalue()
    digest = hashlib.sha256(document + packed).hexdigest()
    header = json.dumps({"format": format, "version": VERSION, "body": len(document), "arrays": len(packed),
                         "sha256": digest}, separators=(",", ":")).encode("ascii")
    return MARKER + header + b"\n" + document + packed


def read_header(data: bytes) -> dict[str, Any]:
    """The header of a state file's bytes; raises :class:`StateFormatError` if there is none."""
    if not data.startswith(MARKER):
        raise StateFormatError("not an ipfi state file (it does not start with the state marker)")
    end = data.find(b"\n", len(MARKER), len(MARKER) + _MAX_HEADER)
    try:
        if end < 0:
            raise ValueError
        header = json.loads(data[len(MARKER):end])
        if not isinstance(header, dict):
            raise ValueError
    except ValueError:
        raise StateFormatError("the state file is damaged (its header line is not readable)") from None
    header["_start"] = end + 1
    return header


def loads(data: bytes, *, format: str = "ipfi-state") -> Any:
    """The state in ``data`` (the bytes of :func:`dumps`): marker, format, version, sizes and
    checksum checked first; raises :class:`StateFormatError` naming what is wrong."""
    header = read_header(data)
    if header.get("format") != format:
        raise StateFormatError(f"not an {format} file (it is {header.get('format')!r})")
    if header.get("version") != VERSION:
        raise StateFormatError(f"state format version {header.get('version')} is not supported (this ipfi reads "
                               f"version {VERSION})")
    start, body, packed = header["_start"], header.get("body"), header.get("arrays")
    if not isinstance(body, int) or not isinstance(packed, int) or start + body + packed != len(data):
        raise StateFormatError(f"the state file is damaged (it has {len(data) - start:,} bytes after its header, "
                               "not the number the header gives): cut short or extended")
    if hashlib.sha256(data[start:]).hexdigest() != header.get("sha256"):
        raise StateFormatError("the state file is damaged or was altered (its checksum does not match)")
    try:
        document = json.loads(data[start:start + body])
        with np.load(io.BytesIO(data[start + body:]), allow_pickle=False) as archive:
            arrays = {name: archive[name] for name in archive.files}
        return from_plain(document, arrays)
    except Exception as error:  # noqa: BLE001 - a checksummed file that still fails: written by another tool
        raise StateFormatError(f"the state file cannot be read ({type(error).__name__})") from None


# -- packed: a process's own bytes ---------------------------------------------------------------
_PACKED = b"ipfi packed\n"


def pack(state: Any) -> bytes:
    """``state`` as bytes for this process to read back with :func:`unpack` (an evicted key's state
    kept aside, :class:`~ipfi_cli.core.keyed.KeyedExplainers`): the same plain data as :func:`dumps`,
    its arrays written raw after the document (no ``.npz`` archive to build and parse), sizes and a
    checksum checked on reading. Not a file format: nothing outside the process reads it.

    >>> import numpy as np
    >>> back = unpack(pack({"n": 3, "mean": np.array([[0.5, np.nan]]), "k": (1, 2)}))
    >>> back["n"], back["mean"].tolist(), back["k"]
    (3, [[0.5, nan]], (1, 2))
    """
    arrays: dict[str, np.ndarray] = {}
    document = _document(state, arrays)
    # a0, a1, ... in order, in C order (np.ascontiguousarray would make a 0-d array 1-d)
    contiguous = [a if a.flags.c_contiguous else np.array(a, order="C") for a in arrays.values()]
    layout = [[a.dtype.str, list(a.shape)] for a in contiguous]
    raw = b"".join(a.tobytes() for a in contiguous)
    digest = hashlib.sha256(document + raw).hexdigest()
    header = json.dumps({"body": len(document), "arrays": layout, "raw": len(raw), "sha256": digest},
                        separators=(",", ":")).encode("ascii")
    return _PACKED + header + b"\n" + document + raw


def unpack(data: bytes) -> Any:
    """The state :func:`pack` wrote (each array a copy of its own, writable); raises
    :class:`StateFormatError` when the bytes are not all there or were changed."""
    end = data.find(b"\n", len(_PACKED)) if data.startswith(_PACKED) else -1
    try:
        if end < 0:
            raise ValueError
        header = json.loads(data[len(_PACKED):end])
        body, raw, layout = int(header["body"]), int(header["raw"]), header["arrays"]
    except (ValueError, KeyError, TypeError):
        raise StateFormatError("kept state bytes are not readable (their header is not there)") from None
    start = end + 1
    if start + body + raw != len(data) or hashlib.sha256(data[start:]).hexdigest() != header.get("sha256"):
        raise StateFormatError("kept state bytes were cut short or changed (their size or checksum does not match)")
    document = json.loads(data[start:start + body])
    arrays: dict[str, np.ndarray] = {}
    offset = start + body
    for i, (dtype_text, shape) in enumerate(layout):
        dtype = np.dtype(dtype_text)
        if dtype.kind not in "biuf":
            raise StateFormatError(f"kept state bytes hold an array of dtype {dtype} (numbers only)")
        count = math.prod(shape)
        arrays[f"a{i}"] = np.frombuffer(data, dtype=dtype, count=count, offset=offset).reshape(shape).copy()
        offset += count * dtype.itemsize
    return from_plain(document, arrays)
