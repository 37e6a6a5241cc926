"""Loading any model the command line takes, for the Python API."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ipfi_cli.models.http_options import MAX_ANSWER_BYTES, HttpOptions, resolve_protocol
from ipfi_cli.models.loading import load_predictor


def load_model(source: str, *, trust: Sequence[str] | None = None, learn: bool = False,
               protocol: str | None = None, headers: Mapping[str, str] | None = None, timeout: float = 30.0,
               classes: Sequence[Any] | None = None, max_answer_bytes: int | None = None) -> Any:
    """Load any model the command line takes, ready for :class:`IncrementalPFI` and :func:`batch_pfi`.

    Parameters
    ----------
    source : str
        A model file (joblib or pickle: they run code on load; ``.skops``; ``.onnx``), an
        MLflow model directory or URI (``models:/name/1``, ``runs:/...``), or a served model's
        URL (``http(s)://HOST/invocations`` for MLflow's protocol, ``.../v2/models/NAME`` for the
        Open Inference Protocol).
    trust : list of str, default=None
        The types a ``.skops`` file may hold (as ``--trust``).
    learn : bool, default=False
        The model must learn one row at a time (river's ``learn_one``).
    protocol, headers, timeout, classes, max_answer_bytes
        For a served model, as ``--protocol``, ``--header``, ``--timeout``, ``--classes`` and
        ``--max-answer-mb``. A served model does not say what it is: a classifier needs
        ``classes`` for the log loss, and ``loss=`` tells the task when it is not zero-one.

    Returns
    -------
    predictor : Predictor
        The model behind the adapter the command line uses (its ``model`` attribute, where it
        has one, is the loaded object).

    Raises
    ------
    ModelError
        One line naming the file, URI or URL (never a URL's password or a header's value).

    Examples
    --------
    >>> from ipfi_cli import load_model
    >>> load_model("no/such/model.joblib")
    Traceback (most recent call last):
    ...
    ipfi_cli.models.files.ModelFileError: no/such/model.joblib: no such model file
    """
    if source.startswith(("http://", "https://")):
        from ipfi_cli.models.http import HttpModelError

        try:
            resolve_protocol(source, protocol)
        except ValueError as error:
            raise HttpModelError(str(error)) from None
        options = HttpOptions(url=source, protocol=protocol, headers=tuple((headers or {}).items()),
                              timeout=timeout, classes=tuple(classes) if classes else None,
                              max_answer_bytes=max_answer_bytes or MAX_ANSWER_BYTES)
        return load_predictor(options.display_url, http=options).predictor
    return load_predictor(source, learn=learn, trust=trust).predictor
