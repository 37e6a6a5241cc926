"""The URLs ipfi sends to (``--pushgateway``, ``--webhook``): checked before a run, their
``user:password@`` taken out as HTTP basic authentication, shown without their secrets, and why
a request to one failed said in one line (:func:`failure_reason`). Standard library only.

>>> check_url("http://[::1/hook")
'not a valid URL (an IPv6 address needs its closing ])'
>>> split_credentials("https://bot:s3cr%40t@alerts.example.org/hook")
('https://alerts.example.org/hook', 'Basic Ym90OnMzY3JAdA==')
"""

from __future__ import annotations

import base64
import re
import urllib.error
import urllib.parse
from typing import Any

from ipfi_cli.text import terminal_safe


def check_url(url: str) -> str | None:
    """Why ``url`` cannot be sent to, or ``None``: an http(s) scheme, a host, a port in 1-65535.
    The reason never quotes the URL (it may hold a password or a token).

    >>> check_url("http://127.0.0.1:9091/") is None, check_url("http://h:99999/"), check_url("ftp://h/")
    (True, 'the port is not a number in 1-65535', 'expected an http:// or https:// URL')
    """
    if not url.startswith(("http://", "https://")):
        return "expected an http:// or https:// URL"
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:  # "Invalid IPv6 URL": a [ without its ]
        return "not a valid URL (an IPv6 address needs its closing ])"
    try:
        port = parts.port
    except ValueError:  # out of 0-65535, or not a number
        return "the port is not a number in 1-65535"
    if port == 0:
        return "the port is not a number in 1-65535"
    if not parts.hostname:
        return "the URL names no host"
    if any(c.isspace() or not c.isprintable() for c in parts.netloc):
        return "the URL's host part holds a space or a control character"
    return None


def split_credentials(url: str) -> tuple[str, str | None]:
    """``url`` without its ``user:password@``, and the ``Authorization`` header value they make
    (HTTP basic authentication; ``None`` without a user). The user and password are %-decoded,
    as a URL writes a ``@`` or ``:`` in them (``%40``, ``%3A``)."""
    parts = urllib.parse.urlsplit(url)
    if parts.username is None:
        return url, None
    user, password = urllib.parse.unquote(parts.username), urllib.parse.unquote(parts.password or "")
    bare = urllib.parse.urlunsplit(parts._replace(netloc=parts.netloc.rsplit("@", 1)[1]))
    return bare, basic_auth(user, password)


def basic_auth(user: str, password: str) -> str:
    """The ``Authorization`` header value of HTTP basic authentication (RFC 7617, UTF-8).

    >>> basic_auth("admin", "test")
    'Basic YWRtaW46dGVzdA=='
    """
    return "Basic " + base64.b64encode(f"{user}:{password}".encode()).decode("ascii")


def shown_url(url: str) -> str:
    """``url`` as messages show it: the scheme, host and port; its password, and its path and query
    as ``***`` (a webhook's token is often its path, as Slack's and Discord's are).

    >>> shown_url("https://hooks.slack.com/services/T0/B0/XXXX"), shown_url("http://127.0.0.1:8080/")
    ('https://hooks.slack.com/***', 'http://127.0.0.1:8080/')
    >>> shown_url("https://bot:s3cret@alerts.example.org/api/v2/alerts?token=abc")
    'https://bot:***@alerts.example.org/***'
    """
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return "***"
    netloc = parts.netloc
    if "@" in netloc:
        user, host = netloc.rsplit("@", 1)
        netloc = f"{user.split(':', 1)[0]}:***@{host}" if ":" in user else netloc
    rest = "/***" if parts.path not in ("", "/") or parts.query or parts.fragment else parts.path
    return terminal_safe(f"{parts.scheme}://{netloc}{rest}")


def without_secrets(text: str, url: str) -> str:
    """``text`` with ``url`` as :func:`shown_url` shows it, and its password, path and query (where
    they are more than a few characters) as ``***``."""
    if not url:
        return text
    text = text.replace(url, shown_url(url))
    try:
        parts = urllib.parse.urlsplit(url)
    except ValueError:
        return text
    path = parts.path + (f"?{parts.query}" if parts.query else "")
    for secret in sorted({parts.password or "", path, parts.query, urllib.parse.unquote(path)}, key=len,
                         reverse=True):
        if len(secret.strip("/")) >= 4:
            text = text.replace(secret, "/***" if secret.startswith("/") else "***")
    return re.sub(r"(://[^/:@\s]*):[^/@\s]*@", r"\1:***@", text)


#: the longest reason shown (a server's reason phrase is its own text)
_REASON_CHARS = 120
#: prometheus_client's own error for an HTTP status (where urllib's opener did not raise it)
_PUSHGATEWAY_STATUS = re.compile(r"error talking to pushgateway: (\d{3})\b ?(.*)", re.DOTALL)


def failure_reason(error: BaseException, url: str = "") -> str:
    """Why a request to ``url`` failed, in one printable line: ``HTTP 500 Internal Server Error`` (the
    status and the server's reason phrase, control characters shown escaped), ``connection refused``,
    ``timed out``, the operating system's words for a network error without its errno (``name or
    service not known``), or the error's type and text. Any part of ``url`` that may be a secret (its
    password, path and query: a Slack webhook's token is its path) is shown as ``***``.

    >>> import urllib.error
    >>> failure_reason(urllib.error.HTTPError("http://h/", 500, "Internal Server Error", None, None))
    'HTTP 500 Internal Server Error'
    >>> failure_reason(urllib.error.URLError(ConnectionRefusedError(111, "Connection refused")))
    'connection refused'
    >>> import socket
    >>> failure_reason(urllib.error.URLError(socket.gaierror(-2, "Name or service not known")))
    'name or service not known'
    >>> failure_reason(OSError("error talking to pushgateway: 401 Unauthorized"))
    'HTTP 401 Unauthorized'
    >>> failure_reason(urllib.error.HTTPError("http://h/", 502, "Bad\\x1b[2J Gateway", None, None))
    'HTTP 502 Bad\\\\x1b[2J Gateway'
    >>> failure_reason(ValueError("no host given in http://u:pw@h/services/T0/B0/tok"),
    ...                "http://u:pw@h/services/T0/B0/tok")
    'ValueError: no host given in http://u:***@h/***'
    """
    status = _PUSHGATEWAY_STATUS.match(str(error)) if not isinstance(error, urllib.error.URLError) else None
    if isinstance(error, urllib.error.HTTPError):
        phrase = error.reason if isinstance(error.reason, str) else ""
        text = f"HTTP {error.code} {phrase}".strip()
    elif status is not None:
        text = f"HTTP {status.group(1)} {status.group(2)}".strip()
    else:
        reason: Any = error.reason if isinstance(error, urllib.error.URLError) else error
        if isinstance(reason, ConnectionRefusedError):
            text = "connection refused"
        elif isinstance(reason, TimeoutError):
            text = "timed out"
        elif isinstance(reason, OSError) and reason.strerror:
            text = reason.strerror[:1].lower() + reason.strerror[1:]
        elif isinstance(reason, BaseException):
            text = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
        else:
            text = str(reason)
    text = without_secrets(terminal_safe(text), url)
    return text if len(text) <= _REASON_CHARS else text[:_REASON_CHARS - 3] + "..."
