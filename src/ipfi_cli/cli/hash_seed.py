"""Whether a model command must run under a fixed string-hash seed; decided before any import.

Python randomises string hashing per process, so the iteration order of a set of strings,
such as the columns of river's ``compose.Select``, differs from run to run, and with it
the order of floating-point sums inside such a model: the last digits of the numbers
would change between processes with the same ``--seed``. A model command with such a
model re-executes itself once under ``PYTHONHASHSEED=0`` (:func:`fix_hash_seed`), which
makes every run and every resume byte-identical.

A model whose numbers cannot depend on it starts once: an ONNX file, or a pickle/joblib
file whose every pickled class or function comes from scikit-learn, NumPy, SciPy,
pandas, joblib, XGBoost, LightGBM or the standard containers (read from the file's pickle
opcodes without loading it; ipfi itself iterates no set of strings into a number). Any
other model, or a file that cannot be read that way (compressed other than with zlib
or gzip, larger than 32 MB), keeps the re-execution. Only the standard library is imported here
(and :mod:`ipfi_cli.run.signals`, which holds Ctrl-C and SIGTERM pending across the ``exec``).

>>> hash_seed_needed(["ipfi", "plot", "traces.csv"])
False
>>> hash_seed_needed(["ipfi", "explain", "data.csv", "-m", "missing.pkl", "-t", "y"])
True
"""

from __future__ import annotations

import os
import re
import sys

#: commands that run models
MODEL_COMMANDS = ("explain", "batch", "compare", "pdp")

#: top-level packages whose pickled objects predict the same numbers under every hash seed
HASH_FREE_PACKAGES = frozenset({
    "sklearn", "numpy", "scipy", "pandas", "joblib", "xgboost", "lightgbm", "threadpoolctl",
    "builtins", "__builtin__", "copyreg", "copy_reg", "_codecs", "collections", "datetime", "decimal",
})

#: larger pickles are not scanned (the re-execution costs less than reading them twice)
SCAN_LIMIT = 32 << 20

_NAME = rb"[A-Za-z_][A-Za-z0-9_.]*"
# protocol 4+: SHORT_BINUNICODE module [MEMOIZE] (SHORT_BINUNICODE name | BINGET | LONG_BINGET) [MEMOIZE] STACK_GLOBAL
_STACK_GLOBAL = re.compile(rb"\x8c([\x01-\xff])(" + _NAME + rb")\x94?(?:\x8c[\x01-\xff]" + _NAME
                           + rb"|h[\x00-\xff]|j[\x00-\xff]{4})\x94?\x93")
# protocols 0-3: GLOBAL or INST, "module\nname\n"
_GLOBAL = re.compile(rb"[ci](" + _NAME + rb")\n" + _NAME + rb"\n")


def pickled_modules(path: str) -> set[str] | None:
    """The modules a pickle file's globals come from, or ``None`` when it cannot tell
    (not a plain pickle, such as a compressed joblib file, or too large to scan)."""
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
    modules = {m.group(2).decode() for m in _STACK_GLOBAL.finditer(data) if m.group(1)[0] == len(m.group(2))}
    modules.update(m.group(1).decode() for m in _GLOBAL.finditer(data))
    return modules or None


def _decompressed(data: bytes) -> bytes:
    """A zlib or gzip stream inflated, up to :data:`SCAN_LIMIT` bytes (b"" when damaged or larger)."""
    import zlib

    inflater = zlib.decompressobj(zlib.MAX_WBITS | 32)  # either header
    try:
        plain = inflater.decompress(data, SCAN_LIMIT)
    except zlib.error:
        return b""
    return b"" if inflater.unconsumed_tail else plain


def _model_argument(arguments: list[str]) -> str | None:
    """The value of ``-m``/``--model`` among a command's arguments: the last one given, which is
    the one the command uses (a wrapper may pass a default before the user's)."""
    found, index = None, 0
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--":
            break
        if argument in ("-m", "--model"):
            found = arguments[index + 1] if index + 1 < len(arguments) else None
            index += 2
            continue
        if argument.startswith("--model="):
            found = argument.split("=", 1)[1]
        elif argument.startswith("-m") and not argument.startswith("--") and len(argument) > 2:
            found = argument[2:]
        index += 1
    return found


def hash_seed_needed(argv: list[str]) -> bool:
    """True when ``argv`` runs a model command whose numbers may depend on string hashing."""
    if len(argv) < 2 or argv[1] not in MODEL_COMMANDS or "--help" in argv or "-h" in argv:
        return False
    model = _model_argument(argv[2:])
    if model is None or not os.path.isfile(model):
        return True
    if model.lower().endswith(".onnx"):
        return False
    modules = pickled_modules(model)
    return modules is None or any(m.split(".")[0] not in HASH_FREE_PACKAGES for m in modules)


def fix_hash_seed(argv: list[str]) -> None:
    """Re-execute this process once under ``PYTHONHASHSEED=0`` when :func:`hash_seed_needed`.

    An explicit ``PYTHONHASHSEED`` is kept (the user chose it); help, ``plot`` and models
    that do not depend on it start at once.
    """
    if os.environ.get("PYTHONHASHSEED", "random") != "random" or os.name == "nt" \
            or not hash_seed_needed(argv):
        return
    from ipfi_cli.run import signals

    os.environ["PYTHONHASHSEED"] = "0"
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        signals.block_for_exec()  # a Ctrl-C meanwhile waits for the new process's handler
        os.execv(sys.executable, [sys.executable, "-m", "ipfi_cli", *argv[1:]])
    except OSError:  # cannot re-execute (no interpreter path): run as is
        del os.environ["PYTHONHASHSEED"]
        signals.unblock_after_exec()
