"""MLflow models (``pip install 'ipfi-cli[mlflow]'``): a local model directory (it holds an
``MLmodel`` file) or a ``models:/NAME/VERSION``, ``models:/NAME@ALIAS`` or ``runs:/RUN_ID/PATH``
URI, resolved by MLflow itself against the tracking store its environment names
(``MLFLOW_TRACKING_URI``, ``MLFLOW_REGISTRY_URI`` and the store's credentials).

A model with the scikit-learn flavour is loaded as the estimator itself (so it gives
``predict_proba`` and its ``classes_``, and everything a scikit-learn model does here);
any other flavour is loaded as a pyfunc, whose ``predict`` gives labels or values. Either
way **loading runs code**: MLflow flavours unpickle (pickle, cloudpickle), so only load
models you trust.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import SklearnPredictor
from ipfi_cli.models.files import ModelFileError

MLFLOW_MISSING = "loading MLflow models needs mlflow: pip install 'ipfi-cli[mlflow]' (or: pip install mlflow)"
URI_SCHEMES = ("models:/", "runs:/")


def is_mlflow_model(spec: str) -> bool:
    """A ``models:/`` or ``runs:/`` URI, or a directory with an ``MLmodel`` file."""
    return spec.startswith(URI_SCHEMES) or (os.path.isdir(spec) and os.path.isfile(os.path.join(spec, "MLmodel")))


class PyfuncPredictor:
    """An MLflow pyfunc model: ``predict`` of a DataFrame, one label or value per row."""

    supports_batch = True
    can_learn = False
    has_proba = False
    classes: list[Any] | None = None

    def __init__(self, model: Any) -> None:
        self.model = model
        self.n_features: int | None = None
        self.columns: list[str] | None = None
        schema = model.metadata.get_input_schema() if model.metadata is not None else None
        if schema is not None and schema.has_input_names():
            self.columns = [str(name) for name in schema.input_names()]

    @property
    def is_classifier(self) -> bool:
        raise ModelError("this MLflow model's flavour does not say whether it classifies: give --task "
                         "classification or --task regression")

    def predict_block(self, block: np.ndarray, columns: Sequence[str], output: Output,
                      targets: np.ndarray | None) -> np.ndarray:
        if output is Output.PROBA:
            raise ModelError("a pyfunc MLflow model gives no probabilities here (only the scikit-learn flavour "
                             "does); use --loss zero-one")
        import pandas as pd

        frame = pd.DataFrame(block, columns=list(columns))
        if block.dtype == object:
            frame = frame.infer_objects()
        predicted = self.model.predict(frame)
        if isinstance(predicted, pd.DataFrame):
            if predicted.shape[1] != 1:
                raise ModelError(f"the pyfunc model answers {predicted.shape[1]} columns per row; expected one")
            predicted = predicted.iloc[:, 0]
        result = np.asarray(predicted).reshape(len(block), -1)[:, 0]
        return result.astype(np.float64) if output is Output.VALUE else result

    def predict_records(self, records: list[dict[str, Any]], output: Output, target: Any) -> np.ndarray:
        columns = list(records[0])
        block = np.empty((len(records), len(columns)), dtype=object)
        block[:, :] = [[r[c] for c in columns] for r in records]
        return self.predict_block(block, columns, output, None)

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        raise ModelError("an MLflow model cannot learn here")


def load_mlflow(spec: str) -> tuple[Any, Any, str]:
    """Load an MLflow model; returns ``(model, predictor, kind)``. Errors name ``spec``."""
    try:
        import mlflow  # noqa: F401
        from mlflow.models import Model
    except ImportError:
        raise ModelFileError(spec, MLFLOW_MISSING) from None
    try:
        local = spec if os.path.isdir(spec) else _download(spec)
        flavors = Model.load(os.path.join(local, "MLmodel")).flavors
        if "sklearn" in flavors:
            import mlflow.sklearn

            estimator = mlflow.sklearn.load_model(local)
            predictor = SklearnPredictor(estimator)
            names = _signature_names(local)
            if predictor.columns is None and names and len(names) == predictor.n_features:
                predictor = SignatureSklearnPredictor(estimator, names)
            return estimator, predictor, "MLflow scikit-learn"
        import mlflow.pyfunc

        model = mlflow.pyfunc.load_model(local)
    except ModelFileError:
        raise
    except ModuleNotFoundError as error:
        raise ModelFileError(spec, f"the model needs the Python module {error.name!r}, "
                                   "which is not installed") from None
    except Exception as error:  # noqa: BLE001 - MLflow raises many kinds (MlflowException, OSError...)
        text = " ".join(str(error).split())[:300] or type(error).__name__
        raise ModelFileError(spec, f"cannot load the MLflow model ({type(error).__name__}: {text})") from None
    return model, PyfuncPredictor(model), "MLflow pyfunc"


class SignatureSklearnPredictor(SklearnPredictor):
    """An estimator fitted on a bare array whose MLflow signature names its inputs: it gets those
    columns, in the signature's order, as an array (as it was fitted)."""

    def __init__(self, model: Any, names: list[str]) -> None:
        super().__init__(model)
        self.columns = list(names)
        self.n_features = None

    def _frame(self, block: np.ndarray, columns: Sequence[str]) -> Any:
        names = self.columns or []
        if list(columns) != names:
            index = {c: j for j, c in enumerate(columns)}
            block = block[:, np.array([index[c] for c in names], dtype=np.intp)]
        return block


def _signature_names(local: str) -> list[str] | None:
    from mlflow.models import Model

    signature = Model.load(os.path.join(local, "MLmodel")).signature
    schema = signature.inputs if signature is not None else None
    return [str(n) for n in schema.input_names()] if schema is not None and schema.has_input_names() else None


def _download(uri: str) -> str:
    """The model's files on local disk (MLflow caches nothing: this downloads to a temporary directory)."""
    from mlflow.artifacts import download_artifacts

    return download_artifacts(artifact_uri=uri)
