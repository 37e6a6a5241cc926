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

#: what follows a URL's "user:password@": a host name, IPv4 or [IPv6] address, and a port
_HOST = re.compile(r"(?:[A-Za-z0-9._~-]+|\[[0-9A-Fa-f:.]+\])(?::[0-9]*)?(?=[/?#]|$)")


def _unencoded_userinfo(url: str) -> tuple[str, str, str] | None:
    """``(scheme, user, host and the rest)`` when ``url``'s password holds an unencoded ``/``, ``#``,
    ``?`` or ``@`` (so a URL parser takes part of it for the host or the path), else ``None``."""
    scheme, sep, rest = url.partition("://")
    at = rest.rfind("@")
    if not sep or at < 0 or not _HOST.match(rest, at + 1):
        return None
    user, colon, _ = rest[:at].partition(":")
    if not colon or any(c in user for c in "/?#@"):
        return None
    try:
        if "@" in urllib.parse.urlsplit(url).netloc and not any(c in rest[:at] for c in "/?#"):
            return None  # a parser reads it right (an @ in the password alone is cut at the last @)
    except ValueError:
        pass
    return scheme, user, rest[at + 1:]


def check_url(url: str) -> str | None:
    """Why ``url`` cannot be sent to, or ``None``: an http(s) scheme, a host, a port in 1-65535, a
    password with its ``/``, ``#``, ``?`` percent-encoded. The reason never quotes the URL (it may
    hold a password or a token).

    >>> check_url("http://127.0.0.1:9091/") is None, check_url("http://h:99999/"), check_url("ftp://h/")
    (True, 'the port is not a number in 1-65535', 'expected an http:// or https:// URL')
    >>> check_url("http://me:pa/ss@127.0.0.1:9091")
    "the URL's password holds '/', '#', '?' or '@' as it is: percent-encode them (%2F, %23, %3F, %40)"
    """
    if not url.startswith(("http://", "https://")):
        return "expected an http:// or https:// URL"
    if _unencoded_userinfo(url) is not None:
        return "the URL's password holds '/', '#', '?' or '@' as it is: percent-encode them (%2F, %23, %3F, %40)"
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
    >>> shown_url("http://alice:S3CR/et#pw@127.0.0.1:9091")
    'http://alice:***@127.0.0.1:9091'
    """
    unencoded = _unencoded_userinfo(url)
    if unencoded is not None:  # the password runs to the last @ before a host
        scheme, user, rest = unencoded
        found = _HOST.match(rest)
        assert found is not None  # _unencoded_userinfo matched it
        tail = "/***" if rest[found.end():] not in ("", "/") else rest[found.end():]
        return terminal_safe(f"{scheme}://{user}:***@{found.group(0)}{tail}")
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
