"""Loading and saving model files (joblib / pickle).

**Loading a pickle runs code**: a joblib or pickle file can execute anything when it is
loaded. Only load model files you trust.

Pickled models load only with (nearly) the library versions they were saved with.
scikit-learn warns with ``InconsistentVersionWarning`` when the versions differ; here
that warning becomes one clear line naming both versions (see :func:`load_model`).
Every failure raises :class:`ModelFileError`, whose message names the file.
"""

from __future__ import annotations

import os
import pickle
import warnings
from typing import Any

from ipfi_cli.io.writers import atomic_write


class ModelFileError(ValueError):
    """A model file cannot be loaded or saved; ``str(error)`` names the file."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = os.fspath(path)
        self.message = message
        super().__init__(f"{self.path}: {message}")


def _version_warning(path: str, warning: Warning) -> str | None:
    """One line for scikit-learn's InconsistentVersionWarning (matched by name: sklearn stays unimported)."""
    if type(warning).__name__ != "InconsistentVersionWarning":
        return None
    saved = getattr(warning, "original_sklearn_version", "?")
    current = getattr(warning, "current_sklearn_version", "?")
    return (f"{path}: saved with scikit-learn {saved}, loaded with scikit-learn {current}; "
            "predictions may be wrong or fail. Re-save the model with this version, or install "
            f"scikit-learn=={saved}.")


def load_model(path: str | os.PathLike[str]) -> tuple[Any, list[str]]:
    """Load a joblib/pickle model file; returns ``(model, warnings)``.

    ``warnings`` are one-line messages (e.g. a scikit-learn version mismatch, reported
    once however many estimators inside the file warn). Raises :class:`ModelFileError`
    for a missing, unreadable or non-model file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(path, "no such model file")
    if os.path.isdir(path):
        raise ModelFileError(path, "is a directory, not a model file")
    if not os.access(path, os.R_OK):
        raise ModelFileError(path, "permission denied: cannot read the model file")
    import joblib

    messages: list[str] = []
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            model = joblib.load(path)
    except ModuleNotFoundError as error:
        raise ModelFileError(path, f"the model needs the Python module {error.name!r}, which is not installed") from None
    except (AttributeError, ImportError) as error:
        raise ModelFileError(path, f"the model was saved with other library versions and cannot be loaded "
                                   f"with these ({error})") from None
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError) as error:
        raise ModelFileError(path, "not a joblib/pickle model file, or a damaged one "
                                   f"(unpickling failed with {type(error).__name__})") from None
    except OSError as error:
        raise ModelFileError(path, f"cannot read the model file ({error.strerror or error})") from None
    for item in caught:
        line = _version_warning(path, item.message)
        if line is None:
            if issubclass(item.category, (DeprecationWarning, PendingDeprecationWarning)):
                continue
            line = f"{path}: {item.category.__name__}: {str(item.message).splitlines()[0]}"
        if line not in messages:
            messages.append(line)
    return model, messages


def save_model(path: str | os.PathLike[str], model: Any) -> None:
    """Write ``model`` with joblib, atomically (a crash leaves the old file or the new one)."""
    import joblib

    try:
        atomic_write(path, lambda f: joblib.dump(model, f))
    except OSError as error:
        raise ModelFileError(path, f"cannot write the model file ({error.strerror or error})") from None
