"""Where a model lives, from the ``--model`` value or ``--model-url``.

* ``--model-url URL`` (with :class:`~ipfi_cli.models.http.HttpOptions`): a served model;
* ``--model FILE.onnx`` (or a file that is an ONNX protobuf): onnxruntime;
* ``--model DIR`` with an ``MLmodel`` file, ``models:/...`` or ``runs:/...``: MLflow;
* anything else: a ``.skops`` or joblib/pickle file (:func:`ipfi_cli.models.files.load_model`),
  which :func:`open_model` leaves to its caller by returning ``None``.

Nothing heavy is imported here: each kind imports its library when it is used.
"""

from __future__ import annotations

import hashlib
import os
from typing import Any

from ipfi_cli.models.http_options import HttpOptions
from ipfi_cli.models.mlflow import is_mlflow_model, load_mlflow

ONNX_SUFFIX = ".onnx"


def is_onnx_file(path: str) -> bool:
    """An ``.onnx`` name (the content is checked when onnxruntime opens it)."""
    return path.lower().endswith(ONNX_SUFFIX)


def open_model(spec: str, *, http: HttpOptions | None = None) -> tuple[Any, Any, str, list[str]] | None:
    """``(model, predictor, kind, warnings)`` for an ONNX, MLflow or HTTP model; ``None`` for a model file.

    ``spec`` is the ``--model`` value (ignored when ``http`` is given). Errors are
    :class:`~ipfi_cli.models.files.ModelFileError` (naming the file or URI) or, for a
    server, :class:`~ipfi_cli.models.http.HttpModelError` (naming the URL without secrets).
    """
    if http is not None:
        from ipfi_cli.models.http import HttpPredictor

        served = HttpPredictor(http)
        return served, served, f"HTTP ({served.protocol})", []
    if is_onnx_file(spec):
        from ipfi_cli.models.onnx import load_onnx

        session, predictor = load_onnx(spec)
        return session, predictor, "ONNX", []

    if is_mlflow_model(spec):
        model, predictor, kind = load_mlflow(spec)
        return model, predictor, kind, []
    return None


def model_digest(spec: str) -> str:
    """What identifies the model a run started with (``--state`` checks it when a run continues).

    A file: the SHA-256 of its bytes. A directory (an MLflow model): of every file's
    relative path and bytes. A URI or URL: of the text (the registry or server decides).
    """
    digest = hashlib.sha256()
    if os.path.isfile(spec):
        with open(spec, "rb") as f:
            for chunk in iter(lambda: f.read(1 << 20), b""):
                digest.update(chunk)
    elif os.path.isdir(spec):
        for folder, _, files in sorted(os.walk(spec)):
            for name in sorted(files):
                path = os.path.join(folder, name)
                digest.update(os.path.relpath(path, spec).encode("utf-8", "surrogatepass") + b"\0")
                with open(path, "rb") as f:
                    for chunk in iter(lambda: f.read(1 << 20), b""):
                        digest.update(chunk)
    else:
        digest.update(spec.encode("utf-8", "surrogatepass"))
    return digest.hexdigest()
