"""Where a served model lives and how to reach it: its URL and protocol, the headers sent,
timeouts, request sizes and retries (:class:`HttpOptions`), with the secrets kept out of every
message (:attr:`HttpOptions.display_url`). :mod:`ipfi_cli.models.http` makes the requests.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, urlsplit

from ipfi_cli.errors import ServiceError

PROTOCOLS = ("mlflow", "v2")
#: answers worth another try: overload, gateway trouble, "too many requests"
RETRY_STATUSES = frozenset({429, 500, 502, 503, 504})
#: longest single pause between tries (seconds), whatever Retry-After asks
MAX_PAUSE = 10.0
FIRST_PAUSE = 0.25


class HttpModelError(ServiceError):
    """The server refused, failed or could not be reached; the message is one safe line."""


@dataclass(frozen=True, repr=False)
class HttpOptions:
    """How to reach a served model. Header values and the URL's password and query are secret: left
    out of ``repr`` and :meth:`for_meta`."""

    url: str
    protocol: str | None = None
    headers: tuple[tuple[str, str], ...] = ()
    timeout: float = 30.0
    max_request_rows: int = 5000
    retries: int = 5
    retry_wait: float = 30.0
    classes: tuple[Any, ...] | None = None
    proba_output: str = "predict_proba"

    @property
    def display_url(self) -> str:
        """The URL without a user, password or query (which may hold tokens)."""
        parts = urlsplit(self.url)
        host = parts.hostname or ""
        if ":" in host:
            host = f"[{host}]"
        port = f":{parts.port}" if parts.port else ""
        return f"{parts.scheme}://{host}{port}{parts.path}"

    def __repr__(self) -> str:
        return f"HttpOptions({', '.join(f'{k}={v!r}' for k, v in self.for_meta().items())})"

    def for_meta(self) -> dict[str, Any]:
        """What a run records: everything but the header values."""
        try:
            protocol: str | None = resolve_protocol(self.url, self.protocol)[0]
        except ValueError:
            protocol = self.protocol
        return {"url": self.display_url, "protocol": protocol,
                "headers": [name for name, _ in self.headers], "timeout": self.timeout,
                "max_request_rows": self.max_request_rows, "retries": self.retries, "retry_wait": self.retry_wait,
                "classes": list(self.classes) if self.classes is not None else None}


def parse_header(text: str) -> tuple[str, str]:
    """``"Authorization: Bearer x"`` -> ``("Authorization", "Bearer x")``.

    >>> parse_header("X-Api-Key:  abc ")
    ('X-Api-Key', 'abc')
    """
    name, sep, value = text.partition(":")
    name = name.strip()
    if not sep or not name or any(c in name for c in " \t\r\n") or any(c in value for c in "\r\n"):
        raise ValueError("expected 'Name: value' (one header, no line breaks)")
    return name, value.strip()


def resolve_protocol(url: str, protocol: str | None) -> tuple[str, str]:
    """The protocol and the inference path for ``url``; ``protocol`` ``None`` or ``auto``: from the path.

    >>> resolve_protocol("http://127.0.0.1:5000/invocations", None)
    ('mlflow', '/invocations')
    >>> resolve_protocol("http://h/v2/models/iris", None)
    ('v2', '/v2/models/iris/infer')
    >>> resolve_protocol("http://h:8080", "mlflow")
    ('mlflow', '/invocations')
    """
    parts = urlsplit(url)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise ValueError(f"not an http:// or https:// URL: {_safe(parts)}")
    path = parts.path.rstrip("/")
    if protocol in (None, "auto"):
        if path.endswith("/invocations"):
            protocol = "mlflow"
        elif "/v2/models/" in path + "/":
            protocol = "v2"
        else:
            raise ValueError(f"cannot tell the protocol from the URL {_safe(parts)}: end it with /invocations (MLflow) "
                             "or /v2/models/NAME (Open Inference Protocol), or give --protocol mlflow|v2")
    if protocol not in PROTOCOLS:
        raise ValueError(f"unknown protocol {protocol!r}: choose mlflow or v2")
    if protocol == "mlflow":
        return protocol, path if path.endswith("/invocations") else path + "/invocations"
    marker = path.find("/v2/models/")
    name = path[marker + len("/v2/models/"):].split("/")[0] if marker >= 0 else ""
    if not name:
        raise ValueError(f"an Open Inference Protocol URL names the model: .../v2/models/NAME (got {_safe(parts)})")
    return protocol, path if path.endswith("/infer") else path + "/infer"


def _safe(parts: SplitResult) -> str:
    host = parts.hostname or ""
    return f"{parts.scheme}://{host}{':' + str(parts.port) if parts.port else ''}{parts.path}"
