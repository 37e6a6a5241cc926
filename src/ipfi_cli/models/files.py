"""Loading and saving model files: skops (safe) and joblib / pickle (runs code).

* ``.skops`` files (zip archives written by ``skops.io.dump``) load with ``skops.io``,
  which rebuilds only known types. A file holding types skops does not trust by default
  is refused with the list of those types; the user names each one they trust
  (``trusted``, the CLI's ``--trust TYPE``). skops is an optional dependency
  (``pip install 'ipfi-cli[safe]'``).
* **Loading a joblib or pickle file runs code**: such a file can execute anything when
  it is loaded. Only load model files you trust. They remain the common case (river
  models, most saved scikit-learn models), so they still load.

The kind is found from the file's first bytes (a zip archive is skops), and a ``.skops``
name that is not a zip archive is an error rather than a pickle. Pickled models load
only with (nearly) the library versions they were saved with. scikit-learn warns with
``InconsistentVersionWarning`` when the versions differ; here that warning becomes one
clear line naming both versions (see :func:`load_model`). Every failure raises
:class:`ModelFileError`, whose message names the file.
"""

from __future__ import annotations

import os
import pickle
import warnings
from collections.abc import Sequence
from typing import Any

from ipfi_cli.errors import ModelError, UsageError, first_line
from ipfi_cli.io.targets import atomic_write, target_problem


class ModelFileError(ModelError):
    """A model file cannot be loaded or saved; ``str(error)`` names the file."""

    def __init__(self, path: str | os.PathLike[str], message: str) -> None:
        self.path = os.fspath(path)
        super().__init__(f"{self.path}: {message}")


#: the distribution this package is installed as (its requirements give the supported ranges)
DISTRIBUTION = "ipfi-cli"


def supported_range(distribution: str) -> str | None:
    """The versions of ``distribution`` ipfi supports (``">=1.3"``), from ipfi's installed metadata.

    ``None`` when ipfi is not installed (run from a source tree) or does not require it.
    """
    from importlib import metadata

    from packaging.requirements import InvalidRequirement, Requirement
    from packaging.utils import canonicalize_name

    try:
        requires = metadata.requires(DISTRIBUTION) or []
    except metadata.PackageNotFoundError:
        return None
    for line in requires:
        try:
            requirement = Requirement(line)
        except InvalidRequirement:
            continue
        if requirement.marker is None and canonicalize_name(requirement.name) == canonicalize_name(distribution):
            return str(requirement.specifier) or None
    return None


def _within(version: str, specifier: str | None) -> bool:
    from packaging.specifiers import SpecifierSet
    from packaging.version import InvalidVersion, Version

    try:
        return specifier is not None and SpecifierSet(specifier).contains(Version(version), prereleases=True)
    except InvalidVersion:
        return False


def _version_fix(distribution: str, saved: str | None, current: str) -> str:
    """How to make a model saved with ``saved`` load: never a version ipfi's requirements forbid."""
    supported = supported_range(distribution)
    refit = f"fit and save the model again with {distribution} {current}"
    if saved is not None and (supported is None or _within(saved, supported)):
        within = f" (ipfi supports {distribution}{supported})" if supported else ""
        return f"install the version it was saved with, pip install '{distribution}=={saved}'{within}, or {refit}"
    if saved is not None:
        return f"{refit} (ipfi supports {distribution}{supported}, which {saved} is not)"
    within = f" (ipfi supports {distribution}{supported})" if supported else ""
    return f"install the {distribution} version it was saved with{within}, or {refit}"


def _version_warning(path: str, warning: Warning | str) -> str | None:
    """One line for scikit-learn's InconsistentVersionWarning (matched by name: sklearn stays unimported)."""
    if type(warning).__name__ != "InconsistentVersionWarning":
        return None
    saved = str(getattr(warning, "original_sklearn_version", "?"))
    current = str(getattr(warning, "current_sklearn_version", "?"))
    return (f"{path}: saved with scikit-learn {saved}, loaded with scikit-learn {current}; "
            f"predictions may be wrong or fail. To fix: {_version_fix('scikit-learn', saved, current)}.")


def _installed_distribution(module: str) -> tuple[str, str] | None:
    """``(distribution, version)`` of the installed package that ``module`` would belong to."""
    from importlib import metadata

    top = module.partition(".")[0]
    names = metadata.packages_distributions().get(top, [])
    for name in names:
        try:
            return name, metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return None


def _mismatch_message(module: str | None, error: BaseException) -> str:
    """A model that does not load with the installed libraries: name them and a fix within ipfi's ranges."""
    found = _installed_distribution(module) if module else None
    if found is None:
        if module and "." not in module:
            return f"the model needs the Python module {module!r}, which is not installed"
        return f"the model was saved with other library versions and cannot be loaded with these ({first_line(error)})"
    distribution, current = found
    needs = f"it needs {module}, which {distribution} {current} does not have" if isinstance(
        error, ModuleNotFoundError) else first_line(error)
    return (f"the model was saved with another version of {distribution} than the installed {current} ({needs}). "
            f"To fix: {_version_fix(distribution, None, current)}")


def _with_saved_version(error: ModelFileError, caught: list[warnings.WarningMessage]) -> ModelFileError:
    """A pickle that failed to load after scikit-learn warned of its version: name the saved version too."""
    for item in caught:
        if type(item.message).__name__ == "InconsistentVersionWarning":
            saved = str(getattr(item.message, "original_sklearn_version", "?"))
            current = str(getattr(item.message, "current_sklearn_version", "?"))
            return ModelFileError(error.path, f"saved with scikit-learn {saved}, which cannot be loaded with the "
                                              f"installed scikit-learn {current}. To fix: "
                                              f"{_version_fix('scikit-learn', saved, current)}")
    return error


def _failing_module(error: BaseException) -> str | None:
    """The module a failed unpickling was looking in (``ModuleNotFoundError.name``, or the class's module)."""
    if isinstance(error, ImportError):
        return error.name
    if isinstance(error, AttributeError):  # "Can't get attribute 'X' on <module 'river.tree.x' from ...>"
        import re

        found = re.search(r"<module '([\w.]+)'", str(error))
        return found.group(1) if found else None
    return None


#: the first bytes of a zip archive, which is what a .skops file is
_ZIP_MAGIC = b"PK\x03\x04"
SKOPS_SUFFIX = ".skops"
SKOPS_MISSING = "reading .skops files needs the skops package: pip install 'ipfi-cli[safe]' (or: pip install skops)"


def model_file_kind(path: str | os.PathLike[str]) -> str:
    """``"skops"`` for a zip archive or a ``.skops`` name, else ``"pickle"`` (joblib/pickle)."""
    path = os.fspath(path)
    with open(path, "rb") as f:
        head = f.read(4)
    if head == _ZIP_MAGIC or path.lower().endswith(SKOPS_SUFFIX):
        return "skops"
    return "pickle"


#: the first bytes of a gzip file (a gzipped data file, or a joblib file compressed with gzip)
_GZIP_MAGIC = b"\x1f\x8b"
_DELIMITERS = (",", ";", "\t", "|")
NOT_A_MODEL = "not a joblib/pickle model file nor a .skops one"


def _text_data(head: bytes) -> bool:
    """Whether ``head`` (a file's first bytes) reads as a data file: its first line is printable
    text with a delimiter (CSV, TSV), or a JSON object or array.

    A pickle never looks like this: protocols 2 and up start with byte 0x80, joblib's
    compressed files with binary headers, and a protocol 0 or 1 pickle's first line is an
    opcode with a module name or a number (no delimiter).
    """
    if head.startswith(b"\xef\xbb\xbf"):
        head = head[3:]
    first = head.split(b"\n", 1)[0].rstrip(b"\r")
    try:
        line = first.decode("utf-8")
    except UnicodeDecodeError as error:
        if b"\n" in head or error.start < len(first) - 3:
            return False
        line = first[:error.start].decode("utf-8")  # a long first line cut inside a character
    if not line.strip() or not line.replace("\t", " ").isprintable():
        return False
    stripped = line.strip()
    if stripped[0] in "{[":
        return True
    return any(d in line for d in _DELIMITERS)


def looks_like_data(path: str) -> bool:
    """Whether the file at ``path`` is text data (CSV, TSV, JSON lines; gzipped or not), not a model."""
    import gzip
    import zlib

    with open(path, "rb") as f:
        head = f.read(4096)
    if head.startswith(_GZIP_MAGIC):
        try:
            with gzip.open(path, "rb") as g:
                head = g.read(4096)
        except (OSError, EOFError, zlib.error):
            return False
    return _text_data(head)


def load_model(path: str | os.PathLike[str], trusted: Sequence[str] = ()) -> tuple[Any, list[str]]:
    """Load a skops or joblib/pickle model file; returns ``(model, warnings)``.

    ``trusted`` names the types a ``.skops`` file may hold beyond those skops trusts by
    default (e.g. ``river.linear_model.log_reg.LogisticRegression``); any other type is
    refused and the error lists them all. ``warnings`` are one-line messages (e.g. a
    scikit-learn version mismatch, reported once however many estimators inside the
    file warn). Raises :class:`ModelFileError` for a missing, unreadable, refused or
    non-model file.
    """
    path = os.fspath(path)
    if not os.path.exists(path):
        raise ModelFileError(path, "no such model file")
    if os.path.isdir(path):
        raise ModelFileError(path, "is a directory, not a model file")
    if not os.access(path, os.R_OK):
        raise ModelFileError(path, "permission denied: cannot read the model file")
    try:
        kind = model_file_kind(path)
    except OSError as error:
        raise ModelFileError(path, f"cannot read the model file ({error.strerror or error})") from None
    if kind == "pickle":
        try:
            data = looks_like_data(path)
        except OSError as error:
            raise ModelFileError(path, f"cannot read the model file ({error.strerror or error})") from None
        if data:
            raise ModelFileError(path, f"{NOT_A_MODEL}: it looks like a data file (is --model given the data?)")
    messages: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        if kind == "skops":
            model = _load_skops(path, list(trusted))
        else:
            try:
                model = _load_pickle(path)
            except ModelFileError as error:
                raise _with_saved_version(error, caught) from None
            if trusted:
                messages.append(f"{path}: --trust applies to .skops files only; this joblib/pickle file was "
                                "loaded with pickle, which runs any code the file holds")
    for item in caught:
        line = _version_warning(path, item.message)
        if line is None:
            if issubclass(item.category, (DeprecationWarning, PendingDeprecationWarning)):
                continue
            line = f"{path}: {item.category.__name__}: {str(item.message).splitlines()[0]}"
        if line not in messages:
            messages.append(line)
    return model, messages


def _interrupted(error: BaseException) -> bool:
    """Whether ``error`` came of a Ctrl-C or SIGTERM (a :class:`KeyboardInterrupt` raised while a library's
    compiled module was initialising is turned into ``ImportError('initialization failed')``)."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        if isinstance(cause, KeyboardInterrupt):
            return True
        seen.add(id(cause))
        cause = cause.__cause__ or cause.__context__
    return False


def _load_pickle(path: str) -> Any:
    import zlib

    import joblib

    try:
        return joblib.load(path)
    except (AttributeError, ImportError) as error:
        if _interrupted(error):  # a stop while the model's libraries loaded: the stop, not a version problem
            raise KeyboardInterrupt from None
        raise ModelFileError(path, _mismatch_message(_failing_module(error), error)) from None
    except (pickle.UnpicklingError, EOFError, ValueError, KeyError, IndexError, TypeError, zlib.error) as error:
        raise ModelFileError(path, f"{NOT_A_MODEL}, or a damaged "
                                   f"file (unpickling failed with {type(error).__name__})") from None
    except OSError as error:
        raise ModelFileError(path, f"cannot read the model file ({error.strerror or error})") from None


def _load_skops(path: str, trusted: list[str]) -> Any:
    """Load with ``skops.io``: refuse (listing them) the untrusted types not in ``trusted``."""
    try:
        import skops.io as sio
    except ImportError:
        raise ModelFileError(path, SKOPS_MISSING) from None
    import zipfile

    damaged = "not a .skops model file (skops files are zip archives written by skops.io.dump), or a damaged one"
    try:
        untrusted = list(sio.get_untrusted_types(file=path))
    except (zipfile.BadZipFile, KeyError, ValueError, TypeError, EOFError) as error:
        raise ModelFileError(path, f"{damaged} ({type(error).__name__}: {first_line(error)})") from None
    except OSError as error:
        raise ModelFileError(path, f"cannot read the model file ({error.strerror or error})") from None
    refused = [name for name in untrusted if name not in trusted]
    if refused:
        raise ModelFileError(
            path, f"refused to load {len(refused)} type(s) that skops does not trust by default: "
                  f"{', '.join(refused)}. Loading a type can run its code; if you trust this file, name each "
                  f"type: " + " ".join(f"--trust {name}" for name in refused))
    try:
        return sio.load(path, trusted=untrusted)
    except (AttributeError, ImportError) as error:
        if _interrupted(error):
            raise KeyboardInterrupt from None
        raise ModelFileError(path, _mismatch_message(_failing_module(error), error)) from None
    except Exception as error:  # noqa: BLE001 - skops raises many kinds for a damaged archive
        raise ModelFileError(path, f"{damaged} ({type(error).__name__}: {first_line(error)})") from None


class _Sink:
    """A binary stream that keeps nothing (to see whether a model can be written at all)."""

    def write(self, data: Any) -> int:
        return len(data)


def check_save_model(path: str | os.PathLike[str], model: Any, option: str = "--save-model") -> None:
    """Refuse, before any work, a model that :func:`save_model` could not write at ``path``
    (:class:`~ipfi_cli.errors.UsageError` naming ``option``): a target that cannot be written, a
    ``.skops`` name without skops installed, or a model the format cannot hold. The model is
    serialised once into nothing to find out, so a long run never loses it at its end.
    """
    name = os.fspath(path)
    problem = target_problem(name)
    if problem:
        raise UsageError(f"{name}: cannot write the model there ({problem})", option)
    if name.lower().endswith(SKOPS_SUFFIX):
        try:
            import skops.io as sio
        except ImportError:
            raise UsageError(f"{name}: {SKOPS_MISSING.replace('reading', 'writing')}", option) from None
        try:
            sio.dumps(model)
        except Exception as error:  # noqa: BLE001 - skops cannot persist every object
            raise UsageError(f"{name}: skops cannot save this {type(model).__name__} ({type(error).__name__}: "
                             f"{first_line(error)}); save it as .joblib", option) from None
        return
    try:
        pickle.Pickler(_Sink(), protocol=pickle.HIGHEST_PROTOCOL).dump(model)
    except Exception as error:  # noqa: BLE001 - pickling fails in many ways
        raise UsageError(f"{name}: this {type(model).__name__} cannot be saved with joblib ({type(error).__name__}: "
                         f"{first_line(error)})", option) from None


def save_model(path: str | os.PathLike[str], model: Any) -> None:
    """Write ``model`` atomically (a crash leaves the old file or the new one): with skops
    for a ``.skops`` name, else with joblib."""
    import joblib

    if os.fspath(path).lower().endswith(SKOPS_SUFFIX):
        try:
            import skops.io as sio
        except ImportError:
            raise ModelFileError(path, SKOPS_MISSING.replace("reading", "writing")) from None
        try:
            data = sio.dumps(model)
        except Exception as error:  # noqa: BLE001 - skops cannot persist every object
            raise ModelFileError(path, f"skops cannot save this {type(model).__name__} "
                                       f"({type(error).__name__}: {first_line(error)}); save it as .joblib") from None
        write = lambda f: f.write(data)  # noqa: E731
    else:
        write = lambda f: joblib.dump(model, f)  # noqa: E731
    try:
        atomic_write(path, write)
    except OSError as error:
        raise ModelFileError(path, f"cannot write the model file ({error.strerror or error})") from None
