"""Models served over HTTP (:class:`HttpPredictor`): the requests, and what the answers mean.

Only the Python standard library is used (``http.client``), with one kept-alive connection
per thread. Two protocols, each with its request bodies and answers in a module of its own:

* ``mlflow``: MLflow's ``POST .../invocations`` (:mod:`ipfi_cli.models.http_mlflow`);
* ``v2``: the Open Inference Protocol's ``POST .../v2/models/NAME[/versions/V]/infer``
  (KServe, Seldon MLServer, Triton; :mod:`ipfi_cli.models.http_v2`).

A block of rows (a micro-batch's perturbed rows) travels in as few requests as the cap on
rows per request allows. Connection errors, timeouts, 5xx answers and 429 are retried with
exponential back-off (``Retry-After`` is honoured) until ``retries`` tries or ``retry_wait``
seconds of waiting; any other 4xx stops at once with one line naming the status and the
server's message. Header values (``Authorization``...) and a URL's password or query are
never shown: messages use :attr:`HttpOptions.display_url` and scrub header values from what
the server says.

A served model does not say what it is: give ``--task`` (classification or regression)
and, for the log loss, ``--classes`` in the order of its probability columns (unless the
server names them in ``{class: p}`` answers).
"""

from __future__ import annotations

import base64
import http.client
import json
import re
import socket
import threading
import time
from collections.abc import Sequence
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import ModelError
from ipfi_cli.models.adapters import predict_records_as_block
from ipfi_cli.models.http_answers import EXPECTED, ServedAnswers, shown_answer
from ipfi_cli.models.http_mlflow import MlflowProtocol
from ipfi_cli.models.http_options import (
    FIRST_PAUSE,
    MAX_PAUSE,
    PROTOCOLS,
    RETRY_STATUSES,
    HttpModelError,
    HttpOptions,
    parse_header,
    resolve_protocol,
)
from ipfi_cli.models.http_v2 import V2Protocol

__all__ = ["PROTOCOLS", "HttpModelError", "HttpOptions", "HttpPredictor", "parse_header", "resolve_protocol"]


class _Late(Exception):
    """The whole answer did not arrive within the timeout."""


class _AnswerTooLarge(Exception):
    def __init__(self, limit: int) -> None:
        super().__init__(limit)
        self.limit = limit


class HttpPredictor(ServedAnswers):
    """A model behind an HTTP endpoint (see the module docstring)."""

    supports_batch = True
    can_learn = False

    def __init__(self, options: HttpOptions) -> None:
        try:
            self.protocol, self.path = resolve_protocol(options.url, options.protocol)
        except ValueError as error:
            raise HttpModelError(str(error)) from None
        self.options = options
        parts = urlsplit(options.address)
        self._parts = parts
        self._query = f"?{parts.query}" if parts.query else ""
        user, password = options.credentials
        # header names are case-insensitive: a given "authorization" replaces the URL's, never joins it
        headers: dict[str, tuple[str, str]] = {}
        for name, value in (("Content-Type", "application/json"), ("Accept", "application/json")):
            headers[name.lower()] = (name, value)
        if user is not None:  # user:password@host becomes basic authentication
            token = f"{user}:{password or ''}".encode()
            headers["authorization"] = ("Authorization", "Basic " + base64.b64encode(token).decode("ascii"))
        for name, value in options.headers:
            headers[name.lower()] = (name, value)
        for name, value in headers.values():
            try:
                value.encode("latin-1")
            except UnicodeEncodeError:
                raise HttpModelError(f"{options.display_url}: the header {name!r} holds characters HTTP cannot "
                                     "send (only latin-1); encode its value") from None
        self._headers = dict(headers.values())
        secret = [v for k, (_, v) in headers.items() if k not in ("content-type", "accept")]
        tokens = [v.split(None, 1)[1] for v in secret if len(v.split(None, 1)) == 2]  # "Bearer TOKEN": TOKEN too
        found = {v for v in secret + tokens if len(v) >= 4}
        if password:
            found |= {password, quote(password, safe=""), quote(password)}
        self._secrets = sorted(found, key=len, reverse=True)
        self._secret_pattern = re.compile("|".join(re.escape(v) for v in self._secrets), re.IGNORECASE) \
            if self._secrets else None
        self._local = threading.local()
        self.columns: list[str] | None = None
        self.n_features: int | None = None
        self.classes: list[Any] | None = list(options.classes) if options.classes else None
        self._class_lookup: dict[str, Any] | None = None
        #: the protocol's request bodies and answers
        self._wire: MlflowProtocol | V2Protocol = MlflowProtocol(options) if self.protocol == "mlflow" \
            else V2Protocol(options)
        #: counters for benchmarks and --verbose
        self.requests = 0
        self.rows_sent = 0
        self.seconds = 0.0
        self.retried = 0
        self.columns, self.n_features = self._wire.read_metadata(self.request, self.path)

    # -- what the model is ------------------------------------------------------------------------
    @property
    def is_classifier(self) -> bool:
        if self.classes:
            return True
        raise HttpModelError(f"{self.options.display_url}: a model over HTTP does not say whether it classifies: "
                             "give --task classification or --task regression")

    @property
    def has_proba(self) -> bool:
        return True  # asked of the server; without --classes the first request says what is missing

    def __getstate__(self) -> dict[str, Any]:
        state = dict(self.__dict__)
        state["_local"] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()

    # -- transport ----------------------------------------------------------------------------------
    def _connection(self) -> http.client.HTTPConnection:
        connection = getattr(self._local, "connection", None)
        if connection is None:
            parts, timeout = self._parts, self.options.timeout
            assert parts.hostname is not None  # resolve_protocol refused a URL without a host
            if parts.scheme == "https":
                connection = http.client.HTTPSConnection(parts.hostname, parts.port, timeout=timeout)
            else:
                connection = http.client.HTTPConnection(parts.hostname, parts.port, timeout=timeout)
            self._local.connection = connection
        return connection

    def _drop_connection(self) -> None:
        connection = getattr(self._local, "connection", None)
        self._local.connection = None
        if connection is not None:
            connection.close()

    def close(self) -> None:
        self._drop_connection()

    def _scrub(self, text: str) -> str:
        """``text`` with every secret (header value, token, password; in any letter case) as ``***``."""
        return self._secret_pattern.sub("***", text) if self._secret_pattern is not None else text

    def _server_message(self, body: bytes) -> str:
        text = body.decode("utf-8", "replace").strip()
        try:
            data = json.loads(text)
        except ValueError:
            data = None
        if isinstance(data, dict):
            for key in ("message", "error", "detail", "error_message"):
                if data.get(key):
                    text = data[key] if isinstance(data[key], str) else json.dumps(data[key])
                    break
        line = " ".join(text.split())
        line = line[:300] + "..." if len(line) > 300 else line
        return self._scrub(line) or "(no message)"

    def request(self, method: str, path: str, payload: Any = None) -> Any:
        """One call with retries; returns the decoded JSON answer."""
        import orjson

        body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY) if payload is not None else None
        where = self.options.display_url
        options = self.options
        tries, waited, started = 0, 0.0, time.perf_counter()
        while True:
            tries += 1
            retry_after: float | None = None
            try:
                connection = self._connection()
                status, reason, response, data = self._exchange(connection, method, path + self._query, body)
            except _AnswerTooLarge as error:
                self._drop_connection()
                raise HttpModelError(f"{where}: the answer is larger than {error.limit:,} bytes (--max-answer-mb); "
                                     "fewer rows per request (--max-request-rows) make smaller answers") from None
            except (OSError, http.client.HTTPException, _Late) as error:
                self._drop_connection()
                if isinstance(error, _Late):
                    problem = f"no complete answer within --timeout {options.timeout:g} s"
                else:
                    problem = (f"cannot reach the server ({type(error).__name__}: "
                               f"{self._scrub(str(error)) or 'no answer'})")
            else:
                if 200 <= status < 300:
                    self.requests += 1
                    self.seconds += time.perf_counter() - started
                    try:
                        return orjson.loads(data)
                    except orjson.JSONDecodeError:
                        raise HttpModelError(f"{where}: the answer is not JSON: "
                                             f"{self._server_message(data)}") from None
                if status < 200 and status != 0:
                    raise HttpModelError(f"{where}: HTTP {status}: not an answer")
                message = self._server_message(data)
                if status not in RETRY_STATUSES:
                    raise HttpModelError(f"{where}: HTTP {status} {reason}: {message}")
                problem = f"HTTP {status} {reason}: {message}"
                header = response.getheader("Retry-After")
                if header and header.strip().isdigit():
                    retry_after = float(header.strip())
            pause = min(MAX_PAUSE, retry_after if retry_after is not None else FIRST_PAUSE * 2 ** (tries - 1))
            if tries > options.retries or waited + pause > options.retry_wait:
                self.seconds += time.perf_counter() - started
                raise HttpModelError(f"{where}: gave up after {tries} tr{'y' if tries == 1 else 'ies'} "
                                     f"({waited:.1f} s of waiting): {problem}")
            time.sleep(pause)
            waited += pause
            self.retried += 1

    def _exchange(self, connection: http.client.HTTPConnection, method: str, path: str,
                  body: bytes | None) -> tuple[int, str, Any, bytes]:
        """Send one request and read its whole answer within ``--timeout`` seconds (a server that
        trickles its answer is cut at the deadline) and ``max_answer_bytes`` bytes."""
        timeout, limit = self.options.timeout, self.options.max_answer_bytes
        late = threading.Event()

        def cut() -> None:
            late.set()
            sock = connection.sock
            if sock is not None:
                try:
                    sock.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass
        timer = threading.Timer(timeout, cut)
        timer.daemon = True
        timer.start()
        try:
            connection.request(method, path, body=body, headers=self._headers)
            response = connection.getresponse()
            length = response.getheader("Content-Length")
            if length and length.strip().isdigit() and int(length) > limit:
                raise _AnswerTooLarge(limit)
            parts: list[bytes] = []
            size = 0
            while True:
                chunk = response.read1(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise _AnswerTooLarge(limit)
                parts.append(chunk)
            if late.is_set():  # cut at the deadline: what came is not the whole answer
                raise _Late()
            if response.getheader("Connection", "").lower() == "close":
                self._drop_connection()
            return response.status, response.reason, response, b"".join(parts)
        except (OSError, http.client.HTTPException):
            if late.is_set():
                raise _Late() from None
            raise
        finally:
            timer.cancel()
            if late.is_set():
                self._drop_connection()

    def stats(self) -> dict[str, Any]:
        """Requests answered, rows sent, seconds spent in requests (waits included) and tries repeated."""
        return {"requests": self.requests, "rows_sent": self.rows_sent, "seconds": round(self.seconds, 3),
                "retried": self.retried}

    # -- prediction -------------------------------------------------------------------------------------
    def _chunks(self, n_rows: int) -> list[slice]:
        size = max(1, self.options.max_request_rows)
        return [slice(start, min(start + size, n_rows)) for start in range(0, n_rows, size)]

    def _call(self, block: np.ndarray, columns: Sequence[str], output: Output) -> list[Any]:
        """Every row's answer: labels or values as a list, probabilities as ``[N, C]`` (or dicts)."""
        wire = self._wire
        block, columns, types = wire.arrange(block, columns)
        results: list[Any] = []
        for part in self._chunks(len(block)):
            rows = block[part]
            answer = self.request("POST", self.path, wire.payload(rows, columns, types, output))
            try:
                got = list(wire.predictions(answer, output, len(rows)))
            except HttpModelError:
                raise
            except (TypeError, ValueError, KeyError, AttributeError, IndexError):
                raise HttpModelError(f"{self.options.display_url}: the answer is malformed: expected "
                                     f"{wire.expected(len(rows))}, got {shown_answer(answer)}") from None
            if len(got) != len(rows):
                raise HttpModelError(f"{self.options.display_url}: sent {len(rows)} rows, got {len(got)} predictions")
            self.rows_sent += len(rows)
            results.extend(got)
        return results

    def predict_block(self, block: np.ndarray, columns: Sequence[str], output: Output,
                      targets: np.ndarray | None) -> np.ndarray:
        """Every row's answer; an answer that is not what the protocol promises is a service error
        naming the URL (never a row's fault, so never skipped)."""
        if len(block) == 0:
            return np.empty(0)
        results = self._call(block, columns, output)
        try:
            return self._decode(results, len(block), output, targets)
        except ModelError:  # the server's (HttpModelError), or a row's answer that cannot be right
            raise
        except (TypeError, ValueError, KeyError, AttributeError, IndexError, OverflowError):
            sample = shown_answer(results[:2])
            raise HttpModelError(f"{self.options.display_url}: the answer is malformed: expected "
                                 f"{EXPECTED[output]} per row, got {sample}") from None

    def predict_records(self, records: list[dict[str, Any]], output: Output, target: Any) -> np.ndarray:
        return predict_records_as_block(self, records, output, target)

    def learn_one(self, x: dict[str, Any], y: Any) -> None:
        raise ModelError("a model over HTTP cannot learn here")
