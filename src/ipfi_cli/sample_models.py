"""The bundled sample models, built for whatever library versions are installed.

A pickled model loads only with (nearly) the scikit-learn or river version it was written
with, so the files in ``sample_data/`` hold no fitted model at all: each is a small pickle
of a :class:`Recipe`, and loading it *builds* the model with the installed versions.

* :func:`river_model` constructs a river estimator from its public name and parameters
  (an untrained model: it learns from the stream with ``--learn``).
* :func:`hist_gradient_boosting` fits a scikit-learn ``HistGradientBoostingClassifier``
  on the training rows stored in the recipe, with one thread (the same model on any
  machine), and caches the fitted model per library versions in :func:`cache_dir`, so it
  is fitted once (about a second) and then loaded from the cache.

Both are deterministic: the same recipe and library versions give the same model. The
recipes are written by ``sample_data/make_sample_data.py``::

    >>> import pickle
    >>> recipe = Recipe(river_model, "tree.HoeffdingTreeClassifier", {"grace_period": 50})
    >>> model = pickle.loads(pickle.dumps(recipe))
    >>> type(model).__name__, model.grace_period
    ('HoeffdingTreeClassifier', 50)
"""

from __future__ import annotations

import hashlib
import importlib
import os
import pickle
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from ipfi_cli.io.targets import atomic_write

#: environment variable naming the folder where fitted sample models are cached
CACHE_ENV = "IPFI_CACHE_DIR"


class Recipe:
    """Pickles as ``function(*args)``: unpickling calls the function instead of restoring state."""

    def __init__(self, function: Callable[..., Any], *args: Any) -> None:
        self.function = function
        self.args = args

    def __reduce__(self) -> tuple[Callable[..., Any], tuple[Any, ...]]:
        return self.function, self.args


def river_model(name: str, params: dict[str, Any]) -> Any:
    """A new river estimator: ``name`` is its public path below ``river`` (``"tree.HoeffdingTreeClassifier"``)."""
    module_name, _, class_name = name.rpartition(".")
    module = importlib.import_module(f"river.{module_name}" if module_name else "river")
    return getattr(module, class_name)(**params)


def cache_dir() -> Path:
    """``$IPFI_CACHE_DIR``, else ``$XDG_CACHE_HOME/ipfi-cli``, else ``~/.cache/ipfi-cli``."""
    if os.environ.get(CACHE_ENV):
        return Path(os.environ[CACHE_ENV])
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "ipfi-cli"


def _versions() -> str:
    import joblib
    import numpy
    import sklearn

    return f"sklearn{sklearn.__version__}-numpy{numpy.__version__}-joblib{joblib.__version__}"


def hist_gradient_boosting(params: dict[str, Any], columns: Sequence[str], data: dict[str, list[Any]],
                           target: list[Any]) -> Any:
    """A ``HistGradientBoostingClassifier(**params)`` fitted on a DataFrame of ``data`` and ``target``.

    The fitted model is cached under :func:`cache_dir`, keyed by a digest of the recipe and
    the installed scikit-learn, numpy and joblib versions. A cache that cannot be read is
    rebuilt, one that cannot be written is skipped: the model is then fitted on each load.
    """
    import joblib

    digest = hashlib.sha256(pickle.dumps((params, list(columns), data, target), protocol=4)).hexdigest()[:16]
    path = cache_dir() / f"hgb-{digest}-{_versions()}.joblib"
    try:
        return joblib.load(path)
    except Exception:  # noqa: BLE001 - missing, partial or unreadable: build it again
        pass
    model = _fit_hist_gradient_boosting(params, columns, data, target)
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(path, lambda f: joblib.dump(model, f))
    except OSError:
        pass
    return model


def _fit_hist_gradient_boosting(params: dict[str, Any], columns: Sequence[str], data: dict[str, list[Any]],
                                target: list[Any]) -> Any:
    import numpy as np
    import pandas as pd
    from sklearn.ensemble import HistGradientBoostingClassifier
    from threadpoolctl import threadpool_limits

    frame = pd.DataFrame({column: data[column] for column in columns})
    with threadpool_limits(limits=1):  # one thread: fast on a busy machine, the same model everywhere
        return HistGradientBoostingClassifier(**params).fit(frame, np.asarray(target))
