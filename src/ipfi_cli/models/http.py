"""Models served over HTTP (:class:`HttpPredictor`): the requests, and what the answers mean.

Only the Python standard library is used (``http.client``), with one kept-alive connection
per thread. Two protocols, each with its request bodies and answers in a module of its own:

* ``mlflow``: MLflow's ``POST .../invocations`` (:mod:`ipfi_cli.models.http_mlflow`);
* ``v2``: the Open Inference Protocol's ``POST .../v2/models/NAME[/versions/V]/infer``
  (KServe, Seldon MLServer, Triton; :mod:`ipfi_cli.models.http_v2`).

A block of rows (a micro-batch's perturbed rows) travels in as few requests as the cap on
rows per request allows, up to ``concurrency`` of them in flight at once (each on its own
kept-alive connection); the answers are put back in the block's order, so the numbers do not
depend on how many were in flight. Each request is sent once and its answer read in full
(``Content-Length``, chunked, or to the connection's close), so a kept-alive connection is
reused only when its previous answer is done.

What happens when the model does not answer (the outage policy, see docs/models.md) and the
requests' counts are :mod:`ipfi_cli.models.http_policy`'s; any 4xx but 408 and 429 stops at once
with one line naming the status and the server's message.

Header values (``Authorization``...) and a URL's password or query are never shown: messages
use :attr:`HttpOptions.display_url` and scrub header values from what the server says.

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
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.parse import quote, urlsplit

import numpy as np

from ipfi_cli.core.losses import Output
from ipfi_cli.errors import ModelError
from ipfi_cli.io.urls import failure_reason
from ipfi_cli.models.adapters import predict_records_as_block
from ipfi_cli.models.http_answers import EXPECTED, ServedAnswers, shown_answer
from ipfi_cli.models.http_mlflow import MlflowProtocol
from ipfi_cli.models.http_options import (
    MAX_REQUEST_VALUES,
    PROTOCOLS,
    RETRY_STATUSES,
    UNAVAILABLE_STATUSES,
    HttpModelError,
    HttpOptions,
    parse_header,
    resolve_protocol,
)
from ipfi_cli.models.http_policy import RequestLedger
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
        #: the requests' counts and the outage policy (--meta, the metrics, benchmarks and --verbose)
        self.ledger = RequestLedger(options)
        self._pool: ThreadPoolExecutor | None = None
        self._last: tuple[bytes, bytes] | None = None  # the last request's body and answer
        self._remember = False
        self._remembered: dict[Any, list[Any]] = {}  # row -> [answer, uses left]
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
        for name in ("_local", "_pool"):
            state[name] = None
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)
        self._local = threading.local()
        if "ledger" not in state:  # saved before the counts had a module of their own
            self.ledger = RequestLedger(self.options)

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
        if self._pool is not None:
            self._pool.shutdown(wait=True)
            self._pool = None

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

    def request(self, method: str, path: str, payload: Any = None, rows: int = 0) -> Any:
        """One call, tried again as the module docstring says; returns the decoded JSON answer.

        A request whose body is the last one's (the first row, asked by two checks in turn) gets
        the last answer again: the same question is never sent twice in a row. ``rows``: how many
        rows the request holds (counted when sent).
        """
        import orjson

        body = orjson.dumps(payload, option=orjson.OPT_SERIALIZE_NUMPY) if payload is not None else None
        last = self._last
        if body is not None and last is not None and last[0] == body:
            return orjson.loads(last[1])
        data = self._answer(method, path, body)
        if rows:
            self.ledger.sent(rows)
        try:
            answer = orjson.loads(data)
        except orjson.JSONDecodeError:
            raise HttpModelError(f"{self.options.display_url}: the answer is not JSON: "
                                 f"{self._server_message(data)}") from None
        if body is not None:
            self._last = (body, data)
        return answer

    def _answer(self, method: str, path: str, body: bytes | None) -> bytes:
        """The whole answer (2xx) to one request, after as many tries as the policy allows."""
        where, ledger = self.options.display_url, self.ledger
        tries = ledger.tries()
        while True:
            retry_after: float | None = None
            started = time.perf_counter()
            try:
                connection = self._connection()
                status, reason, response, data = self._exchange(connection, method, path + self._query, body)
            except _AnswerTooLarge as error:
                self._drop_connection()
                ledger.count("refused")
                raise HttpModelError(f"{where}: the answer is larger than {error.limit:,} bytes (--max-answer-mb); "
                                     "fewer rows per request (--max-request-rows) make smaller answers") from None
            except (OSError, http.client.HTTPException, _Late) as error:
                self._drop_connection()
                unavailable = True
                if isinstance(error, _Late):
                    problem = f"no complete answer within --timeout {self.options.timeout:g} s"
                else:
                    problem = f"cannot reach the server ({self._scrub(failure_reason(error))})"
            else:
                if 200 <= status < 300:
                    tries.answered(time.perf_counter() - started)
                    return data
                if status < 200:
                    ledger.count("refused")
                    raise HttpModelError(f"{where}: HTTP {status}: not an answer")
                problem = f"HTTP {status} {reason}: {self._server_message(data)}"
                if status not in RETRY_STATUSES:
                    ledger.count("refused")
                    raise HttpModelError(f"{where}: {problem}")
                unavailable = status in UNAVAILABLE_STATUSES
                header = response.getheader("Retry-After")
                if header and header.strip().isdigit():
                    retry_after = float(header.strip())
            tries.wait(problem, unavailable, retry_after)  # or HttpModelError when the policy gives up

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
            # read(n), not read1(n): on Python 3.11 read1 never marks a Content-Length answer read in
            # full as done, so the kept-alive connection would still hold it and the next request on it
            # would be sent, then fail (ResponseNotReady) and be sent again
            while True:
                chunk = response.read(1 << 16)
                if not chunk:
                    break
                size += len(chunk)
                if size > limit:
                    raise _AnswerTooLarge(limit)
                parts.append(chunk)
            if late.is_set():  # cut at the deadline: what came is not the whole answer
                raise _Late()
            if not response.isclosed() or response.will_close:  # never reuse a connection in doubt
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

    # -- the requests' counts and the model's state (models/http_policy.py) ---------------------------
    def stats(self) -> dict[str, Any]:
        """What the run asked of the server (:meth:`RequestLedger.stats`): ``--meta`` records it."""
        return self.ledger.stats()

    def latency(self) -> tuple[tuple[float, ...], list[int], float]:
        """The latency histogram of answered requests (:meth:`RequestLedger.latency`)."""
        return self.ledger.latency()

    @property
    def is_down(self) -> bool:
        """Whether the model is unreachable now (a request is waiting for it)."""
        return self.ledger.is_down

    @property
    def on_notice(self) -> Callable[[str], None] | None:
        """Hears one line while the model is unreachable (every 30 s) and when it answers again."""
        return self.ledger.on_notice

    @on_notice.setter
    def on_notice(self, hear: Callable[[str], None] | None) -> None:
        self.ledger.on_notice = hear

    @property
    def on_down(self) -> Callable[[bool], None] | None:
        """Hears ``True`` when the model becomes unreachable and ``False`` when it answers again."""
        return self.ledger.on_down

    @on_down.setter
    def on_down(self, hear: Callable[[bool], None] | None) -> None:
        self.ledger.on_down = hear

    def remember_answers(self, on: bool) -> None:
        """While on, every row's answer is kept, and the next request for a kept row (the same values,
        the same output) is answered from it once instead of being sent: batch PFI's unperturbed rows,
        predicted when the rows are screened and again as the baseline. Off: what is kept is used and
        then forgotten; a block that finds none of it forgets it at once."""
        self._remember = on

    # -- prediction -------------------------------------------------------------------------------------
    def _chunks(self, n_rows: int, n_columns: int) -> list[slice]:
        """The block's requests: at most ``--max-request-rows`` rows and MAX_REQUEST_VALUES values each."""
        size = max(1, min(self.options.max_request_rows, MAX_REQUEST_VALUES // max(1, n_columns)))
        return [slice(start, min(start + size, n_rows)) for start in range(0, n_rows, size)]

    @staticmethod
    def _row_keys(block: np.ndarray, output: Output) -> list[Any]:
        if block.dtype.kind in "fiub":
            return [(output, block.dtype.str, row.tobytes()) for row in block]
        return [(output, repr(tuple(row))) for row in block.tolist()]

    def _ask(self, rows: np.ndarray, columns: Sequence[str], types: list[str], output: Output) -> list[Any]:
        """One request for ``rows``: one answer per row."""
        wire = self._wire
        answer = self.request("POST", self.path, wire.payload(rows, columns, types, output), len(rows))
        try:
            got = list(wire.predictions(answer, output, len(rows)))
        except HttpModelError:
            raise
        except (TypeError, ValueError, KeyError, AttributeError, IndexError):
            raise HttpModelError(f"{self.options.display_url}: the answer is malformed: expected "
                                 f"{wire.expected(len(rows))}, got {shown_answer(answer)}") from None
        if len(got) != len(rows):
            raise HttpModelError(f"{self.options.display_url}: sent {len(rows)} rows, got {len(got)} predictions")
        return got

    def _call(self, block: np.ndarray, columns: Sequence[str], output: Output) -> list[Any]:
        """Every row's answer: labels or values as a list, probabilities as ``[N, C]`` (or dicts).

        The block's requests (``--max-request-rows`` each) go up to ``--concurrency`` at a time; the
        answers come back in the block's order, whatever order they arrive in.
        """
        block, columns, types = self._wire.arrange(block, columns)
        known: dict[int, Any] = {}
        keys: list[Any] | None = None
        if self._remembered or self._remember:
            keys = self._row_keys(block, output)
            for index, key in enumerate(keys):
                kept = self._remembered.get(key)
                if kept is not None:
                    known[index] = kept[0]
                    kept[1] -= 1
                    if kept[1] <= 0:
                        del self._remembered[key]
            if not known and not self._remember:
                self._remembered.clear()
        asked = block if not known else block[[i for i in range(len(block)) if i not in known]]
        parts = [asked[part] for part in self._chunks(len(asked), block.shape[1])]
        if len(parts) > 1 and self.options.concurrency > 1:
            if self._pool is None:
                self._pool = ThreadPoolExecutor(max_workers=self.options.concurrency,
                                                thread_name_prefix="ipfi-http")
            answers = list(self._pool.map(lambda rows: self._ask(rows, columns, types, output), parts))
        else:
            answers = [self._ask(rows, columns, types, output) for rows in parts]
        got = [answer for part in answers for answer in part]
        if not known:
            results = got
        else:
            fresh = iter(got)
            results = [known[i] if i in known else next(fresh) for i in range(len(block))]
        if self._remember and keys is not None:
            for key, answer in zip(keys, results):
                kept = self._remembered.setdefault(key, [answer, 0])
                kept[1] += 1
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
