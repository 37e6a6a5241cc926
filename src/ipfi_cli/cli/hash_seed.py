"""Whether a model command must run under a fixed string-hash seed; decided before any import.

A model whose numbers may depend on Python's string hashing (:func:`ipfi_cli.models.hashing.depends_on_hashing`,
such as river's ``compose.Select`` iterating a set of column names) gives other last digits in every
process unless the hash seed is fixed. A model command with such a model re-executes itself once
under ``PYTHONHASHSEED=6640`` (:data:`~ipfi_cli.models.hashing.PINNED_SEED`, the seed Dask's nanny
gives its workers; :func:`fix_hash_seed`), which makes every run, every resume and every run spread
over Dask workers byte-identical. Any other model starts once. Only the standard library is imported here
(and :mod:`ipfi_cli.run.signals`, which holds Ctrl-C and SIGTERM pending across the ``exec``).

>>> hash_seed_needed(["ipfi", "plot", "traces.csv"])
False
>>> hash_seed_needed(["ipfi", "explain", "data.csv", "-m", "missing.pkl", "-t", "y"])
True

The model may also be named by a ``--config`` file (``model`` in its ``[model]`` table).
"""

from __future__ import annotations

import os
import sys

from ipfi_cli.models.hashing import PINNED_SEED, depends_on_hashing, pickled_modules

__all__ = ["MODEL_COMMANDS", "PINNED_SEED", "fix_hash_seed", "hash_seed_needed", "pickled_modules"]

#: commands that run models
MODEL_COMMANDS = ("explain", "batch", "compare", "pdp")


def _option_argument(arguments: list[str], long: str, short: str | None = None) -> str | None:
    """The value of an option among a command's arguments: the last one given, which is the one
    the command uses (a wrapper may pass a default before the user's)."""
    found, index = None, 0
    spellings = (long,) if short is None else (short, long)
    while index < len(arguments):
        argument = arguments[index]
        if argument == "--":
            break
        if argument in spellings:
            found = arguments[index + 1] if index + 1 < len(arguments) else None
            index += 2
            continue
        if argument.startswith(long + "="):
            found = argument.split("=", 1)[1]
        elif short is not None and argument.startswith(short) and not argument.startswith("--") \
                and len(argument) > 2:
            found = argument[2:]
        index += 1
    return found


def _config_model(path: str | None) -> str | None:
    """``model`` in the ``[model]`` table of a ``--config`` file (TOML, or a ``--meta`` file's
    ``"config"``), as :mod:`ipfi_cli.cli.config` reads it; ``None`` when there is none or the file
    cannot be read (the command then says why)."""
    import json
    import tomllib

    if path is None:
        return None
    try:
        with open(path, "rb") as file:
            raw = file.read()
        tables = json.loads(raw).get("config") if raw.lstrip()[:1] == b"{" else tomllib.loads(raw.decode())
        model = tables["model"]["model"]
    except (OSError, ValueError, KeyError, TypeError, AttributeError):
        return None
    return model if isinstance(model, str) else None


def _model_argument(arguments: list[str]) -> str | None:
    """The model a command's arguments name: ``-m``/``--model``, else the ``--config`` file's."""
    given = _option_argument(arguments, "--model", "-m")
    return given if given is not None else _config_model(_option_argument(arguments, "--config"))


def hash_seed_needed(argv: list[str]) -> bool:
    """True when ``argv`` runs a model command whose numbers may depend on string hashing."""
    if len(argv) < 2 or argv[1] not in MODEL_COMMANDS or "--help" in argv or "-h" in argv:
        return False
    return depends_on_hashing(_model_argument(argv[2:]))


def fix_hash_seed(argv: list[str]) -> None:
    """Re-execute this process once under ``PYTHONHASHSEED=6640`` (:data:`PINNED_SEED`) when
    :func:`hash_seed_needed`.

    An explicit ``PYTHONHASHSEED`` is kept (the user chose it); help, ``plot`` and models
    that do not depend on it start at once.
    """
    if os.environ.get("PYTHONHASHSEED", "random") != "random" or os.name == "nt" \
            or not hash_seed_needed(argv):
        return
    from ipfi_cli.run import signals

    os.environ["PYTHONHASHSEED"] = PINNED_SEED
    try:
        sys.stdout.flush()
        sys.stderr.flush()
        signals.block_for_exec()  # a Ctrl-C meanwhile waits for the new process's handler
        os.execv(sys.executable, [sys.executable, "-m", "ipfi_cli", *argv[1:]])
    except OSError:  # cannot re-execute (no interpreter path): run as is
        del os.environ["PYTHONHASHSEED"]
        signals.unblock_after_exec()
