"""The URLs ipfi sends to (``--pushgateway``, ``--webhook``): checked before a run, their
``user:password@`` taken out as HTTP basic authentication. Standard library only.

>>> check_url("http://[::1/hook")
'not a valid URL (an IPv6 address needs its closing ])'
>>> split_credentials("https://bot:s3cr%40t@alerts.example.org/hook")
('https://alerts.example.org/hook', 'Basic Ym90OnMzY3JAdA==')
"""

from __future__ import annotations

import base64
import re
import urllib.parse

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
