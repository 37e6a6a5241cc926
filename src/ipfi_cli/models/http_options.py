"""Where a served model lives and how to reach it: its URL and protocol, the headers sent,
timeouts, request sizes and retries (:class:`HttpOptions`), with the secrets kept out of every
message (:attr:`HttpOptions.display_url`). :mod:`ipfi_cli.models.http` makes the requests.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

from ipfi_cli.errors import ServiceError

PROTOCOLS = ("mlflow", "v2")
#: answers that say the model cannot answer now (overload, gateway trouble, "too many requests"):
#: waited out like a refused connection, up to ``model_wait`` seconds
UNAVAILABLE_STATUSES = frozenset({408, 429, 502, 503, 504})
#: answers that say a request failed on the server: tried again at most ``retries`` times
RETRY_STATUSES = frozenset({500}) | UNAVAILABLE_STATUSES
#: longest single pause between tries (seconds), whatever Retry-After asks: a model that comes back
#: is found within this time
MAX_PAUSE = 5.0
FIRST_PAUSE = 0.25
#: the default for --model-wait (seconds): how long a model that cannot be reached is waited for
MODEL_WAIT = 300.0
#: the default for --concurrency: requests in flight at once
CONCURRENCY = 4
#: the default for --max-request-rows: a server pays a fixed cost per request (MLServer's scikit-learn
#: runtime ~6 ms of CPU), so 20,000 rows cost it ~15% less per row than 5,000 (benchmarks/bench_served.py)
MAX_REQUEST_ROWS = 20_000
#: whatever --max-request-rows says, a request holds at most this many values (rows x columns, ~10 MB of
#: JSON): wide rows go in fewer rows per request
MAX_REQUEST_VALUES = 1 << 20
_DURATION = re.compile(r"\s*(?:(\d+(?:\.\d*)?|\.\d+)\s*(ms|h|m|s)?\s*)+", re.IGNORECASE)
_PART = re.compile(r"(\d+(?:\.\d*)?|\.\d+)\s*(ms|h|m|s)?", re.IGNORECASE)


def parse_duration(text: str) -> float:
    """Seconds in ``text``: a number of seconds, or parts with units ``h``, ``m``, ``s``, ``ms``.

    >>> parse_duration("30"), parse_duration("5m"), parse_duration("1h30m"), parse_duration("250ms")
    (30.0, 300.0, 5400.0, 0.25)
    """
    if not _DURATION.fullmatch(text or ""):
        raise ValueError(f"not a duration: {text[:40]!r} (say 300, 300s, 5m or 1h30m)")
    scale = {"h": 3600.0, "m": 60.0, "s": 1.0, "ms": 0.001}
    return sum(float(number) * scale[(unit or "s").lower()] for number, unit in _PART.findall(text))


def format_duration(seconds: float) -> str:
    """``seconds`` as a person writes it.

    >>> format_duration(40.2), format_duration(300), format_duration(5400), format_duration(0.5)
    ('40 s', '5m', '1h30m', '0.5 s')
    """
    if seconds < 60:
        return f"{seconds:.0f} s" if seconds >= 10 or seconds == int(seconds) else f"{seconds:.1f} s"
    minutes, rest = divmod(round(seconds), 60)
    hours, minutes = divmod(minutes, 60)
    text = (f"{hours}h" if hours else "") + (f"{minutes}m" if minutes else "") + (f"{rest}s" if rest else "")
    return text
#: the largest answer read by default (bytes): far above any micro-batch's, far below a machine's memory
MAX_ANSWER_BYTES = 256 * 1024 * 1024
#: what may follow a URL's "user:password@": a host name, IPv4 or [IPv6] address, and a port
_HOST = re.compile(r"(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?(?=[/?#]|$)")


def split_credentials(url: str) -> tuple[str, str | None, str | None]:
    """The URL without ``user:password@``, and the user and password (percent-decoded).

    The user information ends at the last ``@`` that a host follows, so a password holding an
    unencoded ``#``, ``/``, ``?`` or ``@`` is taken whole (and never shown) rather than cut
    into a host or a path. An ``@`` in the query does not count when the path is a model's.

    >>> split_credentials("https://me:p#ss/w?rd@models.example:8443/invocations")
    ('https://models.example:8443/invocations', 'me', 'p#ss/w?rd')
    >>> split_credentials("http://127.0.0.1:5000/invocations?k=a@b")
    ('http://127.0.0.1:5000/invocations?k=a@b', None, None)
    """
    scheme, sep, rest = url.partition("://")
    if not sep or "@" not in rest:
        return url, None, None
    stop = len(rest)
    for marker in ("/invocations", "/v2/models/"):  # an @ after the model's path is the query's
        found = rest.rfind(marker)
        if found >= 0:
            stop = min(stop, found)
    first_cut = min([i for i in (rest.find(c) for c in "/?#") if i >= 0] or [len(rest)])
    for at in range(min(stop, len(rest)) - 1, -1, -1):
        if rest[at] != "@":
            continue
        if first_cut > at or _HOST.match(rest, at + 1):
            user, _, password = rest[:at].partition(":")
            return f"{scheme}://{rest[at + 1:]}", unquote(user), unquote(password) if _ else None
    return url, None, None


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
    max_request_rows: int = MAX_REQUEST_ROWS
    retries: int = 5
    model_wait: float = MODEL_WAIT
    concurrency: int = CONCURRENCY
    classes: tuple[Any, ...] | None = None
    proba_output: str = "predict_proba"
    max_answer_bytes: int = MAX_ANSWER_BYTES

    @property
    def address(self) -> str:
        """The URL without its ``user:password@`` (which :meth:`credentials` gives)."""
        return split_credentials(self.url)[0]

    @property
    def credentials(self) -> tuple[str | None, str | None]:
        """The URL's user and password, percent-decoded (``None`` when absent)."""
        return split_credentials(self.url)[1:]

    @property
    def display_url(self) -> str:
        """The URL without a user, password or query (which may hold tokens)."""
        return _safe(urlsplit(self.address))

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
                "max_request_rows": self.max_request_rows, "retries": self.retries,
                "model_wait": self.model_wait, "concurrency": self.concurrency,
                "max_answer_bytes": self.max_answer_bytes,
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
    parts = urlsplit(split_credentials(url)[0])
    try:
        _ = parts.port
    except ValueError:
        raise ValueError(f"the URL's port is not a number: {_safe(parts, port=False)}") from None
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


def _safe(parts: SplitResult, port: bool = True) -> str:
    """``scheme://host:port/path``: never a user, password, query or fragment."""
    host = parts.hostname or ""
    if ":" in host:
        host = f"[{host}]"
    try:
        number = parts.port if port else None
    except ValueError:
        number = None
    return f"{parts.scheme}://{host}{':' + str(number) if number else ''}{parts.path}"
