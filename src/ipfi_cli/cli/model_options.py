"""Options that say where the model lives: ``--model`` (a file, an ONNX graph, an MLflow model)
or ``--model-url`` (a served model) with its HTTP settings.

Commands add these parameters and call :func:`model_source`, which checks them (usage
errors, exit 2) and returns the model's display name and the
:class:`~ipfi_cli.models.http.HttpOptions` for :func:`ipfi_cli.models.loading.load_predictor`.
Nothing heavy is imported here (``ipfi --help`` stays fast).

Header values are secrets: they are never printed, logged or written to ``--meta``.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from enum import Enum
from typing import Annotated, Any, Optional

import typer

from ipfi_cli.cli.errors import usage_error
from ipfi_cli.cli.options import PANEL_MODEL, PICKLE_WARNING

PANEL_SERVED = "Served model (--model-url)"
#: headers sent to a served model, one per line ("Name: value"), before the --header ones
HEADERS_ENV = "IPFI_MODEL_HEADERS"


class Protocol(str, Enum):
    auto = "auto"
    mlflow = "mlflow"
    v2 = "v2"


ModelOpt = Annotated[Optional[str], typer.Option(
    "--model", "-m", help="The model: a .onnx file (onnxruntime, ipfi-cli\\[onnx]; runs no code); a .skops file "
    "(loaded safely, ipfi-cli\\[safe]); a joblib/pickle file (scikit-learn, river, XGBoost, LightGBM); an MLflow "
    "model directory or a models:/NAME/VERSION or runs:/RUN_ID/PATH URI (ipfi-cli\\[mlflow], resolved with "
    "MLFLOW_TRACKING_URI). " + PICKLE_WARNING + " MLflow models unpickle too.",
    rich_help_panel=PANEL_MODEL, show_default=False, metavar="PATH|URI")]
ModelUrlOpt = Annotated[Optional[str], typer.Option(
    "--model-url", help="Explain a served model instead: http(s)://HOST/invocations (MLflow scoring) or "
    "http(s)://HOST/v2/models/NAME (Open Inference Protocol: KServe, MLServer, Triton). Give --task; for the "
    "log loss also --classes.", rich_help_panel=PANEL_SERVED, show_default=False, metavar="URL")]
ProtocolOpt = Annotated[Protocol, typer.Option(
    "--protocol", help="mlflow or v2; auto: from the URL (/invocations or /v2/models/NAME).",
    rich_help_panel=PANEL_SERVED)]
HeaderOpt = Annotated[Optional[list[str]], typer.Option(
    "--header", "-H", help=f"'Name: value' sent with every request (repeatable), e.g. 'Authorization: Bearer "
    f"TOKEN'. Also read from ${HEADERS_ENV} (one header per line). Values are never printed or written to --meta.",
    rich_help_panel=PANEL_SERVED, show_default=False, metavar="HEADER")]
TimeoutOpt = Annotated[float, typer.Option(
    "--timeout", min=0.1, help="Seconds to wait for the server to connect and for each whole answer (an answer "
    "that trickles in is cut at this time).",
    rich_help_panel=PANEL_SERVED)]
MaxRequestRowsOpt = Annotated[int, typer.Option(
    "--max-request-rows", min=1, help="At most this many rows per request (and about a million values: wide "
    "rows go fewer at a time); a micro-batch's perturbed rows are split into as few requests as this allows.",
    rich_help_panel=PANEL_SERVED)]
MaxAnswerMbOpt = Annotated[float, typer.Option(
    "--max-answer-mb", min=0.001, help="Refuse an answer larger than this many megabytes (a server that sends "
    "without end, or far more than the rows asked for).", rich_help_panel=PANEL_SERVED)]
RetriesOpt = Annotated[int, typer.Option(
    "--retries", min=0, help="Tries a request again at most this many times after the server failed on it "
    "(HTTP 500). A model that cannot be reached is waited for instead (--model-wait); any other 4xx stops at once.",
    rich_help_panel=PANEL_SERVED)]
ModelWaitOpt = Annotated[str, typer.Option(
    "--model-wait", "--retry-wait", help="How long to wait for a model that cannot be reached (connection refused, "
    "timeouts, 429, 502, 503, 504) before the run stops (exit 1; a --state keeps what was explained): seconds, or "
    "5m, 1h30m. Meanwhile no input is read (the producer waits, nothing is dropped) and a line says so every 30 s; "
    "when the model answers again the run goes on with the same numbers.", rich_help_panel=PANEL_SERVED,
    metavar="DURATION")]
ConcurrencyOpt = Annotated[int, typer.Option(
    "--concurrency", min=1, max=64, help="Requests in flight at once when a micro-batch needs several "
    "(--max-request-rows each), each on its own connection; the answers are put back in order, so the numbers "
    "do not depend on it.", rich_help_panel=PANEL_SERVED)]
ClassesOpt = Annotated[Optional[str], typer.Option(
    "--classes", help="The served classifier's classes, comma-separated, in the order of its probability "
    "columns (needed for --loss log unless the server names them). Implies --task classification.",
    rich_help_panel=PANEL_SERVED, show_default=False, metavar="C1,C2,...")]

DEFAULT_TIMEOUT = 30.0
DEFAULT_MAX_REQUEST_ROWS = 20_000
DEFAULT_RETRIES = 5
DEFAULT_MODEL_WAIT = "5m"
DEFAULT_CONCURRENCY = 4
DEFAULT_MAX_ANSWER_MB = 256.0


def parse_classes(text: str) -> tuple[Any, ...]:
    """``"0,1"`` -> ``(0, 1)``; numbers become numbers, anything else stays text.

    >>> parse_classes("0, 1")
    (0, 1)
    >>> parse_classes("no,yes")
    ('no', 'yes')
    """
    classes: list[Any] = []
    for token in (t.strip() for t in text.split(",")):
        if not token:
            continue
        if re.fullmatch(r"[+-]?\d+", token):
            classes.append(int(token))
        elif re.fullmatch(r"[+-]?(\d+\.\d*|\.\d+|\d+)([eE][+-]?\d+)?", token):
            classes.append(float(token))
        else:
            classes.append(token)
    return tuple(classes)


def header_lines(header: Sequence[str] | None, environ: Mapping[str, str] | None = None) -> list[str]:
    """The headers from ``$IPFI_MODEL_HEADERS`` (one per line), then the ``--header`` ones."""
    variables: Mapping[str, str] = os.environ if environ is None else environ
    from_env = [line.strip() for line in variables.get(HEADERS_ENV, "").splitlines() if line.strip()]
    return [*from_env, *(header or [])]


def model_source(model: str | None, model_url: str | None, *, protocol: Protocol = Protocol.auto,
                 header: Sequence[str] | None = None, timeout: float = DEFAULT_TIMEOUT,
                 max_request_rows: int = DEFAULT_MAX_REQUEST_ROWS, retries: int = DEFAULT_RETRIES,
                 model_wait: str = DEFAULT_MODEL_WAIT, classes: str | None = None,
                 max_answer_mb: float = DEFAULT_MAX_ANSWER_MB,
                 concurrency: int = DEFAULT_CONCURRENCY) -> tuple[str, Any]:
    """Check the model options; returns ``(model, http)``.

    ``model`` is what the run shows and records (for a URL: without user, password or query);
    ``http`` the :class:`~ipfi_cli.models.http.HttpOptions` for a served model, else ``None``.
    """
    if model and model_url:
        raise usage_error("give either --model or --model-url, not both", "--model-url")
    if not model and not model_url:
        raise usage_error("give the model to explain: --model PATH|URI, or --model-url URL", "--model")
    if not model_url:
        for given, option in ((header, "--header"), (classes, "--classes"),
                              (protocol is not Protocol.auto, "--protocol")):
            if given:
                raise usage_error("is for a served model: it needs --model-url", option)
        return str(model), None
    from ipfi_cli.models.http_options import HttpOptions, parse_duration, parse_header, resolve_protocol

    try:
        wait = parse_duration(model_wait)
    except ValueError as error:
        raise usage_error(str(error), "--model-wait") from None

    headers: dict[str, tuple[str, str]] = {}
    lines = header_lines(header)
    from_env = len(lines) - len(header or [])
    for number, line in enumerate(lines, 1):
        try:
            name, value = parse_header(line)
        except ValueError as error:  # named by position only: the text may be a secret
            where = f"line {number} of ${HEADERS_ENV}" if number <= from_env else f"--header #{number - from_env}"
            raise usage_error(f"{error}, in {where}", "--header") from None
        headers[name.lower()] = (name, value)
    chosen = None if protocol is Protocol.auto else protocol.value
    try:
        resolve_protocol(model_url, chosen)
    except ValueError as error:
        raise usage_error(str(error), "--model-url") from None
    parsed = parse_classes(classes) if classes else None
    if classes is not None and not parsed:
        raise usage_error("name at least one class", "--classes")
    http = HttpOptions(url=model_url, protocol=chosen, headers=tuple(headers.values()), timeout=timeout,
                       max_request_rows=max_request_rows, retries=retries, model_wait=wait, classes=parsed,
                       max_answer_bytes=int(max_answer_mb * 1024 * 1024), concurrency=concurrency)
    return http.display_url, http
