"""Whether a model's numbers may depend on Python's string hashing, and the hash seed ipfi runs such a model under.

Python randomises string hashing per process, so the iteration order of a set of strings,
such as the columns of river's ``compose.Select``, differs from run to run, and with it
the order of floating-point sums inside such a model: the last digits of the numbers
change between processes with the same ``--seed``. Such a model runs under the fixed
:data:`PINNED_SEED` (the command line re-executes itself, :mod:`ipfi_cli.cli.hash_seed`;
a ``--state`` records any other seed, :mod:`ipfi_cli.run.resume`; Dask's workers must hash
as this process does, :mod:`ipfi_cli.run.distributed`). The one rule of which models that
is, :func:`depends_on_hashing`, serves all three.

A model whose numbers cannot depend on it: an ONNX file, or a pickle/joblib file whose
every pickled class or function comes from scikit-learn, NumPy, SciPy, pandas, joblib,
XGBoost, LightGBM or the standard containers, or is the recipe of a bundled scikit-learn
sample model (read from the file's pickle opcodes without loading it; ipfi itself
iterates no set of strings into a number). Any other model, or a
file that cannot be read that way (compressed other than with zlib or gzip, larger than
32 MB), may. Only the standard library is imported here (the command line decides before
anything else is imported).

>>> depends_on_hashing("missing.pkl"), depends_on_hashing(None)
(True, True)
"""

from __future__ import annotations

import os
import re

#: the string-hash seed a model that may depend on it runs under. Dask's nanny starts its workers
#: under 6640 where the seed is unset or 0 (``distributed/nanny.py``), so a run spread over Dask
#: workers started the usual way (``dask worker``, or the local cluster of ``--workers``) sums in the
#: same order as one process. ipfi's states before this pin (0) record no seed (see ipfi_cli.run.resume).
PINNED_SEED = "6640"

#: top-level packages whose pickled objects predict the same numbers under every hash seed
HASH_FREE_PACKAGES = frozenset({
    "sklearn", "numpy", "scipy", "pandas", "joblib", "xgboost", "lightgbm", "threadpoolctl",
    "builtins", "__builtin__", "copyreg", "copy_reg", "_codecs", "collections", "datetime", "decimal",
})

#: pickled functions of other packages whose result predicts the same numbers under every hash seed: the
#: bundled sample scikit-learn models are recipes that fit one when loaded (ipfi_cli.sample_models)
HASH_FREE_GLOBALS = frozenset({"ipfi_cli.sample_models.hist_gradient_boosting"})

#: larger pickles are not scanned (the re-execution costs less than reading them twice)
SCAN_LIMIT = 32 << 20

#: a fixed string whose hash tells two processes' hash seeds apart (ipfi_cli.run.distributed)
PROBE = "ipfi: string-hash probe"

_NAME = rb"[A-Za-z_][A-Za-z0-9_.]*"
# protocol 4+: SHORT_BINUNICODE module [MEMOIZE] (SHORT_BINUNICODE name | BINGET | LONG_BINGET) [MEMOIZE] STACK_GLOBAL
_STACK_GLOBAL = re.compile(rb"\x8c([\x01-\xff])(" + _NAME + rb")\x94?(?:\x8c([\x01-\xff])(" + _NAME
                           + rb")|h[\x00-\xff]|j[\x00-\xff]{4})\x94?\x93")
# protocols 0-3: GLOBAL or INST, "module\nname\n"
_GLOBAL = re.compile(rb"[ci](" + _NAME + rb")\n(" + _NAME + rb")\n")


def depends_on_hashing(model: str | None) -> bool:
    """Whether the model ``--model`` names (``None``: none named, such as ``--model-url``) may give other
    last digits under another string-hash seed: ``False`` only for a model file shown not to."""
    if model is None or not os.path.isfile(model):
        return True
    if model.lower().endswith(".onnx"):
        return False
    found = pickled_globals(model)
    return found is None or any(module.split(".")[0] not in HASH_FREE_PACKAGES
                                and f"{module}.{name}" not in HASH_FREE_GLOBALS for module, name in found)


def workers_must_hash_alike(model: str | None) -> bool:
    """Whether the processes a run spreads its work over must hash strings as this one: the model may
    depend on it (:func:`depends_on_hashing`) and this process runs under a fixed seed (the command line
    pins one; a process under a random seed, such as Python's own default, promises no bytes to match)."""
    return os.environ.get("PYTHONHASHSEED", "random") != "random" and depends_on_hashing(model)


def pickled_modules(path: str) -> set[str] | None:
    """The modules a pickle file's globals come from, or ``None`` when it cannot tell
    (not a plain pickle, such as a compressed joblib file, or too large to scan)."""
    found = pickled_globals(path)
    return None if found is None else {module for module, _ in found}


def pickled_globals(path: str) -> set[tuple[str, str | None]] | None:
    """The ``(module, name)`` of a pickle file's globals (``name`` is ``None`` where the pickle refers to
    it by its memo), or ``None`` when it cannot tell (see :func:`pickled_modules`)."""
    try:
        if os.path.getsize(path) > SCAN_LIMIT:
            return None
        with open(path, "rb") as f:
            data = f.read()
    except OSError:
        return None
    if data[:1] == b"\x78" or data[:2] == b"\x1f\x8b":  # joblib's zlib or gzip compression
        data = _decompressed(data)
    if not data.startswith(b"\x80"):  # pickles of protocol 2+ begin with PROTO
        return None
    found = {(m.group(2).decode(), m.group(4).decode() if m.group(4) and m.group(3)[0] == len(m.group(4)) else None)
             for m in _STACK_GLOBAL.finditer(data) if m.group(1)[0] == len(m.group(2))}
    found.update((m.group(1).decode(), m.group(2).decode()) for m in _GLOBAL.finditer(data))
    return found or None


def _decompressed(data: bytes) -> bytes:
    """A zlib or gzip stream inflated, up to :data:`SCAN_LIMIT` bytes (b"" when damaged or larger)."""
    import zlib

    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # either header
    try:
        plain = inflater.decompress(data, SCAN_LIMIT)
    except zlib.error:
        return b""
    return b"" if inflater.unconsumed_tail else plain
