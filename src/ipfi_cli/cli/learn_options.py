"""The "Model" panel of ``ipfi explain``: the model (a file, or a served one with the "Served model"
panel's options of :mod:`ipfi_cli.cli.model_options`), what it is asked (target, task, loss), and
``--learn``/``--save-model``; its value is :class:`~ipfi_cli.run.settings.ModelSpec` (:func:`model_spec`)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Annotated, Optional

import typer

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.cli.model_options import (
    DEFAULT_CONCURRENCY,
    DEFAULT_MAX_ANSWER_MB,
    DEFAULT_MAX_REQUEST_ROWS,
    DEFAULT_MODEL_WAIT,
    DEFAULT_RETRIES,
    DEFAULT_TIMEOUT,
    ClassesOpt,
    ConcurrencyOpt,
    HeaderOpt,
    MaxAnswerMbOpt,
    MaxRequestRowsOpt,
    ModelOpt,
    ModelUrlOpt,
    ModelWaitOpt,
    Protocol,
    ProtocolOpt,
    RetriesOpt,
    TimeoutOpt,
    model_source,
)
from ipfi_cli.cli.options import (
    PANEL_MODEL,
    AllowUnknownCategoriesOpt,
    LossOpt,
    TargetOpt,
    TaskOpt,
    ThreadsOpt,
    TrustOpt,
    split_names,
)
from ipfi_cli.cli.signature import option
from ipfi_cli.run.settings import ModelSpec

LearnOpt = Annotated[bool, typer.Option(
    "--learn", help="Prequential learning: explain each row with the current model, then learn it "
    "(river models, learn_one).", rich_help_panel=PANEL_MODEL)]
SaveModelOpt = Annotated[Optional[str], typer.Option(
    "--save-model", help="With --learn: write the learned model here at the end (joblib, atomic).",
    rich_help_panel=PANEL_MODEL, show_default=False, metavar="PATH")]

MODEL_OPTIONS = [
    option("model", ModelOpt, None), option("target", TargetOpt, None), option("trust", TrustOpt, None),
    option("threads", ThreadsOpt, None), option("allow_unknown_categories", AllowUnknownCategoriesOpt, False),
    option("task", TaskOpt, "auto"), option("loss", LossOpt, None), option("learn", LearnOpt, False),
    option("save_model", SaveModelOpt, None)]
SERVED_MODEL_OPTIONS = [
    option("model_url", ModelUrlOpt, None), option("protocol", ProtocolOpt, Protocol.auto),
    option("header", HeaderOpt, None), option("timeout", TimeoutOpt, DEFAULT_TIMEOUT),
    option("max_request_rows", MaxRequestRowsOpt, DEFAULT_MAX_REQUEST_ROWS),
    option("max_answer_mb", MaxAnswerMbOpt, DEFAULT_MAX_ANSWER_MB), option("retries", RetriesOpt, DEFAULT_RETRIES),
    option("model_wait", ModelWaitOpt, DEFAULT_MODEL_WAIT), option("concurrency", ConcurrencyOpt, DEFAULT_CONCURRENCY),
    option("classes", ClassesOpt, None)]


def model_spec(model: str | None, model_url: str | None, protocol: Protocol, header: Sequence[str] | None,
               timeout: float, max_request_rows: int, max_answer_mb: float, retries: int, model_wait: str,
               concurrency: int, classes: str | None, trust: Sequence[str] | None, learn: bool,
               save_model: str | None) -> ModelSpec:
    """The model as one value: a file or URI, or a served model (``--model-url``: its checked options)."""
    path, http = model_source(model, model_url, protocol=protocol, header=header, timeout=timeout,
                              max_request_rows=max_request_rows, max_answer_mb=max_answer_mb, retries=retries,
                              model_wait=model_wait, concurrency=concurrency, classes=classes)
    return ModelSpec(path, trust=split_names(trust), http=http, learn=learn, save_model=save_model)


def check_save_model(save_model: str | None, learn: bool) -> None:
    """``--save-model`` needs ``--learn``."""
    if save_model and not learn:
        raise usage_error("needs --learn (without it the model does not change)", "--save-model")
